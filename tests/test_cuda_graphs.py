"""CUDA-graph replays get their captured launch's op (issue #29), checked against tests/independent/graphs_stdlib.py."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tracelens.loader import load_trace
from tracelens.model.events import Kind

GRAPHS = Path(__file__).parent.parent / "traces" / "h200" / "graphs"
WITH_CAPTURE = ["mlp_graph", "mlp_ro", "block_graph", "block_ro", "decode_static_graph", "mlp_graph_capture"]
_spec = importlib.util.spec_from_file_location(
    "graphs_stdlib", Path(__file__).parent / "independent" / "graphs_stdlib.py"
)
assert _spec is not None and _spec.loader is not None
stdlib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stdlib)


def _tracelens_assignment(path: Path) -> list[tuple[str, str | None]]:
    trace = load_trace(path, workers=1)
    events, links = trace.events, trace.links
    kernels = np.flatnonzero((events.kind == Kind.KERNEL) & (links.launch >= 0))
    replayed = [i for i in kernels if "GraphLaunch" in events.name_of(links.launch[i])]
    replayed.sort(key=lambda i: (int(events.ts_ns[i]), events.name_of(i)))
    return [(events.name_of(i), events.name_of(links.op[i]) if links.op[i] >= 0 else None) for i in replayed]


@pytest.mark.parametrize("name", WITH_CAPTURE)
def test_replayed_kernels_get_the_captured_op(name: str) -> None:
    path = GRAPHS / f"{name}.json.gz"
    expected_map, share = stdlib.match(str(path))
    expected = [(kname, op) for (_, kname), op in sorted(expected_map.items())]
    assert share >= 0.95
    assert _tracelens_assignment(path) == expected


def test_replay_without_capture_is_noted_once() -> None:
    trace = load_trace(GRAPHS / "mlp_graph_replay.json.gz", workers=1)
    notes = [w for w in trace.warnings if "no capture in the trace" in w]
    assert len(notes) == 1 and "--skip 0" in notes[0]


@pytest.mark.parametrize("name", WITH_CAPTURE)
def test_graph_traces_with_a_capture_are_roofline_modelled(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #29's bar: ≥ 90 % of kernel time has a roofline model once replays have their captured ops."""
    out, _ = run_cli(capsys, "analyze", str(GRAPHS / f"{name}.json.gz"), "--format", "json")
    assert json.loads(out)["roofline"]["modelled_kernel_time_pct"] >= 90


@pytest.mark.parametrize("name", ["mlp_graph", "block_graph", "mlp_graph_replay", "mlp_eager"])
def test_a_capture_step_is_warm_up(name: str) -> None:
    """The steady steps leave out every step in which a CUDA graph was captured (stdlib: the CPU-side
    ProfilerSteps holding a cudaStreamBeginCapture) and keep the others of the window, as after compilation."""
    import tracelens
    from tests import rawtrace
    from tracelens.analyses import analyze

    path = Path(__file__).resolve().parent.parent / f"traces/h200/graphs/{name}.json.gz"
    events = rawtrace.events(path)
    steps = rawtrace.steps([e for e in events if not str(e.get("cat", "")).startswith("gpu_")])
    begins = [float(e["ts"]) for e in events if e.get("name") == "cudaStreamBeginCapture"]
    captured = {number for number, start, end in steps if any(start <= ts < end for ts in begins)}
    compiled = analyze(tracelens.load(path)).compiled
    assert compiled is not None
    assert not set(compiled.steady_steps) & captured
    assert captured <= set(compiled.excluded_steps)
    assert (name in ("mlp_graph", "block_graph")) == bool(captured)


@pytest.mark.parametrize(("eager", "graph"), [("mlp_eager", "mlp_graph"), ("block_eager", "block_graph")])
def test_a_replayed_kernel_does_the_work_of_its_captured_op(eager: str, graph: str) -> None:
    """Each replay of a captured op is one call of it: the graph variant's GEMM and attention kernels carry the
    same GFLOP per call as the eager twin's (before 2026-12-06 the captured op's FLOPs were shared among its
    replays: 1.43 GFLOP per call on mlp_graph against 8.59, 10-12 % of peak for ~60 %)."""
    import tracelens
    from tracelens.analyses import analyze

    root = Path(__file__).resolve().parent.parent / "traces/h200/graphs"
    found = []
    for name in (eager, graph):
        roofline = analyze(tracelens.load(root / f"{name}.json.gz")).roofline
        assert roofline is not None
        found.append(sorted(round(r.gflop_per_call, 3) for r in roofline.rows if r.model in ("gemm", "attention")))
    assert found[0] == found[1] and found[0]


