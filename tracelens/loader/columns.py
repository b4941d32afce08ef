"""Typed events → columnar `EventTable` and `TrackTable`; the only place event objects are touched."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from tracelens.loader.coerce import is_complete, to_int, valid_strings, valid_text
from tracelens.loader.fields import GPU_TRACK_KINDS, event_fields, factorize
from tracelens.loader.schema import Event
from tracelens.model import stats
from tracelens.model.events import CATEGORY_KINDS, I64, Bool, EventTable, Kind
from tracelens.model.trace import Device, TraceMeta, TrackTable
from tracelens.units import NS_PER_US

MAX_OFFSET_US = 1e11  # ~28 hours: times this far from the trace's median time are not credible


def complete_events(events: Sequence[Event]) -> list[Event]:
    """The complete events (`coerce.is_complete`) among `events`."""
    return [e for e in events if is_complete(e.ph, e.ts)]


@dataclass
class ChunkColumns:
    """Columns of one chunk of complete events; `*_codes` index the chunk's own `*_values`."""

    cat_codes: np.ndarray
    cat_values: list[str]
    name_codes: np.ndarray
    name_values: list[str]
    pid_codes: np.ndarray  # track label codes (GPU events: "gpu<device>")
    pid_values: list[str]
    tid_codes: np.ndarray  # track label codes (GPU events: "<stream>")
    tid_values: list[str]
    is_gpu: Bool
    ts_us: np.ndarray
    dur_us: np.ndarray
    ints: dict[str, I64]
    raws: dict[str, tuple[I64, list[bytes]]]  # sparse: rows that have the field, and its raw JSON

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])


_INT_FIELDS = (
    "correlation",
    "external_id",
    "sequence_number",
    "device",
    "stream",
    "bytes",
    "grid_blocks",
    "block_threads",
)
_RAW_FIELDS = (("input_dims", "input_dims"), ("input_types", "input_type"), ("concrete_inputs", "concrete_inputs"))


def build_columns(events: list[Event]) -> tuple[EventTable, TrackTable, float, set[str]]:
    """Columns for `events` (all `X`); returns the table, its tracks, the time origin (µs) and categories."""
    return merge_columns([columnize(events)])


def columnize(events: list[Any], complete_type: type | None = None) -> ChunkColumns:
    """Columns of one chunk of complete (`X`) events; with `complete_type`, of the complete events among
    decoded events of every phase (see `fields.event_fields`)."""
    fields = event_fields(events, _kinds_of, complete_type)
    cat_codes, cat_values = fields.cat
    kind = _kinds_of(cat_codes, cat_values)
    is_gpu = np.isin(kind, GPU_TRACK_KINDS)
    ints = fields.ints
    external_id = np.where(ints["external_id"] >= 0, ints["external_id"], ints["external_id_legacy"])
    device = np.where(is_gpu, ints["device"], -1)
    stream = np.where(is_gpu, ints["stream"], -1)
    pids, tids = fields.pid, fields.tid
    no_device = np.flatnonzero(is_gpu & (device < 0))
    device[no_device] = _id_numbers(pids[0][no_device], pids[1])
    no_stream = np.flatnonzero(is_gpu & (stream < 0))
    stream[no_stream] = _id_numbers(tids[0][no_stream], tids[1])
    pid_codes, pid_values = _track_labels(*pids, is_gpu, device, "gpu")
    tid_codes, tid_values = _track_labels(*tids, is_gpu, stream, "")
    kernel = kind == Kind.KERNEL
    return ChunkColumns(
        cat_codes=cat_codes,
        cat_values=cat_values,
        name_codes=fields.name[0],
        name_values=fields.name[1],
        pid_codes=pid_codes,
        pid_values=pid_values,
        tid_codes=tid_codes,
        tid_values=tid_values,
        is_gpu=is_gpu,
        ts_us=fields.ts_us,
        dur_us=fields.dur_us,
        ints={
            "correlation": ints["correlation"],
            "external_id": external_id,
            "sequence_number": ints["sequence_number"],
            "device": device,
            "stream": stream,
            "bytes": ints["bytes"],
            "grid_blocks": np.where(kernel, fields.dims["grid"], -1),
            "block_threads": np.where(kernel, fields.dims["block"], -1),
        },
        raws={column: fields.raws[attribute] for column, attribute in _RAW_FIELDS},
    )


def _kinds_of(cat_codes: np.ndarray, cat_values: list[str]) -> np.ndarray:
    return _kinds(cat_values)[cat_codes] if len(cat_codes) else np.zeros(0, np.int8)


def merge_columns(chunks: list[ChunkColumns]) -> tuple[EventTable, TrackTable, float, set[str]]:
    """One table from chunks in file order: identical to columnizing all their events at once."""
    merged = merge_columns_full(chunks)
    return merged.table, merged.tracks, merged.origin_us, merged.categories


