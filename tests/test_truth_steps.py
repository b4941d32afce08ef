"""Step time, queue backlog, GPU busy and the busy + idle = window identity, against an independent reading.

`tests/independent/step_windows.py` recomputes every figure from the raw JSON with the standard library only
(docs/definitions.md states the definitions both follow). Checked on every corpus trace and every recorded
trace that has ProfilerSteps, for every analyzed step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tests import anchors
from tests.conftest import TRACES, anchor, anchor_name, anchor_traces, recorded_trace
from tests.independent.dispatch_idle import idle_dispatch_us
from tests.independent.step_windows import step_figures
from tracelens.analyses.pipeline import analyze

RECORDED = anchors.recorded(TRACES)
ALL = [*anchor_traces(), *RECORDED]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(TRACES)) if p.is_relative_to(TRACES) else anchor_name(p) for p in paths]


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_step_figures_equal_the_independent_reading(path: Path) -> None:
    trace = tracelens.load(path)
    results = analyze(trace)
    if trace.meta.format != "kineto":
        pytest.skip("the independent reading covers Kineto traces (not the 2021 legacy format)")
    expected = {row["number"]: row for row in step_figures(str(path))}
    assert results.summary.step_table, "a trace with complete steps analyzes at least one"
    for row in results.summary.step_table:
        want = expected[row.number]
        if row.gpu_busy_us is None:  # no GPU activity in the trace: GPU figures are unknown, not 0
            assert want["busy_us"] == 0 and row.gpu_window_us is None and row.queue_backlog_us is None
            continue
        assert row.gpu_busy_us == pytest.approx(want["busy_us"], abs=0.002), row.number
        assert row.gpu_window_us == pytest.approx(want["busy_us"] + want["idle_us"], abs=0.002), row.number
        assert row.step_us == pytest.approx(want["step_us"], abs=0.002), row.number
        assert row.queue_backlog_us == pytest.approx(want["backlog_us"], abs=0.002), row.number
    for row in results.summary.step_table:  # the CPU side, with or without GPU activity
        assert row.cpu_ops == expected[row.number]["cpu_ops"], row.number
        assert row.cpu_us == pytest.approx(expected[row.number]["cpu_us"], abs=0.002), row.number


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_busy_plus_idle_buckets_is_the_window_in_every_step(path: Path) -> None:
    results = analyze(tracelens.load(path))
    bound = results.bound
    assert bound is not None
    for step in bound.steps:
        parts = step.gpu_busy_us + step.idle_us
        assert parts == pytest.approx(step.gpu_window_us, abs=0.01), step.number
        assert 0 <= step.exposed_dispatch_us <= step.launch_wait_us + 0.001
    by_number = {row.number: row for row in results.summary.step_table}
    for step in bound.steps:  # the bound analysis and the per-step table read the same windows
        if step.number in by_number and by_number[step.number].gpu_window_us is not None:
            assert step.gpu_window_us == pytest.approx(by_number[step.number].gpu_window_us, abs=0.01)
            assert step.gpu_busy_us == pytest.approx(by_number[step.number].gpu_busy_us, abs=0.01)


def test_qwen_mi300_window_starts_after_the_work_launched_before_the_step() -> None:
    """The step's window starts where the work launched before the recording (the queue of earlier steps) ends,
    as a later step's starts where the previous step's ends: 29,743.9 µs of its own GPU activity in a 33,755.4 µs
    window, equal to its period (88 % busy, as HTA's temporal breakdown calls the rank); it held 42,869 µs of
    busy in 46,892 µs before, most of it the earlier work."""
    results = analyze(tracelens.load(anchor("amd_tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")))
    per_step = results.summary.per_step
    assert (per_step.gpu_busy_us, per_step.gpu_window_us) == (29743.938, 33755.369)
    assert per_step.gpu_window_us == per_step.step_us


def test_cpu_ahead_training_step_time_is_the_gpu_period_not_the_backlog() -> None:
    """20 AdamW steps on an H200 without a sync per step: the CPU runs ahead, the queue grows by ~4 ms a step.
    The step time is GPU end to GPU end (~8.4 ms); the backlog is reported apart and grows. The first step's
    runs from the end of the work launched before the recording (still queued when it started)."""
    results = analyze(tracelens.load(recorded_trace("h200/truth/train_cpu_ahead_stacks.json.gz")))
    table = results.summary.step_table
    assert results.summary.per_step.step_us == 8428.631
    backlog = [row.queue_backlog_us for row in table]
    assert backlog[0] < backlog[5] < backlog[10]
    assert all(7500 < row.step_us < 8700 for row in table)  # type: ignore[operator]


STACKS = [
    *(p for p in RECORDED if "truth" in p.parts),
    *(p for p in anchor_traces() if "amd_tracelens" in p.parts and "torch_compile_triton" not in p.parts),
]


@pytest.mark.parametrize("path", STACKS, ids=_ids(STACKS))
def test_exposed_dispatch_is_dispatch_self_time_in_gpu_idle(path: Path) -> None:
    """Exposed dispatch never exceeds the dispatch self time (Python frames nested in ops excluded) that ran
    while the GPU idled in the step's window, as an independent stdlib reading computes it; where every idle
    microsecond is a launch wait (the CPU-bound training trace, recorded with Python stacks) they are equal.
    Before: dispatch intervals were whole ops, Python children included, then capped at the dispatch time."""
    results = analyze(tracelens.load(path))
    assert results.bound is not None
    bound_us = idle_dispatch_us(str(path))
    for step in results.bound.steps:
        assert step.exposed_dispatch_us <= bound_us[step.number] + 0.002, step.number
        if path.name == "train_cpu_bound_stacks.json.gz":
            assert step.exposed_dispatch_us == pytest.approx(bound_us[step.number], abs=0.002)
    if path.name == "train_cpu_bound_stacks.json.gz":
        assert results.bound.exposed_dispatch_pct == 97.254  # of 4,146.8 µs dispatch per step; before: 97.1


def test_first_step_behind_a_queue_from_before_the_recording() -> None:
    """The audit's GPU-bound trace without a sync per step: GEMMs launched before the recording still run when
    its first step (3) starts, and the first recorded GPU activity is one of them, 949.7 µs into the step: the
    window starts where that work ends, as a later step's starts where the previous step's does (no "other idle"
    for it), and the step is GPU-limited by that queue: its period runs from when the earlier work ended and
    equals its window. Every step then matches the CUDA events (2,979-2,998 µs); it read 6,967 µs for step 3
    before."""
    path = recorded_trace("h200/audit/backlog_nosync.json.gz")
    results = analyze(tracelens.load(path))
    ours = [row.step_us for row in results.summary.step_table]
    assert ours == [row["step_us"] for row in step_figures(str(path))]  # the stdlib reading, to the ns
    first = results.summary.step_table[0]
    assert first.gpu_window_us == first.step_us and first.gpu_busy_us is not None
    assert first.gpu_busy_us <= first.gpu_window_us
    timings = json.loads((path.parent / "timings.json").read_text())[path.name]["timings"]
    cuda_events_us = [1000 * ms for ms in timings["gpu_start_to_next_start_ms"][3:7]]  # steps 3→4 ... 6→end
    assert all(abs(a - b) < 0.01 * b for a, b in zip(ours[:3], cuda_events_us, strict=False)), (ours, cuda_events_us)
    bound = results.bound
    assert bound is not None and bound.steps[0].other_idle_us < 100 and bound.steps[0].bound == "gpu"
