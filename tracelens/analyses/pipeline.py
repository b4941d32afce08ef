"""Every analysis of one trace: `analyze(trace) -> AnalysisReport`."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.analyses.bound import Bound, analyze_bound
from tracelens.analyses.compiled import Compiled, analyze_compiled, compile_intervals, steady_window
from tracelens.analyses.devices import PeakOverride
from tracelens.analyses.dispatch import Dispatch, analyze_dispatch
from tracelens.analyses.fusion import Fusion, FusionOpportunity, analyze_fusion
from tracelens.analyses.roofline import Roofline, analyze_roofline, kernel_models
from tracelens.analyses.summary import Summary, analyze_summary
from tracelens.analyses.window import select_window
from tracelens.model.trace import Trace


@dataclass(frozen=True)
class AnalysisReport:
    """Everything `tracelens analyze` reports about one trace. Later analyses are optional (None = not run)."""

    summary: Summary
    dispatch: Dispatch | None = None
    bound: Bound | None = None
    fusion: Fusion | None = None
    roofline: Roofline | None = None
    compiled: Compiled | None = None

    @property
    def fusion_opportunities(self) -> list[FusionOpportunity]:
        return self.fusion.opportunities if self.fusion else []


def analyze(trace: Trace, step: int | None = None, peaks: PeakOverride | None = None) -> AnalysisReport:
    """Run every analysis on `trace` (optionally one step). Steps that compiled are left out of the
    steady-state figures (see `compiled.note`); `peaks` overrides the device table for the roofline."""
    window = select_window(trace, step)
    compiled = analyze_compiled(trace, window)
    steady = steady_window(trace, window)
    summary = analyze_summary(trace, step, window=steady if compiled.excluded_steps else None)
    dispatch = analyze_dispatch(trace, steady)
    models = kernel_models(trace, steady)
    return AnalysisReport(
        summary=summary,
        dispatch=dispatch,
        bound=analyze_bound(
            trace, steady, dispatch.dispatch_us_per_step, compile_intervals(trace) if compiled.excluded_events else None
        ),
        fusion=analyze_fusion(trace, steady, models),
        roofline=analyze_roofline(trace, steady, peaks, models),
        compiled=compiled,
    )
