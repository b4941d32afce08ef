"""The fields of a chunk of decoded events as columns (`EventFields`): from the C extension
(`tracelens._native.columns`, slot reads), or from its Python twin under TRACELENS_NO_NATIVE=1; both give
identical columns, and a column the extension cannot read exactly (a numeric-string argument, a number beyond
int64 or float range) is read by the Python path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np

from tracelens import native
from tracelens.loader.coerce import to_int, usable_ts
from tracelens.loader.schema import DIM_ARGS as DIM_ARGS  # re-exported: the header's tables
from tracelens.loader.schema import INT_ARGS as INT_ARGS
from tracelens.loader.schema import RAW_ARGS as RAW_ARGS
from tracelens.loader.schema import Args, Event
from tracelens.model.events import GPU_ACTIVITY_KINDS, I64, Kind
from tracelens.native import extension as _native

_EMPTY_ARGS = Args()
# The fields read from each decoded event (`schema.Event`), and (`schema.INT_ARGS`, `DIM_ARGS`, `RAW_ARGS`, derived
# from the one declaration `schema.Args`) from its `args`, in the order the C extension returns them; its field
# table (tracelens/_native_fields.h) is generated from these (`native_header`, scripts/gen_native_fields.py;
# tests/unit/test_native_field_table.py checks it is current).
EVENT_ATTRS = ("cat", "name", "pid", "tid", "ts", "dur", "args")
NATIVE_HEADER = "_native_fields.h"  # beside _native.c
# The metadata (`ph: "M"`) events read, each with the `schema.MetaArgs` field that holds its value, and the
# `TrackTable` column it fills (`loader.threads`). The C extension does not read them: they are a few per file, and
# it only says which chunks hold one (`memory_columns`' `has_meta`); Python reads those chunks' `MetadataEvent`s.
METADATA_EVENTS = {
    "thread_name": ("name", "thread_name"),
    "process_name": ("name", "process_name"),
    "thread_sort_index": ("sort_index", "sort_index"),
}


def native_header() -> str:
    """The C extension's field table (the text of tracelens/_native_fields.h), derived from the tuples above."""

    def names(items: tuple[str, ...]) -> str:
        return ", ".join(f'"{item}"' for item in items)

    tables = [
        ("EVENT_FIELDS", EVENT_ATTRS),
        ("INT_FIELDS", INT_ARGS),
        ("DIM_FIELDS", DIM_ARGS),
        ("RAW_FIELDS", RAW_ARGS),
    ]
    lines = [
        "/* Generated from tracelens/loader/fields.py (EVENT_ATTRS) and schema.py (Args: INT_ARGS, DIM_ARGS,",
        "   RAW_ARGS) by scripts/gen_native_fields.py: do not edit. The slots of these fields are read in this",
        "   order. */",
        "#ifndef TRACELENS_NATIVE_FIELDS_H",
        "#define TRACELENS_NATIVE_FIELDS_H",
    ]
    for table, items in tables:
        count = f"N_{table}"
        lines += [f"#define {count} {len(items)}", f"static const char *{table}[{count}] = {{{names(items)}}};"]
    lines += ["enum { " + ", ".join(f"F_{item.upper()}" for item in EVENT_ATTRS) + " };", "#endif", ""]
    return "\n".join(lines)


class EventFields(msgspec.Struct):
    """One chunk's event fields, a row per event. `cat`, `name`, `pid`, `tid`: (codes, values in order of first
    appearance; code -1 = None). `ints`: the `INT_ARGS` (-1 = absent); `dims`: product of each `DIM_ARGS`
    list (-1 = none); both may also hold values on rows where they mean nothing (device of a CPU op, grid of a
    memcpy): the caller keeps the rows it wants. `raws`: rows that have each `RAW_ARGS` field, and its bytes."""

    cat: tuple[I64, list[str]]
    name: tuple[I64, list[str]]
    pid: tuple[I64, list[Any]]
    tid: tuple[I64, list[Any]]
    ts_us: np.ndarray
    dur_us: np.ndarray
    ints: dict[str, I64]
    dims: dict[str, I64]
    raws: dict[str, tuple[I64, list[bytes]]]


def event_fields(events: list[Any], kind_of: Any, complete_type: type | None = None) -> EventFields:
    """The fields of `events`: complete events of one type, or with `complete_type` any decoded events, of
    which only the `complete_type` ones with a usable `ts` are read (`select_complete`). `kind_of(cat_codes,
    cat_values)` gives each row's kind; the Python path reads device/stream of GPU rows and dims of kernel rows
    only."""
    if native.ENABLED and events:
        try:
            return _native_fields(events, complete_type)
        except TypeError:  # an odd structure: the Python path reads it
            pass
    return _python_fields(select_complete(events, complete_type) if complete_type else events, kind_of)


