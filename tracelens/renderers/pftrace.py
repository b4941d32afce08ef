"""`tracelens annotate --format perfetto`: the trace as a native Perfetto protobuf trace (`.pftrace`) with the
findings in it, written with the `perfetto` package's protos (`perfetto.protos...perfetto_trace_pb2`, the
generated code of Perfetto's own `perfetto_trace.proto`, on the `protobuf` runtime).

Contract: `pftrace_bytes(trace, results) -> bytes`; pure. What the file holds (docs/report.md, "Perfetto"):
- every complete event of the trace as a slice, on a track per CPU thread and per GPU stream, grouped under a
  track per process and per GPU. Slices of one source track that overlap go to lanes of their own so that no
  overlap is lost: GPU activity of a stream is split into lanes in which no two activities overlap (lane 1 is
  `stream S`, the next `stream S · overlap 2`...), CPU events into lanes in which slices nest properly;
- a flow from each launching runtime/driver call to the GPU activity it launched (`Trace.links.launch`);
- on a `tracelens` group: steps (`ProfilerStep` CPU range, and the span of the GPU work launched in the step:
  first start to last end), the critical path of the analyzed step (its calls and GPU activities,
  `results.critical_path`),
  fusion opportunities and exposed GPU idle gaps by main cause (the slices `annotate`'s JSON output adds,
  `renderers.perfetto`);
- counter tracks: allocator totals per device (`[memory]` events), the trace's own counters (`ph: "C"`), and the
  queue depth per GPU stream (activities launched and not finished: +1 at the launching call's start, -1 at the
  activity's end);
- the launching op, category and roofline figures of each GPU activity as debug annotations (the args the JSON
  output adds), with its grid/block and correlation id.

Timestamps are the source file's clock in ns (`Trace.origin_us` added back).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import numpy as np

from tracelens.analyses import AnalysisResults
from tracelens.analyses.activity import gpu_activity
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.errors import TracelensError
from tracelens.loader.rewrite import AddedSlice
from tracelens.model.events import GPU_ACTIVITY_KINDS, kind_mask
from tracelens.model.steps import step_words
from tracelens.model.trace import Trace, TrackTable, short_thread_name

SEQUENCE_ID = 1
CHUNK_PACKETS = 20_000  # packets serialized per Trace message (concatenated Trace messages are one Trace)
ROOT_NAME = "tracelens"
INSTALL_HINT = "pip install perfetto (it brings protobuf)"


def perfetto_module() -> Any:
    """The generated `perfetto_trace_pb2` module; a TracelensError saying how to install it when it is missing."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as exc:
        raise TracelensError(f"--format perfetto needs the perfetto package ({exc}): {INSTALL_HINT}") from None
    return perfetto_trace_pb2


class _Track(msgspec.Struct):
    uuid: int
    name: str
    parent: int | None = None
    counter_unit: str | None = None  # "bytes", "count" or "" for a counter track


class _Slices(msgspec.Struct):
    """Slices to write: parallel lists, in ns on the output clock."""

    track: list[int] = msgspec.field(default_factory=list)
    ts: list[int] = msgspec.field(default_factory=list)
    dur: list[int] = msgspec.field(default_factory=list)
    name: list[str] = msgspec.field(default_factory=list)
    args: list[dict[str, Any] | None] = msgspec.field(default_factory=list)
    flow_out: dict[int, list[int]] = msgspec.field(default_factory=dict)  # slice -> flow ids starting there
    flow_in: dict[int, int] = msgspec.field(default_factory=dict)  # slice -> flow id ending there

    def add(self, track: int, ts: int, dur: int, name: str, args: dict[str, Any] | None = None) -> int:
        self.track.append(track)
        self.ts.append(ts)
        self.dur.append(max(dur, 0))
        self.name.append(name)
        self.args.append(args)
        return len(self.track) - 1


