"""Versioned JSON for programs. Field names are stable: add fields, never rename or remove them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import msgspec

from tracelens import __version__
from tracelens.analyses import AnalysisResults
from tracelens.analyses.bound import Bound
from tracelens.analyses.fusion import Fusion
from tracelens.analyses.memory import Memory
from tracelens.analyses.roofline import Roofline
from tracelens.analyses.summary import STEP_FIGURE_KEYS, StepFigures, Summary
from tracelens.records import field_names, is_record
from tracelens.renderers.sections import renderer_of

ANALYZE_SCHEMA = "tracelens.analyze/1"
PER_STEP_KEYS = STEP_FIGURE_KEYS


def plain(value: Any, leave_out: Iterable[str] = ()) -> Any:
    """A result (records, lists, dicts, scalars) as plain JSON-ready data, in field order; a record's fields
    named in `leave_out` are left out (not converted at all). What a recursive `asdict` gives, without its copies."""
    skip = frozenset(leave_out)
    if skip and is_record(value):
        return {
            name: msgspec.to_builtins(getattr(value, name), enc_hook=_scalar)
            for name in field_names(value)
            if name not in skip
        }
    return msgspec.to_builtins(value, enc_hook=_scalar)


def _scalar(value: Any) -> Any:
    """A numpy scalar that reached a result as its Python value (as `json.dumps` of `asdict` took it)."""
    if hasattr(value, "item") and hasattr(value, "dtype"):
        return value.item()
    raise TypeError(f"not JSON data: {type(value).__name__}")


def per_step_dict(figures: StepFigures) -> dict[str, float | None]:
    """Figures by key; None (JSON null) where a figure cannot be computed."""
    return {key: _number(getattr(figures, key)) for key in PER_STEP_KEYS}


def analyze_dict(results: AnalysisResults) -> dict[str, Any]:
    """The `tracelens.analyze/1` document as plain Python data: each analysis' keys (the registry's `json`
    renderer, or `{name: its result as a dict}`), in registry order."""
    document: dict[str, Any] = {"schema": ANALYZE_SCHEMA, "tool": {"name": "tracelens", "version": __version__}}
    for entry, result in results.results():
        section = renderer_of(entry, "json")
        document.update(section(result, results) if section is not None else {entry.name: plain(result)})
    return _clean(document)


def summary_json(summary: Summary, results: AnalysisResults) -> dict[str, Any]:
    """The document's head: trace facts, steps, per-step figures, kernels, ops, warnings."""
    return {
        "trace": plain(summary.facts),
        "steps": summary.steps,
        "step_numbers": summary.step_numbers,
        "per_step": {**per_step_dict(summary.per_step), **profiler_free_keys(summary)},
        "per_step_note": summary.empty_reason,
        "step_table": [
            {"number": row.number, "complete": row.complete, **per_step_dict(row)} for row in summary.step_table
        ],
        "kernels": _kernels_with_roofline(summary, results.get(Roofline)),
        "ops": plain(summary.ops),
        "warnings": list(summary.warnings),
        "profiler_free": _profiler_free(summary, results),
    }


def _profiler_free(summary: Summary, results: AnalysisResults) -> dict[str, Any] | None:
    """The `profiler_free` object, with `verdict_without_profiler` ("gpu" where the bound verdict would flip, else
    null; `Bound.verdict_without_profiler`)."""
    free = summary.profiler_free
    if free is None:
        return None
    bound = results.get(Bound)
    return {**plain(free), "verdict_without_profiler": bound.verdict_without_profiler if bound else None}


def profiler_free_keys(summary: Summary) -> dict[str, Any]:
    """`per_step.profiler_free_step_us` and `per_step.profiler_free_source` ("measured", "estimated" or null)."""
    free = summary.profiler_free
    return {
        "profiler_free_step_us": free.step_us if free is not None else None,
        "profiler_free_source": free.source if free is not None else None,
    }


ROOFLINE_KERNEL_KEYS = ("pct_of_peak", "model_note", "achieved_tflops", "achieved_tbps", "limit", "model")


def _kernels_with_roofline(summary: Summary, roofline: Roofline | None) -> list[dict[str, Any]]:
    """The kernel table; kernels with a roofline model also get `pct_of_peak` (null on unknown GPUs) etc."""
    by_kernel = roofline.by_kernel() if roofline else {}
    rows = []
    for row in summary.kernels:
        entry = plain(row)
        model = by_kernel.get(row.name)
        if model is not None:
            entry.update({key: getattr(model, key) for key in ROOFLINE_KERNEL_KEYS})
        rows.append(entry)
    return rows


def bound_json(bound: Bound, results: AnalysisResults) -> dict[str, Any]:
    """`bound` is the verdict string ("cpu", "gpu", "mixed", "unknown"), its figures are `bound_breakdown`."""
    return {"bound": bound.bound, "bound_breakdown": plain(bound)}


def fusion_json(fusion: Fusion, results: AnalysisResults) -> dict[str, Any]:
    """`fusion_opportunities` is a list; `fusion` has the totals."""
    return {
        "fusion_opportunities": plain(fusion.opportunities),
        "fusion": {
            "shapes_recorded": fusion.shapes_recorded,
            "est_saving_us_per_step": fusion.est_saving_us_per_step,
            "gemm_epilogue_saving_us_per_step": fusion.gemm_epilogue_saving_us_per_step,
            "evidence": fusion.evidence,
        },
    }


def _number(value: float | None) -> float | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value  # type: ignore[return-value]


def _clean(value: Any) -> Any:
    """Replace NaN/inf (not valid JSON) with null, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


class AnalyzeJsonRenderer:
    def render(self, result: AnalysisResults) -> str:
        return dumps(analyze_dict(result))


def critical_path_json(result: Any, results: AnalysisResults) -> dict[str, Any]:
    """`critical_path` without `path_rows` (event row numbers are internal: the report draws them)."""
    return {"critical_path": plain(result, leave_out=("path_rows",))}


def memory_json(result: Memory, results: AnalysisResults) -> dict[str, Any]:
    """`memory`: every field but the thinned `timeline` (the report draws it; the JSON has the figures)."""
    return {"memory": plain(result, leave_out=("timeline",))}
