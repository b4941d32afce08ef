"""Types of the C extension `tracelens._native` (source: tracelens/_native.c; what each function computes: the
comment above it there). Arrays go in as C-contiguous buffers of the dtype named (numpy arrays, bytearrays) and
come back as bytearrays for `numpy.frombuffer`. Each function's Python twin, beside its caller, is the test
oracle (`TRACELENS_NO_NATIVE=1` selects the twins; tests/unit/test_native_*.py compare both).
tests/unit/test_native_stub.py checks that this file names exactly the module's functions, with their arities."""

from typing import Any, TypeAlias

import numpy as np

Buffer: TypeAlias = np.ndarray[Any, Any] | bytearray | memoryview  # C-contiguous, of the dtype named

def columns(events: list[Any], event_type: type, args_type: type, raw_type: type, select: bool, /) -> tuple[Any, ...]:
    """The decoded events' columns: (cat codes, cat values, name codes, name values, pid codes, pid values, tid
    codes, tid values, ts_us float64 or None, dur_us float64 or None, int columns, dims columns, raw columns),
    each int64 bytearray None where Python must compute that column; TypeError: Python reads the whole chunk."""

def memory_columns(
    events: list[Any],
    instant_types: tuple[type, ...],
    args_type: type,
    memory_name: str,
    counter_type: type,
    meta_type: type,
    /,
) -> tuple[bytearray, tuple[bytearray, ...], bytearray, list[tuple[Any, Any]], bool, bool]:
    """The `[memory]` instant events' (ts_us float64, the six int64 argument columns, (pid, tid) pair codes, the
    pairs, any counter event, any metadata event); TypeError where Python would read them differently."""

def permute(order: Buffer, columns: tuple[Buffer, ...], /) -> None:
    """`column[:] = column[order]` in place for each column; ValueError (no column changed) unless `order` (int64)
    is a permutation of its range."""

def nest(
    ts_ns: Buffer, dur_ns: Buffer, track: Buffer, kind: Buffer, is_cpu: Buffer, tie: Buffer, tolerance: int, /
) -> tuple[bytearray, bytearray, bytearray] | None:
    """(parent int32, depth int32, the CPU rows in nesting order int64); None where the starts are not in time
    order or a track or kind is out of range."""

def enclosing(start: Buffer, end: Buffer, track: Buffer, tolerance: int, /) -> tuple[bytearray, bytearray]:
    """(each row's innermost enclosing earlier row on its track, -1 for none: int64; its depth: int32)."""

def link(
    kind: Buffer,
    correlation: Buffer,
    external_id: Buffer,
    ts_ns: Buffer,
    dur_ns: Buffer,
    track: Buffer,
    parent: Buffer,
    is_api: Buffer,
    is_gpu: Buffer,
    cpu_op: int,
    tolerance_ns: int,
    /,
) -> tuple[bytearray, bytearray, int, int] | None:
    """(launch int32, op int32, launches linked by External id, by containment); None where crafted ids defeat
    the hash."""

def step_of(
    ts_ns: Buffer, kind: Buffer, launch: Buffer, is_cpu: Buffer, step_start: Buffer, step_end: Buffer, /
) -> bytearray:
    """Each event's step, int32 (-1 outside every step)."""

def replay(order: Buffer, calls: Buffer, gpu: Buffer, step_start: int, end: int, /) -> tuple[bytearray, ...]:
    """One re-timing of a step's dependency graph: 10 int64 bytearrays (calls' start, end, own part, own
    predecessor, own ns; activities' start, end, part, predecessor, ns); ValueError for an index out of range."""

def walk(
    node: int,
    calls: Buffer,
    gpu: Buffer,
    end: int,
    latency: int,
    launch_part: int,
    other_part: int,
    n_parts: int,
    n_codes: int,
    limit: int,
    /,
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray, bytearray] | None:
    """(rows visited in order; parts in order of first addition, their ns; name codes, their ns; op codes, their
    ns): the critical path walked back from `node` over one replay's edges, `limit` ns of it at most; None where
    the Python walk must answer."""

def drop_empty_items(buffer: bytearray | memoryview, start: int, end: int, /) -> tuple[int, int] | None:
    """Removes the empty objects among buffer[start:end]'s comma-separated values in place: (new end, values
    removed); None where the text is not such a run of values."""