class _Tracks:
    """Track descriptors by key, with uuids handed out in order."""

    def __init__(self) -> None:
        self.tracks: list[_Track] = []
        self.by_key: dict[tuple[Any, ...], int] = {}

    def get(self, key: tuple[Any, ...], name: str, parent: int | None = None, counter_unit: str | None = None) -> int:
        uuid = self.by_key.get(key)
        if uuid is None:
            uuid = len(self.tracks) + 1
            self.tracks.append(_Track(uuid, name, parent, counter_unit))
            self.by_key[key] = uuid
        return uuid


def pftrace_bytes(trace: Trace, results: AnalysisResults, findings: Iterable[AddedSlice] = ()) -> bytes:
    """The Perfetto protobuf trace of `trace` with `results`' findings (see the module docstring); `findings`
    are the extra slices (`renderers.perfetto.trace_additions(...).slices`), each on a track of its name."""
    pb = perfetto_module()
    offset_ns = _offset_ns(trace)
    tracks, slices = _Tracks(), _Slices()
    row_slice = _source_slices(trace, tracks, slices, offset_ns)
    _annotate_gpu(trace, results, slices, row_slice)
    _add_flows(trace, slices, row_slice)
    root = tracks.get(("root",), ROOT_NAME)
    _step_slices(trace, tracks, slices, offset_ns, root)
    _critical_path_slices(trace, results, tracks, slices, offset_ns, root, row_slice)
    _finding_slices(findings, tracks, slices, offset_ns, root)
    counters = list(_counter_samples(trace, tracks, offset_ns))
    return b"".join(_serialized(pb, tracks, slices, counters))


def _offset_ns(trace: Trace) -> int:
    """What to add to model ns to get the source file's clock in ns (0 if that would be negative)."""
    whole = int(trace.origin_us)  # origin_us * 1000 in floats would be off by up to 128 ns at epoch µs
    offset = whole * 1000 + round((trace.origin_us - whole) * 1000)
    start = int(trace.events.ts_ns.min()) if len(trace.events) else 0
    return offset if offset + start >= 0 else -min(start, 0)


# ---------------------------------------------------------------- the trace's own events


def _source_slices(trace: Trace, tracks: _Tracks, slices: _Slices, offset_ns: int) -> np.ndarray:
    """Every event of the trace as a slice on its lane; returns the slice index of each event row."""
    ev = trace.events
    n = len(ev)
    row_slice = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return row_slice
    is_activity = kind_mask(ev.kind, GPU_ACTIVITY_KINDS)
    order = np.lexsort((-ev.dur_ns, ev.ts_ns, is_activity, ev.track))
    names = ev.names
    track_col, ts_col, dur_col, name_col = ev.track, ev.ts_ns, ev.dur_ns, ev.name
    start = 0
    while start < n:
        track = int(track_col[order[start]])
        activity = bool(is_activity[order[start]])
        stop = start
        while stop < n and track_col[order[stop]] == track and is_activity[order[stop]] == activity:
            stop += 1
        rows = order[start:stop]
        ts = ts_col[rows]
        end = ts + dur_col[rows]
        lanes = _disjoint_lanes(ts, end) if activity else _nested_lanes(ts, end)
        lane_uuids = [_lane_track(trace, tracks, track, activity, lane) for lane in range(int(lanes.max()) + 1)]
        for row, lane, start_ns, dur_ns in zip(
            rows.tolist(), lanes.tolist(), ts.tolist(), dur_col[rows].tolist(), strict=True
        ):
            row_slice[row] = slices.add(lane_uuids[lane], start_ns + offset_ns, dur_ns, names[int(name_col[row])])
        start = stop
    return row_slice


