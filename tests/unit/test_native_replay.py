"""The critical path's replay loop in C (`tracelens._native.replay`) gives exactly the integers of the Python loop
(`critical_path._replay_python`): on real traces, for the observed step and for what-ifs that speed the CPU up,
scale kernel categories and set kernels' durations (syncs that wait for GPU work included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import anchor, optional_corpus, recorded_trace
from tracelens import native
from tracelens.analyses import critical_path as cp
from tracelens.analyses.context import AnalysisContext
from tracelens.analyses.critical_path import Change
from tracelens.loader import load_trace
from tracelens.model.trace import Trace

needs_native = pytest.mark.skipif(not native.ENABLED, reason="TRACELENS_NO_NATIVE is set: only the Python twins run")


def _graph(path: str) -> tuple[Trace, cp.StepGraph]:
    """The trace and the graph of the step its critical path analyzes."""
    trace = load_trace(path, workers=1)
    index = cp._median_step(trace, AnalysisContext(trace).steady)
    assert index is not None
    graph = cp.build_graph(trace, index)
    assert graph is not None
    return trace, graph


CASES = [
    "h200:eager_mlp.json.gz",
    "h200:extra/train_eager_mlp.json.gz",  # a sync that waits for GPU work
    "h200:audit/backlog_nosync.json.gz",
    "h200:audit/gpt2_train_eager.json.gz",
    pytest.param(  # optional (not redistributable): whole µs
        "anchor:other/deepseek-ai__profile-data/train.json.gz",
        marks=optional_corpus("other/deepseek-ai__profile-data/train.json.gz"),
    ),
    "data:eager_mlp_integer_us.json.gz",  # whole µs, redistributable (scripts/derive_integer_us.py)
    "anchor:other/facebookresearch__param/resnet_kineto.json.gz",  # spans that start after the CPU start
    "anchor:hta/trace_diff/test/test.json.gz",  # several streams; the walk cut at the origin mid-stretch
]


def _path(case: str) -> str:
    kind, relative = case.split(":", 1)
    if kind == "data":
        return str(Path(__file__).resolve().parents[1] / "data" / relative)
    return str(recorded_trace(f"h200/{relative}") if kind == "h200" else anchor(relative))


@needs_native
@pytest.mark.parametrize("case", CASES)
def test_the_c_replay_gives_the_python_integers(case: str) -> None:
    trace, graph = _graph(_path(case))
    names = [trace.events.names[code] for code in sorted(set(graph.gpu_name))[:2]]
    changes = [
        (),
        (Change("cpu", 2.0),),
        (Change("cpu", 0.5), Change("category:gemm", 3.0)),
        *[(Change(f"kernel:{name}", set_us=1.0),) for name in names],
    ]
    syncs_awaiting = sum(a >= 0 for a in graph.awaited)
    for change in changes:
        cpu_factor, gpu_dur = cp._resolve(trace, graph, change) if change else (1.0, {})
        work, duration = cp._scaled_cpu(graph, cpu_factor)
        native = cp._replay_native(graph, work, duration, gpu_dur)
        python = cp._replay_python(graph, work, duration, gpu_dur)
        assert native == python, (case, change)
    assert len(graph.order) > 0 and (case != CASES[1] or syncs_awaiting > 0)


@needs_native
def test_an_index_out_of_range_is_refused_not_read() -> None:
    assert cp._native is not None
    order = np.array([[2], [5]], dtype=np.int64)  # GPU activity 5 of 1
    calls = np.zeros((6, 0), dtype=np.int64)
    gpu = np.zeros((12, 1), dtype=np.int64)
    gpu[3] = -1  # binding: none
    with pytest.raises(ValueError, match="out of range"):
        cp._native.replay(order, calls, gpu, 0, cp.END)
    with pytest.raises(ValueError, match="shape"):
        cp._native.replay(np.zeros(3, dtype=np.int64), calls, gpu, 0, cp.END)


def test_durations_int64_cannot_hold_are_replayed_in_python() -> None:
    """A what-if duration beyond int64 (or sums that would wrap) gives the Python loop's integers, not an error."""
    trace, graph = _graph(str(recorded_trace("h200/eager_mlp.json.gz")))
    name = trace.events.names[graph.gpu_name[0]]
    for set_us in (9.2e12, 3e15, 1e16):  # 9.2e15 ns: C; 3e18 ns twice may wrap: Python; 1e19 ns > int64: Python
        cpu_factor, gpu_dur = cp._resolve(trace, graph, (Change(f"kernel:{name}", set_us=set_us),))
        work, duration = cp._scaled_cpu(graph, cpu_factor)
        native = cp._replay_native(graph, work, duration, gpu_dur)
        python = cp._replay_python(graph, work, duration, gpu_dur)
        assert native == python if set_us < 1e13 else native is None
        assert cp.replay(graph, (cpu_factor, gpu_dur)).step_ns >= int(set_us * 1000)


