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
        "kernels": [dataclasses.asdict(row) for row in summary.kernels],
        "ops": [dataclasses.asdict(row) for row in summary.ops],
        "warnings": list(summary.warnings),
    }
    for name, value in _extra_sections(report).items():
        document[name] = value
    return _clean(document)


def _extra_sections(report: AnalysisReport) -> dict[str, Any]:
    """Sections of later analyses: each non-summary field of the report, under its own name."""
    return {
        field.name: dataclasses.asdict(value)
        for field in dataclasses.fields(report)
        if field.name != "summary" and (value := getattr(report, field.name)) is not None
    }


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
