"""Steps of a training loop without ProfilerStep, from the ranges torch emits once per iteration (a DataLoader's
next batch, the optimizer's zero_grad and step; docs/definitions.md#inferred-steps), against the standard
library reading of tests/independent/nostep_autotune.py:loop_marker_steps on the corpus ResNet trace (30
DataLoader iterations, no ProfilerStep), and the rule's edge cases on tiny synthetic traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests.conftest import anchor, kernel, launch, op, step, write_trace
from tests.independent.nostep_autotune import load_events, loop_marker_steps
from tracelens.analyses.pipeline import analyze

RESNET = "other/facebookresearch__param/resnet_kineto.json.gz"


def _kernels_per_period(events: list[dict[str, Any]], periods: list[tuple[int, int]]) -> list[int]:
    """Stdlib: the kernels whose launch call (same correlation) starts inside each period."""
    launched = {
        int(e["args"]["correlation"]): round(float(e["ts"]) * 1000)
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})
    }
    counts = [0] * len(periods)
    for e in events:
        if e.get("cat") != "kernel":
            continue
        at = launched.get(int((e.get("args") or {}).get("correlation", -1)))
        for i, (start, end) in enumerate(periods):
            if at is not None and start <= at < end:
                counts[i] += 1
    return counts


def test_the_resnet_loop_has_a_step_per_dataloader_iteration() -> None:
    path = anchor(RESNET)
    events = load_events(str(path))
    periods = loop_marker_steps(events)
    assert len(periods) == 29  # 30 DataLoader iterations: 29 periods from one to the next
    trace = tracelens.load(path)
    results = analyze(trace)
    facts = results.summary.facts
    assert (facts.step_source, facts.steps_inferred_from, facts.steps_are_calls) == (
        "inferred",
        "DataLoader iterations",
        False,
    )
    ours = [(int(s), int(e)) for s, e in zip(trace.steps.start_ns, trace.steps.end_ns, strict=True)]
    shift = periods[0][0] - ours[0][0]  # tracelens keeps times from the trace's first event
    assert [(s + shift, e + shift) for s, e in ours] == periods
    by_number = {row.number: row.kernels for row in results.summary.step_table}
    assert [by_number[n] for n in range(1, 30)] == _kernels_per_period(events, periods)


def _iteration(t0: float, corr: int, markers: tuple[str, ...]) -> list[dict[str, Any]]:
    """One loop iteration at t0: its marker ranges, one op launching one kernel."""
    events = [op(name, t0 + 5 * i, 2, cat="user_annotation") for i, name in enumerate(markers)]
    events += [op("aten::mul", t0 + 20, 10, ext=corr), launch("cudaLaunchKernel", t0 + 21, 3, corr, ext=corr)]
    events.append(kernel("mul_kernel", t0 + 30, 5, corr))
    return events


@pytest.mark.parametrize(
    ("markers", "expected_from"),
    [
        (("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Optimizer.step#SGD.step"), "DataLoader"),
        (("Optimizer.zero_grad#AdamW.zero_grad", "Optimizer.step#AdamW.step"), "Optimizer.zero_grad"),
        (("Optimizer.step#AdamW.step",), "Optimizer.step"),
    ],
)
def test_the_first_marker_in_order_sets_the_steps(tmp_path: Path, markers: tuple[str, ...], expected_from: str) -> None:
    events = [e for i in range(4) for e in _iteration(100.0 * i, 10 + i, markers)]
    trace = tracelens.load(write_trace(tmp_path / "loop.json", events))
    assert trace.steps.source == "inferred" and trace.steps.inferred_from.startswith(expected_from)
    assert len(trace.steps) == 3 and not trace.steps.spans_calls
    starts = [int(s) for s in trace.steps.start_ns]
    assert [s - starts[0] for s in starts] == [0, 100_000, 200_000]


def test_two_iterations_are_no_loop(tmp_path: Path) -> None:
    events = [e for i in range(2) for e in _iteration(100.0 * i, 10 + i, ("Optimizer.step#SGD.step",))]
    assert tracelens.load(write_trace(tmp_path / "two.json", events)).steps.source == "whole_trace"


def test_profiler_steps_come_first_then_loop_markers_then_compiled_calls(tmp_path: Path) -> None:
    """ProfilerSteps win; a loop marker beats compiled calls (a compiled forward is not the whole iteration);
    compiled calls alone give steps too."""
    loop = [e for i in range(4) for e in _iteration(100.0 * i, 10 + i, ("Optimizer.step#SGD.step",))]
    stepped = [*loop, step(1, 0, 150), step(2, 150, 150)]
    assert tracelens.load(write_trace(tmp_path / "steps.json", stepped)).steps.source == "ProfilerStep"
    calls = [op("Torch-Compiled Region: 0/0", 100.0 * i + 15, 30, cat="user_annotation") for i in range(4)]
    both = tracelens.load(write_trace(tmp_path / "both.json", [*loop, *calls])).steps
    assert both.inferred_from == "Optimizer.step calls" and not both.spans_calls
    bare = [e for e in loop if not str(e["name"]).startswith("Optimizer.")]
    compiled = tracelens.load(write_trace(tmp_path / "compiled.json", [*bare, *calls])).steps
    assert compiled.inferred_from == "Torch-Compiled Region calls" and compiled.spans_calls


def _union_ns(spans: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total, end = total + stop - start, stop
        elif stop > end:
            total, end = total + stop - end, stop
    return total


def test_graphs_and_compile_keep_the_dataloader_wait() -> None:
    """The compile and cuda_graphs actions remove host work a compiled region or graph holds, not the wait for
    the next batch (`actions.HOST_ONLY`), nor GPU work: each changed step lasts at least its DataLoader time
    and at least its GPU busy time. On the ResNet loop (raw events: 196 ms of DataLoader and 158 ms of GPU busy
    a step on average) the mean of that per-step floor is 294 ms; before HOST_ONLY the graph action predicted
    290 ms (the wait removed with the launches' CPU work)."""
    path = anchor(RESNET)
    events = load_events(str(path))
    periods = loop_marker_steps(events)
    launched = {
        int(e["args"]["correlation"]): round(float(e["ts"]) * 1000)
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})
    }
    waits_ns = [0] * len(periods)
    gpu: list[list[tuple[int, int]]] = [[] for _ in periods]
    for e in events:
        start = round(float(e.get("ts", 0)) * 1000)
        at = start
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            at = launched.get(int((e.get("args") or {}).get("correlation", -1)), -1)
        elif not (e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("enumerate(DataLoader)#")):
            continue
        for i, (begin, end) in enumerate(periods):
            if begin <= at < end:
                if e["cat"] == "user_annotation":
                    waits_ns[i] += round(float(e["dur"]) * 1000)
                else:
                    gpu[i].append((start, start + round(float(e.get("dur", 0)) * 1000)))
    floor_us = sum(max(w, _union_ns(g)) for w, g in zip(waits_ns, gpu, strict=True)) / len(periods) / 1000
    assert 290_000 < floor_us < 300_000
    results = analyze(tracelens.load(path))
    assert results.actions is not None
    predicted = {a.action: a.predicted_step_us for a in results.actions.actions}
    assert {"compile", "cuda_graphs"} <= predicted.keys()
    assert min(predicted["compile"], predicted["cuda_graphs"]) >= floor_us
