"""Values kept per `Trace` for as long as it lives: the one mechanism for it (traces are immutable, and their
fields hold numpy arrays, so they are keyed by identity, with the entry dropped when the trace is freed).

- `TraceTable`: a side table, `table.put(trace, value)` / `table.get(trace)` (e.g. the execution trace paired
  with a trace: `tracelens.loader.et`);
- `per_trace`: memoise a pure function of a trace (several analyses need the same derived arrays).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from tracelens.model.trace import Trace

T = TypeVar("T")


class TraceTable(Generic[T]):
    """One value per live trace, keyed by identity; an entry goes when its trace is freed."""

    def __init__(self) -> None:
        self._values: dict[int, T] = {}

    def put(self, trace: Trace, value: T) -> None:
        key = id(trace)
        if key not in self._values:
            weakref.finalize(trace, self._values.pop, key, None)
        self._values[key] = value

    def get(self, trace: Trace) -> T | None:
        return self._values.get(id(trace))

    def __contains__(self, trace: Trace) -> bool:
        return id(trace) in self._values

    def __getitem__(self, trace: Trace) -> T:
        return self._values[id(trace)]


def per_trace(function: Callable[[Trace], T]) -> Callable[[Trace], T]:
    """Cache `function(trace)` for as long as `trace` lives (a `TraceTable`). An array it returns is made
    read-only: it is shared between callers, nobody may change it."""
    table: TraceTable[T] = TraceTable()

    @functools.wraps(function)
    def cached(trace: Trace) -> T:
        if trace not in table:
            value = function(trace)
            if hasattr(value, "setflags"):
                value.setflags(write=False)
            table.put(trace, value)
        return table[trace]

    return cached
