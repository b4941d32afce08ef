"""The one input of every analysis: `AnalysisContext`, a trace with its analyzed window, the options, and the
derived data several analyses share (computed once, on first use).

Contract: an analysis is `analyze_x(ctx: AnalysisContext) -> X` (X a frozen msgspec Struct); pure, no I/O. It reads
the trace and shared data from `ctx`, and another analysis' result with `ctx.result(Other)` (run once per
context, on first request; a cycle is an error). Shared data computed here, not in analyses:
- `window`: the analyzed steps (`--step`, or every complete step; `window.select_window`);
- `steady`: `window` without the steps (or, failing that, the events) that overlap torch.compile compilation;
- `steady_steps`: `window` without the steps that overlap compilation (never drops single events);
- `kernel_models`: the FLOP/byte models of the steady window's kernels (fusion and roofline share them);
- `compile_intervals`: merged compile-phase spans, ns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tracelens.analyses.compiled import compile_intervals, steady_steps, steady_window
from tracelens.analyses.registry import ANALYSES
from tracelens.analyses.roofline import kernel_models
from tracelens.analyses.window import select_window
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    import numpy as np

    from tracelens.analyses.devices import PeakOverride
    from tracelens.analyses.registry import Analysis
    from tracelens.analyses.roofline import KernelModels
    from tracelens.analyses.window import Window

R = TypeVar("R")


@dataclass(frozen=True, eq=False)
class AnalysisContext:
    """`trace` analyzed over `step` (None: every complete step) with roofline `peaks` overrides (None: the device
    table and TRACELENS_PEAKS). `analyses`: what `result()` may run (None: the registry)."""

    trace: Trace
    step: int | None = None
    peaks: PeakOverride | None = None
    analyses: Sequence[Analysis[Any]] | None = None
    _results: dict[str, object] = field(default_factory=dict, init=False, repr=False)
    _running: list[str] = field(default_factory=list, init=False, repr=False)

    @cached_property
    def window(self) -> Window:
        return select_window(self.trace, self.step)

    @cached_property
    def steady(self) -> Window:
        return steady_window(self.trace, self.window)

    @cached_property
    def steady_steps(self) -> Window:
        return steady_steps(self.trace, self.window)

    @cached_property
    def kernel_models(self) -> KernelModels:
        return kernel_models(self.trace, self.steady)

    @property
    def compile_intervals(self) -> np.ndarray:
        return compile_intervals(self.trace)

    def entries(self) -> Sequence[Analysis[Any]]:
        """The analyses this context runs, in registry order."""
        if self.analyses is not None:
            return self.analyses
        return ANALYSES

    def run(self, entry: Analysis[R]) -> R:
        """`entry`'s result for this context, computed on first request."""
        if entry.name not in self._results:
            if entry.name in self._running:
                cycle = " -> ".join([*self._running, entry.name])
                raise RuntimeError(f"analyses depend on each other in a cycle: {cycle}")
            self._running.append(entry.name)
            try:
                self._results[entry.name] = entry.run(self)
            finally:
                self._running.pop()
        return cast("R", self._results[entry.name])

    def result(self, kind: type[R]) -> R:
        """The result of the analysis whose result type is `kind` (run once per context): one of `analyses`, or
        of the registry when `analyses` has none (so a subset of analyses still gets its dependencies)."""
        for entry in (*self.entries(), *ANALYSES):
            if entry.result is kind:
                return self.run(entry)
        raise KeyError(f"no registered analysis returns {kind.__name__}")
