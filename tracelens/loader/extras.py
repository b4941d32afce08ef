"""Memory (`[memory]` instant) and counter (`ph: "C"`) events → columns, apart from the complete events.

The plain path pays almost nothing for them: the streamed chunks are decoded with instant and counter events typed
(`EXTRAS_*_DECODER`; a trace without them decodes exactly as fast as with those phases skipped), and the memory
events' columns come from one pass of the C extension over the decoded events (`_native.memory_columns`; Python's
`python_memory_columns` is the reference it is tested against; their costs: docs/benchmarks.md). The whole-file
path searches its text for markers (`has_extras`) before decoding it a second time, typed.

Chunks give `ExtraColumns`; `merge_extras` joins them into the model's `MemoryTable` / `CounterTable`
(with the thread of each memory event as a CPU track; the enclosing op is the model's business).
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from tracelens import native
from tracelens.loader.coerce import to_int, usable_ts, valid_text
from tracelens.loader.fields import factorize
from tracelens.loader.schema import (
    CounterEvent,
    InstantEvent,
    InstantFields,
    LegacyInstantEvent,
    MemoryArgs,
    MetadataEvent,
)
from tracelens.loader.threads import MetaRow, metadata_rows
from tracelens.model.events import I64
from tracelens.model.memory import CounterTable, MemoryTable
from tracelens.model.trace import TrackTable
from tracelens.native import extension as _native
from tracelens.units import NS_PER_US

MEMORY_NAME = "[memory]"
_MARKERS = (b'"[memory]"', b'"C"', b'"M"')  # `"ph": "C"` in any spacing contains `"C"`, and so for "M"
_EMPTY_ARGS = MemoryArgs()
_INSTANT_TUPLE = (InstantEvent, LegacyInstantEvent)  # same fields (`InstantFields`), so the same slots
_INSTANT_TYPES = frozenset(_INSTANT_TUPLE)
_MEMORY_INTS = ("bytes", "total_allocated", "total_reserved", "device_id", "device_type", "addr")
_MEMORY_INTS_OF = attrgetter(*_MEMORY_INTS)
_PID_TID = attrgetter("pid", "tid")
_MEMORY_RECORD = np.dtype([(name, np.int64) for name in _MEMORY_INTS])


def has_extras(text: bytes | bytearray) -> bool:
    """Whether `text` may hold a memory, counter or metadata event (never False when it does)."""
    return any(marker in text for marker in _MARKERS)


def has_memory_or_counters(text: bytes | bytearray) -> bool:
    """Whether `text` may hold a memory or counter event (never False when it does)."""
    return any(marker in text for marker in _MARKERS[:2])


class ExtraColumns(msgspec.Struct):
    """One chunk's memory and counter events as columns (file order); memory (pid, tid) as a code into
    `memory_pairs` (the distinct pairs as decoded, factorized in the chunk's process), counter pid as a label
    (`str(value)`)."""

    memory_ts_us: np.ndarray
    memory_ints: dict[str, I64]
    memory_pair: I64
    memory_pairs: list[tuple[Any, Any]]
    counter_ts_us: np.ndarray
    counter_name: list[str]
    counter_series: list[str]
    counter_pid: list[str]
    counter_value: np.ndarray
    metadata: list[MetaRow] = msgspec.field(default_factory=list)  # thread and process names (`loader.threads`)

    @property
    def empty(self) -> bool:
        return not (self.memory_ts_us.size or self.counter_ts_us.size or self.metadata)


def extra_columns(events: list[Any]) -> ExtraColumns | None:
    """The memory and counter events among decoded `events` (any phases, from an `EXTRAS_*_DECODER`) as columns;
    None when there are none. Events without a usable `ts` are skipped. The memory events' columns come from
    the C extension (`_native.memory_columns`, one pass over the events), else from
    `python_memory_columns` (identical columns); Python touches only the (rare) counter events."""
    memory = _native_memory_columns(events) if native.ENABLED else None
    if memory is None:
        memory = python_memory_columns(events)
    counters = [e for e in events if type(e) is CounterEvent and usable_ts(e.ts)] if memory.has_counters else []
    metadata = metadata_rows(events) if memory.has_meta else []
    if not memory.ts_us.size and not counters and not metadata:
        return None
    c_ts, c_name, c_series, c_pid, c_value = [], [], [], [], []
    for event in counters:
        for key, value in (event.args or {}).items():
            number = _number(value)
            if number is not None:
                c_ts.append(event.ts)
                c_name.append(event.name)
                c_series.append(key)
                c_pid.append(_label(event.pid))
                c_value.append(number)
    return ExtraColumns(
        memory_ts_us=memory.ts_us,
        memory_ints=memory.ints,
        memory_pair=memory.pair_codes,
        memory_pairs=memory.pairs,
        counter_ts_us=np.array(c_ts, dtype=np.float64),
        counter_name=c_name,
        counter_series=c_series,
        counter_pid=c_pid,
        counter_value=np.array(c_value, dtype=np.float64),
        metadata=metadata,
    )


class MemoryColumns(msgspec.Struct):
    """One chunk's `[memory]` instant events with a usable `ts` (file order): `ts_us` (an int beyond float range
    reads NaN), the `_MEMORY_INTS` (absent args: `MemoryArgs()`'s defaults; None and ints beyond int64: -1), each
    event's (pid, tid) as a code into `pairs` (in order of first appearance); and whether the chunk has a
    counter event, and a metadata (`ph: "M"`) event."""

    ts_us: np.ndarray
    ints: dict[str, I64]
    pair_codes: I64
    pairs: list[tuple[Any, Any]]
    has_counters: bool
    has_meta: bool = False


def _native_memory_columns(events: list[Any]) -> MemoryColumns | None:
    """`python_memory_columns` from the C extension; None when it cannot read the chunk exactly (then Python does)."""
    try:
        ts, ints, codes, pairs, has_counters, has_meta = _native.memory_columns(
            events, _INSTANT_TUPLE, MemoryArgs, MEMORY_NAME, CounterEvent, MetadataEvent
        )
    except TypeError:
        return None
    return MemoryColumns(
        ts_us=np.frombuffer(ts, np.float64),
        ints={name: np.frombuffer(buffer, np.int64) for name, buffer in zip(_MEMORY_INTS, ints, strict=True)},
        pair_codes=np.frombuffer(codes, np.int64),
        pairs=pairs,
        has_counters=has_counters,
        has_meta=has_meta,
    )


def python_memory_columns(events: list[Any]) -> MemoryColumns:
    """The memory events' columns (`MemoryColumns`) in Python: the scans over all events run in C (`filter`,
    `map`, `fromiter`); Python touches only the memory events."""
    types = set(map(type, events))
    instants = filter(InstantFields.__instancecheck__, events) if not _INSTANT_TYPES.isdisjoint(types) else ()
    memory = [e for e in instants if e.name == MEMORY_NAME]
    memory_ts_us = _finite_floats(list(map(attrgetter("ts"), memory)))
    if memory_ts_us is None:  # some `ts` unusable (rare): keep the events that have a usable one
        memory = [e for e in memory if usable_ts(e.ts)]
        memory_ts_us = _floats(list(map(attrgetter("ts"), memory)))
    args = list(map(attrgetter("args"), memory))
    pair_codes, pairs = factorize(list(map(_PID_TID, memory)))
    if None in args:
        args = [a if a is not None else _EMPTY_ARGS for a in args]
    return MemoryColumns(
        memory_ts_us, _memory_ints(args), pair_codes, pairs, CounterEvent in types, MetadataEvent in types
    )


def merge_extras(
    parts: list[ExtraColumns], origin_us: float, tracks: TrackTable, max_offset_us: float
) -> tuple[MemoryTable, CounterTable, list[str]]:
    """The chunks' extras (in file order) as tables on the event table's clock, in time order (file order among
    equal times); events more than `max_offset_us` from the origin are dropped (with a note), as for complete
    events. Memory events get the CPU track of their (pid, tid), `op` -1 (set by `model.build`)."""
    notes: list[str] = []
    memory, dropped_memory = _merge_memory(parts, origin_us, tracks, max_offset_us)
    counters, dropped_counters = _merge_counters(parts, origin_us, max_offset_us)
    dropped = dropped_memory + dropped_counters
    if dropped:
        notes.append(f"{dropped:,} memory or counter events with a timestamp days away from the rest were ignored")
    return memory, counters, notes


def _merge_memory(
    parts: list[ExtraColumns], origin_us: float, tracks: TrackTable, max_offset_us: float
) -> tuple[MemoryTable, int]:
    ts_us = _concat([p.memory_ts_us for p in parts])
    if not ts_us.size:
        return MemoryTable.empty(), 0
    keep = np.abs(ts_us - origin_us) <= max_offset_us
    ints = {name: np.concatenate([p.memory_ints[name] for p in parts]) for name in _MEMORY_INTS}
    cpu_track = {(tracks.pid[i], tracks.tid[i]): i for i in range(len(tracks)) if not tracks.is_gpu[i]}
    track = np.concatenate([_pair_tracks(p, cpu_track) for p in parts])
    rows = np.flatnonzero(keep)
    ts_ns = np.rint((ts_us[rows] - origin_us) * NS_PER_US).astype(np.int64)
    order = rows[np.argsort(ts_ns, kind="stable")]
    ts_ns = np.sort(ts_ns, kind="stable")
    table = MemoryTable(
        ts_ns=ts_ns,
        bytes=ints["bytes"][order],
        total_allocated=ints["total_allocated"][order],
        total_reserved=ints["total_reserved"][order],
        device=ints["device_id"][order],
        device_type=ints["device_type"][order],
        addr=ints["addr"][order],
        track=track[order],
        op=np.full(order.size, -1, dtype=np.int32),
    )
    return table, int(ts_us.size - rows.size)


def _pair_tracks(part: ExtraColumns, cpu_track: dict[tuple[str, str], int]) -> np.ndarray:
    """The CPU track of each of a chunk's memory events (by its (pid, tid) labels), -1 if none."""
    labels = [(_label(pid), _label(tid)) for pid, tid in part.memory_pairs]
    track_of_pair = np.array([cpu_track.get(pair, -1) for pair in labels] + [-1], dtype=np.int32)
    return track_of_pair[part.memory_pair]


