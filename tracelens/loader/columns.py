"""Typed events → columnar `EventTable` and `TrackTable`; the only place event objects are touched."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import numpy as np

from tracelens import native
from tracelens.loader.coerce import is_complete, to_int, valid_strings, valid_text
from tracelens.loader.extras import ExtraColumns
from tracelens.loader.fields import GPU_TRACK_KINDS, event_fields, factorize
from tracelens.loader.record_meta import RECORD_KEY, profiler_free_of
from tracelens.loader.schema import INT_ARGS, RAW_ARGS, Event
from tracelens.model import stats
from tracelens.model.events import CATEGORY_KINDS, I8, I32, I64, Bool, EventTable, Kind
from tracelens.model.trace import Device, TraceMeta, TrackTable
from tracelens.native import extension as _native
from tracelens.units import NS_PER_US

_ON_GPU_TRACK = np.zeros(256, dtype=bool)  # by kind (int8 read as an index: negative ones wrap, all False)
_ON_GPU_TRACK[GPU_TRACK_KINDS] = True
MAX_OFFSET_US = 1e11  # about 28 hours: times this far from the trace's median time are not credible


def complete_events(events: Sequence[Event]) -> list[Event]:
    """The complete events (`coerce.is_complete`) among `events`."""
    return [e for e in events if is_complete(e.ph, e.ts)]


class ChunkTracks(msgspec.Struct):
    """The distinct (pid label, tid label) pairs of one chunk's events (`ChunkColumns.pid_labels` /
    `tid_labels` indices), with the row of each pair's first event and that event's GPU flag, device and stream
    (what its track takes when the pair's first event in the file is that one)."""

    pid: I64
    tid: I64
    first_row: I64
    is_gpu: Bool
    device: I64
    stream: I64

    def __len__(self) -> int:
        return int(self.pid.shape[0])


class ChunkColumns(msgspec.Struct):
    """Columns of one chunk of complete events, in the table's dtypes where the merge copies them as they are.
    `name_codes` index the chunk's own `name_values`, `track_codes` its own `tracks`; `cat_values`, `pid_labels`
    and `tid_labels` are every category and track label (GPU events: "gpu<device>" and "<stream>") its events
    gave."""

    kind: I8
    cat_values: list[str]
    name_codes: I32
    name_values: list[str]
    track_codes: I32
    tracks: ChunkTracks
    pid_labels: list[str]
    tid_labels: list[str]
    ts_us: np.ndarray
    dur_us: np.ndarray
    ints: dict[str, I64]
    raws: dict[str, tuple[I64, list[bytes]]]  # sparse: rows that have the field, and its raw JSON
    extras: ExtraColumns | None = None  # the chunk's memory and counter events (`loader.extras`), if any
    empty_objects: int = 0  # items of the event list that were empty objects, removed before decoding

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])


# The integer `args` (`schema.INT_ARGS`) that `columnize` combines: `External id` with its legacy spelling, device
# and stream kept on GPU rows only (else taken from the track); every other one fills the `EventTable` column of its
# name as read (-1 where absent).
COMBINED_INT_ARGS = ("external_id", "external_id_legacy", "device", "stream")
_PLAIN_INT_ARGS = tuple(name for name in INT_ARGS if name not in COMBINED_INT_ARGS)
_INT_FIELDS = (*_PLAIN_INT_ARGS, "external_id", "device", "stream", "grid_blocks", "block_threads")
# (column, `schema.RAW_ARGS` field): each raw argument fills the column of its name, but `input_type`'s is plural
_RAW_FIELDS = tuple(({"input_type": "input_types"}.get(name, name), name) for name in RAW_ARGS)


def build_columns(events: list[Event]) -> tuple[EventTable, TrackTable, float, set[str]]:
    """Columns for `events` (all `X`); returns the table, its tracks, the time origin (µs) and categories."""
    return merge_columns([columnize(events)])


