"""CUDA-graph replays → the launches recorded while the graph was captured (issue #29).

Rule (docs/cuda_graphs.md): a capture is the span from `cudaStreamBeginCapture` to the next
`cudaStreamEndCapture` on the same thread; its captured launches are the kernel-launch API calls on that thread
inside the span that own no GPU activity, in time order. Each `cudaGraphLaunch` replays the most recent capture
that ended before it and has as many captured launches as the replay runs kernels; replayed kernel k (by start
time) takes the op of captured launch k. A replay with no capture of its kernel count is counted in one warning
and keeps no op (never a guess).
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, Bool, EventTable, Kind, kind_mask
from tracelens.model.steps import step_numbers_by_code
from tracelens.model.trace import Trace, TrackTable
from tracelens.records import replace

GRAPH_LAUNCH_NAMES = ("cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch")
# Every runtime/driver call that launches one kernel: the one list (dispatch's launch layer, graph removal, the
# profiler-overhead model, replays here)
KERNEL_LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelExC_v11060",
    "cudaLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
)


def graph_launch_name_mask(events: EventTable) -> Bool:
    """Per name code of `events`: whether it names a CUDA-graph launch (`GRAPH_LAUNCH_NAMES`). The one reading
    of that set (replays here, the actions' kept launches, the op table's replayed kernels, graph removal)."""
    wanted = set(GRAPH_LAUNCH_NAMES)
    return np.fromiter((name in wanted for name in events.names), dtype=bool, count=len(events.names))


def _codes(events: EventTable, names: tuple[str, ...]) -> np.ndarray:
    wanted = set(names)
    return np.array([i for i, n in enumerate(events.names) if n in wanted], dtype=np.int64)


CAPTURE_BEGIN = ("cudaStreamBeginCapture", "hipStreamBeginCapture")
CAPTURE_END = ("cudaStreamEndCapture", "hipStreamEndCapture")
INSTANTIATE = ("cudaGraphInstantiate", "hipGraphInstantiate")


def capture_spans(events: EventTable) -> list[tuple[int, int]]:
    """(start ns, end ns) of each capture with what completes it: from its `cudaStreamBeginCapture` to the end of
    the last `cudaStreamEndCapture` / `cudaGraphInstantiate` call on its thread before the next capture begins
    there (the begin call's own end without one)."""
    api = kind_mask(events.kind, API_KINDS)
    begins = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_BEGIN)))
    ends = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_END + INSTANTIATE)))
    spans = []
    for b in begins.tolist():
        track, start = events.track[b], int(events.ts_ns[b])
        later = begins[(events.track[begins] == track) & (events.ts_ns[begins] > start)]
        mine = ends[(events.track[ends] == track) & (events.ts_ns[ends] >= start)]
        if later.size:
            mine = mine[events.ts_ns[mine] < events.ts_ns[later].min()]
        end = int((events.ts_ns[mine] + events.dur_ns[mine]).max()) if mine.size else start + int(events.dur_ns[b])
        spans.append((start, end))
    return spans


def _captures(events: EventTable, launch: I32) -> list[tuple[int, np.ndarray]]:
    """(end ns, captured launch rows in time order) of each capture, ordered by end."""
    api = kind_mask(events.kind, API_KINDS)
    begin = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_BEGIN)))
    end = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_END)))
    launches = np.flatnonzero(api & np.isin(events.name, _codes(events, KERNEL_LAUNCH_NAMES)))
    owners = np.zeros(len(events), dtype=bool)
    owners[launch[launch >= 0]] = True
    launches = launches[~owners[launches]]
    result = []
    for b in begin:
        track, start = events.track[b], events.ts_ns[b]
        ends = end[(events.track[end] == track) & (events.ts_ns[end] >= start)]
        if ends.size == 0:
            continue
        stop = int(events.ts_ns[ends].min())
        inside = launches[
            (events.track[launches] == track) & (events.ts_ns[launches] >= start) & (events.ts_ns[launches] <= stop)
        ]
        result.append((stop, inside[np.argsort(events.ts_ns[inside], kind="stable")]))
    result.sort(key=lambda c: c[0])
    return result