def select_complete(events: list[Any], complete_type: Any) -> list[Any]:
    """The `complete_type` events with a usable `ts` (`coerce.usable_ts`); other phases are other types."""
    return [e for e in events if type(e) is complete_type and usable_ts(e.ts)]


def native_available() -> bool:
    return native.ENABLED


def _native_fields(decoded: list[Any], complete_type: type | None) -> EventFields:
    select = complete_type is not None
    event_type = complete_type if complete_type is not None else type(decoded[0])
    (cat_codes, cat_values, name_codes, name_values, pid_codes, pid_values, tid_codes, tid_values, ts, dur) = (
        columns := _native.columns(decoded, event_type, Args, msgspec.Raw, select)
    )[:10]
    ints, dims, raws = columns[10:]
    events = select_complete(decoded, event_type) if select and None in (ts, dur, *ints, *dims) else decoded
    args: list[Args] = []

    def all_args() -> list[Args]:
        if not args:
            args.extend(e.args or _EMPTY_ARGS for e in events)
        return args

    def int_column(buffer: bytearray | None, attribute: str) -> I64:
        return np.frombuffer(buffer, np.int64) if buffer is not None else _int_column(all_args(), attribute)

    def dims_column(buffer: bytearray | None, attribute: str) -> I64:
        if buffer is not None:
            return np.frombuffer(buffer, np.int64)
        return _dims_product(all_args(), attribute, np.full(len(all_args()), Kind.KERNEL, np.int8))

    return EventFields(
        cat=(np.frombuffer(cat_codes, np.int64), cat_values),
        name=(np.frombuffer(name_codes, np.int64), name_values),
        pid=(np.frombuffer(pid_codes, np.int64), pid_values),
        tid=(np.frombuffer(tid_codes, np.int64), tid_values),
        ts_us=np.frombuffer(ts, np.float64) if ts is not None else _floats(list(map(attrgetter("ts"), events))),
        dur_us=np.frombuffer(dur, np.float64) if dur is not None else _durations(events),
        ints={name: int_column(buffer, name) for name, buffer in zip(INT_ARGS, ints, strict=True)},
        dims={name: dims_column(buffer, name) for name, buffer in zip(DIM_ARGS, dims, strict=True)},
        raws={
            name: (np.frombuffer(rows, np.int64), values) for name, (rows, values) in zip(RAW_ARGS, raws, strict=True)
        },
    )


def _python_fields(events: list[Event], kind_of: Any) -> EventFields:
    n = len(events)
    cat = factorize(list(map(attrgetter("cat"), events)))
    kind = kind_of(*cat)
    try:
        ts_us = np.fromiter(map(attrgetter("ts"), events), dtype=np.float64, count=n)
    except OverflowError:  # an int too large for a float
        ts_us = _floats(list(map(attrgetter("ts"), events)))
    try:
        dur_us = np.fromiter(map(attrgetter("dur"), events), dtype=np.float64, count=n)
    except (TypeError, OverflowError):
        dur_us = _durations(events)
    args = [e.args or _EMPTY_ARGS for e in events]
    gpu_rows = np.flatnonzero(np.isin(kind, GPU_TRACK_KINDS))
    ints = {name: _int_column(args, name) for name in INT_ARGS if name not in ("device", "stream")}
    ints |= dict(zip(("device", "stream"), _gpu_int_columns(args, gpu_rows, ("device", "stream")), strict=True))
    return EventFields(
        cat=cat,
        name=factorize(list(map(attrgetter("name"), events))),
        pid=_factorize_ids(events, "pid"),
        tid=_factorize_ids(events, "tid"),
        ts_us=ts_us,
        dur_us=dur_us,
        ints=ints,
        dims={name: _dims_product(args, name, kind) for name in DIM_ARGS},
        raws={name: _raw_column(args, name) for name in RAW_ARGS},
    )


GPU_TRACK_KINDS = np.array((*GPU_ACTIVITY_KINDS, Kind.GPU_ANNOTATION, Kind.CUDA_SYNC), np.int8)  # on GPU tracks


def _durations(events: list[Event]) -> np.ndarray:
    return _floats([e.dur if e.dur is not None else 0.0 for e in events])


