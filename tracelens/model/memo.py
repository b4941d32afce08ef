"""Memoise pure functions of a `Trace` (several analyses need the same derived arrays)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

from tracelens.model.trace import Trace

T = TypeVar("T")


def per_trace(function: Callable[[Trace], T]) -> Callable[[Trace], T]:
    """Cache `function(trace)` for as long as `trace` lives (keyed by identity: traces are immutable)."""
    cache: dict[int, T] = {}

    @functools.wraps(function)
    def cached(trace: Trace) -> T:
        key = id(trace)
        if key not in cache:
            value = function(trace)
            if hasattr(value, "setflags"):
                value.setflags(write=False)  # shared between callers: nobody may change it
            cache[key] = value
            weakref.finalize(trace, cache.pop, key, None)
        return cache[key]

    return cached
