"""Analyses: pure functions `analyze_x(trace, ...) -> XResult` (dataclasses), no I/O, no plotting."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.analyses.summary import Summary, analyze_summary
from tracelens.model.trace import Trace


@dataclass(frozen=True)
class AnalysisReport:
    """Everything `tracelens analyze` reports about one trace."""

    summary: Summary


def analyze(trace: Trace, step: int | None = None) -> AnalysisReport:
    """Run every analysis on `trace` (optionally one step)."""
    return AnalysisReport(summary=analyze_summary(trace, step))


__all__ = ["AnalysisReport", "Summary", "analyze", "analyze_summary"]