def captured_mask(events: EventTable, calls: np.ndarray) -> np.ndarray:
    """Per event: whether it is one of `calls` (bool per event) made on a capturing thread while its capture ran
    (`cudaStreamBeginCapture` … `cudaStreamEndCapture`): a launch, copy or set recorded into the graph, which
    runs when the graph is replayed, bool."""
    out = np.zeros(len(events), dtype=bool)
    if not _codes(events, CAPTURE_BEGIN).size:
        return out
    api = kind_mask(events.kind, API_KINDS)
    begin = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_BEGIN)))
    end = np.flatnonzero(api & np.isin(events.name, _codes(events, CAPTURE_END)))
    candidates = np.flatnonzero(calls)
    for b in begin.tolist():
        track, start = events.track[b], events.ts_ns[b]
        ends = end[(events.track[end] == track) & (events.ts_ns[end] >= start)]
        if ends.size:
            stop = events.ts_ns[ends].min()
            at = events.ts_ns[candidates]
            out[candidates[(events.track[candidates] == track) & (at >= start) & (at <= stop)]] = True
    return out


def replaying_launch(events: EventTable, launch: I32, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows` (GPU activity): the row of the CUDA-graph launch that replayed it (`GRAPH_LAUNCH_NAMES`),
    -1 for activity launched on its own or not linked to a launch (int64)."""
    launched = launch[rows].astype(np.int64)
    graph_codes = np.flatnonzero(graph_launch_name_mask(events))
    if graph_codes.size == 0:
        return np.full(launched.size, -1, dtype=np.int64)
    replayed = (launched >= 0) & np.isin(events.name[np.maximum(launched, 0)], graph_codes)
    return np.where(replayed, launched, -1)


def attribute_replays(events: EventTable, launch: I32, op: I32) -> tuple[I32, list[str]]:
    """`op` with each replayed kernel given its captured launch's op, and the warnings/notes (see the module)."""
    matched = _matched_replays(events, launch)
    if matched is None:
        return op, []
    replayed, sources = matched
    if not sources:
        enclosed = bool((op[replayed] >= 0).any())  # without CPU ops no op encloses a graph launch either
        keep = "keep only the op enclosing their cudaGraphLaunch" if enclosed else "have no op"
        return op, [
            f"{replayed.size:,} kernels replayed by CUDA graphs have no capture in the trace, so they {keep}: "
            "start the profiler before the graph is captured (before torch.compile's cudagraph warm-up), record "
            "with `tracelens record --skip 0`, or pass a trace of the capture with --capture"
        ]
    out = op.copy()
    unmatched = 0
    for kernels, chosen in sources:
        if chosen is None:
            unmatched += 1
        else:
            out[kernels] = op[chosen]
    notes = []
    if unmatched:
        notes.append(
            f"{unmatched:,} CUDA-graph launches match no capture in the trace (no earlier capture with as many "
            "launches as the replay ran kernels): their kernels keep only the op enclosing their graph launch"
        )
    return out, notes


def uncaptured_replays(events: EventTable, launch: I32, op: I32) -> np.ndarray:
    """The rows of the replayed kernels whose op (`op`, after `attribute_replays` and any `graft_capture`) is
    still the op enclosing their graph launch: no capture, in the trace or grafted from `--capture`, matched
    them, so what they ran as ops is not known (in a trace without CPU ops, where both are none: those no capture
    in the trace matches); in no order."""
    graph_codes = np.flatnonzero(graph_launch_name_mask(events))
    gpu = np.flatnonzero((events.kind == Kind.KERNEL) & (launch >= 0))
    if gpu.size == 0 or graph_codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    replayed = gpu[np.isin(events.name[launch[gpu]], graph_codes)]
    same = op[replayed] == op[launch[replayed]]
    no_ops = same & (op[replayed] < 0)  # a trace without CPU ops: the ops tell nothing, the matching does
    if no_ops.any():
        unmatched = set(_unmatched_rows(events, launch).tolist())
        same[no_ops] = [int(k) in unmatched for k in replayed[no_ops].tolist()]
    return replayed[same].astype(np.int64)


def _unmatched_rows(events: EventTable, launch: I32) -> np.ndarray:
    """The replayed kernels that no capture in the trace matches (the module's rule)."""
    matched = _matched_replays(events, launch)
    if matched is None:
        return np.zeros(0, dtype=np.int64)
    replayed, sources = matched
    if not sources:
        return replayed.astype(np.int64)
    missing = [kernels for kernels, chosen in sources if chosen is None]
    return np.concatenate(missing).astype(np.int64) if missing else np.zeros(0, dtype=np.int64)


def _matched_replays(events: EventTable, launch: I32) -> tuple[np.ndarray, list[tuple[np.ndarray, I32 | None]]] | None:
    """None where no kernel is replayed by a CUDA graph; else the replayed kernel rows and, per graph launch, its
    replayed kernels in start order with the captured launches they take the ops of (None: no capture matches);
    an empty list where the trace has no capture at all."""
    gpu = np.flatnonzero(kind_mask(events.kind, GPU_ACTIVITY_KINDS) & (events.kind == Kind.KERNEL) & (launch >= 0))
    graph_codes = np.flatnonzero(graph_launch_name_mask(events))
    if gpu.size == 0 or graph_codes.size == 0:
        return None
    replayed = gpu[np.isin(events.name[launch[gpu]], graph_codes)]
    if replayed.size == 0:
        return None
    captures = _captures(events, launch)
    if not captures:
        return replayed, []
    sources: list[tuple[np.ndarray, I32 | None]] = []
    graph_of = launch[replayed]
    for g in np.unique(graph_of):
        kernels = replayed[graph_of == g]
        kernels = kernels[np.argsort(events.ts_ns[kernels], kind="stable")]
        when = int(events.ts_ns[g])
        chosen = None
        for stop, captured in reversed(captures):
            if stop <= when and captured.size == kernels.size:
                chosen = captured
                break
        sources.append((kernels, chosen))
    return replayed, sources


def _graph_replays(events: EventTable, launch: I32) -> dict[int, np.ndarray]:
    """{cudaGraphLaunch row: its replayed kernel rows in start order}."""
    graph_codes = np.flatnonzero(graph_launch_name_mask(events))
    gpu = np.flatnonzero((events.kind == Kind.KERNEL) & (launch >= 0))
    if gpu.size == 0 or graph_codes.size == 0:
        return {}
    replayed = gpu[np.isin(events.name[launch[gpu]], graph_codes)]
    graph_of = launch[replayed]
    result = {}
    for g in np.unique(graph_of):
        kernels = replayed[graph_of == g]
        result[int(g)] = kernels[np.argsort(events.ts_ns[kernels], kind="stable")]
    return result


def _in_trace_choice(captures: list[tuple[int, np.ndarray]], when_ns: int, count: int) -> int | None:
    """Index of the capture rule 3 picks for a replay of `count` kernels launched at `when_ns`, or None."""
    for index in range(len(captures) - 1, -1, -1):
        stop, captured = captures[index]
        if stop <= when_ns and captured.size == count:
            return index
    return None


class CaptureGraft(msgspec.Struct, frozen=True):
    """What `graft_capture` did: graph launches matched to the capture file, and those left unmatched because
    no capture there has as many launches (`count_mismatch`) or because every capture of that count has other
    kernel names (`name_mismatch`)."""

    matched: int
    count_mismatch: int
    name_mismatch: int
    grafted_rows: int


def graft_capture(trace: Trace, capture: Trace, label: str) -> tuple[Trace, CaptureGraft | None]:
    """`trace` with the replays that no capture in it explains matched to a capture of `capture` (the rule of
    the module, docs/cuda_graphs.md#a-capture-in-a-second-trace): the captured launches of `capture` and their
    enclosing CPU events (ProfilerStep ranges left out) are appended to the event table on tracks of their own
    ("capture: ..."), after the trace's last event and in no step, and each matched replayed kernel takes the
    op of its captured launch. A captured launch's kernel name is known when `capture` replays that capture
    itself (kernel k of that replay); a capture whose known names differ from the replay's kernels is no match.
    Returns the trace unchanged (and None) when every replay of `trace` already has an in-trace capture or it
    has none; the warnings say what matched and what did not."""
    events, links = trace.events, trace.links
    replays = _graph_replays(events, links.launch)
    if not replays:
        return trace, None
    own = _captures(events, links.launch)
    pending = {g: k for g, k in replays.items() if _in_trace_choice(own, int(events.ts_ns[g]), k.size) is None}
    if not pending:
        return trace, None
    _, old_notes = attribute_replays(events, links.launch, links.op)
    warnings = [w for w in trace.warnings if w not in old_notes]
    theirs = _captures(capture.events, capture.links.launch)
    if not theirs:
        warnings.append(
            f"--capture {label}: no CUDA-graph capture in that trace (no cudaStreamBeginCapture … "
            f"cudaStreamEndCapture with launches); {len(pending):,} graph launches keep only the op enclosing "
            "them"
        )
        return replace(trace, warnings=tuple(warnings)), CaptureGraft(0, len(pending), 0, 0)
    names = _captured_kernel_names(capture, theirs)
    chosen: dict[int, int] = {}
    count_mismatch = name_mismatch = 0
    for g, kernels in pending.items():
        replayed_names = tuple(events.name_of(int(k)) for k in kernels)
        same_count = [i for i, (_, c) in enumerate(theirs) if c.size == kernels.size]
        fits = [i for i in same_count if names[i] is None or names[i] == replayed_names]
        if fits:
            chosen[g] = fits[-1]
        elif same_count:
            name_mismatch += 1
        else:
            count_mismatch += 1
    graft = CaptureGraft(len(chosen), count_mismatch, name_mismatch, 0)
    if count_mismatch or name_mismatch:
        warnings.append(_mismatch_warning(label, graft))
    if not chosen:
        return replace(trace, warnings=tuple(warnings)), graft
    used = sorted({i for i in chosen.values()})
    merged, row_of = _append_rows(trace, capture, np.concatenate([theirs[i][1] for i in used]))
    op = merged.links.op.copy()
    for g, index in chosen.items():
        captured_op = capture.links.op[theirs[index][1]]
        op[pending[g]] = np.where(captured_op >= 0, row_of[np.maximum(captured_op, 0)], -1)
    warnings = [w for w in warnings if not w.startswith(NO_CPU_OPS)]  # the capture's ops are in the table now
    merged = replace(merged, links=replace(merged.links, op=op), warnings=tuple(warnings))
    return merged, replace(graft, grafted_rows=len(merged.events) - len(events))


def _mismatch_warning(label: str, graft: CaptureGraft) -> str:
    parts = []
    if graft.count_mismatch:
        parts.append(f"{graft.count_mismatch:,} of a kernel count no capture there has")
    if graft.name_mismatch:
        parts.append(f"{graft.name_mismatch:,} whose kernel names differ from every capture of their count")
    return (
        f"--capture {label}: {graft.count_mismatch + graft.name_mismatch:,} CUDA-graph launches match no capture "
        f"in it ({'; '.join(parts)}); their kernels keep only the op enclosing their graph launch"
    )


def _captured_kernel_names(capture: Trace, captures: list[tuple[int, np.ndarray]]) -> list[tuple[str, ...] | None]:
    """Per capture of the capture trace, the kernel names of its launches when that trace replays it (the
    first replay rule 3 gives it), else None (unknown)."""
    events = capture.events
    names: list[tuple[str, ...] | None] = [None] * len(captures)
    for g, kernels in sorted(_graph_replays(events, capture.links.launch).items()):
        index = _in_trace_choice(captures, int(events.ts_ns[g]), kernels.size)
        if index is not None and names[index] is None:
            names[index] = tuple(events.name_of(int(k)) for k in kernels)
    return names


NO_CPU_OPS = "no CPU ops in the trace"  # the start of that warning of `model.build.trace_warnings`
GRAFT_GAP_NS = 1_000_000  # grafted capture rows start this long after the trace's last event


def _append_rows(trace: Trace, capture: Trace, launches: np.ndarray) -> tuple[Trace, np.ndarray]:
    """`trace` with `launches` of `capture` and their enclosing CPU events (not ProfilerStep ranges) appended,
    and {capture row: new row} as an array (-1 where not appended)."""
    source, parent = capture.events, capture.links.parent
    step_codes = np.fromiter(step_numbers_by_code(source.names), dtype=np.int32)
    is_step = np.isin(source.name, step_codes)
    keep = np.zeros(len(source), dtype=bool)
    ops = capture.links.op[launches]
    frontier = np.unique(np.concatenate([launches, ops[ops >= 0]]))
    while frontier.size:
        frontier = frontier[~keep[frontier]]
        keep[frontier] = True
        frontier = parent[frontier]
        frontier = np.unique(frontier[frontier >= 0])
    keep &= ~is_step
    rows = np.flatnonzero(keep)  # the capture trace's table is in time order: so are these
    n = len(trace.events)
    row_of = np.full(len(source), -1, dtype=np.int64)
    row_of[rows] = n + np.arange(rows.size)
    events = _merged_events(trace, capture, rows)
    tracks, track_code = _merged_tracks(trace.tracks, capture.tracks, source.track[rows])
    events = replace(events, track=np.concatenate([trace.events.track, track_code]).astype(np.int32))
    new_parent = parent[rows].astype(np.int64)
    while True:  # climb past what was left out (ProfilerStep ranges)
        dropped = (new_parent >= 0) & ~keep[np.maximum(new_parent, 0)]
        if not dropped.any():
            break
        new_parent[dropped] = parent[new_parent[dropped]]
    mapped_parent = np.where(new_parent >= 0, row_of[np.maximum(new_parent, 0)], -1)
    depth = np.zeros(rows.size, dtype=np.int32)
    for i in range(rows.size):  # parents come before their children
        p = mapped_parent[i]
        depth[i] = 0 if p < 0 else depth[p - n] + 1
    cap_op = capture.links.op[rows]
    links = trace.links
    minus = np.full(rows.size, -1, dtype=np.int32)
    merged_links = replace(
        links,
        parent=np.concatenate([links.parent, mapped_parent.astype(np.int32)]),
        depth=np.concatenate([links.depth, depth]),
        launch=np.concatenate([links.launch, minus]),
        op=np.concatenate([links.op, np.where(cap_op >= 0, row_of[np.maximum(cap_op, 0)], -1).astype(np.int32)]),
        step=np.concatenate([links.step, minus]),
    )
    return replace(trace, events=events, tracks=tracks, links=merged_links), row_of


def _merged_events(trace: Trace, capture: Trace, rows: np.ndarray) -> EventTable:
    """The event table of `trace` with `rows` of `capture` appended (names recoded, times moved past the end)."""
    main, source = trace.events, capture.events
    names = list(main.names)
    code = {name: i for i, name in enumerate(names)}
    recode = np.empty(len(source.names), dtype=np.int32)
    for i, name in enumerate(source.names):
        if name not in code:
            code[name] = len(names)
            names.append(name)
        recode[i] = code[name]
    last_end = int(main.end_ns.max()) if len(main) else 0
    shift = last_end + GRAFT_GAP_NS - (int(source.ts_ns[rows].min()) if rows.size else 0)
    columns: dict[str, object] = {}
    for field in EventTable.__struct_fields__:
        if field in ("names", "track"):
            continue
        column = getattr(source, field)[rows]
        if field == "name":
            column = recode[column]
        elif field == "ts_ns":
            column = column + shift
        columns[field] = np.concatenate([getattr(main, field), column])
    return EventTable(names=tuple(names), track=main.track, **columns)  # type: ignore[arg-type]


def _merged_tracks(main: TrackTable, source: TrackTable, codes: np.ndarray) -> tuple[TrackTable, np.ndarray]:
    """`main` with a CPU track "capture: PID" per track of `codes`, and each code's new track."""
    used = np.unique(codes)
    new_code = {int(t): len(main) + i for i, t in enumerate(used)}
    tracks = TrackTable(
        pid=(*main.pid, *(f"capture: {source.pid[int(t)]}" for t in used)),
        tid=(*main.tid, *(source.tid[int(t)] for t in used)),
        is_gpu=np.concatenate([main.is_gpu, np.zeros(used.size, dtype=bool)]),
        device=np.concatenate([main.device, np.full(used.size, -1, dtype=np.int64)]),
        stream=np.concatenate([main.stream, np.full(used.size, -1, dtype=np.int64)]),
    )
    return tracks, np.array([new_code[int(t)] for t in codes], dtype=np.int32)
