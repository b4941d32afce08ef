"""Exposed vs hidden GPU idle time and the cpu/gpu/mixed verdict on tiny hand-built steps."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import MUL_KERNEL, cpu_bound_events, load_events
from tracelens.analyses.bound import Gaps, bound_of, classify_gaps, gap_arrays, gap_table, verdict
from tracelens.analyses.window import select_window


def test_gap_waiting_for_a_launch_is_exposed_dispatch(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    result = bound_of(trace, select_window(trace), dispatch_us_per_step=24.0)
    # kernels 16-18 and 36-38: the 18 µs gap ends at a kernel launched 32-37 after the GPU went idle
    assert result.gpu_busy_us_per_step == 4.0
    assert result.launch_wait_us_per_step == 18.0
    assert result.sync_wait_us_per_step == 0.0
    assert result.bound == "cpu"
    # the CPU's dispatch work inside that 18-36 µs wait: mul 18-20, the query 21-22, gelu 30-36 = 9 µs of 24
    assert result.exposed_dispatch_us_per_step == 9.0
    assert result.exposed_dispatch_pct == 37.5
    assert result.exposed_dispatch_pct_of_gpu == round(100 * 9 / 22, 3)  # GPU time: 4 busy + 18 idle


def test_gap_until_a_sync_returns_is_sync_then_launch(tmp_path: Path) -> None:
    events = [
        step(1, 0, 200),
        op("aten::mm", 0, 10, ext=1),
        launch("cudaLaunchKernel", 2, 5, correlation=1, ext=1),
        kernel("gemm_kernel", 5, 95, correlation=1),  # GPU busy 5-100
        launch("cudaDeviceSynchronize", 20, 90, correlation=5),  # CPU blocked 20-110
        op("aten::mul", 120, 10, ext=2),
        launch("cudaLaunchKernel", 122, 5, correlation=2, ext=2),
        kernel(MUL_KERNEL, 126, 4, correlation=2),  # gap 100-126
    ]
    trace = load_events(tmp_path, events)
    result = bound_of(trace, select_window(trace), dispatch_us_per_step=100.0)
    assert result.sync_wait_us_per_step == 10.0  # 100-110: the CPU was still inside the sync
    assert result.launch_wait_us_per_step == 16.0  # 110-126: then it had to launch
    assert result.gpu_busy_us_per_step == 99.0
    assert result.bound == "gpu"  # busy 99 of 125 µs


def test_kernel_queued_long_before_its_gap_is_other_idle(tmp_path: Path) -> None:
    events = [
        step(1, 0, 200),
        op("aten::mm", 0, 10, ext=1),
        launch("cudaLaunchKernel", 1, 2, correlation=1, ext=1),
        launch("cudaLaunchKernel", 4, 2, correlation=2, ext=1),
        kernel("gemm_kernel", 10, 20, correlation=1, stream=7),
        kernel("gemm_kernel", 50, 20, correlation=2, stream=8),  # launched at 4-6, idle 30-50 anyway
    ]
    trace = load_events(tmp_path, events)
    result = bound_of(trace, select_window(trace), dispatch_us_per_step=10.0)
    assert (result.launch_wait_us_per_step, result.other_idle_us_per_step) == (0.0, 20.0)
    assert result.bound == "mixed"  # busy 40 of 60


def test_gap_table_is_the_arrays_and_both_classify_alike(tmp_path: Path) -> None:
    """The report filters `gap_table` frames and classifies them; analyses classify `Gaps` arrays."""
    trace = load_events(tmp_path, cpu_bound_events())
    gaps = gap_arrays(trace)
    frame = gap_table(trace)
    assert list(frame.columns) == ["group", "row", "step", "gap_start_ns", "gap_end_ns", "launch_ts_ns",
                                   "launch_end_ns", "busy_ns"]  # fmt: skip
    assert frame["gap_start_ns"].tolist() == [16_000, 18_000]  # kernels 16-18 and 36-38 on device 0
    assert frame["gap_end_ns"].tolist() == [16_000, 36_000]
    assert frame["launch_ts_ns"].tolist() == [12_000, 32_000]
    assert frame["busy_ns"].tolist() == [2_000, 2_000]
    later = frame[frame["gap_end_ns"] > 20_000]
    assert classify_gaps(trace, later).tolist() == [[18_000.0, 0.0, 0.0]]  # launch, sync, other
    assert classify_gaps(trace, gaps.take(gaps.gap_end_ns > 20_000)).tolist() == [[18_000.0, 0.0, 0.0]]
    assert Gaps.of(frame).gap_end_ns.tolist() == gaps.gap_end_ns.tolist()


def test_verdict_thresholds() -> None:
    assert verdict(busy_us=10, launch_wait_us=11, other_idle_us=0) == "cpu"
    assert verdict(busy_us=75, launch_wait_us=20, other_idle_us=5) == "gpu"
    assert verdict(busy_us=60, launch_wait_us=30, other_idle_us=10) == "mixed"
    assert verdict(busy_us=0, launch_wait_us=0, other_idle_us=0) == "unknown"