def columnize(events: list[Any], complete_type: type | None = None) -> ChunkColumns:
    """Columns of one chunk of complete (`X`) events; with `complete_type`, of the complete events among
    decoded events of every phase (see `fields.event_fields`)."""
    fields = event_fields(events, _kinds_of, complete_type)
    cat_codes, cat_values = fields.cat
    kind = _kinds_of(cat_codes, cat_values)
    is_gpu = _ON_GPU_TRACK[kind]
    ints = fields.ints
    external_id = np.where(ints["external_id"] >= 0, ints["external_id"], ints["external_id_legacy"])
    device = np.where(is_gpu, ints["device"], -1)
    stream = np.where(is_gpu, ints["stream"], -1)
    pids, tids = fields.pid, fields.tid
    no_device = np.flatnonzero(is_gpu & (device < 0))
    device[no_device] = _id_numbers(pids[0][no_device], pids[1])
    no_stream = np.flatnonzero(is_gpu & (stream < 0))
    stream[no_stream] = _id_numbers(tids[0][no_stream], tids[1])
    pid_codes, pid_labels = _track_labels(*pids, is_gpu, device, "gpu")
    tid_codes, tid_labels = _track_labels(*tids, is_gpu, stream, "")
    track_codes, tracks = _chunk_tracks(pid_codes, tid_codes, len(tid_labels), is_gpu, device, stream)
    kernel = kind == Kind.KERNEL
    return ChunkColumns(
        kind=kind.astype(np.int8, copy=False),
        cat_values=cat_values,
        name_codes=fields.name[0].astype(np.int32),
        name_values=fields.name[1],
        track_codes=track_codes,
        tracks=tracks,
        pid_labels=pid_labels,
        tid_labels=tid_labels,
        ts_us=fields.ts_us,
        dur_us=fields.dur_us,
        ints={
            **{name: ints[name] for name in _PLAIN_INT_ARGS},
            "external_id": external_id,
            "device": device,
            "stream": stream,
            "grid_blocks": np.where(kernel, fields.dims["grid"], -1),
            "block_threads": np.where(kernel, fields.dims["block"], -1),
        },
        raws={column: fields.raws[attribute] for column, attribute in _RAW_FIELDS},
    )


def _kinds_of(cat_codes: np.ndarray, cat_values: list[str]) -> np.ndarray:
    return _kinds(cat_values)[cat_codes] if len(cat_codes) else np.zeros(0, np.int8)


def _chunk_tracks(
    pid_codes: I64, tid_codes: I64, n_tid_labels: int, is_gpu: Bool, device: I64, stream: I64
) -> tuple[I32, ChunkTracks]:
    """Each row's code among the chunk's distinct (pid label, tid label) pairs, and the pairs."""
    pair = pid_codes * max(n_tid_labels, 1) + tid_codes
    unique_pairs, codes = _dense_unique(pair)
    first = _first_index(codes, len(unique_pairs))
    tracks = ChunkTracks(
        pid=unique_pairs // max(n_tid_labels, 1),
        tid=unique_pairs % max(n_tid_labels, 1),
        first_row=first,
        is_gpu=is_gpu[first],
        device=device[first],
        stream=stream[first],
    )
    return codes.astype(np.int32), tracks


def merge_columns(chunks: list[ChunkColumns]) -> tuple[EventTable, TrackTable, float, set[str]]:
    """One table from chunks in file order: identical to columnizing all their events at once."""
    merged = merge_columns_full(chunks)
    return merged.table, merged.tracks, merged.origin_us, merged.categories


class MergedColumns(msgspec.Struct):
    """The table in canonical row order, and what was done to get there.

    Rows are sorted by (time, duration, kind, External id, name, track, correlation) and names and tracks are
    coded in sorted order, so any permutation of the same events gives the same table. `source_rows[i]` is
    the position of row i among the chunks' events (file order); events with incredible times are dropped.
    """

    table: EventTable
    tracks: TrackTable
    origin_us: float
    categories: set[str]
    source_rows: I64
    notes: list[str]


