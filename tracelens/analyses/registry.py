"""The registry of analyses: ONE list, `ANALYSES`, drives the pipeline (`analyze`), the `tracelens.analyze/1`
JSON document, the `analyze` text output and the HTML report.

Each entry (`Analysis`) names:
- `name`: the analysis' attribute of `AnalysisResults` and, unless `json` says otherwise, its top-level JSON key;
- `run`: the analysis, `run(ctx: AnalysisContext) -> result` (see `tracelens.analyses.context`);
- `result`: the result type, a frozen `msgspec.Struct` that round-trips through msgspec (the results cache stores it;
  tests/test_registry.py checks every entry);
- `text`: its section of `tracelens analyze` (`"module:function"`, in `tracelens.renderers.analyses.<name>`:
  `function(result, report) -> list of rich renderables`, None entries skipped), printed in `text_order`;
- `panels`: its panels of the HTML report (`"module:function"`, in the same module, `function(result | None,
  report) -> AnalysisPanels`; None = not run: say so);
- `json`: its top-level keys of the JSON document (`"module:function"`, `function(result, report) -> dict`);
  None: `{name: result as plain data}`;
Renderers are named by import path so that running the analyses never imports rich or plotly.

Order of `ANALYSES` = order of the JSON keys and the report's panels; an analysis may ask for another's result
in any order (`ctx.result(Type)`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import msgspec

from tracelens.analyses.actions import Actions, analyze_actions
from tracelens.analyses.bound import Bound, analyze_bound
from tracelens.analyses.comm_overlap import CommOverlap, analyze_comm_overlap
from tracelens.analyses.compiled import Compiled, analyze_compiled
from tracelens.analyses.critical_path import CriticalPath, analyze_critical_path
from tracelens.analyses.dispatch import Dispatch, analyze_dispatch
from tracelens.analyses.fusion import Fusion, FusionOpportunity, analyze_fusion
from tracelens.analyses.memory import Memory, analyze_memory
from tracelens.analyses.roofline import Roofline, analyze_roofline
from tracelens.analyses.stream_idle import StreamIdle, analyze_stream_idle
from tracelens.analyses.summary import Summary, analyze_summary

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

R = TypeVar("R")
SHOWN = "tracelens.renderers.analyses"  # the module that shows analysis x is f"{SHOWN}.x"
JSON = "tracelens.renderers.jsonout"


class Analysis(msgspec.Struct, Generic[R], frozen=True):
    """One registered analysis (see the module docstring)."""

    name: str
    run: Callable[[AnalysisContext], R]
    result: type[R]
    text: str | None = None
    panels: str | None = None
    json: str | None = None
    text_order: int = 50  # text sections print by this, then in registry order


ANALYSES: tuple[Analysis[Any], ...] = (
    # the head of every output (trace facts, per-step figures, kernels, ops); the report draws its overview,
    # timeline and breakdown charts from it (tracelens.renderers.page), so it has no `panels`
    Analysis(
        "summary",
        analyze_summary,
        Summary,
        text="tracelens.renderers.text:summary_parts",
        json=f"{JSON}:summary_json",
        text_order=0,
    ),
    Analysis(
        "dispatch",
        analyze_dispatch,
        Dispatch,
        text=f"{SHOWN}.dispatch:dispatch_parts",
        panels=f"{SHOWN}.dispatch:dispatch_panels",
    ),
    # the verdict: in the text, first after the compile note
    Analysis(
        "bound",
        analyze_bound,
        Bound,
        text=f"{SHOWN}.bound:bound_parts",
        panels=f"{SHOWN}.bound:bound_panels",
        json=f"{JSON}:bound_json",
        text_order=20,
    ),
    Analysis(
        "fusion",
        analyze_fusion,
        Fusion,
        text=f"{SHOWN}.fusion:fusion_parts",
        panels=f"{SHOWN}.fusion:fusion_panels",
        json=f"{JSON}:fusion_json",
    ),
    Analysis(
        "roofline",
        analyze_roofline,
        Roofline,
        text=f"{SHOWN}.roofline:roofline_parts",
        panels=f"{SHOWN}.roofline:roofline_panels",
    ),
    # its note says which steps the other analyses left out, so it comes first in the text
    Analysis(
        "compiled",
        analyze_compiled,
        Compiled,
        text=f"{SHOWN}.compiled:compiled_parts",
        panels=f"{SHOWN}.compiled:compiled_panels",
        text_order=10,
    ),
    Analysis(
        "critical_path",
        analyze_critical_path,
        CriticalPath,
        text=f"{SHOWN}.critical_path:critical_path_parts",
        panels=f"{SHOWN}.critical_path:critical_path_panels",
        json=f"{JSON}:critical_path_json",
        text_order=30,
    ),
    Analysis(
        "actions",
        analyze_actions,
        Actions,
        text=f"{SHOWN}.actions:actions_parts",
        panels=f"{SHOWN}.actions:actions_panels",
        text_order=-10,  # "what to do next" is the first thing `analyze` prints
    ),
    Analysis(
        "comm_overlap",
        analyze_comm_overlap,
        CommOverlap,
        text=f"{SHOWN}.comm_overlap:comm_overlap_parts",
        panels=f"{SHOWN}.comm_overlap:comm_overlap_panels",
    ),
    Analysis(
        "stream_idle",
        analyze_stream_idle,
        StreamIdle,
        text=f"{SHOWN}.stream_idle:stream_idle_parts",
        panels=f"{SHOWN}.stream_idle:stream_idle_panels",
    ),
    Analysis(
        "memory",
        analyze_memory,
        Memory,
        text=f"{SHOWN}.memory:memory_parts",
        panels=f"{SHOWN}.memory:memory_panels",
        json=f"{JSON}:memory_json",
    ),
)


REQUIRED = ("summary",)  # every AnalysisResults has these; the other analyses may be absent (None)


class ResultsBase(msgspec.Struct, frozen=True):
    """The methods of every `AnalysisResults` type (the attributes are its analyses' results)."""

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


class AnalysisResults(ResultsBase, frozen=True):
    """Everything `tracelens analyze` reports about one trace: one attribute per entry of `ANALYSES`, named as
    the entry, of its result type (None = not run), in registry order after `REQUIRED`; `results[name]`;
    `results.get(ResultType)`. Adding an analysis adds its line here too (tests/test_registry.py checks that
    the two agree)."""

    summary: Summary
    dispatch: Dispatch | None = None
    bound: Bound | None = None
    fusion: Fusion | None = None
    roofline: Roofline | None = None
    compiled: Compiled | None = None
    critical_path: CriticalPath | None = None
    actions: Actions | None = None
    comm_overlap: CommOverlap | None = None
    stream_idle: StreamIdle | None = None
    memory: Memory | None = None


AnalysisResults.analyses = ANALYSES
