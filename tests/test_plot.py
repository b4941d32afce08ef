"""tracelens.plot: the HTML report's own figures for notebooks, equal to the report's panels (the same builders),
titled, and an error saying why when the report's panel says "not available"."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

import tracelens
from tests.conftest import recorded_trace
from tests.test_check_builders import write_eager
from tracelens.renderers.page import build_report
from tracelens.report.timeline import bake_page_hovers

PANELS = {
    "gpu-by-category": tracelens.plot.gpu_time_by_category,
    "gpu-by-op": tracelens.plot.gpu_time_by_op,
    "step-times": tracelens.plot.step_times,
    "dispatch": tracelens.plot.dispatch_layers,
    "roofline": tracelens.plot.roofline,
}


def untitled(figure: go.Figure) -> dict[str, Any]:
    data = copy.deepcopy(figure.to_plotly_json())
    data["layout"].pop("title", None)
    return data


@pytest.fixture(scope="module")
def eager() -> tuple[tracelens.Trace, tracelens.AnalysisResults]:
    trace = tracelens.load(recorded_trace("h200/eager_mlp.json.gz"))
    return trace, tracelens.analyze(trace)


@pytest.mark.parametrize("panel_id", list(PANELS))
def test_figures_are_the_reports(panel_id: str, eager: tuple[tracelens.Trace, tracelens.AnalysisResults]) -> None:
    trace, results = eager
    panel = build_report([(trace, results)]).panel(panel_id)
    assert panel.figure is not None
    figure = PANELS[panel_id](results)
    assert isinstance(figure, go.Figure)
    assert figure.layout.title.text == panel.title
    assert untitled(figure) == untitled(panel.figure)
    assert untitled(PANELS[panel_id](trace)) == untitled(panel.figure)  # a Trace is analyzed on the way


def test_timeline_is_the_reports(eager: tuple[tracelens.Trace, tracelens.AnalysisResults]) -> None:
    trace, results = eager
    panel = build_report([(trace, results)]).panel("timeline")
    assert panel.figure is not None
    figure = tracelens.plot.timeline(trace)
    assert untitled(figure) == untitled(bake_page_hovers(panel.figure))  # the hovers the page's script shows
    assert len(figure.data) == len(panel.figure.data) > 0


def test_timeline_has_no_menu_only_the_page_acts_on() -> None:
    """The eager block's thread is 7 levels deep: the page's timeline has the CPU depth menu (the page's script
    folds the lanes); the notebook figure, drawn without that script, has every lane and no such menu."""
    trace = tracelens.load(recorded_trace("h200/block/eager_block.json.gz"))
    page = build_report([(trace, tracelens.analyze(trace))]).panel("timeline").figure
    assert page is not None
    labels = [[b.label for b in menu.buttons] for menu in page.layout.updatemenus]
    assert any("CPU depth: top level" in menu for menu in labels), labels
    figure = tracelens.plot.timeline(trace)
    assert [[b.label for b in menu.buttons] for menu in figure.layout.updatemenus] == labels[:1]
    assert figure.layout.meta is None and figure.layout.yaxis.range == page.layout.yaxis.range


@pytest.mark.parametrize(("kind", "panel_id"), [("gpu_time", "compare-gpu"), ("kernels", "compare-kernels"),
                                                ("steps", "compare-steps")])  # fmt: skip
def test_comparison_is_the_reports(kind: str, panel_id: str) -> None:
    traces = {name: tracelens.load(recorded_trace(f"h200/{name}.json.gz")) for name in ("eager_mlp", "compiled_mlp")}
    page = build_report([(t, tracelens.analyze(t)) for t in traces.values()])
    expected = page.panel(panel_id).figure
    assert expected is not None
    figure = tracelens.plot.compare(traces, kind=kind)  # type: ignore[arg-type]
    assert untitled(figure) == untitled(expected)
    names = {trace.name for trace in figure.data}
    assert kind == "steps" or names  # stacked by category: one trace per category present
    if kind == "steps":
        assert [t.name for t in figure.data] == ["eager_mlp", "compiled_mlp"]


def test_a_figure_without_data_says_why(tmp_path: Path) -> None:
    trace = tracelens.load(write_eager(tmp_path))  # no Input Dims: no FLOP/byte model for any kernel
    with pytest.raises(tracelens.TracelensError, match=r"Roofline.*not available: no kernel has a FLOP/byte model"):
        tracelens.plot.roofline(trace)
    with pytest.raises(tracelens.TracelensError, match="at least two traces"):
        tracelens.plot.compare([trace])
