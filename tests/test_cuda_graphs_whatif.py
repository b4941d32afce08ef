"""The `cuda_graphs` action's prediction on each eager twin of traces/h200/graphs against its CUDA-graph
variant: the profiled step (mean span of the steps without a capture, raw events, stdlib) and the profiler-free
step (the CUDA-event median of timings.json). Recomputes the table of docs/cuda_graphs.md#the-what-if-on-the-graph-twins
(issue #29, Done-when 2); the model is docs/actions.md's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.test_actions import raw_mean_span_us
from tracelens.analyses import analyze

GRAPHS = Path(__file__).parent.parent / "traces" / "h200" / "graphs"
DOC = Path(__file__).parent.parent / "docs" / "cuda_graphs.md"
# (eager twin, graph variant, what the variant did besides graphs)
TWINS = [
    ("mlp_eager", "mlp_graph", "graph"),
    ("mlp_eager", "mlp_graph_replay", "graph"),
    ("block_eager", "block_graph", "graph"),
    ("block_eager", "block_graph_replay", "graph"),
    ("eager_mlp_t64", "graph_eager_mlp_t64", "graph"),
    ("eager_mlp_t4096", "graph_eager_mlp_t4096", "graph"),
    ("mlp_eager", "mlp_ro_replay", "compiled + graph"),
    ("block_eager", "block_ro_replay", "compiled + graph"),
    ("decode_eager", "decode_static_graph", "compiled + graph"),
]


def replay_mean_span_us(path: Path) -> float:
    """Stdlib: the mean span of the ProfilerSteps that hold no cudaStreamBeginCapture
    (tests/test_actions.py:raw_mean_span_us)."""
    return raw_mean_span_us(path, without_capture=True)


def _pct(value: float) -> str:
    return f"{value:+.1%}".replace("%", " %").replace("-", "−")


def table_row(before: str, after: str, kind: str) -> tuple[str, float, float, bool]:
    """The docs row of one twin, its profiled error, its profiler-free error and whether the realized step lies
    in the prediction's stated range."""
    results = analyze(tracelens.load(GRAPHS / f"{before}.json.gz"))
    assert results.actions is not None
    (action,) = [a for a in results.actions.actions if a.action == "cuda_graphs"]
    realized = replay_mean_span_us(GRAPHS / f"{after}.json.gz")
    timings = json.loads((GRAPHS / "timings.json").read_text())["runs"]
    cuda_events_us = timings[after]["cuda_event_ms"]["median"] * 1000
    free = action.predicted_profiler_free_step_us
    assert free is not None
    error, free_error = action.predicted_step_us / realized - 1, free / cuda_events_us - 1
    row = (
        f"| `{before}` → `{after}` | {kind} | {action.predicted_step_us:,.1f} ({action.low:,.0f}–{action.high:,.0f}) "
        f"| {realized:,.1f} | {_pct(error)} | {free:,.1f} | {cuda_events_us:,.1f} | {_pct(free_error)} |"
    )
    return row, error, free_error, action.low <= realized <= action.high


@pytest.mark.parametrize(("before", "after", "kind"), TWINS, ids=[t[1] for t in TWINS])
def test_the_whatif_table_is_the_recomputed_one(before: str, after: str, kind: str) -> None:
    row, _, free_error, inside = table_row(before, after, kind)
    assert row in DOC.read_text(encoding="utf-8"), row
    if kind == "graph":  # the pure CUDA-graph twins: the profiled step inside the action's stated range
        assert inside
        # profiler-free, against CUDA events: inside ±20 % since the floor at the busiest stream (−66 % before)
        assert abs(free_error) <= 0.20


@pytest.mark.parametrize("before", sorted({t[0] for t in TWINS}))
def test_the_profiler_free_prediction_is_never_below_the_gpu_work(before: str) -> None:
    """Stdlib floor: the mean over the eager twin's complete steps of the kernel µs launched in each step on its
    busiest stream; the graph action keeps GPU work, so its profiler-free step cannot be shorter."""
    evs = rawtrace.events(GRAPHS / f"{before}.json.gz")
    per_step: dict[int, dict[int, float]] = {}
    for e, step in rawtrace.kernel_steps(evs):
        if step is not None:
            stream = int((e.get("args") or {}).get("stream", 0))
            lanes = per_step.setdefault(step, {})
            lanes[stream] = lanes.get(stream, 0.0) + float(e.get("dur", 0))
    floor_us = sum(max(lanes.values()) for lanes in per_step.values()) / len(per_step)
    trace = tracelens.load(GRAPHS / f"{before}.json.gz")
    results = analyze(trace)
    assert results.actions is not None
    (action,) = [a for a in results.actions.actions if a.action == "cuda_graphs"]
    assert action.predicted_profiler_free_step_us is not None
    assert action.predicted_profiler_free_step_us >= 0.97 * floor_us


if __name__ == "__main__":
    for twin in TWINS:
        print(table_row(*twin)[0])