@dataclass
class MergedColumns:
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
    """Merge chunks (in file order), drop events with incredible times, sort rows canonically."""
    n = sum(len(c) for c in chunks)
    cat_codes, cat_values = _merge_codes([(c.cat_codes, c.cat_values) for c in chunks])
    kind = _kinds(cat_values)[cat_codes] if n else np.zeros(0, np.int8)
    invalid: list[str] = []  # texts with a lone surrogate, kept with U+FFFD
    name_codes, name_values = _sorted_codes(*_merge_codes([(c.name_codes, c.name_values) for c in chunks]), invalid)
    pid_codes, pid_values = _sorted_codes(*_merge_codes([(c.pid_codes, c.pid_values) for c in chunks]), invalid)
    tid_codes, tid_values = _sorted_codes(*_merge_codes([(c.tid_codes, c.tid_values) for c in chunks]), invalid)
    ts_us = _concat([c.ts_us for c in chunks], np.float64)
    dur_us = _concat([c.dur_us for c in chunks], np.float64)
    keep, notes = _credible_times(ts_us, dur_us)
    categories = {valid_text(str(c)) for c in cat_values}
    invalid += [str(c) for c in cat_values if valid_text(str(c)) != str(c)]
    if invalid:
        held = "names hold" if len(invalid) > 1 else "name holds"
        notes.append(
            f"{len(invalid):,} {held} invalid Unicode (a lone surrogate escape such as \\ud800); "
            "kept with U+FFFD in its place"
        )
    ts_us[~keep] = np.nan
    origin_us = float(np.floor(np.nanmin(ts_us))) if keep.any() else 0.0
    ts_ns = _to_ns(ts_us, origin_us)
    dur_ns = _to_ns(dur_us)
    np.maximum(dur_ns, 0, out=dur_ns)
    ints = {name: _concat([c.ints[name] for c in chunks], np.int64) for name in _INT_FIELDS}
    is_gpu = _concat([c.is_gpu for c in chunks], np.bool_)
    track, tracks = _tracks(pid_codes, pid_values, tid_codes, tid_values, is_gpu, ints["device"], ints["stream"])
    columns: dict[str, np.ndarray] = {
        "kind": kind.astype(np.int8),
        "name": name_codes.astype(np.int32),
        "track": track,
        "ts_ns": ts_ns,
        "dur_ns": dur_ns,
        **ints,
    }
    # among ops with equal times, the smaller External id (created first: the enclosing op) sorts first
    keys = tuple(columns[name] for name in ("correlation", "track", "name", "external_id", "kind", "dur_ns", "ts_ns"))
    if keep.all():
        order = lexsort_by_last(keys)
    else:
        kept = np.flatnonzero(keep)
        order = kept[lexsort_by_last(tuple(key[kept] for key in keys))]
    del keys
    raws = _sorted_raws(chunks, order, n)
    table = EventTable(**_permuted(columns, order), **raws, names=tuple(str(v) for v in name_values))
    return MergedColumns(table, tracks, origin_us, categories, order.astype(np.int64), notes)


def _permuted(columns: dict[str, np.ndarray], order: I64) -> dict[str, np.ndarray]:
    """`column[order]` for every column. The columns are given up: when `order` keeps every row, a column's
    buffer, once permuted, receives the next column of its dtype (fewer fresh pages: page faults were half of
    merging's time). `order` holds valid row numbers, so `np.take`'s "clip" mode changes nothing but lets it
    write straight into the buffer."""
    out: dict[str, np.ndarray] = {}
    spare: dict[np.dtype, np.ndarray] = {}
    for name, column in columns.items():
        buffer = spare.pop(column.dtype, None)
        out[name] = np.take(column, order, out=buffer, mode="clip") if buffer is not None else column[order]
        if column.shape == order.shape and column.flags.owndata:
            spare[column.dtype] = column
    return out


def _sorted_raws(chunks: list[ChunkColumns], order: I64, n: int) -> dict[str, np.ndarray]:
    """The raw-JSON columns (None where absent) in the final row order, straight from the chunks' sparse rows."""
    position = np.full(n, -1, dtype=np.int64)
    position[order] = np.arange(order.size)
    out = {}
    for name, _ in _RAW_FIELDS:
        column = np.full(order.size, None, dtype=object)
        offset = 0
        for chunk in chunks:
            rows, values = chunk.raws[name]
            if rows.size:
                at = position[rows + offset]
                holder = np.empty(len(values), dtype=object)
                holder[:] = values
                column[at[at >= 0]] = holder[at >= 0]
            offset += len(chunk)
        out[name] = column
    return out


def lexsort_by_last(keys: tuple[np.ndarray, ...]) -> I64:
    """`np.lexsort(keys)` (last key primary, stable), faster when the primary key has few ties: rows are
    ordered by the primary key alone (a stable sort, quick on nearly sorted times), and only the rows that tie
    on it are lexsorted by every key."""
    primary = keys[-1]
    order = np.argsort(primary, kind="stable")
    ties = primary[order[1:]] == primary[order[:-1]]
    if not ties.any():
        return order.astype(np.int64)
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= ties
    tied[:-1] |= ties
    positions = np.flatnonzero(tied)
    rows = order[positions]
    order[positions] = rows[np.lexsort(tuple(key[rows] for key in keys))]
    return order.astype(np.int64)