def _lane_track(trace: Trace, tracks: _Tracks, track: int, activity: bool, lane: int) -> int:
    """The uuid of lane `lane` (0-based) of source track `track`, under its process or GPU group."""
    tt = trace.tracks
    if tt.is_gpu[track]:
        device, stream = int(tt.device[track]), int(tt.stream[track])
        group = tracks.get(("gpu", device), f"GPU {device}")
        base = f"stream {stream}" if activity else f"stream {stream} annotations"
    else:
        group = tracks.get(("pid", tt.pid[track]), _process_name(tt, track))
        base = tt.label(track) if tt.short_name(track) else f"thread {tt.tid[track]}"
    name = base if lane == 0 else f"{base} · overlap {lane + 1}"
    return tracks.get(("lane", track, activity, lane), name, group)


def _process_name(tt: TrackTable, track: int) -> str:
    """`python3 (pid 469)` where the trace names the process, else `process 469`."""
    pid = tt.pid[track]
    name = short_thread_name(tt.process_name[track], "") if tt.process_name else ""
    return f"{name} (pid {pid})" if name else f"process {pid}"


def _disjoint_lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per interval (sorted by start) so that no two intervals of a lane overlap: the first lane free at the
    interval's start. Touching intervals (end == next start) share a lane."""
    lane_end: list[int] = []
    out = np.zeros(start.size, dtype=np.int64)
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        for lane, last in enumerate(lane_end):
            if last <= s:
                lane_end[lane] = e
                out[i] = lane
                break
        else:
            lane_end.append(e)
            out[i] = len(lane_end) - 1
    return out


def _nested_lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per interval (sorted by start, longer first) so that the intervals of a lane nest properly: each lane
    is a stack of open intervals, and an interval goes to the first lane whose innermost open interval (after
    closing those that ended) contains it."""
    stacks: list[list[int]] = []
    out = np.zeros(start.size, dtype=np.int64)
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or stack[-1] >= e:
                stack.append(e)
                out[i] = lane
                break
        else:
            stacks.append([e])
            out[i] = len(stacks) - 1
    return out


def _annotate_gpu(trace: Trace, results: AnalysisResults, slices: _Slices, row_slice: np.ndarray) -> None:
    """Debug annotations of GPU activity: what `annotate`'s JSON output adds, grid/block, correlation id."""
    from tracelens.renderers.perfetto import kernel_args  # pandas: only for this debug view

    ev = trace.events
    extra = kernel_args(gpu_activity_frame(trace), results)
    for row, args in extra.items():
        out = dict(args)
        if ev.grid_blocks[row] >= 0:
            out["grid blocks"] = int(ev.grid_blocks[row])
        if ev.block_threads[row] >= 0:
            out["block threads"] = int(ev.block_threads[row])
        if ev.correlation[row] >= 0:
            out["correlation"] = int(ev.correlation[row])
        slices.args[int(row_slice[row])] = out
    for row in np.flatnonzero(~kind_mask(ev.kind, GPU_ACTIVITY_KINDS)).tolist():
        dims = ev.input_dims[row]
        if dims is not None:
            slices.args[int(row_slice[row])] = {"Input Dims": _text(dims)}


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _add_flows(trace: Trace, slices: _Slices, row_slice: np.ndarray) -> None:
    """A flow from each launching call to its GPU activity; the flow id is the activity's row + 1."""
    gpu = gpu_activity(trace)
    for row, launch in zip(gpu.row.tolist(), gpu.launch.tolist(), strict=True):
        if launch < 0:
            continue
        source, target = int(row_slice[launch]), int(row_slice[row])
        slices.flow_out.setdefault(source, []).append(row + 1)  # a graph launch starts several flows
        slices.flow_in[target] = row + 1


# ---------------------------------------------------------------- findings


