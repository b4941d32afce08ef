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
) -> AnalysisReport:
    """Run every analysis of the registry (or of `analyses`) on `trace` (optionally one step), in registry
    order, in this process. Steps that compiled are left out of the steady-state figures (see `compiled.note`);
    `peaks` overrides the device table for the roofline."""
    entries = tuple(analyses)
    context = AnalysisContext(trace, step, peaks, entries)
    results = {entry.name: context.run(entry) for entry in entries}
    report: AnalysisReport = report_type(entries)(**results)  # type: ignore[assignment]
    return report
