"""Group-bys on integer keys with numpy, giving the figures pandas' `groupby(sort=False)` gives, bit for bit.

Analyses group by codes (name codes, shape-signature codes), not strings. Group ids are numbered in order of
first appearance, as pandas numbers them; sums and means follow pandas' own arithmetic (`group_sums`), so
switching an analysis from pandas to these helpers changes no figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tracelens.model.events import I64

F64 = npt.NDArray[np.float64]
_EXACT_LIMIT = 2.0**52  # whole numbers whose absolute sum stays below this add up without rounding


def first_seen_groups(*keys: np.ndarray) -> tuple[I64, I64]:
    """Group rows by equal values in all `keys` (integer columns of one length), numbering groups in order of
    first appearance, like pandas `groupby(sort=False)`. Returns (group id of every row, first row of every
    group)."""
    key = combined_key(*keys)
    if key.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    span = int(key.max()) + 1
    if span > 8 * key.size + 65_536:  # sparse keys: sort them
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        renumber = np.empty(order.size, dtype=np.int64)
        renumber[order] = np.arange(order.size)
        return renumber[inverse.ravel()], first[order].astype(np.int64)
    first_of_key = np.full(span, key.size, dtype=np.int64)  # dense keys: a table over their range
    np.minimum.at(first_of_key, key, np.arange(key.size, dtype=np.int64))
    present = np.flatnonzero(first_of_key < key.size)
    first = np.sort(first_of_key[present])
    renumber = np.empty(span, dtype=np.int64)
    renumber[key[first]] = np.arange(first.size)
    return renumber[key], first


def combined_key(*keys: np.ndarray) -> I64:
    """One int64 per row, equal exactly where all integer `keys` are equal (mixed radix of the value ranges;
    dense codes first when that would overflow)."""
    columns = [np.asarray(k, dtype=np.int64) for k in keys]
    columns = [c - int(c.min()) if c.size else c for c in columns]
    key = columns[0]
    for column in columns[1:]:
        radix = int(column.max()) + 1 if column.size else 1
        if key.size and (int(key.max()) + 1) * radix >= 2**62:
            key = np.unique(key, return_inverse=True)[1].ravel().astype(np.int64)
        key = key * radix + column
    return key


def group_sums(values: np.ndarray, group: I64, n_groups: int) -> F64:
    """Per-group sums of `values` exactly as pandas (3.x) groupby sum gives them, for `group` numbered as
    pandas numbers its groups (`first_seen_groups` for `groupby(sort=False)`). Like pandas: when the group
    ids never decrease and there is no NaN, `np.add.reduceat` over the runs; otherwise Kahan summation in
    row order, NaN skipped. There, groups of whole numbers whose absolute sum stays below 2**52 never round,
    so their plain sum is the Kahan sum; only the other groups run the compensated loop (a Python step per
    row)."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.zeros(n_groups, dtype=np.float64)
    if group.size == 0:
        return sums
    starts = _runs_of_sorted(group, values)
    if starts is not None:
        sums[group[starts]] = np.add.reduceat(values, starts)
        return sums
    sums += np.bincount(group, weights=values, minlength=n_groups)
    fractional = np.bincount(group, weights=values != np.trunc(values), minlength=n_groups)  # NaN counts too
    magnitude = np.bincount(group, weights=np.abs(values), minlength=n_groups)
    inexact = (fractional > 0) | ~(magnitude < _EXACT_LIMIT)
    if inexact.any():
        rows = np.flatnonzero(inexact[group])
        totals = dict.fromkeys(np.flatnonzero(inexact).tolist(), 0.0)
        compensation = dict.fromkeys(totals, 0.0)
        for g, value in zip(group[rows].tolist(), values[rows].tolist(), strict=True):
            if value != value:  # NaN
                continue
            y = value - compensation[g]
            t = totals[g] + y
            c = t - totals[g] - y
            compensation[g] = 0.0 if c != c else c  # an infinite value makes the compensation NaN
            totals[g] = t
        sums[list(totals)] = list(totals.values())
    return sums


def _runs_of_sorted(group: I64, values: F64) -> I64 | None:
    """Where each group's run starts, when `group` never decreases and `values` has no NaN; else None."""
    if np.any(group[1:] < group[:-1]) or np.isnan(values).any():
        return None
    return np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))


def group_counts(values: np.ndarray, group: I64, n_groups: int) -> I64:
    """Non-NaN values per group."""
    present = ~np.isnan(np.asarray(values, dtype=np.float64))
    return np.bincount(group[present], minlength=n_groups).astype(np.int64)


def group_means(values: np.ndarray, group: I64, n_groups: int) -> F64:
    """Per-group means as pandas' groupby mean gives them: the sum as `group_sums` computes it over the
    non-NaN count (NaN for a group without values)."""
    counts = group_counts(values, group, n_groups)
    sums = group_sums(values, group, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, np.nan)


def group_modes(group: I64, value: I64, n_groups: int) -> I64:
    """Most frequent `value` (non-negative ints) of each group, the smallest on ties, like pandas
    `mode().iat[0]` when `value` ranks the strings (see `string_ranks`). -1 for a group with no rows."""
    modes = np.full(n_groups, -1, dtype=np.int64)
    if group.size == 0:
        return modes
    radix = int(value.max()) + 1
    pairs, counts = np.unique(group * radix + value, return_counts=True)  # sorted by group, then value
    pair_group, pair_value = pairs // radix, pairs % radix
    order = np.lexsort((pair_value, -counts, pair_group))
    best = order[np.concatenate(([True], pair_group[order][1:] != pair_group[order][:-1]))]
    modes[pair_group[best]] = pair_value[best]
    return modes


def string_ranks(strings: Sequence[str]) -> tuple[I64, list[str]]:
    """Rank of each string in sorted order (equal strings share a rank), and the sorted distinct strings."""
    if not strings:
        return np.zeros(0, dtype=np.int64), []
    uniques, inverse = np.unique(np.asarray(strings, dtype=object), return_inverse=True)
    return inverse.ravel().astype(np.int64), [str(s) for s in uniques]


def string_keys(names: Sequence[str], codes: np.ndarray) -> tuple[I64, list[str]]:
    """Dense keys 0..k-1 for name `codes` into `names` (-1 = ""): equal strings share a key and keys sort as
    the strings do (`string_ranks` of the names in use). Also returns the k strings, by key. Python work is per
    distinct code, not per entry."""
    slot = np.asarray(codes, dtype=np.int64) + 1  # 0 is the "" of code -1
    present = np.zeros(len(names) + 1, dtype=bool)
    present[slot] = True
    used = np.flatnonzero(present)
    ranks, distinct = string_ranks(["" if s == 0 else names[s - 1] for s in used.tolist()])
    lookup = np.zeros(len(names) + 1, dtype=np.int64)
    lookup[used] = ranks
    return lookup[slot], distinct


def descending_order(values: np.ndarray) -> I64:
    """Positions that sort `values` (no NaN) largest first, ties in their original order, like pandas
    `sort_values(ascending=False, kind="stable")`."""
    values = np.asarray(values)
    reversed_order = np.argsort(values[::-1], kind="stable")
    return (values.size - 1 - reversed_order)[::-1].astype(np.int64)
