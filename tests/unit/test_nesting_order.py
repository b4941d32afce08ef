"""`nesting._nesting_order` is the lexsort it replaces, on sorted and unsorted starts."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tracelens.model.nesting import _nesting_order

ROWS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 6), st.integers(0, 5), st.integers(0, 3)), min_size=0, max_size=80
)


def _columns(rows: list[tuple[int, int, int, int]], sort_starts: bool) -> tuple[np.ndarray, ...]:
    track, start, length, tie = (np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))
    if sort_starts:
        start = np.sort(start)
    return np.arange(0, 2 * len(rows), 2), start, start + length, track.astype(np.int32), tie.astype(np.int8)


@given(ROWS, st.booleans())
def test_equals_the_full_lexsort(rows: list[tuple[int, int, int, int]], sort_starts: bool) -> None:
    if not rows:
        assert _nesting_order(*(np.zeros(0, np.int64) for _ in range(5))).size == 0
        return
    cpu, start, end, track, tie = _columns(rows, sort_starts)
    expected = np.lexsort((cpu, tie, -end, start, track))
    assert _nesting_order(cpu, start, end, track, tie).tolist() == expected.tolist()


def test_same_start_on_one_track_puts_the_longer_and_then_the_outer_kind_first() -> None:
    cpu = np.array([0, 1, 2, 3])
    start = np.array([5, 5, 5, 9])
    end = np.array([6, 9, 9, 10])
    track = np.array([0, 0, 0, 0], dtype=np.int32)
    tie = np.array([0, 2, 1, 0], dtype=np.int8)  # row 2 (priority 1) encloses row 1 (priority 2) of equal span
    assert _nesting_order(cpu, start, end, track, tie).tolist() == [2, 1, 0, 3]