def _step_slices(trace: Trace, tracks: _Tracks, slices: _Slices, offset_ns: int, root: int) -> None:
    """Each step's CPU range (`ProfilerStep`) and the span of the GPU work it launched (first start to last end
    of the GPU activities whose launching call lies in the step) on tracks of their own."""
    steps = trace.steps
    if not len(steps) or not steps.per_step:
        return
    gpu = gpu_activity(trace)
    cpu_track = tracks.get(("steps", "cpu"), "steps (CPU range)", root)
    end = gpu.ts_ns + gpu.dur_ns
    spans: list[tuple[int, int, str, dict[str, Any]]] = []
    for i in range(len(steps)):
        number = int(steps.number[i])
        start, stop = int(steps.start_ns[i]), int(steps.end_ns[i])
        args: dict[str, Any] = {"step": number, "complete": bool(steps.complete[i])}
        slices.add(cpu_track, start + offset_ns, stop - start, step_words(number), args)
        launched = gpu.step == i
        if launched.any():
            first, last = int(gpu.ts_ns[launched].min()), int(end[launched].max())
            work = {"step": number, "GPU activities": int(launched.sum())}
            spans.append((first + offset_ns, last - first, f"{step_words(number)} GPU", work))
    _add_laned(tracks, slices, ("steps", "gpu"), "steps (GPU work launched)", root, spans)


def _add_laned(
    tracks: _Tracks,
    slices: _Slices,
    key: tuple[Any, ...],
    name: str,
    parent: int,
    items: list[tuple[int, int, str, dict[str, Any]]],
) -> None:
    """Slices (ts, dur, name, args) that may overlap on one track: lane 1 is the track `name`, the others
    `name · overlap k`, so that no two slices of a track overlap."""
    items = sorted(items, key=lambda item: (item[0], -item[1]))
    start = np.asarray([item[0] for item in items], dtype=np.int64)
    end = start + np.asarray([item[1] for item in items], dtype=np.int64)
    for (ts, dur, label, args), lane in zip(items, _disjoint_lanes(start, end).tolist(), strict=True):
        track = tracks.get((*key, lane), name if lane == 0 else f"{name} · overlap {lane + 1}", parent)
        slices.add(track, ts, dur, label, args)


def _critical_path_slices(
    trace: Trace,
    results: AnalysisResults,
    tracks: _Tracks,
    slices: _Slices,
    offset_ns: int,
    root: int,
    row_slice: np.ndarray,
) -> None:
    """The calls and GPU activities on the critical path of the analyzed step, copied onto a track group of
    their own (lanes where they overlap), and marked in the original slices' annotations."""
    path = getattr(results, "critical_path", None)
    rows = sorted(set(getattr(path, "path_rows", None) or []))
    if not rows:
        return
    ev = trace.events
    step = getattr(path, "step", None)
    items = []
    for row in rows:
        name = ev.names[int(ev.name[row])]
        items.append((int(ev.ts_ns[row]) + offset_ns, int(ev.dur_ns[row]), name, {"step": step}))
        original = int(row_slice[row])
        marked = dict(slices.args[original] or {})
        marked["tracelens critical path"] = step_words(step)
        slices.args[original] = marked
    _add_laned(tracks, slices, ("critical",), "critical path", root, items)


def _finding_slices(
    findings: Iterable[AddedSlice], tracks: _Tracks, slices: _Slices, offset_ns: int, root: int
) -> None:
    """The JSON output's finding slices (fusion opportunities, exposed idle gaps), a track group per track name
    with lanes where they overlap."""
    by_track: dict[str, list[tuple[int, int, str, dict[str, Any]]]] = {}
    for item in findings:
        entry = (item.ts_ns + offset_ns, item.dur_ns, item.name, dict(item.args))
        by_track.setdefault(item.track, []).append(entry)
    for name, items in by_track.items():
        _add_laned(tracks, slices, ("finding", name), name, root, items)


# ---------------------------------------------------------------- counters


class _Counter(msgspec.Struct, frozen=True):
    track: int
    ts: np.ndarray  # ns, output clock, sorted
    value: np.ndarray
    integer: bool


