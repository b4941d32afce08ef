"""The optimizer stays eager under `compile` (docs/actions.md#the-optimizer-stays-eager): what the compiled training
twins show in their raw events, the calls the model keeps, and the launches it predicts against the realized ones."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests import rawtrace
from tracelens.analyses import analyze

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/actions.md"
TWINS = (  # eager, compiled, optimizer launches a step in both
    ("traces/h200/block/train_eager_block.json.gz", "traces/h200/block/train_compiled_block.json.gz", 4),
    ("traces/h200/extra/train_eager_mlp.json.gz", "traces/h200/extra/train_compiled_mlp.json.gz", 40),
)
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")


def _events(path: str) -> list[dict[str, Any]]:
    with gzip.open(ROOT / path, "rt") as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def optimizer_steps(path: str) -> list[tuple[float, int]]:
    """Stdlib: per `Optimizer.step#` user annotation, its length (µs) and the kernel launch calls on its thread that
    start inside it."""
    events = _events(path)
    calls = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["name"] in LAUNCHES]
    out = []
    for step in (e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")):
        end = step["ts"] + step["dur"]
        out.append((step["dur"], sum(1 for c in calls if c["tid"] == step["tid"] and step["ts"] <= c["ts"] < end)))
    return out


@pytest.mark.parametrize(("eager", "compiled", "launches"), TWINS, ids=lambda v: str(v).split("/")[-1])
def test_the_compiled_twin_launched_the_same_optimizer_kernels(eager: str, compiled: str, launches: int) -> None:
    """Why the optimizer is kept: every optimizer step of both twins launches the same number of kernels, and the
    docs give each side's range of `Optimizer.step` lengths."""
    doc = " ".join(DOC.read_text().split())
    spans = []
    for path in (eager, compiled):
        steps = optimizer_steps(path)
        assert steps and {n for _, n in steps} == {launches}
        lengths = [round(us) for us, _ in steps]
        spans.append(f"{min(lengths):,}-{max(lengths):,}")
    assert f"{spans[1]} against {spans[0]} µs" in doc


def test_the_kept_calls_are_those_inside_the_optimizer_ranges() -> None:
    """`_optimizer_calls` against a loop over each call of each step graph and each `Optimizer.*#` annotation of its
    thread, read from the event columns."""
    from tracelens.analyses.actions import OPTIMIZER, _optimizer_calls
    from tracelens.analyses.critical_path import build_graph
    from tracelens.analyses.window import select_window
    from tracelens.model.events import Kind

    trace = tracelens.load(ROOT / TWINS[1][0])
    ev = trace.events
    ranges: dict[int, list[tuple[int, int]]] = {}
    for row in range(len(ev)):
        if ev.kind[row] == Kind.USER_ANNOTATION and ev.names[ev.name[row]].startswith(OPTIMIZER):
            start = int(ev.ts_ns[row])
            ranges.setdefault(int(ev.track[row]), []).append((start, start + int(ev.dur_ns[row])))
    kept = 0
    for index in select_window(trace).step_indices.tolist():
        graph = build_graph(trace, index)
        assert graph is not None
        expected = [
            any(begin <= start < end for begin, end in ranges.get(thread, ()))
            for thread, start in zip(graph.call_thread, graph.call_start_ns, strict=True)
        ]
        assert _optimizer_calls(trace, graph).tolist() == expected
        kept += sum(expected)
    assert kept >= 40  # the for-each AdamW's launches, each step


def test_the_predicted_launches_against_the_compiled_twins() -> None:
    """The compile action's launches a step on each eager twin, and the compiled twin's from the raw events, as
    the docs say (the block 107 → 46 for 44, the MLP 58 → 55 for 55)."""
    doc = " ".join(DOC.read_text().split())
    for (eager, compiled, _), name in zip(TWINS, ("the training block", "the training MLP"), strict=True):
        results = analyze(tracelens.load(ROOT / eager))
        assert results.actions is not None
        (action,) = [a for a in results.actions.actions if a.action == "compile"]
        assert action.predicted_launches_per_step is not None
        before, after = (statistics.median(rawtrace.launches_per_step(ROOT / p).values()) for p in (eager, compiled))
        text = f"{name} {before:.0f} → {action.predicted_launches_per_step:.0f} (realized {after:.0f})"
        assert text in doc, text
