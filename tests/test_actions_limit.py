"""CUDA-graph traces and one rule for what limits a step.

An action's `limited_by` (the changed step) is read as the `Limit:` line reads the observed step, from the
savings of all CPU work and all GPU work 2× faster. With a plan that changes nothing, `savings_of_calls` gives
the critical path's own what-ifs; its C and Python replays agree; on CUDA-graph traces, whose graphs leave gaps
between kernels, no fusion calls a GPU-limited step CPU-limited (docs/actions.md); the op table counts the
kernels a graph replayed, by a stdlib reading of the raw events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracelens
from tests import rawtrace
from tracelens import native
from tracelens.analyses import analyze
from tracelens.analyses.critical_path import (
    _steps_with_gpu,
    _within_budget,
    critical_path_of,
    replay_calls,
    savings_of_calls,
    step_graph,
    steps_in_means,
)
from tracelens.analyses.window import select_window
from tracelens.renderers.text import op_table
from tracelens.report.breakdowns import gpu_time_by_op
from tracelens.units import NS_PER_US

H200 = Path("traces/h200")
TRACES = ("eager_mlp", "block/eager_block", "extra/sweep_eager_mlp_t64", "graphs/block_graph", "graphs/mlp_graph")


def _identity_savings_us(trace: tracelens.Trace) -> tuple[float, float]:
    """Mean (CPU 2×, GPU 2×) savings of `savings_of_calls` with the observed calls and activities, over the
    critical path's steps."""
    window = select_window(trace)
    path = critical_path_of(trace, window)
    indices, _ = _within_budget(trace, steps_in_means(trace, _steps_with_gpu(trace, window), path))
    cpu = gpu = 0
    graphs = [g for g in (step_graph(trace, i) for i in indices) if g is not None]
    for graph in graphs:
        work, duration, _ = graph.cpu_columns
        step_ns = replay_calls(graph, work, duration, {}).step_ns
        cpu_ns, gpu_ns = savings_of_calls(graph, work, duration, {}, step_ns)
        cpu, gpu = cpu + cpu_ns, gpu + gpu_ns
    return cpu / len(graphs) / NS_PER_US, gpu / len(graphs) / NS_PER_US


@pytest.mark.parametrize("name", TRACES)
def test_no_change_gives_the_critical_paths_what_ifs(name: str) -> None:
    trace = tracelens.load(H200 / f"{name}.json.gz")
    path = critical_path_of(trace, select_window(trace))
    rows = {row.change: row.saved_us for row in path.what_if}
    cpu_us, gpu_us = _identity_savings_us(trace)
    assert cpu_us == pytest.approx(rows["all CPU work 2× faster"], abs=0.06)
    assert gpu_us == pytest.approx(rows["all GPU work 2× faster"], abs=0.06)


@pytest.mark.parametrize("name", TRACES[:3])
def test_the_python_replay_gives_the_same_savings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tracelens.load(H200 / f"{name}.json.gz")
    indices, _ = _within_budget(trace, _steps_with_gpu(trace, select_window(trace)))
    graph = step_graph(trace, indices[0])
    assert graph is not None
    work, duration, _ = graph.cpu_columns
    removed = np.flatnonzero(~graph.cpu_columns[2])[:3]  # a changed plan: some calls' work and length set to 0
    work, duration = work.copy(), duration.copy()
    work[removed], duration[removed] = 0, 0
    gpu_dur = {0: 1_000}
    step_ns = replay_calls(graph, work, duration, gpu_dur).step_ns
    fast = savings_of_calls(graph, work, duration, gpu_dur, step_ns)
    monkeypatch.setattr(native, "ENABLED", False)
    assert replay_calls(graph, work.tolist(), duration.tolist(), gpu_dur).step_ns == step_ns
    assert savings_of_calls(graph, work, duration, gpu_dur, step_ns) == fast


