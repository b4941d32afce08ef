"""`lexsort_by_last` is `np.lexsort` (last key primary, stable), only faster when the primary key rarely ties."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.loader.columns import lexsort_by_last


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 60).flatmap(
        lambda n: st.lists(st.lists(st.integers(-3, 3), min_size=n, max_size=n), min_size=1, max_size=4)
    )
)
def test_equals_numpy_lexsort(columns: list[list[int]]) -> None:
    keys = tuple(np.array(c, dtype=np.int64) for c in columns)
    assert lexsort_by_last(keys).tolist() == np.lexsort(keys).tolist()


def test_ties_on_the_primary_key_are_broken_by_the_others_then_by_position() -> None:
    ts = np.array([5, 1, 5, 5, 0])
    kind = np.array([2, 9, 1, 2, 9])
    assert lexsort_by_last((kind, ts)).tolist() == [4, 1, 2, 0, 3]
    assert lexsort_by_last((np.arange(5), np.arange(5)[::-1].copy())).tolist() == [4, 3, 2, 1, 0]
    assert lexsort_by_last((np.zeros(0, np.int64),)).tolist() == []