def _floats(values: list[Any]) -> np.ndarray:
    """float64 array of numbers; a Python int too large for a float becomes NaN."""
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except OverflowError:
        return np.array([v if abs(v) < 1e300 else math.nan for v in values], dtype=np.float64)


def factorize(values: Sequence[Any] | np.ndarray) -> tuple[I64, list[Any]]:
    """(codes, uniques) with uniques in order of first appearance; None gets code -1 and is not a unique.

    Values must be hashable; equal values (1 and 1.0) share a code, like a dict's keys.
    """
    if isinstance(values, np.ndarray) and values.dtype != object:
        return _factorize_numbers(values)
    uniques = dict.fromkeys(values)
    has_none = None in uniques
    uniques.pop(None, None)
    lookup: dict[Any, int] = {value: code for code, value in enumerate(uniques)}
    if has_none:
        lookup[None] = -1
    codes = np.fromiter(map(lookup.__getitem__, values), dtype=np.int64, count=len(values))
    return codes, list(uniques)


def _factorize_numbers(values: np.ndarray) -> tuple[I64, list[Any]]:
    """`factorize` of a numeric array (no None), without a Python object per value."""
    sorted_uniques, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(by_appearance.size)
    return rank[inverse.ravel()].astype(np.int64), sorted_uniques[by_appearance].tolist()


def _int_column(args: list[Args], attribute: str) -> I64:
    try:  # fast path: every value an int (absent ones default to -1)
        return np.fromiter(map(attrgetter(attribute), args), dtype=np.int64, count=len(args))
    except (TypeError, ValueError, OverflowError):
        pass
    values = np.array(list(map(attrgetter(attribute), args)), dtype=object)
    present = values != None  # noqa: E711 (elementwise comparison on an object array)
    out = np.full(len(args), -1, dtype=np.int64)
    if present.any():
        try:
            out[present] = values[present].astype(np.int64)
        except (TypeError, ValueError, OverflowError):
            out[present] = [_int_or_minus_one(v) for v in values[present]]
    return out


def _int_or_minus_one(value: object) -> int:
    number = to_int(value)
    return -1 if number is None else number


def _gpu_int_columns(args: list[Args], rows: np.ndarray, attributes: tuple[str, ...]) -> list[I64]:
    """Integer `args` fields that only GPU-track events keep (-1 on every other row), read from those rows only."""
    picked = _pick(args, rows)
    columns = []
    for attribute in attributes:
        column = np.full(len(args), -1, dtype=np.int64)
        column[rows] = _int_column(picked, attribute)
        columns.append(column)
    return columns


def _factorize_ids(events: list[Event], attribute: str) -> tuple[I64, list[Any]]:
    """`factorize` of the events' pid or tid; all-integer ids (the usual case) without a dict look-up per event."""
    try:
        return _factorize_numbers(np.fromiter(map(attrgetter(attribute), events), np.int64, count=len(events)))
    except (TypeError, ValueError, OverflowError):
        return factorize(list(map(attrgetter(attribute), events)))


def _dims_product(args: list[Args], attribute: str, kind: np.ndarray) -> I64:
    """Product of each kernel's grid or block dims; -1 where there is no non-empty list of ints or the product
    does not fit int64."""
    out = np.full(len(args), -1, dtype=np.int64)
    rows = np.flatnonzero(kind == Kind.KERNEL)
    dims = list(map(attrgetter(attribute), _pick(args, rows)))
    try:  # fast path: every kernel has dims of one length
        matrix = np.array(dims, dtype=np.int64)
        if matrix.ndim == 2 and matrix.shape[1] > 0:
            fits = np.abs(matrix.astype(np.float64).prod(axis=1)) < 2.0**62  # else the int64 product wraps
            if fits.all():
                out[rows] = matrix.prod(axis=1)
                return out
    except (TypeError, ValueError, OverflowError):
        pass
    for index, value in zip(rows, dims, strict=True):
        if isinstance(value, list) and value:
            product = math.prod(value)
            out[index] = product if -(2**63) <= product < 2**63 else -1
    return out


def _pick(items: list[Args], rows: np.ndarray) -> list[Args]:
    if rows.size == 0:
        return []
    if rows.size == 1:
        return [items[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(items))


def _raw_column(args: list[Args], attribute: str) -> tuple[I64, list[bytes]]:
    raws = list(map(attrgetter(attribute), args))
    rows = np.flatnonzero(np.fromiter(map(len, raws), dtype=np.int64, count=len(raws)))
    return rows, [bytes(raws[index]) for index in rows]  # copied out, so the input buffer can be freed
