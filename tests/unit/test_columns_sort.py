"""`lexsort_by_last` is `np.lexsort` (last key primary, stable), only faster when the primary key rarely ties;
`permuted` is numpy indexing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.loader import columns as columns_module
from tracelens.loader.columns import lexsort_by_last, permuted


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


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 70).flatmap(lambda n: st.tuples(st.permutations(list(range(n))), st.integers(0, n))))
def test_permuted_in_place_equals_numpy_indexing(case: tuple[list[int], int]) -> None:
    """`columns.permuted` (the C extension's in-place cycles where built) gives `column[order]` for every item
    size, also when `order` leaves rows out."""
    permutation, kept = case
    order = np.array(sorted(permutation[:kept], key=permutation.index), dtype=np.int64)
    made = {f"c{itemsize}": np.arange(len(permutation), dtype=f"i{itemsize}") * 3 - 7 for itemsize in (1, 2, 4, 8)}
    expected = {name: column[order] for name, column in made.items()}
    got = permuted({name: column.copy() for name, column in made.items()}, order)
    for name, column in expected.items():
        assert got[name].dtype == column.dtype and got[name].tolist() == column.tolist(), name


def test_permute_refuses_what_is_not_a_permutation() -> None:
    native = columns_module._native
    if native is None:
        return
    column = np.arange(4, dtype=np.int64)
    for order in ([0, 1, 1, 2], [0, 1, 2, 4], [-1, 0, 1, 2]):
        with pytest.raises(ValueError):
            native.permute(np.array(order, dtype=np.int64), (column,))
        assert column.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        native.permute(np.arange(4, dtype=np.int64), (np.arange(3, dtype=np.int64),))