def _counter_samples(trace: Trace, tracks: _Tracks, offset_ns: int) -> Iterator[_Counter]:
    """Memory totals per device, the trace's counters, and queue depth per GPU stream."""
    memory = trace.memory
    if len(memory):
        group = tracks.get(("memory",), "memory (allocator)")
        for device in sorted(set(memory.device.tolist())):
            mask = memory.device == device
            label = "CPU" if device < 0 else f"GPU {device}"
            for column, values in (("allocated", memory.total_allocated), ("reserved", memory.total_reserved)):
                track = tracks.get(("memory", device, column), f"{label} {column} bytes", group, counter_unit="bytes")
                yield _Counter(track, memory.ts_ns[mask] + offset_ns, values[mask], True)
    counters = trace.counters
    if len(counters):
        group = tracks.get(("counters",), "counters (trace)")
        for pid, code, series in counters.lane_keys():
            mask = (counters.pid == pid) & (counters.name == code) & (counters.series == series)
            label = f"{counters.names[code]} {counters.series_names[series]} (pid {counters.pids[pid]})"
            track = tracks.get(("counter", pid, code, series), label, group, counter_unit="")
            yield _Counter(track, counters.ts_ns[mask] + offset_ns, counters.value[mask], False)
    yield from _queue_depth(trace, tracks, offset_ns)


def _queue_depth(trace: Trace, tracks: _Tracks, offset_ns: int) -> Iterator[_Counter]:
    """Per GPU stream: activities launched and not finished (+1 at the launching call's start, -1 at the end)."""
    gpu = gpu_activity(trace)
    launched = gpu.launch >= 0
    if not launched.any():
        return
    group = tracks.get(("queue",), "queue depth (launched, not finished)")
    launch_ts = trace.events.ts_ns[gpu.launch[launched]]
    end = (gpu.ts_ns + gpu.dur_ns)[launched]
    device, stream = gpu.device[launched], gpu.stream[launched]
    for d, s in sorted(set(zip(device.tolist(), stream.tolist(), strict=True))):
        mask = (device == d) & (stream == s)
        times = np.concatenate((launch_ts[mask], end[mask]))
        steps = np.concatenate((np.ones(int(mask.sum()), np.int64), -np.ones(int(mask.sum()), np.int64)))
        order = np.lexsort((steps, times))  # at one time the -1 first
        times, depth = times[order], np.cumsum(steps[order])
        last = np.concatenate((times[1:] != times[:-1], [True]))  # one sample per time: the depth after it
        track = tracks.get(("queue", d, s), f"GPU {d} stream {s} queue depth", group, counter_unit="count")
        yield _Counter(track, times[last] + offset_ns, depth[last], True)


# ---------------------------------------------------------------- serializing


def _serialized(pb: Any, tracks: _Tracks, slices: _Slices, counters: list[_Counter]) -> Iterator[bytes]:
    """The packets: track descriptors, then slice begin/end (instant for zero duration) and counter events in
    time order, ends before begins at one time, inner before outer, in Trace messages of CHUNK_PACKETS."""
    chunk = pb.Trace()
    for track in tracks.tracks:
        packet = chunk.packet.add()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        descriptor = packet.track_descriptor
        descriptor.uuid = track.uuid
        descriptor.name = track.name
        if track.parent is not None:
            descriptor.parent_uuid = track.parent
        if track.counter_unit is not None:
            unit = {"bytes": pb.CounterDescriptor.UNIT_SIZE_BYTES, "count": pb.CounterDescriptor.UNIT_COUNT}
            descriptor.counter.unit = unit.get(track.counter_unit, pb.CounterDescriptor.UNIT_UNSPECIFIED)
    first = chunk.packet[0] if len(chunk.packet) else None
    if first is not None:
        first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    yield chunk.SerializeToString()
    chunk = pb.Trace()
    flat = _FlatCounters(counters)
    for record in _records(slices, counters):
        _fill(pb, chunk.packet.add(), record, slices, flat)
        if len(chunk.packet) >= CHUNK_PACKETS:
            yield chunk.SerializeToString()
            chunk = pb.Trace()
    if len(chunk.packet):
        yield chunk.SerializeToString()