@pytest.mark.parametrize("name", ["graphs/block_graph", "graphs/mlp_graph"])
def test_graph_traces_fusions_agree_with_the_limit_line(name: str) -> None:
    """A fusion inside the graph leaves the step GPU-limited, as the `Limit:` line says of it; before, every
    action of these traces was `cpu-limited` (step > 1.5 × GPU busy: the graph's own gaps between kernels).
    compile too, on a program that replays its own graphs: the compiled code is captured, so no wrapper runs and
    the step's launches stay its graph launches (before 2026-12-06 its model put Inductor's 170.9 µs wrapper on
    the host and predicted a longer step than the replay)."""
    results = analyze(tracelens.load(H200 / f"{name}.json.gz"))
    assert results.actions is not None and results.critical_path is not None
    assert results.critical_path.limit == "gpu"
    fusions = [a for a in results.actions.actions if a.action in ("fuse", "gemm_epilogue")]
    assert fusions and all(action.limited_by == "gpu" for action in fusions)
    (compile_,) = [a for a in results.actions.actions if a.action == "compile"]
    assert compile_.limited_by == "gpu" and 0 < compile_.saved_us < results.actions.summary.step_us
    assert compile_.predicted_launches_per_step == _graph_launches_per_step_stdlib(
        H200 / f"{name}.json.gz", results.compiled.steady_steps if results.compiled else []
    )


@pytest.mark.parametrize("name", ["graphs/block_graph_replay", "graphs/mlp_graph_replay"])
def test_replays_without_their_capture_say_why_compile_is_left_out(name: str) -> None:
    """The replayed kernels' ops are not in a replay-only trace: what compiling would fuse is unknown, so no
    compile prediction (before: 0 chains fused and Inductor's wrapper added, a negative saving)."""
    results = analyze(tracelens.load(H200 / f"{name}.json.gz"))
    assert results.actions is not None
    assert "compile" not in [a.action for a in results.actions.actions]
    assert (
        "compile, compile_reduce_overhead: no capture in the trace (or given with --capture) matches the CUDA graphs'"
        in results.actions.note
    )
    assert "compile_reduce_overhead" not in [a.action for a in results.actions.actions]
    assert not _captures_stdlib(H200 / f"{name}.json.gz")


def _captures_stdlib(path: Path) -> list[dict[str, Any]]:
    """Stdlib: the trace's stream-capture begin calls."""
    return [e for e in rawtrace.events(path) if e.get("name") in ("cudaStreamBeginCapture", "hipStreamBeginCapture")]


def _graph_launches_per_step_stdlib(path: Path, numbers: list[int]) -> float:
    """Stdlib: cudaGraphLaunch calls inside the ProfilerSteps `numbers`, per step (each step's span on the
    launching thread: the profiler's ProfilerStep ranges)."""
    evs = rawtrace.events(path)
    steps = [
        e for e in evs if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"
    ]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in steps if int(e["name"].split("#")[1]) in numbers]
    launches = [e for e in evs if e.get("name") == "cudaGraphLaunch"]
    inside = sum(1 for e in launches for a, b in spans if a <= e["ts"] < b)
    return inside / len(spans)


def _replayed_kernels_per_step_stdlib(path: Path, numbers: list[int]) -> float:
    """Stdlib: kernels whose launch call (by correlation id) is a CUDA-graph launch and lies in one of the
    ProfilerSteps `numbers`, per step."""
    evs = rawtrace.events(path)
    graph_launch = {
        int(e["args"]["correlation"])
        for e in evs
        if "GraphLaunch" in str(e.get("name")) and (e.get("args") or {}).get("correlation") is not None
    }
    count = sum(
        1
        for e, step in rawtrace.kernel_steps(evs)
        if step in numbers and int((e.get("args") or {}).get("correlation", -1)) in graph_launch
    )
    return count / len(numbers)


@pytest.mark.parametrize(
    "name", ["graphs/mlp_graph", "graphs/block_graph", "graphs/mlp_ro", "graphs/mlp_graph_replay", "eager_mlp"]
)
def test_the_op_table_counts_replayed_kernels(name: str) -> None:
    """The ops' replayed kernels per step add up to the stdlib count; the text says why such an op shows 0
    calls per step (it ran when the graph was captured), and says nothing of "(no op)": a replay whose capture is
    not in the trace (mlp_graph_replay) has no op that ran at capture."""
    path = H200 / f"{name}.json.gz"
    results = analyze(tracelens.load(path))
    summary = results.summary
    replayed = sum(row.replayed_kernels_per_step for row in summary.ops)
    assert replayed == pytest.approx(_replayed_kernels_per_step_stdlib(path, summary.step_numbers), abs=0.01)
    captured = [row for row in summary.ops if row.replayed_kernels_per_step and not row.calls_per_step]
    captured = [row for row in captured if row.name != "(no op)"]
    assert bool(captured) == (name.startswith("graphs/") and not name.endswith("_replay"))
    text = op_table(summary).caption
    assert (text is not None) == bool(captured)
    panel = gpu_time_by_op(summary)  # the report's op chart says the same, in the same words
    assert panel.note == (text or "")