def merge_columns_full(chunks: list[ChunkColumns]) -> MergedColumns:
    """Merge chunks (in file order), drop events with incredible times, sort rows canonically. `chunks` is
    consumed (emptied as the chunks are copied, so that each chunk's memory is freed as soon as it is merged)."""
    invalid: list[str] = []  # texts with a lone surrogate, kept with U+FFFD
    codes = _merged_codes(chunks, invalid)
    columns, raws = _file_order_columns(chunks, codes)
    ts_us, dur_us = columns.pop("ts_us"), columns.pop("dur_us")
    keep, notes = _credible_times(ts_us, dur_us)
    if invalid:
        held = "names hold" if len(invalid) > 1 else "name holds"
        notes.append(
            f"{len(invalid):,} {held} invalid Unicode (a lone surrogate escape such as \\ud800); "
            "kept with U+FFFD in its place"
        )
    every_row = bool(keep.all())
    if not every_row:
        ts_us[~keep] = np.nan
    origin_us = float(np.floor(np.nanmin(ts_us))) if keep.any() else 0.0
    columns["ts_ns"] = _to_ns(ts_us, origin_us)
    columns["dur_ns"] = dur_ns = _to_ns(dur_us)
    del ts_us, dur_us
    np.maximum(dur_ns, 0, out=dur_ns)
    # among ops with equal times, the smaller External id (created first: the enclosing op) sorts first
    keys = tuple(columns[name] for name in ("correlation", "track", "name", "external_id", "kind", "dur_ns", "ts_ns"))
    if every_row:
        order = lexsort_by_last(keys)
    else:
        kept = np.flatnonzero(keep)
        order = kept[lexsort_by_last(tuple(key[kept] for key in keys))]
    del keys, dur_ns
    sorted_raws = _sorted_raws(raws, order, int(keep.size))
    table = EventTable(**permuted(columns, order), **sorted_raws, names=codes.names)
    return MergedColumns(table, codes.tracks, origin_us, codes.categories, order, notes)


class _MergedCodes(msgspec.Struct):
    """The chunks' names and tracks coded once for all: `names` (sorted) and `tracks`; per chunk, the global
    code of each of its name codes and track codes."""

    names: tuple[str, ...]
    name_codes: list[I32]
    tracks: TrackTable
    track_codes: list[I32]
    categories: set[str]


