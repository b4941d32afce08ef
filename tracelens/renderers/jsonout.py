"""Versioned JSON for programs. Field names are stable: add fields, never rename or remove them."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from tracelens import __version__
from tracelens.analyses import AnalysisReport
from tracelens.analyses.summary import STEP_FIGURE_KEYS, StepFigures

ANALYZE_SCHEMA = "tracelens.analyze/1"
PER_STEP_KEYS = STEP_FIGURE_KEYS


def per_step_dict(figures: StepFigures) -> dict[str, float]:
    return {key: _number(getattr(figures, key)) for key in PER_STEP_KEYS}


def analyze_dict(report: AnalysisReport) -> dict[str, Any]:
    """The `tracelens.analyze/1` document as plain Python data."""
    summary = report.summary
    document: dict[str, Any] = {
        "schema": ANALYZE_SCHEMA,
        "tool": {"name": "tracelens", "version": __version__},
        "trace": dataclasses.asdict(summary.facts),
        "steps": summary.steps,
        "step_numbers": summary.step_numbers,
        "per_step": per_step_dict(summary.per_step),
        "step_table": [
            {"number": row.number, "complete": row.complete, **per_step_dict(row)} for row in summary.step_table
        ],
        "kernels": _kernels_with_roofline(report),
        "ops": [dataclasses.asdict(row) for row in summary.ops],
        "warnings": list(summary.warnings),
    }
    for name, value in _extra_sections(report).items():
        document[name] = value
    return _clean(document)


ROOFLINE_KERNEL_KEYS = ("pct_of_peak", "model_note", "achieved_tflops", "achieved_tbps", "limit", "model")


def _kernels_with_roofline(report: AnalysisReport) -> list[dict[str, Any]]:
    """The kernel table; kernels with a roofline model also get `pct_of_peak` (null on unknown GPUs) etc."""
    by_kernel = report.roofline.by_kernel() if report.roofline else {}
    rows = []
    for row in report.summary.kernels:
        entry = dataclasses.asdict(row)
        model = by_kernel.get(row.name)
        if model is not None:
            entry.update({key: getattr(model, key) for key in ROOFLINE_KERNEL_KEYS})
        rows.append(entry)
    return rows


def _extra_sections(report: AnalysisReport) -> dict[str, Any]:
    """Sections of later analyses, each under a stable name. `bound` is the verdict string ("cpu", "gpu",
    "mixed", "unknown") with its figures under `bound_breakdown`; `fusion_opportunities` is a list."""
    sections: dict[str, Any] = {}
    for field in dataclasses.fields(report):
        value = getattr(report, field.name)
        if field.name == "summary" or value is None:
            continue
        if field.name == "bound":
            sections["bound"] = value.bound
            sections["bound_breakdown"] = dataclasses.asdict(value)
        elif field.name == "fusion":
            sections["fusion_opportunities"] = [dataclasses.asdict(o) for o in value.opportunities]
            sections["fusion"] = {
                "shapes_recorded": value.shapes_recorded,
                "est_saving_us_per_step": value.est_saving_us_per_step,
                "gemm_epilogue_saving_us_per_step": value.gemm_epilogue_saving_us_per_step,
                "evidence": value.evidence,
            }
        else:
            sections[field.name] = dataclasses.asdict(value)
    return sections


def _number(value: float) -> float:
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
    output_file_extension = ".json"

    def render(self, result: AnalysisReport) -> str:
        return dumps(analyze_dict(result))