@pytest.mark.parametrize(("eager", "graph"), [("mlp_eager", "mlp_graph"), ("block_eager", "block_graph")])
def test_fusion_on_a_graph_trace_is_per_replay(eager: str, graph: str) -> None:
    """Each replay of a captured op is a call of its own for fusion too: the graph variant's chains are the eager
    twin's, one instance per step each (mlp_graph joined its five replays into one 10-kernel chain at 0.2 per
    step, saving 0.5 µs where the eager twin's saves 2.7); and no fusion action removes the graph launch, which
    replays the other kernels too (`fuse`/`gemm_epilogue` read "launches 1 → 0")."""
    import tracelens
    from tracelens.analyses import analyze

    root = Path(__file__).resolve().parent.parent / "traces/h200/graphs"
    chains = []
    for name in (eager, graph):
        results = analyze(tracelens.load(root / f"{name}.json.gz"))
        assert results.fusion is not None
        chains.append(
            sorted((tuple(o.ops), o.calls_per_step) for o in results.fusion.opportunities if o.kind == "chain")
        )
        if name == graph:
            assert results.actions is not None
            launches = results.summary.per_step.launches
            for action in results.actions.actions:
                if action.action in ("fuse", "gemm_epilogue"):
                    assert action.predicted_launches_per_step == launches, action.basis
                    assert "inside the CUDA graph" in action.basis or action.action == "gemm_epilogue"
    assert chains[0] == chains[1] and chains[0]


@pytest.mark.parametrize(("graph", "compiled"), [("mlp_graph", "mlp_ro"), ("block_graph", "block_ro")])
def test_reduce_overhead_on_a_graph_trace_keeps_the_graph_launch(graph: str, compiled: str) -> None:
    """`compile_reduce_overhead` on a program that replays its own CUDA graphs (torch.compile's graphs in their
    place) keeps one graph launch and puts Inductor's wrapper before it (block_graph once read "launches 1 → 0").
    Its twin compiled with mode="reduce-overhead" (compiled regions new, graphs kept) is that action, and within
    the stated range. (Before 2026-12-06 this was `compile`'s model on such a program; `compile` is now the
    compiled code captured by the program's own graphs: no wrapper.)"""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.analyses.actions import program_of
    from tracelens.variants import taken_action

    root = Path(__file__).resolve().parent.parent / "traces/h200/graphs"
    results = analyze(tracelens.load(root / f"{graph}.json.gz"))
    assert results.actions is not None
    (action,) = [a for a in results.actions.actions if a.action == "compile_reduce_overhead"]
    assert action.predicted_launches_per_step == results.summary.per_step.launches == 1
    after = analyze(tracelens.load(root / f"{compiled}.json.gz"))
    measured = after.critical_path
    assert measured is not None and measured.step_us is not None
    assert action.low <= measured.step_us <= action.high
    before_shape, after_shape = program_of(results), program_of(after)
    assert before_shape is not None and after_shape is not None
    assert taken_action(before_shape, after_shape) == "compile_reduce_overhead"


XDIT_CAPTURE = "amd_tracelens/inference/xdit_flux.1_aiter_sage/capture_traces/capture_trace_rank_0.json.gz"


@pytest.mark.parametrize(
    "path",
    [
        *(GRAPHS / f"{name}.json.gz" for name in ("mlp_graph_capture", "block_graph_capture", "mlp_graph", "mlp_ro")),
        Path(__file__).parent / "corpus" / XDIT_CAPTURE,
    ],
    ids=lambda p: p.name,
)
def test_captured_launches_are_not_launches(path: Path) -> None:
    """`per_step.launches` counts the calls that launched GPU work: a launch (or set, or copy) recorded while a
    CUDA graph is captured launches nothing (it runs when the graph is replayed), so the capture step of the MLP
    launches 3 (two kernels and the graph), not 8, the block's 3, not 40 (its captured memset too), and AMD's
    xDiT capture trace (HIP, no ProfilerStep) 1,563, not 3,130 (tests/rawtrace.py `launches_per_step`, raw
    events)."""
    from tests import rawtrace
    from tracelens.analyses import analyze

    results = analyze(load_trace(path, workers=1))
    expected = rawtrace.launches_per_step(path)
    measured = {row.number: row.launches for row in results.summary.step_table}
    assert measured == {number: expected[number] for number in measured}
    if path.name in ("mlp_graph_capture.json.gz", "block_graph_capture.json.gz"):
        assert measured == {1: 3}
    if path.name == "capture_trace_rank_0.json.gz":
        assert measured == {-1: 1563}


@pytest.mark.parametrize(("name", "has_ops"), [("block_graph_replay", False), ("block_ro_replay", True)])
def test_the_uncaptured_replay_warning_names_an_op_only_where_one_exists(name: str, has_ops: bool) -> None:
    """A replay trace without a capture: where the trace records CPU ops (reduce-overhead's wrapper encloses the
    graph launch) the replayed kernels keep that op; where it records none (a hand-captured graph replayed
    outside any op) the warning says they have no op, beside "no CPU ops in the trace" (it said "keep only the
    op enclosing their cudaGraphLaunch" there too, before 2026-12-07). CPU ops counted from the raw events."""
    with gzip.open(GRAPHS / f"{name}.json.gz", "rt") as handle:
        raw_ops = sum(e.get("cat") == "cpu_op" for e in json.load(handle)["traceEvents"])
    assert (raw_ops > 0) is has_ops
    warning = next(w for w in load_trace(GRAPHS / f"{name}.json.gz").warnings if "have no capture" in w)
    assert ("keep only the op enclosing" in warning) is has_ops
    assert ("so they have no op" in warning) is not has_ops
