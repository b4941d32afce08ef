"""Typed events → columnar `EventTable` and `TrackTable`; the only place event objects are touched."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from tracelens.load.schema import Args, Event
from tracelens.model.events import CATEGORY_KINDS, GPU_ACTIVITY_KINDS, I64, EventTable, Kind
from tracelens.model.trace import Device, TraceMeta, TrackTable

_EMPTY_ARGS = Args()


MAX_OFFSET_US = 1e11  # ~28 hours: times this far from the trace's median time are not credible


def complete_events(events: Sequence[Event]) -> list[Event]:
    """The `ph: "X"` events that have a finite timestamp (instants, flows and metadata are not modelled)."""
    return [e for e in events if e.ph == "X" and e.ts is not None and (type(e.ts) is int or math.isfinite(e.ts))]


def drop_incredible_times(events: list[Event]) -> tuple[list[Event], I64, list[str]]:
    """Drop events whose `ts` lies > MAX_OFFSET_US from the median `ts`; a `dur` that is not finite or longer
    than that counts as 0. Returns the kept events, their positions in `events` and notes for the warnings."""
    n = len(events)
    ts = _floats(map(attrgetter("ts"), events), n)
    finite = np.isfinite(ts)
    median = float(np.median(ts[finite])) if finite.any() else 0.0
    keep = finite & (np.abs(ts - median) <= MAX_OFFSET_US)
    kept = np.flatnonzero(keep).astype(np.int64)
    notes = []
    if not keep.all():
        events = [e for e, k in zip(events, keep.tolist(), strict=True) if k]
        notes.append(f"{n - len(events):,} events with a timestamp days away from the rest were ignored")
    dur = _floats((0.0 if e.dur is None else e.dur for e in events), len(events))
    bad = np.flatnonzero(~(np.abs(dur) <= MAX_OFFSET_US))
    for index in bad.tolist():
        events[index].dur = None
    if bad.size:
        notes.append(f"{bad.size:,} events with a duration that is not a number or over a day count as 0 µs")
    return events, kept, notes


def _floats(values: Iterable[Any], n: int) -> np.ndarray:
    """float64 array of numbers; a Python int too large for a float becomes NaN."""
    items = list(values)
    try:
        return np.fromiter(items, dtype=np.float64, count=n)
    except OverflowError:
        return np.array([v if abs(v) < 1e300 else math.nan for v in items], dtype=np.float64)


def build_columns(events: list[Event]) -> tuple[EventTable, TrackTable, float, set[str], I64]:
    """Columns for `events` (all `X`); returns the table, its tracks, the time origin (µs), categories and
    each row's position in `events`.

    Rows are in a canonical order (time, duration, kind, External id, name, track, correlation); names and tracks are
    coded in sorted order, so any permutation of the same events gives the same table.
    """
    n = len(events)
    cat_codes, cat_values = pd.factorize(np.fromiter(map(attrgetter("cat"), events), dtype=object, count=n))
    categories = {str(c) for c in cat_values}
    kind_of_cat = np.array([CATEGORY_KINDS.get(str(c).lower(), Kind.OTHER) for c in cat_values] + [0], np.int8)
    kind = kind_of_cat[cat_codes] if n else np.zeros(0, np.int8)

    names = np.fromiter(map(attrgetter("name"), events), dtype=object, count=n)
    name_codes, name_values = pd.factorize(names, sort=True)
    if any(str(v).endswith("\x00") for v in name_values):  # numpy strings drop trailing NULs: drop them here
        stripped = np.array([str(v).rstrip("\x00") for v in name_values], dtype=object)
        name_codes, name_values = pd.factorize(stripped[name_codes], sort=True)
    ts_us = np.fromiter(map(attrgetter("ts"), events), dtype=np.float64, count=n)
    dur_us = np.array([e.dur if e.dur is not None else 0.0 for e in events], dtype=np.float64)
    origin_us = float(np.floor(np.nanmin(ts_us))) if n else 0.0
    ts_ns = _to_ns(ts_us - origin_us)
    dur_ns = np.maximum(_to_ns(dur_us), 0)

    args = [e.args or _EMPTY_ARGS for e in events]
    external_id = _int_column(args, "external_id")
    legacy = _int_column(args, "external_id_legacy")
    external_id = np.where(external_id >= 0, external_id, legacy)

    is_gpu_event = np.isin(kind, np.array((*GPU_ACTIVITY_KINDS, Kind.GPU_ANNOTATION, Kind.CUDA_SYNC), np.int8))
    pids = np.fromiter(map(attrgetter("pid"), events), dtype=object, count=n)
    tids = np.fromiter(map(attrgetter("tid"), events), dtype=object, count=n)
    device = _int_column(args, "device")
    stream = _int_column(args, "stream")
    device = np.where(is_gpu_event & (device < 0), _ints_or(pids, -1), device)
    stream = np.where(is_gpu_event & (stream < 0), _ints_or(tids, -1), stream)
    track, tracks = _tracks(pids, tids, is_gpu_event, device, stream)

    table = EventTable(
        kind=kind.astype(np.int8),
        name=name_codes.astype(np.int32),
        track=track,
        ts_ns=ts_ns,
        dur_ns=dur_ns,
        correlation=_int_column(args, "correlation"),
        external_id=external_id,
        sequence_number=_int_column(args, "sequence_number"),
        device=np.where(is_gpu_event, device, -1),
        stream=np.where(is_gpu_event, stream, -1),
        bytes=_int_column(args, "bytes"),
        grid_blocks=_dims_product(args, "grid", kind),
        block_threads=_dims_product(args, "block", kind),
        input_dims=_raw_column(args, "input_dims"),
        input_types=_raw_column(args, "input_type"),
        concrete_inputs=_raw_column(args, "concrete_inputs"),
        names=tuple(str(v) for v in name_values),
    )
    # among ops with equal times, the smaller External id (created first: the enclosing op) sorts first
    order = np.lexsort(
        (table.correlation, table.track, table.name, table.external_id, table.kind, table.dur_ns, table.ts_ns)
    )
    return _reordered(table, order), tracks, origin_us, categories, order.astype(np.int64)


def _reordered(table: EventTable, order: np.ndarray) -> EventTable:
    columns = {f.name: getattr(table, f.name) for f in fields(table) if f.name != "names"}
    return EventTable(**{name: column[order] for name, column in columns.items()}, names=table.names)


def _to_ns(values_us: np.ndarray) -> I64:
    clean = np.nan_to_num(values_us, nan=0.0, posinf=0.0, neginf=0.0)
    return np.rint(clean * 1000.0).astype(np.int64)


def _int_column(args: list[Args], attribute: str) -> I64:
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
    number = _int_or_none(value)
    return number if number is not None and -(2**63) <= number < 2**63 else -1


def _ints_or(values: np.ndarray, default: int) -> I64:
    in_range = (v if type(v) is int and -(2**63) <= v < 2**63 else default for v in values)
    return np.fromiter(in_range, dtype=np.int64, count=len(values))


def _dims_product(args: list[Args], attribute: str, kind: np.ndarray) -> I64:
    out = np.full(len(args), -1, dtype=np.int64)
    for index in np.flatnonzero(kind == Kind.KERNEL):
        dims = getattr(args[index], attribute)
        if isinstance(dims, list) and dims:
            out[index] = math.prod(dims)
    return out


def _raw_column(args: list[Args], attribute: str) -> np.ndarray:
    out = np.full(len(args), None, dtype=object)
    for index, raw in enumerate(map(attrgetter(attribute), args)):
        if len(raw):
            out[index] = bytes(raw)  # copy out, so the input buffer can be freed
    return out


def _tracks(
    pids: np.ndarray, tids: np.ndarray, is_gpu: np.ndarray, device: I64, stream: I64
) -> tuple[np.ndarray, TrackTable]:
    """Factorize (pid, tid); GPU events get (device, stream) tracks whatever their pid/tid say."""
    pid_labels = np.array([_label(p) for p in pids], dtype=object) if len(pids) else pids
    tid_labels = np.array([_label(t) for t in tids], dtype=object) if len(tids) else tids
    pid_labels = np.where(is_gpu, np.char.mod("gpu%d", device).astype(object), pid_labels)
    tid_labels = np.where(is_gpu, np.char.mod("%d", stream).astype(object), tid_labels)
    pid_codes, pid_values = pd.factorize(pid_labels, sort=True)
    tid_codes, tid_values = pd.factorize(tid_labels, sort=True)
    pair = pid_codes.astype(np.int64) * max(len(tid_values), 1) + tid_codes
    track, unique_pairs = pd.factorize(pair, sort=True)
    first = _first_index(track, len(unique_pairs))
    tracks = TrackTable(
        pid=tuple(str(pid_values[pid_codes[i]]) for i in first),
        tid=tuple(str(tid_values[tid_codes[i]]) for i in first),
        is_gpu=is_gpu[first].astype(bool),
        device=np.where(is_gpu[first], device[first], -1).astype(np.int64),
        stream=np.where(is_gpu[first], stream[first], -1).astype(np.int64),
    )
    return track.astype(np.int32), tracks


def _label(value: object) -> str:
    return "" if value is None else str(value)


def _first_index(codes: np.ndarray, n_unique: int) -> np.ndarray:
    first = np.full(n_unique, 0, dtype=np.int64)
    order = np.arange(len(codes))[::-1]
    first[codes[::-1]] = order
    return first


# ---------------------------------------------------------------- metadata


def build_meta(metadata: dict[str, Any], categories: Iterable[str], bare_array: bool) -> TraceMeta:
    """Facts from the top-level keys; tolerant of any value type."""
    legacy = any(c in categories for c in ("Operator", "Runtime", "Kernel"))
    dist = metadata.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    run = metadata.get("tracelens_run")
    return TraceMeta(
        schema_version=_int_or_none(metadata.get("schemaVersion")),
        devices=tuple(_devices(metadata.get("deviceProperties"))),
        cuda_runtime_version=_cuda_version(metadata.get("cuda_runtime_version")),
        cuda_driver_version=_cuda_version(metadata.get("cuda_driver_version")),
        hip_runtime_version=_plain_str(metadata.get("hip_runtime_version")),
        base_time_ns=_int_or_none(metadata.get("baseTimeNanoseconds")),
        rank=_int_or_none(dist.get("rank")),
        world_size=_int_or_none(dist.get("world_size")),
        format="chrome-array" if bare_array else ("kineto-legacy" if legacy else "kineto"),
        run=run if isinstance(run, dict) else {},
        raw=metadata,
    )


def _devices(value: object) -> list[Device]:
    if not isinstance(value, list):
        return []
    devices: list[Device] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        major, minor = item.get("computeMajor"), item.get("computeMinor")
        devices.append(
            Device(
                index=_index if (_index := _int_or_none(item.get("id"))) is not None else len(devices),
                name=str(item.get("name", "")),
                num_sms=_int_or_none(item.get("numSms")),
                total_memory_bytes=_int_or_none(item.get("totalGlobalMem")),
                compute_capability=f"{major}.{minor}" if major is not None and minor is not None else None,
            )
        )
    return devices


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _cuda_version(value: object) -> str | None:
    number = _int_or_none(value)
    if number is None:
        return _plain_str(value)
    if number >= 1000:  # CUDA encodes 12080 as 12.8
        return f"{number // 1000}.{(number % 1000) // 10}"
    return str(number)


def _plain_str(value: object) -> str | None:
    return None if value is None else str(value)
