"""Selecting events by integer codes instead of strings: masks by kind and by name, row sets.

`EventTable.name` is a code into `EventTable.names` (unique strings), so equal names have equal codes; these
helpers select rows by codes (grouping is in `keygroups`) and leave strings to the few output rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from tracelens.model.events import I64, Bool, EventTable, Kind, kind_mask
from tracelens.model.memo import per_trace
from tracelens.model.trace import Trace


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
    mask = np.take(table, ev.name)
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