END, COUNTER, INSTANT, BEGIN = 0, 1, 2, 3


def _records(slices: _Slices, counters: list[_Counter]) -> Iterator[tuple[int, int, int]]:
    """(what, index, time) in write order: `what` is END/INSTANT/BEGIN of slice `index` or COUNTER sample
    `index` (into the concatenated counter samples)."""
    ts = np.asarray(slices.ts, dtype=np.int64)
    dur = np.asarray(slices.dur, dtype=np.int64)
    index = np.arange(ts.size, dtype=np.int64)
    zero = dur == 0
    times = [ts[zero], ts[~zero], ts[~zero] + dur[~zero]]
    what = [np.full(int(zero.sum()), INSTANT), np.full(int((~zero).sum()), BEGIN), np.full(int((~zero).sum()), END)]
    which = [index[zero], index[~zero], index[~zero]]
    # ties: begins of longer slices first (-dur); ends of later-started (inner) slices first (-start)
    ties = [np.zeros(int(zero.sum()), np.int64), -dur[~zero], -ts[~zero]]
    counter_ts = [c.ts for c in counters]
    n_counter = sum(t.size for t in counter_ts)
    times.append(np.concatenate(counter_ts) if counter_ts else np.zeros(0, np.int64))
    what.append(np.full(n_counter, COUNTER))
    which.append(np.arange(n_counter, dtype=np.int64))
    ties.append(np.zeros(n_counter, np.int64))
    t_all, w_all, i_all, tie_all = (np.concatenate(x).astype(np.int64) for x in (times, what, which, ties))
    order = np.lexsort((tie_all, w_all, t_all))
    yield from zip(w_all[order].tolist(), i_all[order].tolist(), t_all[order].tolist(), strict=True)


class _FlatCounters:
    """The counters' samples concatenated: track, value and whether it is an integer, by sample index."""

    def __init__(self, counters: list[_Counter]) -> None:
        self.track: list[int] = []
        self.value: list[int | float] = []
        for counter in counters:
            self.track.extend([counter.track] * counter.ts.size)
            values = counter.value.astype(np.int64) if counter.integer else counter.value.astype(np.float64)
            self.value.extend(values.tolist())


def _fill(pb: Any, packet: Any, record: tuple[int, int, int], slices: _Slices, counters: _FlatCounters) -> None:
    what, index, time = record
    packet.timestamp = time
    packet.trusted_packet_sequence_id = SEQUENCE_ID
    event = packet.track_event
    if what == COUNTER:
        event.type = pb.TrackEvent.TYPE_COUNTER
        event.track_uuid = counters.track[index]
        value = counters.value[index]
        if isinstance(value, int):
            event.counter_value = value
        else:
            event.double_counter_value = value
        return
    event.track_uuid = slices.track[index]
    if what == END:
        event.type = pb.TrackEvent.TYPE_SLICE_END
        return
    event.type = pb.TrackEvent.TYPE_INSTANT if what == INSTANT else pb.TrackEvent.TYPE_SLICE_BEGIN
    event.name = slices.name[index]
    event.flow_ids.extend(slices.flow_out.get(index, ()))
    if index in slices.flow_in:
        event.terminating_flow_ids.append(slices.flow_in[index])
    for key, value in (slices.args[index] or {}).items():
        _annotation(event.debug_annotations.add(), key, value)


def _annotation(annotation: Any, key: str, value: Any) -> None:
    annotation.name = key
    if isinstance(value, bool):
        annotation.bool_value = value
    elif isinstance(value, int):
        annotation.int_value = value
    elif isinstance(value, float):
        annotation.double_value = value
    elif isinstance(value, str):
        annotation.string_value = value
    else:
        annotation.string_value = json.dumps(value, default=str)
