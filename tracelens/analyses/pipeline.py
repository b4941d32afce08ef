"""Every analysis of one trace: `analyze(trace, step, peaks) -> AnalysisReport`, driven by the registry
(`tracelens.analyses.registry.ANALYSES`).

`AnalysisReport` is a frozen dataclass generated from the registry: one attribute per analysis, named as its
entry (`report.summary`, `report.bound`, ...; None = not run), plus `report["bound"]` and the typed
`report.get(Bound)`. Being a plain dataclass of the result types, it round-trips through msgspec (the results
cache stores it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tracelens.analyses.context import AnalysisContext
from tracelens.analyses.fusion import Fusion, FusionOpportunity
from tracelens.analyses.registry import ANALYSES, Analysis
from tracelens.loader.forked import ChildDied, auto_workers, run_forked
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    from tracelens.analyses.devices import PeakOverride
    from tracelens.analyses.summary import Summary

R = TypeVar("R")
REQUIRED = ("summary",)  # every report has these; the other analyses may be absent (None)
DOC = (
    "Everything `tracelens analyze` reports about one trace: one attribute per registered analysis, named as its "
    "registry entry (None = not run); `report[name]`; `report.get(ResultType)`."
)


class ReportBase:
    """The methods of every `AnalysisReport` type (the attributes come from the registry)."""

    analyses: ClassVar[tuple[Analysis[Any], ...]] = ()

    def __getitem__(self, name: str) -> Any:
        """The result of the analysis called `name` (None if it did not run)."""
        if all(entry.name != name for entry in self.analyses):
            raise KeyError(name)
        return getattr(self, name, None)

    def get(self, kind: type[R]) -> R | None:
        """The result of type `kind`, or None when its analysis did not run."""
        for entry in self.analyses:
            value = getattr(self, entry.name, None)
            if isinstance(value, kind):
                return value
        return None

    def results(self) -> list[tuple[Analysis[Any], Any]]:
        """(entry, result) of every analysis that ran, in registry order."""
        pairs = [(entry, getattr(self, entry.name, None)) for entry in self.analyses]
        return [(entry, value) for entry, value in pairs if value is not None]

    @property
    def fusion_opportunities(self) -> list[FusionOpportunity]:
        fusion = self.get(Fusion)
        return fusion.opportunities if fusion else []


@functools.cache
def report_type(analyses: tuple[Analysis[Any], ...]) -> type[ReportBase]:
    """The frozen dataclass with one field per entry of `analyses` (in order; `REQUIRED` ones first)."""
    missing = [name for name in REQUIRED if all(entry.name != name for entry in analyses)]
    if missing:
        raise ValueError(f"a report needs the analyses {missing}")
    ordered = sorted(analyses, key=lambda entry: entry.name not in REQUIRED)
    fields = [
        (e.name, e.result) if e.name in REQUIRED else (e.name, e.result | None, dataclasses.field(default=None))
        for e in ordered
    ]
    cls: type[ReportBase] = dataclasses.make_dataclass("AnalysisReport", fields, bases=(ReportBase,), frozen=True)
    cls.__module__, cls.__doc__ = __name__, DOC
    cls.analyses = analyses
    return cls


if TYPE_CHECKING:

    class AnalysisReport(ReportBase):
        summary: Summary

        def __init__(self, summary: Summary, **results: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

else:
    AnalysisReport = report_type(ANALYSES)


def analyze(
    trace: Trace,
    step: int | None = None,
    peaks: PeakOverride | None = None,
    analyses: Sequence[Analysis[Any]] = ANALYSES,
    workers: int | None = None,
) -> AnalysisReport:
    """Run every analysis of the registry (or of `analyses`) on `trace` (optionally one step). Steps that
    compiled are left out of the steady-state figures (see `compiled.note`); `peaks` overrides the device table
    for the roofline. `workers` >= 2 (None: `auto_workers()`, 1 where forking is unsafe) runs the entries marked
    `apart` in a forked child meanwhile, on traces of `PARALLEL_MIN_EVENTS` events or more; the same report for
    any value (the analyses are pure)."""
    entries = tuple(analyses)
    context = AnalysisContext(trace, step, peaks, entries)
    parallel = len(trace.events) >= PARALLEL_MIN_EVENTS and (auto_workers() if workers is None else workers) > 1
    results = _run_parallel(context, entries) if parallel else {e.name: context.run(e) for e in entries}
    report: AnalysisReport = report_type(entries)(**results)  # type: ignore[assignment]
    return report


PARALLEL_MIN_EVENTS = 100_000  # below this a fork (~5-10 ms with the results' pickling) saves less than it costs
# the child's one result may come long after the parent's share on a huge trace; only a child that hangs waits this
APART_STALL_S = 1800.0


def _run_parallel(context: AnalysisContext, entries: tuple[Analysis[Any], ...]) -> dict[str, Any]:
    """Every entry's result: the `apart` ones computed by a forked child (which computes what they ask for
    itself), the others here meanwhile; here too when the child dies."""
    apart = tuple(entry for entry in entries if entry.apart)
    here: dict[str, Any] = {}

    def run_here() -> None:
        for entry in entries:
            if not entry.apart:
                here[entry.name] = context.run(entry)

    def run_apart(group: tuple[Analysis[Any], ...]) -> dict[str, Any]:
        return {entry.name: context.run(entry) for entry in group}

    try:
        [there] = run_forked([apart], 1, run_apart, meanwhile=run_here, stall_s=APART_STALL_S)
    except ChildDied:  # killed (out of memory?) or stalled, after `run_here` ran: its entries are computed here
        there = {entry.name: context.run(entry) for entry in apart}
    return {entry.name: here[entry.name] if entry.name in here else there[entry.name] for entry in entries}
