"""Every analysis of one trace: `analyze(trace, step, peaks) -> AnalysisResults`, driven by the registry
(`tracelens.analyses.registry.ANALYSES`).

`AnalysisResults` (written out in `tracelens.analyses.registry`, beside the entries it must match: a test
checks) has one attribute per analysis, named as its entry (`results.summary`, `results.bound`, ...; None = not
run), plus `results["bound"]` and the typed `results.get(Bound)`. Being a frozen Struct of the result types, it
round-trips through msgspec (the results cache stores it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import msgspec

from tracelens.analyses.context import AnalysisContext
from tracelens.analyses.registry import ANALYSES, REQUIRED, Analysis, AnalysisResults, ResultsBase
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    from tracelens.analyses.devices import PeakOverride

R = TypeVar("R")
DOC = "An `AnalysisResults` of other analyses than the registry's (see `tracelens.analyses.registry.AnalysisResults`)."


@functools.cache
def results_type(analyses: tuple[Analysis[Any], ...]) -> type[ResultsBase]:
    """`AnalysisResults` for the registry's entries; for other entries (tests, a subset) a frozen Struct made
    like it: one field per entry of `analyses` (in order; `REQUIRED` ones first)."""
    if analyses == AnalysisResults.analyses:
        return AnalysisResults
    missing = [name for name in REQUIRED if all(entry.name != name for entry in analyses)]
    if missing:
        raise ValueError(f"a report needs the analyses {missing}")
    ordered = sorted(analyses, key=lambda entry: entry.name not in REQUIRED)
    fields = [(e.name, e.result) if e.name in REQUIRED else (e.name, e.result | None, None) for e in ordered]
    made = msgspec.defstruct("AnalysisResults", fields, bases=(ResultsBase,), frozen=True, module=__name__)
    cls = cast("type[ResultsBase]", made)  # a subclass of its base, which defstruct's signature does not say
    cls.__doc__ = DOC
    cls.analyses = analyses
    return cls


def analyze(
    trace: Trace,
    step: int | None = None,
    peaks: PeakOverride | None = None,
    analyses: Sequence[Analysis[Any]] = ANALYSES,
) -> AnalysisResults:
    """Run every analysis of the registry (or of `analyses`) on `trace` (optionally one step), in registry
    order, in this process. Steps that compiled are left out of the steady-state figures (see `compiled.note`);
    `peaks` overrides the device table for the roofline."""
    entries = tuple(analyses)
    context = AnalysisContext(trace, step, peaks, entries)
    results = {entry.name: context.run(entry) for entry in entries}
    analysis_results: AnalysisResults = results_type(entries)(**results)  # type: ignore[assignment]
    return analysis_results