def test_compiles_attention_rewrite_keeps_a_graph_launch() -> None:
    """An attention rewrite whose removed kernels a CUDA graph replays removes no launch call: the graph launch
    replays the rest of the graph (no trace of the repository has written-out attention inside a graph, so the
    rewrite is given by hand on block_graph's kernels)."""
    from tracelens.analyses import actions

    trace = tracelens.load(H200 / "graphs/block_graph.json.gz")
    indices, _ = _within_budget(trace, _steps_with_gpu(trace, select_window(trace)))
    graph = step_graph(trace, indices[0])
    assert graph is not None
    launch = np.asarray(graph.gpu_launch_call)
    names = trace.events.names
    replayed = [
        k
        for k in range(launch.size)
        if launch[k] >= 0 and "GraphLaunch" in names[trace.events.name[graph.calls.row[launch[k]]]]
    ]
    assert len(replayed) >= 4
    call = int(launch[replayed[0]])
    duration = graph.cpu_columns[1]
    plan = actions._compile_plan(trace, graph, [], {graph.step_index: [(replayed[0], replayed[1:4])]})
    assert plan.duration[call] == duration[call] > 0  # kept, at its observed length
    assert plan.work[call] > 0  # Inductor's wrapper before it (the call stays a launch)
    assert all(plan.gpu_dur[k] == 0 for k in replayed[1:4])  # the rewrite's kernels are gone from the GPU


def _gpu_busy_share_stdlib(path: Path) -> float:
    """Stdlib: the mean over ProfilerSteps of the union of the kernel intervals launched in each step, divided by
    the mean step span (tests/test_actions.py's reading)."""
    from tests.test_actions import raw_mean_span_us

    per_step: dict[int, list[tuple[float, float]]] = {}
    for event, step in rawtrace.kernel_steps(rawtrace.events(path)):
        if step is not None:
            start = float(event["ts"])
            per_step.setdefault(step, []).append((start, start + float(event.get("dur", 0))))
    busy = [sum(end - start for start, end in rawtrace.merge(spans)) for spans in per_step.values()]
    return sum(busy) / len(busy) / raw_mean_span_us(path)


def test_a_step_the_gpu_fills_less_than_half_gets_no_narrow_range() -> None:
    """Where the GPU is busy under half of the step (stdlib) and an action leaves the GPU's work as it is, the
    GPU-limited class (its narrow range) does not apply even though halving the GPU's work saves more than halving
    the CPU's: `limited_by` is "unknown" and the range the CPU-limited one (docs/actions.md#cpu-limited-steps).
    HTA's negative-queue trace: the GPU busy 32 % of the step. (The queued traces that showed it before, e.g.
    traces/h200/truth/gemm_gpu_ahead, fill their spans since spans start where earlier steps' GPU work ends.)"""
    from tests.conftest import anchor
    from tracelens.analyses.actions import CPU_LIMITED_HALF_WIDTH

    path = anchor("hta/negative_queue_length_values_check/rank0.json.gz")
    assert _gpu_busy_share_stdlib(path) < 0.5
    results = analyze(tracelens.load(path))
    assert results.actions is not None and results.critical_path is not None
    assert results.critical_path.limit == "gpu"
    for action in results.actions.actions:
        assert action.limited_by == "unknown"
        assert action.high == pytest.approx(action.predicted_step_us * (1 + CPU_LIMITED_HALF_WIDTH), abs=0.01)


def test_a_capture_matches_in_a_trace_without_cpu_ops(tmp_path: Path) -> None:
    """Without CPU ops (a trace recorded with them filtered out) a replayed kernel's op and its graph launch's are
    both none: the capture in the trace still matches its replays, so compile is predicted, not left out for a
    capture said to be missing."""
    import gzip
    import json

    source = H200 / "graphs/block_graph.json.gz"
    document = json.loads(gzip.decompress(source.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("cat") != "cpu_op"]
    stripped = tmp_path / "block_graph_no_ops.json"
    stripped.write_text(json.dumps(document), encoding="utf-8")
    results = analyze(tracelens.load(stripped))
    assert results.actions is not None
    assert "compile" in [a.action for a in results.actions.actions]
    assert "no capture in the trace" not in results.actions.note