def _merged_codes(chunks: list[ChunkColumns], invalid: list[str]) -> _MergedCodes:
    """Names and track labels in sorted order (after `_clean_text`: a value that holds a lone surrogate is
    appended to `invalid`, as is a category), tracks sorted by (pid label, tid label); from the chunks' values
    only (a few per chunk), no per-event work."""
    name_codes, names = _value_ranks([c.name_values for c in chunks], invalid)
    pid_ranks, pid_labels = _value_ranks([c.pid_labels for c in chunks], invalid)
    tid_ranks, tid_labels = _value_ranks([c.tid_labels for c in chunks], invalid)
    cat_values = list(dict.fromkeys(value for c in chunks for value in c.cat_values))
    invalid += [str(c) for c in cat_values if valid_text(str(c)) != str(c)]
    n_tid = max(len(tid_labels), 1)
    pairs = [c.tracks for c in chunks]
    key = _concat([pid_ranks[k][p.pid].astype(np.int64) * n_tid + tid_ranks[k][p.tid] for k, p in enumerate(pairs)])
    offsets = np.cumsum([0] + [len(c) for c in chunks])
    first_row = _concat([p.first_row + offsets[k] for k, p in enumerate(pairs)])
    unique_keys, track_of_pair = _dense_unique(key)
    by_first = np.lexsort((first_row, track_of_pair))  # per track, its pair whose first event comes first
    is_first = np.ones(by_first.size, dtype=bool)
    is_first[1:] = track_of_pair[by_first[1:]] != track_of_pair[by_first[:-1]]
    first = by_first[is_first]
    is_gpu = _concat([p.is_gpu for p in pairs])[first].astype(bool)
    tracks = TrackTable(
        pid=tuple(pid_labels[int(k) // n_tid] for k in unique_keys),
        tid=tuple(tid_labels[int(k) % n_tid] for k in unique_keys),
        is_gpu=is_gpu,
        device=np.where(is_gpu, _concat([p.device for p in pairs])[first], -1).astype(np.int64),
        stream=np.where(is_gpu, _concat([p.stream for p in pairs])[first], -1).astype(np.int64),
    )
    pair_offsets = np.cumsum([0] + [len(p) for p in pairs])
    track_codes = [track_of_pair[pair_offsets[k] : pair_offsets[k + 1]].astype(np.int32) for k in range(len(pairs))]
    categories = {valid_text(str(c)) for c in cat_values}
    return _MergedCodes(tuple(names), name_codes, tracks, track_codes, categories)


def _value_ranks(parts: list[list[str]], invalid: list[str]) -> tuple[list[I32], list[str]]:
    """For each part's values, their codes among the distinct values of all parts, cleaned (trailing NULs
    stripped, `valid_text`) and sorted; and those sorted values. Each distinct value that holds a lone surrogate is
    appended to `invalid`."""
    first: dict[str, int] = {}
    ids = [np.array([first.setdefault(value, len(first)) for value in values], dtype=np.int64) for values in parts]
    texts = [str(value).rstrip("\x00") for value in first]  # numpy strings drop trailing NULs: so do names
    cleaned = [valid_text(text) for text in texts]
    invalid += [text for text, fixed in zip(texts, cleaned, strict=True) if text is not fixed]
    if not cleaned:
        return [np.zeros(0, dtype=np.int32) for _ in parts], []
    uniques, inverse = np.unique(np.array(cleaned, dtype=object), return_inverse=True)
    rank = inverse.ravel().astype(np.int32)
    return [rank[part] for part in ids], [str(value) for value in uniques]


_COPIED = ("kind", "ts_us", "dur_us", *_INT_FIELDS)  # columns the merge copies from the chunks as they are
_FILE_ORDER_DTYPES: dict[str, np.dtype[Any]] = {
    **{name: np.dtype(np.int64) for name in _INT_FIELDS},
    "kind": np.dtype(np.int8),
    "ts_us": np.dtype(np.float64),
    "dur_us": np.dtype(np.float64),
    "name": np.dtype(np.int32),
    "track": np.dtype(np.int32),
}
_COLUMN_ALIGN_BYTES = 64


def empty_columns(n: int, dtypes: dict[str, np.dtype[Any]]) -> dict[str, np.ndarray]:
    """Uninitialised columns of `n` rows, one per entry of `dtypes`, carved out of ONE allocation (each column
    starts at a multiple of 64 bytes). Why one: a fresh page costs a page fault on first write, and numpy asks the
    kernel for huge pages (2 MB pages, one fault instead of 512) only for allocations of at least 4 MB,
    which one column of a big trace may not be but all of them together are (the faults saved:
    docs/benchmarks.md). The columns are views of that one buffer, which lives as long as any of them does."""
    sizes = [-(-n * dtype.itemsize // _COLUMN_ALIGN_BYTES) * _COLUMN_ALIGN_BYTES for dtype in dtypes.values()]
    buffer = np.empty(sum(sizes) + _COLUMN_ALIGN_BYTES, dtype=np.uint8)
    start = -buffer.ctypes.data % _COLUMN_ALIGN_BYTES
    columns = {}
    for (name, dtype), size in zip(dtypes.items(), sizes, strict=True):
        columns[name] = buffer[start : start + n * dtype.itemsize].view(dtype)
        start += size
    return columns


def _file_order_columns(
    chunks: list[ChunkColumns], codes: _MergedCodes
) -> tuple[dict[str, np.ndarray], dict[str, tuple[list[I64], list[bytes]]]]:
    """Every column in file order (one array each, filled chunk by chunk: codes translated to the global ones),
    and the raw-JSON columns' rows (file-order positions) and values. Empties `chunks`, freeing each chunk once
    copied."""
    n = sum(len(c) for c in chunks)
    columns = empty_columns(n, _FILE_ORDER_DTYPES)
    raws: dict[str, tuple[list[I64], list[bytes]]] = {name: ([], []) for name, _ in _RAW_FIELDS}
    offset = 0
    chunks.reverse()
    for name_codes, track_codes in zip(codes.name_codes, codes.track_codes, strict=True):
        chunk = chunks.pop()
        end = offset + len(chunk)
        for name in _COPIED:
            source = chunk.ints[name] if name in chunk.ints else getattr(chunk, name)
            columns[name][offset:end] = source
        np.take(name_codes, chunk.name_codes, out=columns["name"][offset:end])
        np.take(track_codes, chunk.track_codes, out=columns["track"][offset:end])
        for name, (rows, values) in chunk.raws.items():
            if rows.size:
                raws[name][0].append(rows + offset)
                raws[name][1].extend(values)
        offset = end
        del chunk
    return columns, raws


def permuted(columns: dict[str, np.ndarray], order: I64) -> dict[str, np.ndarray]:
    """`column[order]` for every column (of as many rows as each other, `order` a selection of them without
    repeats), computed in place by the C extension (`_native.permute`: no second copy of any
    column; rows `order` leaves out end up past its length and are cut off), else by numpy."""
    n = next(iter(columns.values())).shape[0] if columns else 0
    if not native.ENABLED or not columns:
        return {name: column[order] for name, column in columns.items()}
    full = order
    if order.size != n:  # the rows left out go last
        left_out = np.ones(n, dtype=bool)
        left_out[order] = False
        full = np.concatenate([order, np.flatnonzero(left_out)])
    _native.permute(full, tuple(columns.values()))
    return {name: column[: order.size] for name, column in columns.items()}


def _sorted_raws(raws: dict[str, tuple[list[I64], list[bytes]]], order: I64, n: int) -> dict[str, np.ndarray]:
    """The raw-JSON columns (None where absent) in the final row order, from their file-order rows and values;
    the fields without any value share one read-only column of None."""
    position = None
    out = {}
    nothing = None  # one read-only all-None column for every field without values (most traces)
    for name, (rows, values) in raws.items():
        if not values:
            if nothing is None:
                nothing = np.full(order.size, None, dtype=object)
                nothing.flags.writeable = False
            out[name] = nothing
            continue
        if position is None:
            position = np.full(n, -1, dtype=np.int64)
            position[order] = np.arange(order.size)
        at = position[np.concatenate(rows)]
        holder = np.empty(len(values), dtype=object)
        holder[:] = values
        column = np.full(order.size, None, dtype=object)
        column[at[at >= 0]] = holder[at >= 0]
        out[name] = column
    return out


def lexsort_by_last(keys: tuple[np.ndarray, ...]) -> I64:
    """`np.lexsort(keys)` (last key primary, stable), faster when the primary key has few ties: rows are
    ordered by the primary key alone (a stable sort, quick on nearly sorted times), and only the rows that tie
    on it are lexsorted by every key."""
    primary = keys[-1]
    order = np.argsort(primary, kind="stable").astype(np.int64, copy=False)
    in_order = primary[order]
    ties = in_order[1:] == in_order[:-1]
    del in_order
    if not ties.any():
        return order
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= ties
    tied[:-1] |= ties
    positions = np.flatnonzero(tied)
    rows = order[positions]
    order[positions] = rows[np.lexsort(tuple(key[rows] for key in keys))]
    return order


def _credible_times(ts_us: np.ndarray, dur_us: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Rows whose `ts` is finite and within MAX_OFFSET_US of the median and whose `dur` is not negative (an
    impossible duration: left out, with a note); a `dur` that is not finite or longer than MAX_OFFSET_US is set
    to 0 in place. Returns the mask and notes for the warnings. The median is needed only when
    the finite times span more than MAX_OFFSET_US (it lies between the least and the greatest of them)."""
    finite = np.isfinite(ts_us)
    every_finite = bool(finite.all())
    times = ts_us if every_finite else ts_us[finite]
    if times.size and float(times.max()) - float(times.min()) <= MAX_OFFSET_US:
        keep = finite
    else:
        median = stats.median(times) if times.size else 0.0
        with np.errstate(invalid="ignore"):
            keep = finite & (np.abs(ts_us - median) <= MAX_OFFSET_US)
    del times
    bad_dur = ~((dur_us >= -MAX_OFFSET_US) & (dur_us <= MAX_OFFSET_US))  # NaN compares false
    notes = []
    every_row = bool(keep.all())
    if not every_row:
        notes.append(f"{int((~keep).sum()):,} events with a timestamp days away from the rest were ignored")
    negative = keep & (dur_us < 0) & ~bad_dur  # an impossible duration: counted as 0 it would falsify busy time
    if negative.any():
        notes.append(f"{int(negative.sum()):,} events with a negative duration were left out (no figure counts them)")
        keep = keep & ~negative
        every_row = False
    bad_kept = bad_dur if every_row else bad_dur & keep
    if bad_kept.any():
        notes.append(f"{int(bad_kept.sum()):,} events with a duration that is not a number or over a day count as 0 µs")
    if bad_dur.any():
        dur_us[bad_dur] = 0.0
    return keep, notes


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _kinds(cat_values: list[str]) -> np.ndarray:
    return np.array([CATEGORY_KINDS.get(str(c).lower(), Kind.OTHER) for c in cat_values] + [0], np.int8)


_CONVERT_ROWS = 1 << 14  # converted at a time: small temporaries, reused


def _to_ns(values_us: np.ndarray, origin_us: float = 0.0) -> I64:
    """rint((values - origin) * NS_PER_US) as int64, NaN and infinities as 0, written over `values_us` (ours,
    float64): the result is a view of its buffer, converted a block at a time."""
    out = values_us.view(np.int64)
    for start in range(0, values_us.size, _CONVERT_ROWS):
        block = values_us[start : start + _CONVERT_ROWS]
        if origin_us:
            np.subtract(block, origin_us, out=block)
        np.nan_to_num(block, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        np.multiply(block, NS_PER_US, out=block)
        out[start : start + _CONVERT_ROWS] = np.rint(block, out=block).astype(np.int64)
    return out


def _id_numbers(codes: I64, uniques: list[Any]) -> I64:
    """The pid/tid of each event (codes into `uniques`, -1 = None) as an int; -1 for strings, None and ints
    outside int64."""
    table = [u if type(u) is int and -(2**63) <= u < 2**63 else -1 for u in uniques]
    return np.array([*table, -1], dtype=np.int64)[codes]  # code -1 reads the final -1


def _track_labels(
    codes: I64, uniques: list[Any], is_gpu: Bool, gpu_numbers: I64, prefix: str
) -> tuple[np.ndarray, list[str]]:
    """Per-event track label codes: str(pid/tid) for CPU events (pid/tid `codes` into `uniques`, -1 = None),
    f"{prefix}{number}" for GPU events."""
    labels = [_label(v) for v in uniques] + [""]
    codes = np.where(codes < 0, len(uniques), codes).astype(np.int64)
    gpu_rows = np.flatnonzero(is_gpu)
    if gpu_rows.size:
        numbers, inverse = _dense_unique(gpu_numbers[gpu_rows])
        codes[gpu_rows] = len(labels) + inverse
        labels += [f"{prefix}{int(number)}" for number in numbers]
    label_codes, label_values = factorize(labels)
    return label_codes[codes].astype(np.int64), [str(v) for v in label_values]


def _dense_unique(values: I64) -> tuple[I64, I64]:
    """`np.unique(values, return_inverse=True)` for ints: by counting when they are small and non-negative (track
    pairs, devices, streams), by sorting otherwise."""
    if values.size == 0 or int(values.min()) < 0 or int(values.max()) > 4 * values.size + 65536:
        unique, inverse = np.unique(values, return_inverse=True)
        return unique, inverse.ravel()
    present = np.bincount(values) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[values]


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
        schema_version=to_int(metadata.get("schemaVersion")),
        devices=tuple(_devices(metadata.get("deviceProperties"))),
        cuda_runtime_version=_cuda_version(metadata.get("cuda_runtime_version")),
        cuda_driver_version=_cuda_version(metadata.get("cuda_driver_version")),
        hip_runtime_version=_plain_str(metadata.get("hip_runtime_version")),
        base_time_ns=to_int(metadata.get("baseTimeNanoseconds")),
        rank=to_int(dist.get("rank")),
        world_size=to_int(dist.get("world_size")),
        format="chrome-array" if bare_array else ("kineto-legacy" if legacy else "kineto"),
        run=run if isinstance(run, dict) else {},
        profiler_free=profiler_free_of(metadata),
        record_shapes=_option(metadata, "record_shapes", "shapes"),
        with_stack=_option(metadata, "with_stack", "stack"),
        profile_memory=_option(metadata, "profile_memory", "memory"),
        raw=metadata if not _has_invalid_text(metadata) else valid_strings(metadata),  # type: ignore[arg-type]
    )


def _option(metadata: dict[str, Any], key: str, record_key: str) -> bool | None:
    """A profiler option: the top-level key Kineto writes (`record_shapes: 1`), else `tracelens_record.options`."""
    value = metadata.get(key)
    if value is None:
        record = metadata.get(RECORD_KEY)
        options = record.get("options") if isinstance(record, dict) else None
        value = options.get(record_key) if isinstance(options, dict) else None
    if isinstance(value, bool):
        return value
    number = to_int(value)
    return None if number is None else number != 0


def _has_invalid_text(metadata: dict[str, Any]) -> bool:
    """Whether a string in the metadata holds a lone surrogate (rare: checked on its JSON form, whole)."""
    try:
        msgspec.json.encode(metadata)
    except UnicodeEncodeError:
        return True
    except (TypeError, msgspec.EncodeError):
        return False
    return False


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
                index=_index if (_index := to_int(item.get("id"))) is not None else len(devices),
                name=valid_text(str(item.get("name", ""))),
                num_sms=to_int(item.get("numSms")),
                total_memory_bytes=to_int(item.get("totalGlobalMem")),
                compute_capability=f"{major}.{minor}" if major is not None and minor is not None else None,
            )
        )
    return devices


def _cuda_version(value: object) -> str | None:
    number = to_int(value)
    if number is None:
        return _plain_str(value)
    if number >= 1000:  # CUDA encodes 12080 as 12.8
        return f"{number // 1000}.{(number % 1000) // 10}"
    return str(number)


def _plain_str(value: object) -> str | None:
    return None if value is None else valid_text(str(value))
