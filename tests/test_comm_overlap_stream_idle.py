"""Communication/computation overlap and per-stream idle time, checked against HolisticTraceAnalysis and an
independent stdlib computation (tests/rawtrace.py) on the multi-rank corpus traces.

HTA is loaded with `include_last_profiler_step=True` (its default drops the last step and the kernels launched
after it starts, which tracelens keeps); HTA's timestamps are whole µs on these traces, so sums agree to ~1 µs per
gap.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests import rawtrace
from tests.conftest import anchor
from tracelens.analyses.comm_overlap import comm_overlap_of
from tracelens.analyses.stream_idle import stream_idle_of
from tracelens.analyses.window import select_window

RANK_TRACES = (
    "hta/negative_queue_length_values_check/rank0.json.gz",
    "hta/trace_filter/sampled_rank-0.json.gz",
    "hta/trace_filter/sampled_rank-1.json.gz",
)


def _hta(path: Path, tmp_path: Path) -> Any:
    analysis = pytest.importorskip("hta.trace_analysis")
    shutil.copy(path, tmp_path / path.name)
    return analysis.TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)


@pytest.mark.parametrize("relative", RANK_TRACES)
def test_overlap_equals_hta_and_the_stdlib_reference(relative: str, tmp_path: Path) -> None:
    path = anchor(relative)
    trace = tracelens.load(path)
    window = select_window(trace)
    ours = comm_overlap_of(trace, window)
    assert ours.overlap_pct is not None and ours.comm_kernels > 0
    reference = rawtrace.comm_overlap_pct(path, set(window.step_numbers))
    assert reference is not None
    assert ours.overlap_pct == pytest.approx(reference, abs=1e-3)  # reported to 3 decimals
    hta = _hta(path, tmp_path).get_comm_comp_overlap(visualize=False)
    assert round(ours.overlap_pct, 2) == pytest.approx(float(hta["comp_comm_overlap_pctg"].iloc[0]), abs=0.011)
    per_step = [s for s in ours.steps if s.overlap_pct is not None]
    assert all(0.0 <= s.overlap_pct <= 100.0 for s in per_step)
    assert all(s.exposed_us == pytest.approx(s.comm_us - s.overlapped_us) for s in ours.steps)


def test_overlap_figures_of_the_nccl_rank0_trace() -> None:
    """rank0 (A100, 16 ranks): 75 NCCL kernels in 5 steps, 1.47 % of their time overlapped by compute."""
    trace = tracelens.load(anchor(RANK_TRACES[0]))
    ours = comm_overlap_of(trace, select_window(trace))
    assert ours.comm_kernels == 75
    assert round(ours.overlap_pct or 0.0, 2) == 1.47


def test_no_communication_is_unknown_not_zero() -> None:
    trace = tracelens.load(Path("traces/h200/eager_mlp.json.gz"))
    ours = comm_overlap_of(trace, select_window(trace))
    assert ours.comm_kernels == 0
    assert ours.overlap_pct is None and ours.comm_us_per_step is None and ours.exposed_us_per_step is None
    assert ours.note == "no communication kernels in the trace"


@pytest.mark.parametrize("relative", RANK_TRACES[:2])
def test_stream_idle_split_equals_hta(relative: str, tmp_path: Path) -> None:
    """HTA's host-wait / kernel-wait / other idle time per stream, to 3 µs per stream (HTA's whole µs)."""
    path = anchor(relative)
    trace = tracelens.load(path)
    window = select_window(trace)
    ours = {row.stream: row for row in stream_idle_of(trace, window).streams}
    frame, _ = _hta(path, tmp_path).get_idle_time_breakdown(consecutive_kernel_delay=30, visualize=False)
    theirs: dict[tuple[int, str], float] = {
        (int(r["stream"]), str(r["idle_category"])): float(r["idle_time"]) for r in frame.to_dict("records")
    }
    assert {stream for stream, _ in theirs} == set(ours)
    for stream, row in ours.items():
        for category, value in (
            ("host_wait", row.host_wait_us_per_step),
            ("kernel_wait", row.kernel_wait_us_per_step),
            ("other", row.other_us_per_step),
        ):
            assert value * window.n_steps == pytest.approx(theirs.get((stream, category), 0.0), abs=3.0)


def test_stream_idle_parts_add_up() -> None:
    trace = tracelens.load(anchor(RANK_TRACES[0]))
    result = stream_idle_of(trace, select_window(trace))
    assert [r.stream for r in result.streams][:2] == [7, 84]
    for row in result.streams:
        parts = row.host_wait_us_per_step + row.kernel_wait_us_per_step + row.other_us_per_step
        assert parts == pytest.approx(row.idle_us_per_step)
        assert row.busy_pct is None or 0.0 <= row.busy_pct <= 100.0


def test_stream_idle_is_over_the_summary_steps_and_says_which() -> None:
    """Issue #27 item 8: one busy figure per stream per window. The compiled sweep compiles in its first steps;
    the idle table is over the summary's steps (warm-up steps left out) and names them. Busy is the union
    of the stream's activity launched in those steps, recomputed here from the raw events."""
    import gzip
    import json

    from tracelens.analyses import analyze

    path = Path("traces/h200/sweep/compiled_default_block.json.gz")
    results = analyze(tracelens.load(path))
    idle = results.stream_idle
    assert idle is not None
    steps = results.summary.step_numbers
    assert idle.window.startswith(f"steps {min(steps)}-{max(steps)}") and "warm-up step" in idle.window
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    spans = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"] in {f"ProfilerStep#{n}" for n in steps}
    ]
    launches = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    busy: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            at = launches.get(e["args"].get("correlation"))
            if at is not None and any(a <= at <= b for a, b in spans):
                busy.setdefault(e["args"]["stream"], []).append((e["ts"], e["ts"] + e["dur"]))
    for row in idle.streams:
        merged, end = 0.0, float("-inf")
        for a, b in sorted(busy[row.stream]):
            merged += max(b - max(a, end), 0.0)
            end = max(end, b)
        assert row.busy_us_per_step == pytest.approx(merged / len(steps), abs=0.01)
