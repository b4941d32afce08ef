"""Grouping by integer codes (event name codes, layer indices) instead of strings: masks and group ids.

`EventTable.name` is a code into `EventTable.names` (unique strings), so equal names have equal codes; these
helpers select and group rows by codes and leave strings to the few output rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from tracelens.model.events import I64, Bool, EventTable, Kind
from tracelens.model.memo import per_trace
from tracelens.model.trace import Trace


def kind_mask(kind: np.ndarray, kinds: Iterable[int]) -> Bool:
    """`np.isin(kind, kinds)` for a few small kind values (one comparison each: much faster than isin; plain
    ints, as comparing an array with an IntEnum member is ten times slower)."""
    mask = np.zeros(kind.shape, dtype=bool)
    for value in kinds:
        mask |= kind == int(value)
    return mask


def name_mask(trace: Trace, predicate: Callable[[str], object], kinds: Iterable[int] | None = None) -> Bool:
    """For every event: whether its name satisfies `predicate`, evaluated once per distinct name. With `kinds`,
    only events of those kinds (and only their names are tested)."""
    ev = trace.events
    kinds = None if kinds is None else tuple(kinds)
    codes = np.arange(len(ev.names)) if kinds is None else names_of_kinds(trace, kinds)
    table = np.zeros(len(ev.names), dtype=bool)
    table[codes] = [bool(predicate(ev.names[c])) for c in codes.tolist()]
    if not table.any():
        return np.zeros(len(ev), dtype=bool)
    mask = table[ev.name]
    return mask if kinds is None else mask & kind_mask(ev.kind, kinds)


def names_of_kinds(trace: Trace, kinds: Iterable[int]) -> I64:
    """Sorted name codes that events of these kinds use."""
    return np.flatnonzero(_kind_name_pairs(trace)[list(kinds)].any(axis=0))


@per_trace
def _kind_name_pairs(trace: Trace) -> Bool:
    """Which (kind, name code) pairs occur: shape (len(Kind), len(names)). Cached per trace."""
    ev = trace.events
    pairs = np.zeros(len(Kind) * len(ev.names), dtype=bool)
    pairs[ev.kind.astype(np.int64) * len(ev.names) + ev.name] = True
    return pairs.reshape(len(Kind), len(ev.names))


def name_codes_at(events: EventTable, indices: np.ndarray) -> I64:
    """Name codes of the events at `indices`; -1 gets the code of "" (like `EventTable.names_at`): the code of
    an event named "" if there is one, else `len(names)`. Strings: `names_with_blank(events)[code]`."""
    missing = events.names.index("") if "" in events.names else len(events.names)
    safe = np.maximum(indices, 0)
    return np.where(indices >= 0, events.name[safe], missing).astype(np.int64)


def names_with_blank(events: EventTable) -> list[str]:
    """`events.names` plus "" at index `len(names)`, for codes from `name_codes_at`."""
    return [*events.names, ""]


def unique_rows(rows: np.ndarray, n: int) -> I64:
    """`np.unique(rows)` for row indices in [0, n), through a mask (much faster than sorting or hashing)."""
    seen = np.zeros(n, dtype=bool)
    seen[rows] = True
    return np.flatnonzero(seen)


def first_seen_groups(*keys: np.ndarray) -> tuple[I64, I64]:
    """Group rows by equal values in all `keys` (integer columns of one length), numbering groups in order of
    first appearance, like pandas `groupby(sort=False)`. Returns (group id of every row, first row of every
    group)."""
    key = _combined_key(keys)
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


def _combined_key(keys: tuple[np.ndarray, ...]) -> I64:
    """One int64 per row that is equal exactly when all keys are (mixed radix; dense ranks if that overflows)."""
    if not keys or keys[0].size == 0:
        return np.zeros(keys[0].size if keys else 0, dtype=np.int64)
    columns = [k.astype(np.int64) - int(k.min()) for k in keys]
    radices = [int(c.max()) + 1 for c in columns]
    if np.prod(np.array(radices, dtype=np.float64)) >= 2.0**62:
        _, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        return inverse.ravel().astype(np.int64)
    key = np.zeros(columns[0].size, dtype=np.int64)
    for column, radix in zip(columns, radices, strict=True):
        key = key * radix + column
    return key