def _sorted_codes(codes: np.ndarray, values: list[str], invalid: list[str]) -> tuple[np.ndarray, list[str]]:
    """Recode so that values are sorted (and trailing NULs, which numpy strings drop, are stripped; lone
    surrogates replaced, the values that had them appended to `invalid`)."""
    if not values:
        return codes, values
    texts = [str(v).rstrip("\x00") for v in values]
    valid = [valid_text(text) for text in texts]
    invalid += [text for text, fixed in zip(texts, valid, strict=True) if text is not fixed]
    cleaned = np.array(valid, dtype=object)
    uniques, inverse = np.unique(cleaned, return_inverse=True)
    return inverse.ravel()[codes].astype(np.int64), [str(v) for v in uniques]


def _credible_times(ts_us: np.ndarray, dur_us: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Rows whose `ts` is finite and within MAX_OFFSET_US of the median; a `dur` that is not finite or longer
    than that is set to 0 in place. Returns the mask and notes for the warnings."""
    finite = np.isfinite(ts_us)
    median = stats.median(ts_us[finite]) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        keep = finite & (np.abs(ts_us - median) <= MAX_OFFSET_US)
        bad_dur = ~(np.abs(dur_us) <= MAX_OFFSET_US)
    notes = []
    if not keep.all():
        notes.append(f"{int((~keep).sum()):,} events with a timestamp days away from the rest were ignored")
    if bad_dur[keep].any():
        notes.append(
            f"{int(bad_dur[keep].sum()):,} events with a duration that is not a number or over a day count as 0 µs"
        )
    dur_us[bad_dur] = 0.0
    return keep, notes


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _merge_codes(parts: list[tuple[np.ndarray, list[str]]]) -> tuple[np.ndarray, list[str]]:
    """Codes into one list of values, in order of first appearance across the parts."""
    if len(parts) == 1:
        return parts[0]
    all_values = np.array([v for _, values in parts for v in values], dtype=object)
    if not all_values.size:
        return np.zeros(sum(len(c) for c, _ in parts), np.int64), []
    global_codes, uniques = factorize(all_values)
    offsets = np.cumsum([0] + [len(values) for _, values in parts])
    codes = np.concatenate([global_codes[offset + c] for (c, _), offset in zip(parts, offsets, strict=False)])
    return codes.astype(np.int64), list(uniques)


def _kinds(cat_values: list[str]) -> np.ndarray:
    return np.array([CATEGORY_KINDS.get(str(c).lower(), Kind.OTHER) for c in cat_values] + [0], np.int8)


def _to_ns(values_us: np.ndarray, origin_us: float = 0.0) -> I64:
    """rint((values - origin) * NS_PER_US) as int64, NaN and infinities as 0; `values_us` (ours) is overwritten."""
    if origin_us:
        np.subtract(values_us, origin_us, out=values_us)
    np.nan_to_num(values_us, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    np.multiply(values_us, NS_PER_US, out=values_us)
    return np.rint(values_us, out=values_us).astype(np.int64)


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
        numbers, inverse = np.unique(gpu_numbers[gpu_rows], return_inverse=True)
        codes[gpu_rows] = len(labels) + inverse
        labels += [f"{prefix}{int(number)}" for number in numbers]
    label_codes, label_values = factorize(labels)
    return label_codes[codes].astype(np.int64), [str(v) for v in label_values]


def _tracks(
    pid_codes: np.ndarray,
    pid_values: list[str],
    tid_codes: np.ndarray,
    tid_values: list[str],
    is_gpu: Bool,
    device: I64,
    stream: I64,
) -> tuple[np.ndarray, TrackTable]:
    """Factorize (pid label, tid label) pairs in sorted order."""
    pair = pid_codes.astype(np.int64) * max(len(tid_values), 1) + tid_codes
    unique_pairs, track = _dense_unique(pair)
    first = _first_index(track, len(unique_pairs))
    tracks = TrackTable(
        pid=tuple(pid_values[pid_codes[i]] for i in first),
        tid=tuple(tid_values[tid_codes[i]] for i in first),
        is_gpu=is_gpu[first].astype(bool),
        device=np.where(is_gpu[first], device[first], -1).astype(np.int64),
        stream=np.where(is_gpu[first], stream[first], -1).astype(np.int64),
    )
    return track.astype(np.int32), tracks


def _dense_unique(values: I64) -> tuple[I64, I64]:
    """`np.unique(values, return_inverse=True)` for non-negative ints: by counting when they are small (track
    pairs are), by sorting otherwise."""
    if values.size == 0 or int(values.max()) > 4 * values.size + 65536:
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
        raw=metadata if not _has_invalid_text(metadata) else valid_strings(metadata),  # type: ignore[arg-type]
    )


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
