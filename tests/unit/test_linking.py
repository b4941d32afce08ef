"""Linking edge cases on tiny hand-written traces: each test states the rule it checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tracelens
from tests.conftest import kernel, launch, op, step, write_trace
from tracelens.model.events import Kind


def load(tmp_path: Path, events: list[dict[str, object]], name: str = "t.json", **top: object) -> tracelens.Trace:
    return tracelens.load(write_trace(tmp_path / name, events, **top))


def row(trace: tracelens.Trace, name: str, kind: Kind | None = None) -> int:
    ev = trace.events
    code = ev.names.index(name)
    rows = np.flatnonzero((ev.name == code) & ((ev.kind == kind) if kind is not None else True))
    assert rows.size == 1, f"{name}: {rows.size} rows"
    return int(rows[0])


def test_kernel_links_to_launch_by_correlation_and_to_op_by_external_id(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            step(1, 0, 100),
            op("aten::addmm", 10, 20, ext=5),
            launch("cudaLaunchKernel", 15, 5, correlation=42, ext=5),
            kernel("gemm_kernel", 30, 50, correlation=42),
        ],
    )
    k, lc, o = row(trace, "gemm_kernel"), row(trace, "cudaLaunchKernel"), row(trace, "aten::addmm")
    assert trace.links.launch[k] == lc
    assert trace.links.op[lc] == o and trace.links.op[k] == o
    assert trace.links.op_by_external_id == 1 and trace.links.op_by_containment == 0
    summary = tracelens.analyze(trace).summary
    assert summary.per_step.kernels == 1 and summary.per_step.launches == 1
    assert summary.kernels[0].op == "aten::addmm" and summary.kernels[0].category == "gemm"


def test_external_id_that_resolves_to_no_op_falls_back_to_containment(tmp_path: Path) -> None:
    # Old kineto wrote External id == correlation for launches; 77 names no op here.
    trace = load(
        tmp_path,
        [
            op("aten::mul", 10, 20, ext=3),
            launch("cudaLaunchKernel", 12, 5, correlation=77, ext=77),
            kernel("mul_kernel", 30, 5, correlation=77),
        ],
    )
    assert trace.links.op[row(trace, "mul_kernel")] == row(trace, "aten::mul")
    assert trace.links.op_by_external_id == 0 and trace.links.op_by_containment == 1


def test_external_id_of_an_op_that_does_not_enclose_the_launch_is_not_trusted(tmp_path: Path) -> None:
    # The id names an op on another thread: time containment on the launch's own thread wins.
    trace = load(
        tmp_path,
        [
            op("aten::add", 10, 20, ext=9, tid=2),
            op("aten::sub", 10, 20, ext=8),
            launch("cudaLaunchKernel", 12, 5, correlation=1, ext=9),
            kernel("k", 30, 5, correlation=1),
        ],
    )
    assert trace.links.op[row(trace, "k")] == row(trace, "aten::sub")


def test_bare_triton_launch_without_external_id_uses_innermost_enclosing_op(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            op("LigerGELUMulFunction", 0, 100, ext=1),
            op("aten::empty_like", 5, 3, ext=2),
            launch("cuLaunchKernelEx", 20, 10, correlation=5, cat="cuda_driver"),
            kernel("_geglu_tanh_forward_kernel", 40, 30, correlation=5),
        ],
    )
    k = row(trace, "_geglu_tanh_forward_kernel")
    assert trace.links.op[k] == row(trace, "LigerGELUMulFunction")
    assert tracelens.analyze(trace).summary.kernels[0].category == "fused"


def test_launch_outside_every_op_has_no_op(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            op("aten::mm", 0, 10, ext=1),
            launch("cuLaunchKernel", 20, 5, correlation=5, cat="cuda_driver"),
            kernel("my_kernel", 30, 5, correlation=5),
        ],
    )
    assert trace.links.launch[row(trace, "my_kernel")] == row(trace, "cuLaunchKernel")
    assert trace.links.op[row(trace, "my_kernel")] == -1


def test_cuda_graph_launch_owns_all_its_kernels(tmp_path: Path) -> None:
    events = [
        step(1, 0, 200),
        op("CUDAGraph::replay", 10, 30, ext=4),
        launch("cudaGraphLaunch", 15, 10, correlation=50, ext=4),
    ]
    events += [kernel(f"graph_kernel_{i}", 40 + 10 * i, 8, correlation=50) for i in range(3)]
    trace = load(tmp_path, events)
    launches = {int(trace.links.launch[row(trace, f"graph_kernel_{i}")]) for i in range(3)}
    assert launches == {row(trace, "cudaGraphLaunch")}
    summary = tracelens.analyze(trace).summary
    assert summary.per_step.kernels == 3 and summary.per_step.launches == 1
    assert summary.ops[0].name == "CUDAGraph::replay" and summary.ops[0].kernels_per_step == 3


def test_gpu_activity_without_launch_is_unattributed_and_in_no_step(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            kernel("leftover_from_before_window", 1, 5, correlation=999),
            step(1, 10, 100),
            op("aten::relu", 20, 10, ext=1),
            launch("cudaLaunchKernel", 22, 4, correlation=1, ext=1),
            kernel("relu_kernel", 40, 5, correlation=1),
        ],
    )
    assert trace.links.step[row(trace, "leftover_from_before_window")] == -1
    summary = tracelens.analyze(trace).summary
    assert summary.per_step.kernels == 1
    assert summary.facts.unattributed_gpu_activities == 1
    assert any("have no launch" in w for w in trace.warnings)


def test_kernel_running_after_its_step_ended_belongs_to_the_step_that_launched_it(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            step(1, 0, 50),
            step(2, 50, 50),
            op("aten::mm", 10, 10, ext=1),
            launch("cudaLaunchKernel", 12, 4, correlation=1, ext=1),
            kernel("long_gemm", 20, 70, correlation=1),  # runs into step 2's CPU span
            op("aten::mm", 60, 10, ext=2),
            launch("cudaLaunchKernel", 62, 4, correlation=2, ext=2),
            kernel("next_gemm", 90, 10, correlation=2),
        ],
    )
    assert trace.links.step[row(trace, "long_gemm")] == 0
    assert trace.links.step[row(trace, "next_gemm")] == 1
    table = tracelens.analyze(trace).summary.step_table
    assert [(r.number, r.kernels) for r in table] == [(1, 1), (2, 1)]
    assert table[0].step_us == 90.0  # from step start to the end of its last kernel


def test_trace_without_profiler_steps_is_one_window(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            op("aten::add", 0, 10, ext=1),
            launch("cudaLaunchKernel", 2, 3, correlation=1, ext=1),
            kernel("add_kernel", 10, 5, correlation=1),
            op("aten::add", 20, 10, ext=2),
            launch("cudaLaunchKernel", 22, 3, correlation=2, ext=2),
            kernel("add_kernel", 30, 5, correlation=2),
        ],
    )
    summary = tracelens.analyze(trace).summary
    assert trace.steps.source == "whole_trace"
    assert summary.steps == 1 and summary.per_step.kernels == 2
    assert any("no ProfilerStep" in w for w in trace.warnings)


def test_legacy_2021_categories_and_lowercase_external_id(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 1, "tid": "main", "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::conv2d",
            "pid": 1,
            "tid": "main",
            "ts": 10,
            "dur": 30,
            "args": {"External id": 7},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": "main",
            "ts": 12,
            "dur": 5,
            "args": {"correlation": 11, "external id": 7},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "implicit_convolve_sgemm",
            "pid": 0,
            "tid": "stream 7",
            "ts": 50,
            "dur": 20,
            "args": {"correlation": 11, "external id": 7, "device": 0, "stream": 7},
        },
    ]
    trace = load(tmp_path, events)
    assert trace.meta.format == "kineto-legacy"
    assert trace.links.op[row(trace, "implicit_convolve_sgemm")] == row(trace, "aten::conv2d")
    assert trace.links.op_by_external_id == 1
    summary = tracelens.analyze(trace).summary
    assert summary.step_numbers == [3] and summary.per_step.kernels == 1
    assert summary.kernels[0].category == "conv"


def test_bare_array_top_level_and_string_pids(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text(
        '[{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": "CPU functions", "tid": "1", "ts": 5, "dur": 2}]'
    )
    trace = tracelens.load(path)
    assert trace.meta.format == "chrome-array"
    assert trace.n_events == 1 and trace.tracks.pid == ("CPU functions",)


def test_integer_epoch_microseconds_keep_nanosecond_exactness(tmp_path: Path) -> None:
    base = 1_740_461_679_471_346  # DeepSeek-era integer epoch µs
    trace = load(tmp_path, [op("a", base, 3), op("b", base + 1, 1)])
    assert trace.origin_us == float(base)
    assert trace.events.ts_ns.tolist() == [0, 1000]
    assert trace.events.dur_ns.tolist() == [3000, 1000]


def test_relative_float_timestamps_are_exact_nanoseconds(tmp_path: Path) -> None:
    trace = load(tmp_path, [op("a", 5149313705841.453, 12.345), op("b", 5149313705841.454, 0.001)])
    assert trace.events.ts_ns.tolist() == [453, 454]
    assert trace.events.dur_ns.tolist() == [12345, 1]


def test_gpu_busy_is_the_union_per_device_summed_over_devices(tmp_path: Path) -> None:
    events = [step(1, 0, 1000), op("aten::x", 0, 100, ext=1)]
    for corr, (dev, stream, ts, dur) in enumerate([(0, 7, 100, 50), (0, 8, 120, 50), (1, 7, 100, 10)], start=1):
        events.append(launch("cudaLaunchKernel", 10 + corr, 1, correlation=corr, ext=1))
        k = kernel(f"k{corr}", ts, dur, correlation=corr, stream=stream)
        k["pid"] = dev
        k["args"]["device"] = dev
        events.append(k)
    summary = tracelens.analyze(load(tmp_path, events)).summary
    # device 0: [100,150) ∪ [120,170) = 70 µs; device 1: 10 µs
    assert summary.per_step.gpu_busy_us == 80.0
    assert summary.per_step.gpu_kernel_us == 110.0


def test_inductor_wrapper_op_is_replaced_by_its_enclosing_op(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            step(1, 0, 100),
            op("CompiledFunction", 1, 90, ext=1),
            op("triton_poi_fused_gelu_mul_0", 10, 20, ext=2),
            launch("cuLaunchKernel", 12, 5, correlation=3, ext=2, cat="cuda_driver"),
            kernel("triton_poi_fused_gelu_mul_0", 40, 30, correlation=3),
        ],
    )
    summary = tracelens.analyze(trace).summary
    assert summary.kernels[0].op == "CompiledFunction"
    assert summary.kernels[0].category == "fused"


def test_nesting_parent_is_innermost_enclosing_event_on_the_same_thread(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            op("outer", 0, 100),
            op("inner", 10, 50),
            op("leaf", 20, 5),
            op("sibling", 70, 10),
            op("other_thread", 15, 5, tid=2),
        ],
    )
    parent = {trace.events.name_of(i): trace.links.parent[i] for i in range(trace.n_events)}
    assert parent["inner"] == row(trace, "outer")
    assert parent["leaf"] == row(trace, "inner")
    assert parent["sibling"] == row(trace, "outer")
    assert parent["other_thread"] == -1
    assert trace.links.depth[row(trace, "leaf")] == 2


def test_truncated_trace_marks_its_last_step_incomplete(tmp_path: Path) -> None:
    events = []
    for number in range(3):
        t0 = number * 100
        events += [
            step(number, t0, 90),
            op("aten::mm", t0 + 10, 10, ext=number + 1),
            launch("cudaLaunchKernel", t0 + 12, 3, correlation=number + 1, ext=number + 1),
            kernel("gemm", t0 + 30, 20, correlation=number + 1),
        ]
    path = write_trace(tmp_path / "full.json", events)
    data = path.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.9)])
    trace = tracelens.load(cut)
    assert trace.truncation.truncated
    assert trace.steps.complete.tolist() == [True, True, False]
    assert any("cut off mid-write" in w for w in trace.warnings)
    assert tracelens.analyze(trace).summary.steps == 2
