"""The analysis registry drives the pipeline, the JSON document, the text output and the report: an analysis
added to it (here a toy one, defined in this file with its renderers) appears in all four without touching any
other file; every registered result type round-trips through msgspec (the results cache stores them)."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import msgspec
import pytest
from rich.text import Text

from tests.conftest import anchor, one_gemm_trace, recorded_trace
from tracelens.analyses import AnalysisResults, analyze
from tracelens.analyses.bound import Bound
from tracelens.analyses.context import AnalysisContext
from tracelens.analyses.registry import ANALYSES, Analysis
from tracelens.analyses.summary import Summary
from tracelens.loader import load_trace
from tracelens.model.trace import Trace
from tracelens.records import field_names, replace
from tracelens.renderers.jsonout import analyze_dict
from tracelens.renderers.page import build_report
from tracelens.renderers.sections import renderer_of
from tracelens.renderers.text import AnalyzeTextRenderer
from tracelens.report.document import AnalysisPanels, Panel

# ---------------------------------------------------------------- a toy analysis: module, renderers


@dataclasses.dataclass(frozen=True)
class KernelNames:
    distinct: int
    longest: str


def analyze_kernel_names(ctx: AnalysisContext) -> KernelNames:
    names = [row.name for row in ctx.result(Summary).kernels]
    return KernelNames(len(names), max(names, key=len, default=""))


def kernel_names_text(result: KernelNames, results: AnalysisResults) -> list[Any]:
    return [Text(f"Kernel names: {result.distinct} distinct, the longest has {len(result.longest)} characters")]


def kernel_names_panels(result: KernelNames | None, results: AnalysisResults) -> AnalysisPanels:
    note = "not run" if result is None else f"{result.distinct} distinct kernel names"
    return AnalysisPanels(findings=(Panel(id="kernel-names", title="Kernel names", note=note),))


TOY = Analysis(
    "kernel_names",
    analyze_kernel_names,
    KernelNames,
    text=f"{__name__}:kernel_names_text",
    panels=f"{__name__}:kernel_names_panels",
)

# ---------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def mlp() -> Trace:
    return load_trace(recorded_trace("h200/eager_mlp.json.gz"))


def test_a_registered_analysis_appears_in_json_text_and_report(mlp: Trace) -> None:
    plain = analyze(mlp)
    results = analyze(mlp, analyses=(*ANALYSES, TOY))
    expected = KernelNames(
        distinct=len(plain.summary.kernels), longest=max((k.name for k in plain.summary.kernels), key=len)
    )
    assert results.kernel_names == results["kernel_names"] == results.get(KernelNames) == expected
    assert expected.distinct == 5  # the eager MLP's five kernels
    document = analyze_dict(results)
    assert list(document)[-1] == "kernel_names" and document["kernel_names"] == dataclasses.asdict(expected)
    assert {k: v for k, v in document.items() if k != "kernel_names"} == analyze_dict(plain)
    text = AnalyzeTextRenderer().render(results)
    line = f"Kernel names: 5 distinct, the longest has {len(expected.longest)} characters"
    assert line in text
    assert text.replace(line + "\n", "") == AnalyzeTextRenderer().render(plain)
    page = build_report([(mlp, results)])
    assert page.panel("kernel-names").note == "5 distinct kernel names"
    assert [p.id for p in page.sections[-1].panels][-1] == "kernel-names"


def test_the_report_keeps_its_attributes_and_lookups(mlp: Trace) -> None:
    results = analyze(mlp)
    assert [entry.name for entry, _ in results.results()] == [entry.name for entry in ANALYSES]
    assert results.bound is results["bound"] is results.get(Bound)
    assert results.fusion_opportunities == results.fusion.opportunities
    assert results.roofline.rows and results.compiled is not None and results.dispatch is not None
    with pytest.raises(KeyError):
        results["nope"]
    assert pickle.loads(pickle.dumps(results)) == results
    assert AnalysisResults.__doc__ and type(results) is AnalysisResults


def test_dependencies_run_once_and_cycles_are_errors(mlp: Trace) -> None:
    calls: list[str] = []

    def counted(ctx: AnalysisContext) -> Summary:
        calls.append("summary")
        return ANALYSES[0].run(ctx)

    summary = replace(ANALYSES[0], run=counted)
    analyze(mlp, analyses=(summary, TOY))
    assert calls == ["summary"]  # asked for by the toy and run by the pipeline: computed once

    def first(ctx: AnalysisContext) -> KernelNames:
        return ctx.result(Bound)  # type: ignore[return-value]

    def second(ctx: AnalysisContext) -> Bound:
        ctx.result(KernelNames)
        raise AssertionError("unreachable")

    cycle = (ANALYSES[0], replace(TOY, run=first), Analysis("bound", second, Bound))
    with pytest.raises(RuntimeError, match="cycle: kernel_names -> bound -> kernel_names"):
        analyze(mlp, analyses=cycle)


def test_a_subset_of_analyses_gets_its_dependencies_from_the_registry(mlp: Trace) -> None:
    summary, bound = (entry for entry in ANALYSES if entry.name in ("summary", "bound"))
    results = analyze(mlp, analyses=(summary, bound))  # bound needs the dispatch and compiled results
    assert [entry.name for entry, _ in results.results()] == ["summary", "bound"]
    assert results.bound == analyze(mlp).bound
    assert set(analyze_dict(results)) == {
        *analyze_dict(AnalysisResults(summary=results.summary)),
        "bound",
        "bound_breakdown",
    }


def test_every_renderer_the_registry_names_exists() -> None:
    for entry in ANALYSES:
        assert issubclass(entry.result, msgspec.Struct) and entry.result.__struct_config__.frozen, entry.name
        for kind in ("text", "panels", "json"):
            if getattr(entry, kind) is not None:
                assert callable(renderer_of(entry, kind)), f"{entry.name}.{kind}"
    assert len({entry.name for entry in ANALYSES}) == len(ANALYSES)
    assert len({entry.result for entry in ANALYSES}) == len(ANALYSES)  # `ctx.result(Type)` is unambiguous


# ---------------------------------------------------------------- msgspec round trip


def round_trips(kind: type, value: object) -> bool:
    """`value` encodes with msgspec and decodes as `kind` to the same value, types included (the repr tells
    tuples from lists, 1 from 1.0 and numpy scalars from floats)."""
    decoded = msgspec.msgpack.decode(msgspec.msgpack.encode(value), type=kind)
    return decoded == value and repr(decoded) == repr(value)


ROUND_TRIP_TRACES = [
    *(f"recorded:h200/{name}.json.gz" for name in ("eager_mlp", "compiled_mlp", "liger_mlp")),
    # compiled with Triton kernels, an AMD GPU with unknown-shape ops, multi-stream HTA traces
    "anchor:amd_tracelens/torch_compile_triton/trace.json.gz",
    "anchor:amd_tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "anchor:hta/trace_diff/control/control.json.gz",
]


@pytest.mark.parametrize("name", ROUND_TRIP_TRACES)
def test_every_registered_result_round_trips_through_msgspec(name: str) -> None:
    where, _, relative = name.partition(":")
    results = analyze(load_trace(recorded_trace(relative) if where == "recorded" else anchor(relative)))
    for entry in ANALYSES:
        msgspec.inspect.type_info(entry.result)  # raises for a type msgspec cannot handle
        result = results[entry.name]
        assert isinstance(result, entry.result)
        assert round_trips(entry.result, result), f"{entry.name}: {entry.result.__name__} does not round-trip"
    assert round_trips(AnalysisResults, results)


def test_every_registered_result_round_trips_on_a_tiny_trace(tmp_path: Path) -> None:
    results = analyze(load_trace(one_gemm_trace(tmp_path)))
    for entry in ANALYSES:
        assert round_trips(entry.result, results[entry.name]), entry.name


def test_the_round_trip_check_catches_a_result_that_does_not_survive() -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose:
        values: tuple[int, ...]
        share: float

    assert round_trips(Loose, Loose((1, 2), 0.5))
    assert not round_trips(Loose, Loose([1, 2], 0.5))  # type: ignore[arg-type]  # a list comes back a tuple
    assert not round_trips(Loose, Loose((1, 2), 1))  # an int comes back a float


def test_the_written_out_report_type_agrees_with_the_registry() -> None:
    """`AnalysisResults` is written out (so strict mypy types `results.bound`); its fields are the registry's
    entries, in the order `results_type` would give them, each of its entry's result type (None allowed but for
    the required ones)."""
    import typing

    from tracelens.analyses.pipeline import results_type
    from tracelens.analyses.registry import REQUIRED, AnalysisResults

    hints = typing.get_type_hints(AnalysisResults)
    fields = list(field_names(AnalysisResults))
    ordered = sorted(ANALYSES, key=lambda entry: entry.name not in REQUIRED)
    assert fields == [entry.name for entry in ordered]
    for entry in ANALYSES:
        assert hints[entry.name] == (entry.result if entry.name in REQUIRED else entry.result | None), entry.name
    assert results_type(ANALYSES) is AnalysisResults and AnalysisResults.analyses == ANALYSES
