"""Figure data of the report (`fig.to_dict()`), checked on a tiny hand-built two-step trace.

The tiny trace (tests/report_helpers.py): per step a ProfilerStep annotation, aten::mm and aten::relu (depth 1),
one cudaLaunchKernel under each (depth 2), a 20 µs GEMM and a 10 µs elementwise kernel on stream 7.
So: 14 slices on 4 lanes (3 CPU lanes for depths 0..2, 1 GPU lane).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import recorded_trace
from tests.report_helpers import array, tiny_trace
from tracelens.analyses import AnalysisResults, analyze
from tracelens.loader import load_trace
from tracelens.model.kernel_names import CATEGORIES
from tracelens.renderers.page import build_report
from tracelens.report.lanes import gap_for_blocks, lay_out, merge_into_blocks
from tracelens.report.palette import CATEGORY_COLORS
from tracelens.report.timeline import page_hovers


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    trace = load_trace(tiny_trace(tmp_path_factory.mktemp("tiny")))
    return trace, analyze(trace)


def traces_by_name(fig_dict: dict) -> dict[tuple[str, str], dict]:
    return {(t["name"], t.get("hoverinfo", "")): t for t in fig_dict["data"]}


def test_every_category_has_a_colour() -> None:
    assert set(CATEGORY_COLORS) == set(CATEGORIES)


def test_lanes_of_the_tiny_trace(tiny: tuple) -> None:
    trace, _ = tiny
    lanes = lay_out(trace)
    assert lanes.n_lanes == 4
    assert [label for _, label in lanes.ticks] == ["CPU 100/1", "GPU 0 stream 7"]
    assert [y for y, _ in lanes.ticks] == [0, 3]
    names = trace.events.names_at(lanes.rows)
    lane_of = dict(zip(names, lanes.y.tolist(), strict=False))
    assert lane_of["ProfilerStep#1"] == 0 and lane_of["aten::mm"] == 1 and lane_of["cudaLaunchKernel"] == 2
    assert lane_of["ampere_sgemm_128x64_nn"] == 3


def test_timeline_draws_every_slice_of_a_small_trace(tiny: tuple) -> None:
    document = build_report([tiny])
    fig = document.panel("timeline").figure.to_dict()
    by_name = traces_by_name(fig)
    # 5 colour groups x (bars + hover points) + the launch links + the GPU lane's utilization strip + the
    # critical path's outline + the labels' text trace (filled by the page for the visible range)
    assert len(fig["data"]) == 14
    assert "critical path" in {t["name"] for t in fig["data"]}
    util = [t for t in fig["data"] if t.get("meta", {}).get("lod") == "util"]
    assert len(util) == 1 and util[0]["meta"]["lane"] == 3
    z = np.asarray(util[0]["z"][0], dtype=float)
    assert 0.0 < z.max() <= 1.0 and z.min() >= 0.0
    expected = {"CPU op": 4, "user annotation": 2, "runtime / driver call": 4, "GPU: gemm": 2, "GPU: elementwise": 2}
    for name, count in expected.items():
        bars, hover = by_name[(name, "skip")], by_name[(name, "text")]
        assert array(bars["x"]).size == 3 * count  # start, end, gap per bar
        assert np.isnan(array(bars["x"])[2::3]).all()
        assert array(hover["x"]).size == count and len(hover["text"]) == count
    gemm_bars = array(by_name[("GPU: gemm", "skip")]["x"])
    assert gemm_bars[:2].tolist() == [30.0, 50.0] and gemm_bars[3:5].tolist() == [130.0, 150.0]
    assert array(by_name[("GPU: gemm", "skip")]["y"]).tolist() == [3] * 6
    links = by_name[("launch → GPU", "skip")]
    assert array(links["x"]).size == 4 * 3
    assert array(links["x"])[:2].tolist() == [15.0, 30.0]  # cudaLaunchKernel start → GEMM start
    assert "merged (not drawn one by one)" not in {t["name"] for t in fig["data"]}
    assert document.panel("timeline").note.startswith("All 14 slices are drawn one by one.")


def test_hover_shows_name_duration_shapes_and_launching_op(tiny: tuple) -> None:
    """The hover: short name, category and duration, the launching op and the shapes (the tiny trace's kernels
    carry no grid/block)."""
    fig = build_report([tiny]).panel("timeline").figure.to_dict()
    by_name = traces_by_name(fig)
    for hover in by_name.values():  # as the page shows them (a kernel's title and full name stored once)
        if hover.get("hoverinfo") == "text" and hover.get("meta", {}).get("names"):
            hover["text"] = page_hovers(hover["text"], hover["meta"]["names"], hover.get("customdata"))
    assert by_name[("GPU: gemm", "text")]["text"][0] == (
        "<b>ampere_sgemm_128x64_nn</b><br>gemm · 20.000 µs<br>launched by: aten::mm<br>shapes: [8, 512], [512, 512]"
    )
    relu = by_name[("GPU: elementwise", "text")]["text"][0]
    assert relu.startswith(
        "<b>vectorized_elementwise_kernel[relu]</b><br>void at::native::vectorized_elementwise_kernel"
    )
    assert "<br>elementwise · 10.000 µs<br>launched by: aten::relu" in relu  # after the full name
    assert by_name[("CPU op", "text")]["text"][1] == "<b>aten::relu</b><br>20.000 µs<br>shapes: [8, 512]"


def test_capped_timeline_draws_one_step_and_merges_the_rest(tiny: tuple) -> None:
    document = build_report([tiny], max_slices=6)
    panel = document.panel("timeline")
    by_name = traces_by_name(panel.figure.to_dict())
    # step 1 (both steps last 100 µs; the lower median): 2 kernels, then depth 0, 1, 2 in time order
    drawn = {name: len(by_name[(name, "text")]["text"]) for name, kind in by_name if kind == "text"}
    assert drawn == {
        "GPU: gemm": 1,
        "GPU: elementwise": 1,
        "user annotation": 1,
        "CPU op": 2,
        "runtime / driver call": 1,
        "merged (not drawn one by one)": 8,
    }
    merged = by_name[("merged (not drawn one by one)", "text")]["text"]
    assert sum(int(t.split(" ")[0]) for t in merged) == 8
    assert "6 of 14 slices are drawn one by one (from step 1" in panel.note
    assert "the other 8 are merged into 8 grey blocks" in panel.note


def test_step_menu_and_initial_zoom(tiny: tuple) -> None:
    layout = build_report([tiny]).panel("timeline").figure.to_dict()["layout"]
    buttons = layout["updatemenus"][0]["buttons"]
    assert [b["label"] for b in buttons] == ["whole trace", "step 1", "step 2"]
    assert buttons[2]["args"][0]["xaxis.range"] == [99.0, 201.0]
    assert layout["xaxis"]["range"] == [-1.0, 101.0]


def test_merge_into_blocks_by_hand() -> None:
    y = np.array([0, 0, 0, 1, 1])
    start = np.array([0, 10, 100, 0, 5])
    end = np.array([8, 20, 110, 50, 6])
    blocks = merge_into_blocks(y, start, end, gap_ns=1)  # lane 1: [5, 6) lies inside [0, 50)
    assert blocks.start_ns.tolist() == [0, 10, 100, 0]
    assert blocks.end_ns.tolist() == [8, 20, 110, 50]
    assert blocks.count.tolist() == [1, 1, 1, 2]
    merged = merge_into_blocks(y, start, end, gap_ns=2)  # a gap of exactly 2 ns is merged
    assert merged.start_ns.tolist() == [0, 100, 0] and merged.count.tolist() == [2, 1, 2]
    wide = merge_into_blocks(y, start, end, gap_ns=80)
    assert wide.start_ns.tolist() == [0, 0] and wide.end_ns.tolist() == [110, 50]
    assert wide.busy_ns.tolist() == [8 + 10 + 10, 50 + 1]
    # the gaps on lane 0 are 2 and 80: allowing 3 blocks means merging across the 2 ns gap only
    assert gap_for_blocks(y, start, end, 3) == 2
    assert len(merge_into_blocks(y, start, end, gap_for_blocks(y, start, end, 3))) == 3


def test_breakdowns(tiny: tuple) -> None:
    document = build_report([tiny])
    category = document.panel("gpu-by-category").figure.to_dict()["data"][0]
    assert list(category["x"]) == ["gemm", "elementwise"]
    assert array(category["y"]).tolist() == [20.0, 10.0]
    by_op = document.panel("gpu-by-op").figure.to_dict()["data"][0]
    assert list(by_op["y"]) == ["aten::relu", "aten::mm"]  # longest at the top of a horizontal bar chart
    assert array(by_op["x"]).tolist() == [10.0, 20.0]
    steps = document.panel("step-times").figure.to_dict()["data"]
    assert [t["name"] for t in steps] == ["step (period)", "CPU step", "GPU busy"]
    assert array(steps[2]["y"]).tolist() == [30.0, 30.0]
    table = document.panel("kernels").table
    assert table is not None and table.rows[0][:4] == ("ampere_sgemm_128x64_nn", "gemm", "1", "20.0")


def test_findings_say_not_available_without_the_analyses(tiny: tuple) -> None:
    trace, results = tiny
    document = build_report([(trace, AnalysisResults(summary=results.summary))])
    for panel_id in ("bound", "fusion", "roofline", "dispatch", "gpu-idle", "compiled"):
        panel = document.panel(panel_id)
        assert panel.figure is None and panel.table is None
        assert panel.note.startswith("not available")


def test_findings_show_an_analysis_result_when_present(tiny: tuple) -> None:
    trace, results = tiny

    @dataclasses.dataclass(frozen=True)
    class Bound:
        verdict: str
        gpu_idle_fraction: float

    class WithBound(AnalysisResults, frozen=True):  # a report whose `bound` is of another version's type
        bound: object = None

    extended = WithBound(summary=results.summary, bound=Bound("CPU-bound", 0.7))
    table = build_report([(trace, extended)]).panel("bound").table
    assert table is not None and table.rows == (("verdict", "CPU-bound"), ("gpu_idle_fraction", "0.7"))


def test_comparison_of_two_traces(tmp_path: Path) -> None:
    first = load_trace(tiny_trace(tmp_path, "a.json.gz"))
    second = load_trace(tiny_trace(tmp_path, "b.json.gz", tracelens_run={"variant": "compiled"}))
    document = build_report([(first, analyze(first)), (second, analyze(second))])
    assert document.sections[0].id == "compare"
    table = document.panel("compare-table").table
    assert table is not None and [row[0] for row in table.rows] == ["a", "compiled"]
    assert table.rows[0][2] == "2"  # kernels per step
    gpu = document.panel("compare-gpu").figure.to_dict()["data"]
    assert [t["name"] for t in gpu] == ["gemm", "elementwise"]
    assert array(gpu[0]["y"]).tolist() == [20.0, 20.0]
    counts = document.panel("compare-kernels").figure.to_dict()["data"]
    assert [(t["name"], array(t["y"]).tolist()) for t in counts] == [("gemm", [1.0, 1.0]), ("elementwise", [1.0, 1.0])]
    assert document.panel("t0-timeline").figure is not None and document.panel("t1-timeline").figure is not None
    ids = [p.id for s in document.sections for p in s.panels]
    assert len(ids) == len(set(ids))


def test_comparison_of_the_recorded_mlp_study() -> None:
    """eager_mlp, compiled_mlp, liger_mlp: 5, 4 and 4 kernels per step; the fused variants' kernels are listed
    with the eager ops they replace."""
    paths = [recorded_trace(f"h200/{name}.json.gz") for name in ("eager_mlp", "compiled_mlp", "liger_mlp")]
    inputs = [(trace, analyze(trace)) for trace in map(load_trace, paths)]
    document = build_report(inputs)
    table = document.panel("compare-table").table
    assert table is not None
    assert [(row[0], row[2]) for row in table.rows] == [("eager_mlp", "5"), ("compiled_mlp", "4"), ("liger_mlp", "4")]
    assert table.columns[-1] == "bound" and [row[-1] for row in table.rows] == [r.bound.bound for _, r in inputs]
    fusions = document.panel("compare-fusions").table
    assert fusions is not None and {row[0] for row in fusions.rows} == {"compiled_mlp", "liger_mlp"}


def test_a_trace_without_steps_labels_its_window_trace(tmp_path: Path) -> None:
    """Without ProfilerStep the one window is the whole trace: labelled "trace" in the report's per-step table
    and step-time chart and in the text table, never by its JSON number (-1)."""
    from tests.conftest import write_trace
    from tests.report_helpers import tiny_events

    events = [e for e in tiny_events() if not str(e.get("name", "")).startswith("ProfilerStep#")]
    trace = load_trace(write_trace(tmp_path / "nostep.json", events))
    assert trace.steps.source == "whole_trace"
    results = analyze(trace)
    assert [row.number for row in results.summary.step_table] == [-1]  # JSON keeps the documented number
    document = build_report([(trace, results)])
    table = document.panel("per-step").table
    assert table is not None and [row[0] for row in table.rows] == ["median", "trace"]
    steps = document.panel("step-times").figure.to_dict()["data"]
    assert all(list(t["x"]) == ["trace"] for t in steps)


def test_the_report_of_a_trace_without_steps_never_names_step_minus_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A third-party trace without ProfilerStep (one whole-trace window, JSON number -1): the page's words name
    "the whole trace", never "step -1", "1 steps" or the JSON's "whole_trace"."""
    import html
    import re

    from tests.conftest import run_cli

    trace = Path(__file__).parent / "corpus/amd_tracelens/torch_compile_triton/trace.json.gz"
    out = tmp_path / "page.html"
    run_cli(capsys, "report", str(trace), "-o", str(out), "--no-cache")
    page = re.sub(r"<script.*?</script>", " ", out.read_text(encoding="utf-8"), flags=re.S)
    words = html.unescape(re.sub(r"<[^>]+>", " ", page))
    assert "step -1" not in words and "1 steps" not in words and "whole_trace" not in words
    assert "the whole trace (no steps)" in words


def test_the_dispatch_panel_says_which_layers_its_total_leaves_out() -> None:
    """The report's dispatch note: the total is every layer's CPU self time but python's and sync's (on the
    study's eager MLP 323.1 µs beside 174.2 python and 1,123.2 sync: "everything but Python" before 2026-12-07;
    new user); the layers summed here from the analysis' own table."""
    from tracelens.renderers.analyses.dispatch import dispatch_panel

    results = analyze(load_trace(Path(__file__).resolve().parent.parent / "traces/h200/eager_mlp.json.gz"))
    dispatch = results.dispatch
    rest = sum(layer.us_per_step for layer in dispatch.layers if layer.name not in ("python", "sync"))
    assert dispatch.dispatch_us_per_step == pytest.approx(rest, abs=0.01)
    note = dispatch_panel(results).note
    assert "but python and sync" in note and f"{dispatch.dispatch_us_per_step:,.3f}"[:5] in note
