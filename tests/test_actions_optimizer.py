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
    the docs say (the block 107 → 41 for 44, the MLP 58 → 55 for 55)."""
    doc = " ".join(DOC.read_text().split())
    for (eager, compiled, _), name in zip(TWINS, ("the training block", "the training MLP"), strict=True):
        results = analyze(tracelens.load(ROOT / eager))
        assert results.actions is not None
        (action,) = [a for a in results.actions.actions if a.action == "compile"]
        assert action.predicted_launches_per_step is not None
        before, after = (statistics.median(rawtrace.launches_per_step(ROOT / p).values()) for p in (eager, compiled))
        text = f"{name} {before:.0f} → {action.predicted_launches_per_step:.0f} (realized {after:.0f})"
        assert text in doc, text


def _with_ranges(tmp_path: Path, source: str, make: Any) -> Path:
    """`source` with user annotations added by `make(events) -> list of new events`, written to `tmp_path`."""
    with gzip.open(ROOT / source, "rt") as handle:
        document = json.load(handle)
    document["traceEvents"].extend(make([e for e in document["traceEvents"] if e.get("ph") == "X"]))
    out = tmp_path / "changed.json"
    out.write_text(json.dumps(document), encoding="utf-8")
    return out


def _compile_prediction(path: Path) -> tuple[float, float | None]:
    results = analyze(tracelens.load(path))
    assert results.actions is not None
    (action,) = [a for a in results.actions.actions if a.action == "compile"]
    return action.predicted_step_us, action.predicted_launches_per_step


def test_a_closure_inside_the_optimizer_step_is_not_kept_eager(tmp_path: Path) -> None:
    """`optimizer.step(closure)` (Lightning's loop, LBFGS, SAM) runs the forward and backward inside the range:
    an `Optimizer.step#` range around each whole step predicts what the twin without it predicts (only the work
    after the last backward op inside it is the optimizer's)."""

    def around_steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
        return [{**s, "name": "Optimizer.step#SAM.step", "ts": s["ts"] + 0.5, "dur": s["dur"] - 1.0} for s in steps]

    source = TWINS[0][0]
    assert _compile_prediction(_with_ranges(tmp_path, source, around_steps)) == _compile_prediction(ROOT / source)


def test_nested_optimizer_ranges_count_once(tmp_path: Path) -> None:
    """A wrapping optimizer (ZeroRedundancyOptimizer's inner step) nests `Optimizer.step#` ranges: the same
    prediction as one range."""

    def doubled(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**e, "name": "Optimizer.step#Inner.step"}
            for e in events
            if e.get("cat") == "user_annotation" and e["name"].startswith("Optimizer.step#")
        ]

    source = TWINS[1][0]
    assert _compile_prediction(_with_ranges(tmp_path, source, doubled)) == _compile_prediction(ROOT / source)


def test_a_tiny_gemm_needs_no_counterpart_but_a_larger_one_does() -> None:
    """`other_program`'s per-call rule around `MIN_GFLOP_PER_CALL`: no cliff at the threshold (0.00199 against
    0.00201 is one GEMM), a 0.00013-GFLOP GEMM on one side only is no difference, a 0.5-GFLOP one is."""
    from tracelens.variants import MIN_GFLOP_PER_CALL, ProgramShape, other_program

    def shape(per_call: tuple[float, ...]) -> ProgramShape:
        return ProgramShape(device="H100", gemm_gflop_per_step=10.0, gemm_gflop_per_call=per_call)

    assert MIN_GFLOP_PER_CALL == 0.002
    assert other_program(shape((0.002, 8.6)), shape((0.002, 8.6))) is None
    assert other_program(shape((0.00199, 8.6)), shape((0.00201, 8.6))) is None
    assert other_program(shape((0.0, 8.6)), shape((8.6,))) is None
    reason = other_program(shape((0.5, 8.6)), shape((8.6,)))
    assert reason == "GEMMs of 8.6 GFLOP per call, the prediction's program 0.5, 8.6"
