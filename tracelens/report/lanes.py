"""Where each drawn event sits on the timeline: one band per CPU thread (a lane per nesting depth, counting only
the enclosing events that are drawn: `drawn_depth`) and one lane per GPU stream; and merging of events that are
not drawn one by one into blocks per lane.

Vectorised: no per-event Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelens.model.events import I64, Kind, kind_mask
from tracelens.model.trace import Trace

DRAWN_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.RUNTIME, Kind.DRIVER, Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
MAX_LANES_PER_THREAD = 12


@dataclass(frozen=True)
class Lanes:
    """`rows` (event indices, ascending) and their lane `y` (0 = top); `ticks` label each band's first lane and
    `gpu` says, per band (in the order of `ticks`), whether it is a GPU stream's (one lane) or a CPU thread's (a
    lane per nesting level in use, outermost first)."""

    rows: I64
    y: I64
    n_lanes: int
    ticks: tuple[tuple[int, str], ...]
    clamped: int  # CPU events deeper than MAX_LANES_PER_THREAD, drawn on the band's last lane
    gpu: tuple[bool, ...] = ()

    def band_levels(self) -> list[int]:
        """How many lanes each band has (a CPU thread's: its nesting levels, at most MAX_LANES_PER_THREAD)."""
        firsts = [first for first, _ in self.ticks] + [self.n_lanes]
        return [firsts[i + 1] - firsts[i] for i in range(len(self.ticks))]


COLLAPSE_ABOVE_LEVELS = 6  # a CPU thread with more nesting levels than this starts folded
DEFAULT_LEVELS = 3  # to its outermost this many


def default_levels(levels: int, gpu: bool) -> int:
    """How many of a band's `levels` lanes the page shows at load: all of a GPU stream's and of a CPU thread of
    at most `COLLAPSE_ABOVE_LEVELS` levels; the outermost `DEFAULT_LEVELS` of a deeper thread."""
    return levels if gpu or levels <= COLLAPSE_ABOVE_LEVELS else DEFAULT_LEVELS


def lay_out(trace: Trace) -> Lanes:
    """Lanes for every CPU op / annotation / runtime call and every GPU activity of `trace`."""
    ev, tracks = trace.events, trace.tracks
    rows = np.flatnonzero(kind_mask(ev.kind, DRAWN_KINDS)).astype(np.int64)
    track = ev.track[rows].astype(np.int64)
    is_gpu = tracks.is_gpu[track] if len(tracks) else np.zeros(rows.size, dtype=bool)
    depth = np.where(is_gpu, 0, drawn_depth(trace)[rows]).astype(np.int64)
    width = int(depth.max()) + 1 if depth.size else 1
    keys, inverse = np.unique(track * width + depth, return_inverse=True)
    key_track = keys // width
    rank = np.arange(keys.size) - np.searchsorted(key_track, key_track, side="left")
    lane = np.minimum(rank, MAX_LANES_PER_THREAD - 1)[inverse]
    clamped = int((rank[inverse] >= MAX_LANES_PER_THREAD).sum())
    used, lanes_used = np.unique(key_track, return_counts=True)
    lanes_used = np.minimum(lanes_used, MAX_LANES_PER_THREAD)
    order = sorted(range(used.size), key=lambda i: _track_sort_key(trace, int(used[i])))
    base = np.zeros(len(tracks) if len(tracks) else 1, dtype=np.int64)
    ticks: list[tuple[int, str]] = []
    gpu: list[bool] = []
    offset = 0
    for i in order:
        base[used[i]] = offset
        ticks.append((offset, tracks.label(int(used[i]))))
        gpu.append(bool(tracks.is_gpu[used[i]]))
        offset += int(lanes_used[i])
    return Lanes(rows=rows, y=base[track] + lane, n_lanes=offset, ticks=tuple(ticks), clamped=clamped, gpu=tuple(gpu))


def drawn_depth(trace: Trace) -> I64:
    """Per event, how many of its enclosing events (`Links.parent` chain) the timeline draws (`DRAWN_KINDS`): its
    nesting depth with the Python stack frames, which are not drawn, left out, so that they take no lane. The loop
    runs over nesting levels, each level vectorised."""
    parent, depth = trace.links.parent.astype(np.int64), trace.links.depth.astype(np.int64)
    out = np.zeros(depth.size, dtype=np.int64)
    if depth.size == 0 or int(depth.max()) == 0:
        return out
    drawn = kind_mask(trace.events.kind, DRAWN_KINDS).astype(np.int64)
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2))
    for level in range(1, int(depth.max()) + 1):
        rows = order[bounds[level] : bounds[level + 1]]
        above = parent[rows]
        out[rows] = out[above] + drawn[above]
    return out


def _natural(text: str) -> tuple[int, int, str]:
    stripped = text.lstrip("-")
    return (0, int(text), "") if stripped.isdigit() else (1, 0, text)


def _track_sort_key(trace: Trace, track: int) -> tuple[object, ...]:
    tracks = trace.tracks
    if tracks.is_gpu[track]:
        return (1, int(tracks.device[track]), int(tracks.stream[track]))
    return (0, _natural(tracks.pid[track]), _natural(tracks.tid[track]))


@dataclass(frozen=True)
class Blocks:
    """Merged runs of events on one lane: start/end (ns), how many events and their summed duration."""

    y: I64
    start_ns: I64
    end_ns: I64
    count: I64
    busy_ns: I64

    def __len__(self) -> int:
        return int(self.y.size)


def merge_into_blocks(y: I64, start_ns: I64, end_ns: I64, gap_ns: int) -> Blocks:
    """Merge events per lane `y` whose gaps are at most `gap_ns` into blocks (sorted by lane, then time)."""
    if y.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Blocks(empty, empty, empty, empty, empty)
    order = np.lexsort((start_ns, y))
    g, s, e = y[order].astype(np.int64), start_ns[order].astype(np.int64), end_ns[order].astype(np.int64)
    offset = g * (2 * (int(e.max()) - int(s.min()) + 1 + gap_ns))  # later lanes exceed earlier ones
    running = np.maximum.accumulate(e + offset) - offset
    new = np.ones(g.size, dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > running[:-1] + gap_ns)
    first = np.flatnonzero(new)
    return Blocks(
        y=g[first],
        start_ns=s[first],
        end_ns=np.maximum.reduceat(e, first),
        count=np.diff(np.append(first, g.size)).astype(np.int64),
        busy_ns=np.add.reduceat(e - s, first),
    )


def gap_for_blocks(y: I64, start_ns: I64, end_ns: I64, max_blocks: int) -> int:
    """The smallest gap (ns) such that merging events per lane across gaps up to it leaves at most
    `max_blocks` blocks (0 when the events already fit)."""
    if y.size <= max_blocks:
        return 0
    order = np.lexsort((start_ns, y))
    g, s, e = y[order].astype(np.int64), start_ns[order].astype(np.int64), end_ns[order].astype(np.int64)
    offset = g * (2 * (int(e.max()) - int(s.min()) + 1))
    running = np.maximum.accumulate(e + offset) - offset
    gaps = s[1:] - running[:-1]
    gaps = gaps[g[1:] == g[:-1]]  # a new lane always starts a block
    keep = max_blocks - int(np.unique(g).size)  # gaps that may stay open
    if keep <= 0:
        return int(gaps.max()) if gaps.size else 0
    if gaps.size <= keep:
        return 0
    return int(np.partition(gaps, gaps.size - keep - 1)[gaps.size - keep - 1])