@needs_native
@pytest.mark.parametrize("case", CASES[:4])
def test_a_what_if_by_column_saves_what_the_resolved_one_does(case: str) -> None:
    """The critical path's standard what-ifs on GPU columns (all GPU work, a category) hand the C replay a column
    of new lengths (`_column_durations`); the saving is the one `_resolve`'s durations give, replayed by the C and
    the Python loops."""
    trace, graph = _graph(_path(case))
    step = cp._Analyzed(0, graph.step_index, graph, cp.replay(graph), cp._observed_step_ns(graph))
    categories = sorted({cp.CATEGORIES[c] for c in graph.gpu_category})
    changes = [Change("gpu", 2.0), Change("gpu", set_us=3.0), *(Change(f"category:{c}", 3.0) for c in categories)]
    for change in changes:
        cpu_factor, gpu_dur = cp._resolve(trace, graph, (change,))
        work, duration = cp._scaled_cpu(graph, cpu_factor)
        python = cp._finish(graph, 1.0, *cp._replay_python(graph, work, duration, gpu_dur), walk=False)
        assert cp._saved_ns(trace, step, change) == step.base.step_ns - python.step_ns, (case, change)


@needs_native
@pytest.mark.parametrize("case", CASES)
def test_the_c_walk_gives_the_python_path(case: str) -> None:
    """The path walked by the C extension (`_native.walk`, what `replay` uses) has the Python walk's parts,
    kernels and ops, with the same integers, in the same order (outputs list them in that order on ties), and the
    same rows; for the observed step and for what-ifs."""
    trace, graph = _graph(_path(case))
    changes = [(), (Change("cpu", 2.0),), (Change("gpu", 3.0),), (Change("cpu", 0.5), Change("category:gemm", 3.0))]
    for change in changes:
        cpu_factor, gpu_dur = cp._resolve(trace, graph, change) if change else (1.0, {})
        work, duration = cp._scaled_cpu(graph, cpu_factor)
        python = cp._finish(graph, cpu_factor, *cp._replay_python(graph, work, duration, gpu_dur))
        walked = cp.replay(graph, (cpu_factor, gpu_dur))
        assert walked == python, (case, change)
        for kind in ("path", "path_kernels", "path_ops"):
            assert list(getattr(walked, kind).items()) == list(getattr(python, kind).items()), (case, change, kind)
        assert walked.path_rows and walked.path


@needs_native
def test_a_walk_the_c_extension_cannot_take_is_walked_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the C walk answers None (a code out of its range, a sum beyond int64), `replay` walks the same edges
    in Python: the same path."""
    _, graph = _graph(str(recorded_trace("h200/eager_mlp.json.gz")))
    expected = cp.replay(graph)
    assert cp._native is not None
    calls, gpu, n_codes = graph.walk_arrays
    assert cp._native.walk(cp.END - 1, calls[:, :0], gpu[:, :0], cp.END, 0, 0, 0, 1, n_codes, cp.NO_LIMIT) is None
    monkeypatch.setattr(cp._native, "walk", lambda *arguments: None)
    assert cp.replay(graph) == expected
