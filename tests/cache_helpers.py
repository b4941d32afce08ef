"""Helpers of the cache tests: a cache object of a test's own, and a generic deep comparison of model objects."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from tracelens._cache import Cache
from tracelens.model.trace import Trace
from tracelens.records import field_names, is_record

T = TypeVar("T")

WARNING = "tracelens: warning: cache entry "


def make_cache(folder: Path, **options: Any) -> Cache:
    """A cache in `folder` that stores every trace (no size threshold), warnings printed as the CLI does."""
    return Cache(folder, **{"min_trace_bytes": 0, **options})


def assert_same(a: object, b: object, where: str = "trace") -> int:
    """Assert `a` and `b` are equal in every field of every nested record, with the same types and array
    dtypes/shapes (NaN equals NaN); returns how many leaf values were compared."""
    assert type(a) is type(b), (where, type(a), type(b))
    if is_record(a):
        return sum(assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}") for name in field_names(a))
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        if a.dtype == object:
            left, right = a.tolist(), b.tolist()
            assert left == right and [type(x) for x in left] == [type(x) for x in right], where
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
        return 1
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        return sum(assert_same(x, y, f"{where}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))) + 1
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        return sum(assert_same(a[k], b[k], f"{where}[{k!r}]") for k in a) + 1
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        assert math.isnan(b), where
        return 1
    assert a == b, (where, a, b)
    return 1


def no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make decoding a trace file fail: what follows must come from the cache."""
    import tracelens._cache.traces as traces

    def fail(*args: object, **kwargs: object) -> Trace:
        raise AssertionError("decoded although the cache holds the trace")

    monkeypatch.setattr(traces, "begin_decode", fail)


def cached(
    cache: Any, kind: str, inputs: list[Path], options: dict[str, object], record_type: type[T], compute: Any
) -> T:
    """What a command does with the results cache: look up, compute when nothing was found, store."""
    slot = cache.lookup_result(kind, inputs, options)
    found = slot.value(record_type)
    if found is not None:
        return found
    result: T = compute()
    cache.store_result(slot, result, record_type)
    return result
