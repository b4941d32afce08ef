"""Finding panels: bound, fusion opportunities, roofline, CPU dispatch by layer, GPU idle by cause.

Contract: each function takes an `AnalysisReport` and returns a `Panel`. They read optional fields of the
report (`getattr(report, name, None)`); when a field is absent or None the panel says "not available".
"""

from __future__ import annotations

from typing import Any

from tracelens.analyses import AnalysisReport
from tracelens.report.document import Panel, unavailable
from tracelens.report.generic import result_table

MISSING = "this version of tracelens does not compute it"


def finding(report: AnalysisReport, field: str) -> Any:
    """The optional analysis result `field` of `report`, or None."""
    return getattr(report, field, None)


def _generic_panel(report: AnalysisReport, field: str, panel_id: str, title: str) -> Panel:
    result = finding(report, field)
    if result is None:
        return unavailable(panel_id, title, MISSING)
    table = result_table(result)
    if table is None:
        return unavailable(panel_id, title, "the analysis found nothing to show")
    return Panel(id=panel_id, title=title, table=table)


def bound_panel(report: AnalysisReport) -> Panel:
    return _generic_panel(report, "bound", "bound", "What bounds a step")


def fusion_panel(report: AnalysisReport) -> Panel:
    return _generic_panel(report, "fusion_opportunities", "fusion", "Fusion opportunities")


def roofline_panel(report: AnalysisReport) -> Panel:
    return _generic_panel(report, "roofline", "roofline", "Roofline: achieved vs peak")


def dispatch_panel(report: AnalysisReport) -> Panel:
    return _generic_panel(report, "dispatch", "dispatch", "CPU dispatch by layer")


def idle_panel(report: AnalysisReport) -> Panel:
    return _generic_panel(report, "bound", "gpu-idle", "GPU idle by cause")
