"""Integer-key group-bys: the same figures, bit for bit, as the pandas group-bys they replace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.analyses.keygroups import (
    combined_key,
    descending_order,
    first_seen_groups,
    group_means,
    group_modes,
    group_sums,
    string_ranks,
)

FLOATS = st.one_of(
    st.floats(min_value=-1e18, max_value=1e18),
    st.integers(min_value=0, max_value=10**6).map(float),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, 1.0, 2.0**53, float("inf"), float("nan")]),
)


def test_sums_are_compensated_like_pandas_not_plain() -> None:
    group = np.array([0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1])
    values = np.array([1e16, 0.1, 1.0, 0.1, 1.0] + [0.1] * 8)
    sums = group_sums(values, group, 2)
    # plain left-to-right addition gives 1e16 and 0.9999999999999999; Kahan keeps the lost low bits
    assert sums.tolist() == [10000000000000002.0, 1.0]
    assert sums.tolist() == pd.Series(values).groupby(group, sort=False).sum().tolist()


def test_sums_of_groups_in_runs_add_up_like_numpy_reduceat() -> None:
    values = np.array([58612.3, 55409050.2, 80971.1, 56047595.2, 2.0])
    group = np.array([0, 0, 0, 0, 1])
    # np.add.reduceat (pandas' road for sorted groups) gives 111596228.8, Kahan 111596228.80000001
    assert group_sums(values, group, 2).tolist() == [111596228.8, 2.0]
    assert group_sums(values, group, 2).tolist() == pd.Series(values).groupby(group).sum().tolist()


def test_sums_of_whole_numbers_skip_nan_and_keep_empty_groups_at_zero() -> None:
    group = np.array([0, 0, 2, 2])
    values = np.array([3.0, 4.0, np.nan, 5.0])
    assert group_sums(values, group, 4).tolist() == [7.0, 0.0, 5.0, 0.0]
    means = group_means(values, group, 4)
    assert means[0] == 3.5 and means[2] == 5.0 and np.isnan(means[1]) and np.isnan(means[3])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), FLOATS), min_size=1, max_size=60), st.booleans())
def test_sums_and_means_match_pandas_bit_for_bit(rows: list[tuple[int, float]], contiguous: bool) -> None:
    if contiguous:  # pandas takes another road (np.add.reduceat) when the groups come in runs
        rows = sorted(rows, key=lambda row: row[0])
    group, first = first_seen_groups(np.array([g for g, _ in rows], dtype=np.int64))  # pandas' numbering
    values = np.array([v for _, v in rows], dtype=np.float64)
    grouped = pd.DataFrame({"g": [g for g, _ in rows], "v": values}).groupby("g", sort=False)["v"]
    assert group_sums(values, group, first.size).tobytes() == grouped.sum().to_numpy().tobytes()
    assert group_means(values, group, first.size).tobytes() == grouped.mean().to_numpy().tobytes()


def test_groups_are_numbered_in_order_of_first_appearance() -> None:
    group, first = first_seen_groups(np.array([7, 3, 7, 3, 9]), np.array([1, 1, 1, 2, 1]))
    assert group.tolist() == [0, 1, 0, 2, 3]
    assert first.tolist() == [0, 1, 3, 4]
    empty, none = first_seen_groups(np.zeros(0, dtype=np.int64))
    assert empty.size == 0 and none.size == 0


def test_combined_key_stays_distinct_when_the_radix_product_overflows() -> None:
    big = np.array([0, 2**40, 2**40, 0], dtype=np.int64)
    key = combined_key(big, big, np.array([5, 5, 6, 5]))
    assert key[0] == key[3] and len({key[0], key[1], key[2]}) == 3


def test_modes_break_ties_towards_the_smallest_value() -> None:
    group = np.array([0, 0, 0, 0, 1, 1, 1])
    value = np.array([3, 1, 3, 1, 2, 5, 5])
    assert group_modes(group, value, 3).tolist() == [1, 5, -1]


def test_string_ranks_follow_string_order_and_merge_equal_strings() -> None:
    ranks, strings = string_ranks(["b", "", "a", "b", "Z"])
    assert ranks.tolist() == [3, 0, 2, 3, 1]
    assert strings == ["", "Z", "a", "b"]
    # pandas' mode on the strings picks what the ranks pick
    names = ["b", "a", "b", "a"]
    ranks, strings = string_ranks(names)
    mode = group_modes(np.zeros(4, dtype=np.int64), ranks, 1)[0]
    assert strings[mode] == pd.Series(names).mode().iat[0] == "a"


@pytest.mark.parametrize("values", [[3.0, 5.0, 3.0, 0.0, -0.0, 5.0], [2, 2, 2], [1, 9, 4, 9, 1]])
def test_descending_order_keeps_ties_in_place_like_pandas(values: list[float]) -> None:
    expected = pd.DataFrame({"v": values}).sort_values("v", ascending=False, kind="stable").index.tolist()
    assert descending_order(np.array(values)).tolist() == expected