def _merge_counters(parts: list[ExtraColumns], origin_us: float, max_offset_us: float) -> tuple[CounterTable, int]:
    ts_us = _concat([p.counter_ts_us for p in parts])
    if not ts_us.size:
        return CounterTable.empty(), 0
    keep = np.abs(ts_us - origin_us) <= max_offset_us
    values = _concat([p.counter_value for p in parts])
    columns = []
    labels = []
    for attribute in ("counter_name", "counter_series", "counter_pid"):
        texts = [valid_text(text) for p in parts for text in getattr(p, attribute)]
        uniques = sorted(set(texts))
        lookup = {text: code for code, text in enumerate(uniques)}
        columns.append(np.array([lookup[text] for text in texts], dtype=np.int32))
        labels.append(tuple(uniques))
    rows = np.flatnonzero(keep)
    ts_ns = np.rint((ts_us[rows] - origin_us) * NS_PER_US).astype(np.int64)
    by_time = np.argsort(ts_ns, kind="stable")
    order = rows[by_time]
    table = CounterTable(
        ts_ns=ts_ns[by_time],
        name=columns[0][order],
        series=columns[1][order],
        pid=columns[2][order],
        value=values[order],
        names=labels[0],
        series_names=labels[1],
        pids=labels[2],
    )
    return table, int(ts_us.size - rows.size)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def _finite_floats(values: list[Any]) -> np.ndarray | None:
    """float64 column of `ts` values when every one is usable (`usable_ts`: an int or a finite float), else None."""
    try:
        column = np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError, OverflowError):  # None, or an int beyond float range
        return None
    return column if np.isfinite(column).all() else None


def _memory_ints(args: list[Any]) -> dict[str, I64]:
    """The `_MEMORY_INTS` columns of memory events' args, as `_ints` gives them: in one pass over the args
    (a record array from one getter of all six fields) when every value is an int within int64, else field by
    field."""
    try:
        records = np.fromiter(map(_MEMORY_INTS_OF, args), dtype=_MEMORY_RECORD, count=len(args))
    except (TypeError, ValueError, OverflowError):
        return {name: _ints(list(map(attrgetter(name), args))) for name in _MEMORY_INTS}
    return {name: np.ascontiguousarray(records[name]) for name in _MEMORY_INTS}


def _ints(values: list[int | None]) -> I64:
    """int64 column of decoded ints (the schema admits no other number): -1 for None and values beyond int64."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, OverflowError):
        return np.array([-1 if (n := to_int(v)) is None else n for v in values], dtype=np.int64)


def _floats(values: list[Any]) -> np.ndarray:
    """float64 column of usable `ts` values; an int beyond float range (not a credible time) reads NaN."""
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except OverflowError:
        return np.array([_float_or_nan(v) for v in values], dtype=np.float64)


def _float_or_nan(value: float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.nan


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _label(value: object) -> str:
    return "" if value is None else valid_text(str(value))
