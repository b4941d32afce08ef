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
    # the step's GPU window is its CPU span 0-100 (its GPU work ends at 38): kernels 16-18 and 36-38; the GPU
    # waits 0-16 for the mul launched 12-17 and 18-36 for the gelu launched 32-37; 38-100 nothing follows: sync
    # until the device sync (80-90) returns, as in any gap, then other (all other before 2026-12-07)
    assert result.gpu_window_us_per_step == 100.0
    assert result.gpu_busy_us_per_step == 4.0
    assert result.launch_wait_us_per_step == 34.0
    assert (result.sync_wait_us_per_step, result.queued_idle_us_per_step, result.other_idle_us_per_step) == (52, 0, 10)
    assert result.bound == "cpu"
    # dispatch SELF time inside the waits: t 2-5, mul 10-12 and 17-18 + its launch 12-16 (0-16: 9 µs);
    # mul 18-20, the query 21-22, gelu 30-32 + its launch 32-36 (18-36: 9 µs) = 18 µs of 24
    assert result.exposed_dispatch_us_per_step == 18.0
    assert result.exposed_dispatch_pct == 75.0
    assert result.exposed_dispatch_pct_of_gpu == 18.0  # of the 100 µs window


def test_gap_until_a_sync_returns_is_sync_then_launch(tmp_path: Path) -> None:
    events = [
        step(1, 0, 130),
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
    assert result.launch_wait_us_per_step == 21.0  # 0-5 for the first launch; 110-126: then it had to launch
    assert result.gpu_busy_us_per_step == 99.0
    assert result.bound == "mixed"  # busy 99 of 130 µs (76 %) while 16 % of the window waits for launches


def test_kernel_queued_before_its_gap_is_queued_idle_even_under_a_sync(tmp_path: Path) -> None:
    events = [
        step(1, 0, 70),
        op("aten::mm", 0, 10, ext=1),
        launch("cudaLaunchKernel", 1, 2, correlation=1, ext=1),
        launch("cudaLaunchKernel", 4, 2, correlation=2, ext=1),
        launch("cudaDeviceSynchronize", 12, 58, correlation=3),  # the CPU waits 12-70
        kernel("gemm_kernel", 10, 20, correlation=1, stream=7),
        kernel("gemm_kernel", 50, 20, correlation=2, stream=8),  # launched at 4-6, idle 30-50 anyway
    ]
    trace = load_events(tmp_path, events)
    result = bound_of(trace, select_window(trace), dispatch_us_per_step=10.0)
    assert result.queued_idle_us_per_step == 20.0  # 30-50: not "sync", though the CPU sat in a sync
    assert (result.launch_wait_us_per_step, result.sync_wait_us_per_step) == (10.0, 0.0)  # 0-10: first launch
    assert result.bound == "mixed"  # busy 40 of 70


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
    assert classify_gaps(trace, later).tolist() == [[18_000.0, 0.0, 0.0, 0.0]]  # launch, sync, queued, other
    assert classify_gaps(trace, gaps.take(gaps.gap_end_ns > 20_000)).tolist() == [[18_000.0, 0.0, 0.0, 0.0]]
    assert Gaps.of(frame).gap_end_ns.tolist() == gaps.gap_end_ns.tolist()


def test_verdict_thresholds() -> None:
    assert verdict(busy_us=10, launch_wait_us=11, other_idle_us=0) == "cpu"
    assert verdict(busy_us=10, launch_wait_us=10, other_idle_us=0) == "cpu"
    assert verdict(busy_us=88, launch_wait_us=10, other_idle_us=2) == "gpu"
    assert verdict(busy_us=88, launch_wait_us=11, other_idle_us=1) == "mixed"  # launch waits over 10 %
    assert verdict(busy_us=78, launch_wait_us=21, other_idle_us=1) == "mixed"  # not "gpu": 21 % waits on launches
    assert verdict(busy_us=84, launch_wait_us=0, other_idle_us=16) == "mixed"  # busy under 85 %
    assert verdict(busy_us=60, launch_wait_us=30, other_idle_us=10) == "mixed"
    assert verdict(busy_us=0, launch_wait_us=0, other_idle_us=0) == "unknown"
