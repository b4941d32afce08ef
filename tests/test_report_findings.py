"""Finding panels on a recorded H200 trace (eager_mlp: mm → gelu → mul → mm, 5 steps), checked against the
analysis results they draw (the analyses' own figures are tested in their own tests)."""

from __future__ import annotations

import pytest

from tests.conftest import recorded_trace
from tests.report_helpers import array
from tracelens.analyses import AnalysisResults, analyze
from tracelens.loader import load_trace
from tracelens.model.trace import Trace
from tracelens.renderers.page import build_report
from tracelens.report.document import ReportDocument


@pytest.fixture(scope="module")
def mlp() -> tuple[Trace, AnalysisResults, ReportDocument]:
    trace = load_trace(recorded_trace("h200/eager_mlp.json.gz"))
    results = analyze(trace)
    return trace, results, build_report([(trace, results)])


def test_idle_by_cause_draws_the_bound_steps(mlp: tuple) -> None:
    _, results, document = mlp
    data = document.panel("gpu-idle").figure.to_dict()["data"]
    assert [t["name"].split(":")[0] for t in data] == ["GPU busy", "idle", "idle", "idle", "idle", "idle"]
    assert list(data[0]["x"]) == [str(s.number) for s in results.bound.steps] == ["3", "4", "5", "6", "7"]
    assert array(data[0]["y"]).tolist() == [s.gpu_busy_us for s in results.bound.steps]
    assert array(data[1]["y"]).tolist() == [s.launch_wait_us for s in results.bound.steps]
    assert array(data[2]["y"]).tolist() == [s.sync_wait_us for s in results.bound.steps]


def test_bound_panel_states_the_verdict(mlp: tuple) -> None:
    _, results, document = mlp
    panel = document.panel("bound")
    assert panel.table is not None and panel.table.rows[0] == ("verdict", results.bound.bound)
    by_what_if = {"gpu": "GPU work limits", "cpu": "CPU work limits", "mixed": "Both CPU and GPU work limit"}
    by_idle = {"gpu": "GPU-bound", "cpu": "CPU-bound", "mixed": "Mixed"}
    said = (by_what_if if results.bound.verdict_basis == "what-if" else by_idle)[results.bound.bound]
    assert panel.note.startswith(said)  # the meaning of what decided the verdict
    # its figures are means over the steps; the per-step table beside it shows medians: the note says which
    assert f"means over the {len(results.bound.steps)} analyzed steps" in panel.note
    busy = dict(panel.table.rows)["GPU busy µs/step"].replace(",", "")
    mean_busy = sum(s.gpu_busy_us for s in results.summary.step_table) / len(results.summary.step_table)
    assert float(busy) == pytest.approx(mean_busy, abs=0.01)


def test_dispatch_layers(mlp: tuple) -> None:
    _, results, document = mlp
    bar = document.panel("dispatch").figure.to_dict()["data"][0]
    layers = [layer for layer in results.dispatch.layers if layer.us_per_step > 0][::-1]
    assert list(bar["y"]) == [layer.name for layer in layers]
    assert array(bar["x"]).tolist() == [layer.us_per_step for layer in layers]


def test_fusion_table(mlp: tuple) -> None:
    _, results, document = mlp
    table = document.panel("fusion").table
    assert table is not None and len(table.rows) == len(results.fusion.opportunities) == 2
    assert table.rows[0][0] == "vectorized_elementwise_kernel[gelu] → vectorized_elementwise_kernel[mul]"
    assert table.rows[0][1] == "aten::gelu → aten::mul"
    # the same kernels as a GEMM-epilogue opportunity of the gate/up GEMMs
    assert table.rows[1][0] == "GEMM epilogue: " + table.rows[0][0] and table.rows[1][1] == table.rows[0][1]


def test_roofline_points_and_roofs(mlp: tuple) -> None:
    _, results, document = mlp
    data = document.panel("roofline").figure.to_dict()["data"]
    roofs = [t for t in data if t["name"].startswith("roof ")]
    points = [t for t in data if t["name"].endswith("-limited kernels")]
    dtypes = {r.dtype for r in results.roofline.rows}
    assert [t["name"].split()[1] for t in roofs] == sorted(dtypes & set(results.roofline.peaks_tflops))
    plotted = sum(array(t["x"]).size for t in points)
    modelled = [r for r in results.roofline.rows if r.intensity_flop_per_byte and r.achieved_tflops]
    assert plotted == len(modelled) > 0
    compute = next(t for t in points if t["name"] == "compute-limited kernels")
    rows = [r for r in modelled if r.limit == "compute"]
    assert array(compute["y"]).tolist() == [r.achieved_tflops for r in rows]
