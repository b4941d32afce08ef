"""DataFrame views on the tiny eager MLP trace of tests/test_check_builders.py (figures read off its events)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import tracelens
from tests.conftest import recorded_trace
from tests.test_check_builders import GEMM, write_compiled, write_eager


@pytest.fixture(scope="module")
def eager(tmp_path_factory: pytest.TempPathFactory) -> tracelens.Trace:
    return tracelens.load(write_eager(tmp_path_factory.mktemp("frames")))


def test_kernels_frame(eager: tracelens.Trace) -> None:
    frame = tracelens.kernels_frame(eager)
    assert list(frame.columns) == [
        "step", "name", "short_name", "kind", "category", "op", "launch_api", "start_us", "dur_us", "end_us",
        "launch_start_us", "queue_us", "device", "stream", "grid_blocks", "block_threads",
    ]  # fmt: skip
    assert frame["step"].tolist() == [1, 1, 1, 2, 2, 2]
    first = frame.iloc[:3]
    assert first["short_name"].tolist() == [
        GEMM, "vectorized_elementwise_kernel[gelu]", "vectorized_elementwise_kernel[mul]"
    ]  # fmt: skip
    assert first["op"].tolist() == ["aten::addmm", "aten::gelu", "aten::mul"]
    assert first["kind"].tolist() == ["kernel"] * 3
    assert first["start_us"].tolist() == [40.0, 150.0, 180.0]
    assert first["dur_us"].tolist() == [100.0, 20.0, 30.0]
    assert first["end_us"].tolist() == [140.0, 170.0, 210.0]
    assert first["launch_start_us"].tolist() == [30.0, 85.0, 115.0]
    assert first["queue_us"].tolist() == [10.0, 65.0, 65.0]
    assert frame.groupby("step")["dur_us"].sum().tolist() == [150.0, 150.0]
    assert [str(frame[c].dtype) for c in ("step", "op", "device", "stream", "grid_blocks", "queue_us")] == [
        "Int64", "string", "Int64", "Int64", "Int64", "Float64"
    ]  # fmt: skip
    assert frame["grid_blocks"].isna().all()  # not recorded in the tiny trace: NA, not -1


def test_frames_follow_pandas_conventions_on_a_recorded_trace() -> None:
    """Input dims are tuples (here aten::linear's input, weight and bias), missing values NA, never "" or -1."""
    trace = tracelens.load(recorded_trace("h200/eager_linear.json.gz"))
    ops = tracelens.ops_frame(trace)
    linear = ops[ops["name"] == "aten::linear"]["input_dims"].iloc[0]
    assert linear == ((4096, 2048), (16384, 2048), (16384,))  # the raw event: [[4096, 2048], [16384, 2048], [16384]]
    for frame in (ops, tracelens.kernels_frame(trace), tracelens.launches_frame(trace)):
        for column in frame.columns:
            values = frame[column]
            if values.dtype == object or str(values.dtype) == "string":
                assert not (values.astype(str) == "").any(), column
            elif str(values.dtype) == "Int64":
                assert not (values.dropna() < 0).any(), column
    kernels = tracelens.kernels_frame(trace)
    assert (kernels["grid_blocks"].dropna() > 0).all() and kernels["grid_blocks"].notna().any()


def test_ops_frame(eager: tracelens.Trace) -> None:
    frame = tracelens.ops_frame(eager)
    assert list(frame.columns) == [
        "step", "name", "parent", "depth", "thread", "start_us", "dur_us", "end_us", "kernels", "gpu_us", "input_dims"
    ]  # fmt: skip
    step1 = frame[frame["step"] == 1]
    assert step1["name"].tolist() == ["aten::linear", "aten::t", "aten::addmm", "aten::gelu", "aten::mul"]
    assert step1["parent"].tolist() == ["ProfilerStep#1", "aten::linear", "aten::linear", "ProfilerStep#1",
                                        "ProfilerStep#1"]  # fmt: skip
    assert step1["depth"].tolist() == [1, 2, 2, 1, 1]
    assert step1["kernels"].tolist() == [0, 0, 1, 1, 1]
    assert step1["gpu_us"].tolist() == [0.0, 0.0, 100.0, 20.0, 30.0]
    assert step1["dur_us"].tolist() == [60.0, 4.0, 40.0, 20.0, 20.0]
    assert step1["thread"].unique().tolist() == ["CPU 100/1"]
    assert str(frame["depth"].dtype) == "Int64" and str(frame["kernels"].dtype) == "Int64"
    assert frame["input_dims"].map(lambda dims: dims is pd.NA).all()  # the tiny trace records no shapes


def test_launches_frame(eager: tracelens.Trace) -> None:
    frame = tracelens.launches_frame(eager)
    assert list(frame.columns) == [
        "step", "name", "api", "op", "start_us", "dur_us", "kernels", "kernel", "kernel_start_us", "launch_to_start_us"
    ]  # fmt: skip
    step1 = frame[frame["step"] == 1]
    assert step1["name"].tolist() == ["cudaOccupancyMaxActiveBlocksPerMultiprocessor"] + ["cudaLaunchKernel"] * 3
    assert step1["op"].tolist() == ["aten::addmm", "aten::addmm", "aten::gelu", "aten::mul"]
    assert step1["kernels"].tolist() == [0, 1, 1, 1]
    assert step1["kernel"].iloc[1] == GEMM and step1["kernel"].iloc[0] is pd.NA  # the query launched nothing
    assert step1["launch_to_start_us"].iloc[1:].tolist() == [10.0, 65.0, 65.0]
    assert step1["launch_to_start_us"].iloc[0] is pd.NA
    assert (str(frame["kernels"].dtype), str(frame["kernel_start_us"].dtype)) == ("Int64", "Float64")
    assert step1["api"].unique().tolist() == ["runtime"]


def test_driver_launches_are_marked(tmp_path: Path) -> None:
    frame = tracelens.launches_frame(tracelens.load(write_compiled(tmp_path)))
    assert frame[frame["step"] == 1][["name", "api"]].values.tolist() == [
        ["cudaLaunchKernel", "runtime"], ["cuLaunchKernelEx", "driver"]
    ]  # fmt: skip


def test_steps_frame(eager: tracelens.Trace) -> None:
    frame = tracelens.steps_frame(eager)
    assert frame["step"].tolist() == [1, 2]
    assert frame["start_us"].tolist() == [0.0, 1000.0]
    assert frame["kernels"].tolist() == [3, 3]
    assert frame["launches"].tolist() == [3, 3]
    assert [str(frame[c].dtype) for c in ("step", "kernels", "memcpy", "launches", "cpu_ops", "cpu_us")] == [
        "Int64", "Int64", "Int64", "Int64", "Int64", "float64"
    ]  # fmt: skip
    assert frame["gpu_kernel_us"].tolist() == [150.0, 150.0]
    assert frame["cpu_us"].tolist() == [500.0, 500.0]
    assert frame["complete"].tolist() == [True, True]
    assert frame["analyzed"].tolist() == [True, True]


@pytest.mark.parametrize("name", ["sweep/compiled_static_geglu", "graphs/mlp_graph", "eager_mlp"])
def test_the_analyzed_rows_give_analyzes_medians(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`analyzed` marks the rows `analyze`'s per-step medians are over (compiling and capturing steps not): their
    medians are the JSON's `per_step` figures, where the median of every row is not (compiled_static_geglu)."""
    import json

    from tests.independent.warmup_steps import steady_steps
    from tracelens.cli import main

    path = recorded_trace(f"h200/{name}.json.gz")
    frame = tracelens.steps_frame(tracelens.load(path))
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    per_step = json.loads(capsys.readouterr().out)["per_step"]
    rows = frame[frame["analyzed"]]
    assert rows["step"].tolist() == steady_steps(str(path))  # the warm-up steps, read from the raw events, left out
    for key in ("step_us", "gpu_busy_us", "cpu_us"):
        assert float(rows[key].astype("float64").median()) == pytest.approx(per_step[key], abs=1e-3), key
