"""Grouping by integer codes (event name codes, layer indices) instead of strings: masks and group ids.

`EventTable.name` is a code into `EventTable.names` (unique strings), so equal names have equal codes; these
helpers select and group rows by codes and leave strings to the few output rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from tracelens.model.events import I64, Bool, EventTable


def kind_mask(kind: np.ndarray, kinds: Iterable[int]) -> Bool:
    """`np.isin(kind, kinds)` for a few small kind values (one comparison each: much faster than isin)."""
    mask = np.zeros(kind.shape, dtype=bool)
    for value in kinds:
        mask |= kind == value
    return mask


def name_mask(events: EventTable, predicate: Callable[[str], object]) -> Bool:
    """For every event: whether its name satisfies `predicate` (evaluated once per distinct name)."""
    table = np.fromiter((bool(predicate(s)) for s in events.names), dtype=bool, count=len(events.names))
    return table[events.name] if table.size else np.zeros(len(events), dtype=bool)


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
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty(order.size, dtype=np.int64)
    renumber[order] = np.arange(order.size)
    return renumber[inverse.ravel()], first[order].astype(np.int64)


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
