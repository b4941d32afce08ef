"""The C extension's `enclosing` and `nest` give the nesting of the vectorised Python (`nesting._enclosing_in_sorted`,
`nesting._python_nest`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import anchor
from tracelens import native
from tracelens.loader import load_trace
from tracelens.model import nesting
from tracelens.model.events import CPU_KINDS, EventTable, Kind, kind_mask

NATIVE = nesting._native
needs_native = pytest.mark.skipif(not native.ENABLED, reason="TRACELENS_NO_NATIVE is set: only the Python twins run")

ROWS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 12)), min_size=0, max_size=120)


def _python_depths(cand: np.ndarray) -> list[int]:
    depth = [0] * cand.size
    for i, c in enumerate(cand.tolist()):
        depth[i] = depth[c] + 1 if c >= 0 else 0
    return depth


@needs_native
@settings(max_examples=300)
@given(ROWS)
def test_same_parents_and_depths_as_the_vectorised_python(rows: list[tuple[int, int, int]]) -> None:
    track = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = start + np.array([r[2] for r in rows], dtype=np.int64)
    order = np.lexsort((np.arange(len(rows)), -end, start, track))
    start, end, track = start[order], end[order], track[order]
    expected = nesting._enclosing_in_sorted(start, end, track)
    cand, depth = nesting._enclosing(start, end, track)
    assert cand.tolist() == expected.tolist()
    assert depth is not None and depth.tolist() == _python_depths(expected)


@needs_native
@pytest.mark.parametrize(
    "relative", ["other/facebookresearch__param/resnet_kineto.json.gz", "hta/trace_diff/control/control.json.gz"]
)
def test_real_traces_nest_the_same(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = load_trace(anchor(relative)).events
    parent, depth = nesting.nest(events)
    monkeypatch.setattr(native, "ENABLED", False)
    python_parent, python_depth = nesting.nest(events)
    assert parent.tolist() == python_parent.tolist() and depth.tolist() == python_depth.tolist()
    assert int(depth.max()) >= 5  # real nesting, not a flat trace


def test_the_extension_refuses_other_dtypes() -> None:
    if NATIVE is None:
        pytest.skip("the C extension is not built")
    with pytest.raises(TypeError):
        NATIVE.enclosing(np.zeros(3, np.int32), np.zeros(3, np.int64), np.zeros(3, np.int64), 0)
    with pytest.raises(ValueError):
        NATIVE.enclosing(np.zeros(3, np.int64), np.zeros(2, np.int64), np.zeros(3, np.int64), 0)
    with pytest.raises(TypeError):
        NATIVE.enclosing(np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, np.int64))


TABLE_ROWS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(0, 8), st.sampled_from(list(Kind))),
    min_size=0,
    max_size=150,
)


def _table(rows: list[tuple[int, int, int, Kind]], sort_starts: bool) -> EventTable:
    n = len(rows)
    track, start, dur, kind = (list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], [])
    ts = np.array(start, dtype=np.int64)
    if sort_starts:
        ts = np.sort(ts)
    ints = {name: np.full(n, -1, dtype=np.int64) for name in ("correlation", "external_id", "sequence_number")}
    ints |= {name: np.full(n, -1, dtype=np.int64) for name in ("device", "stream", "bytes", "grid_blocks")}
    return EventTable(
        kind=np.array(kind, dtype=np.int8),
        name=np.zeros(n, dtype=np.int32),
        track=np.array(track, dtype=np.int32),
        ts_ns=ts,
        dur_ns=np.array(dur, dtype=np.int64),
        block_threads=np.full(n, -1, dtype=np.int64),
        input_dims=np.full(n, None, dtype=object),
        input_types=np.full(n, None, dtype=object),
        concrete_inputs=np.full(n, None, dtype=object),
        input_strides=np.full(n, None, dtype=object),
        names=("x",),
        **ints,
    )


@needs_native
@settings(max_examples=400)
@given(TABLE_ROWS, st.booleans())
def test_the_one_pass_nesting_equals_the_vectorised_python(rows: list[tuple[int, int, int, Kind]], sort: bool) -> None:
    """`_native.nest` (one pass over a table in time order; starts out of order: it refuses and numpy nests) gives
    the parents, depths and nesting order of `_python_nest`; that order sorts the CPU rows by (track, start,
    depth), what `memory.enclosing_ops` sorts them by."""
    table = _table(rows, sort)
    parent, depth, order = nesting.nest_ordered(table)
    python_parent, python_depth, python_order = nesting._python_nest(table)
    assert parent.tolist() == python_parent.tolist() and depth.tolist() == python_depth.tolist()
    assert order.tolist() == python_order.tolist()
    cpu = np.flatnonzero(kind_mask(table.kind, CPU_KINDS))
    assert order.tolist() == cpu[np.lexsort((depth[cpu], table.ts_ns[cpu], table.track[cpu]))].tolist()


@needs_native
def test_a_run_of_equal_starts_too_long_for_insertion_is_sorted_the_same() -> None:
    rows = [(0, 5, length % 7, (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME)[length % 3]) for length in range(90)]
    table = _table(rows, True)
    assert [a.tolist() for a in nesting.nest_ordered(table)] == [a.tolist() for a in nesting._python_nest(table)]


@needs_native
def test_the_one_pass_nesting_refuses_what_it_cannot_read() -> None:
    table = _table([(0, 3, 1, Kind.CPU_OP), (0, 1, 1, Kind.CPU_OP)], False)  # starts out of order
    args = (table.ts_ns, table.dur_ns, table.track, table.kind, nesting._IS_CPU, nesting._TIE_PRIORITY, 1000)
    assert NATIVE.nest(*args) is None
    with pytest.raises(ValueError):
        NATIVE.nest(table.ts_ns[:1], *args[1:])
    bad_kind = np.array([100, 1], dtype=np.int8)
    assert NATIVE.nest(np.sort(table.ts_ns), table.dur_ns, table.track, bad_kind, *args[4:]) is None
