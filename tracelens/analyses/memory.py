"""Memory per step, from the `[memory]` events of traces recorded with `profile_memory=True` (`Trace.memory`).

Contract: `analyze_memory(ctx) -> Memory` over the analyzed steps (`ctx.window`); pure. `memory_of(trace,
window)` is the same for any window.

Definitions (each event carries the allocator's `Total Allocated` / `Total Reserved` on its device *after* it):
- the *device* of the figures is the accelerator (`Device Type` ≠ 0) whose `Total Allocated` is highest in the
  analyzed steps; the CPU only when the trace has no accelerator memory events. `devices` lists every device.
- *peak allocated* of a step: the highest `Total Allocated` the device reached in [step start, step end): the
  largest value of the events in the step, and the level carried in (the value of the device's last event
  before the step), as the level holds between events. Same for *peak reserved*. The headline
  `peak_allocated_bytes` / `peak_reserved_bytes` are medians over the analyzed steps; null when the events carry
  no totals (older PyTorch) or no step has a level.
- *allocations* of a step: the device's events with `Bytes` > 0 in the step (frees are `Bytes` < 0), counted and
  summed; `by_op` groups them by the outermost CPU op running on their thread (the op the Python code called),
  `by_inner_op` by the innermost one (often `aten::empty`); both per step (totals over the steps ÷ steps).
- an allocation *outlives* its step when no free of its `Addr` on that device follows it before the step ends
  (the next event of that address is not a free, or comes at or after the end; an allocation whose free the
  trace does not hold outlives every step). Null when the events carry no `Addr`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.window import Window
from tracelens.model import stats
from tracelens.model.events import I64, Kind
from tracelens.model.memory import EXTRAS_NOT_READ, MemoryTable
from tracelens.model.steps import STEP_PREFIX
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

MAX_OPS = 15  # rows of `by_op` / `by_inner_op`
TIMELINE_POINTS = 4000  # per device and series in `timeline` (peaks and troughs of each bin kept)
NO_OP = "(no CPU op)"


class MemoryDevice(msgspec.Struct, frozen=True):
    device: str  # "GPU 0", "CPU"
    device_type: int  # c10::DeviceType (0 CPU, 1 CUDA, 6 HIP)
    device_id: int
    events: int  # memory events of the device in the whole trace
    max_allocated_bytes: int | None  # highest Total Allocated in the analyzed steps (None: no totals)
    max_reserved_bytes: int | None


class MemoryStep(msgspec.Struct, frozen=True):
    step: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    allocations: int
    allocated_bytes: int
    frees: int
    outliving_allocations: int | None  # None: the events carry no Addr
    outliving_bytes: int | None


class MemoryOp(msgspec.Struct, frozen=True):
    op: str
    allocations_per_step: float
    bytes_per_step: float
    share_of_bytes: float  # of the allocated bytes of the analyzed steps, in [0, 1]


class MemorySeries(msgspec.Struct, frozen=True):
    """The device's totals over time (µs since trace start), thinned to at most `TIMELINE_POINTS` points
    (each bin keeps its lowest and highest value)."""

    device: str
    ts_us: list[float]
    allocated_bytes: list[int]
    reserved_bytes: list[int]


class Memory(msgspec.Struct, frozen=True):
    device: str | None  # the device of the figures; None without memory events
    peak_allocated_bytes: int | None  # median over steps
    peak_reserved_bytes: int | None
    allocations_per_step: float | None
    allocated_bytes_per_step: float | None
    outliving_allocations_per_step: float | None
    outliving_bytes_per_step: float | None
    steps: list[MemoryStep]
    devices: list[MemoryDevice]
    by_op: list[MemoryOp]  # outermost CPU op, most bytes first
    by_inner_op: list[MemoryOp]  # innermost CPU op
    timeline: list[MemorySeries]  # for the report (not in the JSON)
    note: str  # why figures are null, or what they cover


def analyze_memory(ctx: AnalysisContext) -> Memory:
    """Memory per step over the analyzed steps (see the module docstring)."""
    return memory_of(ctx.trace, ctx.window)


def memory_of(trace: Trace, window: Window) -> Memory:
    """`analyze_memory` for any window."""
    memory = trace.memory
    if not len(memory):
        if any(w.startswith(EXTRAS_NOT_READ) for w in trace.warnings):
            return _empty("memory events were not read: the file needed repairs to decode (see the warnings)")
        return _empty("the trace has no [memory] events (record with torch.profiler's profile_memory=True)")
    devices = _device_keys(memory)
    starts = trace.steps.start_ns[window.step_indices]
    ends = trace.steps.end_ns[window.step_indices]
    rows_of = {key: np.flatnonzero((memory.device_type == key[0]) & (memory.device == key[1])) for key in devices}
    in_steps = {key: _in_any(memory.ts_ns[rows], starts, ends) for key, rows in rows_of.items()}
    maxima = {key: _max_known(memory.total_allocated[rows][in_steps[key]]) for key, rows in rows_of.items()}
    chosen = _headline(devices, maxima)
    rows = rows_of[chosen]
    device_rows = [
        MemoryDevice(
            device=_device_label(*key),
            device_type=key[0],
            device_id=key[1],
            events=int(rows_of[key].size),
            max_allocated_bytes=maxima[key],
            max_reserved_bytes=_max_known(memory.total_reserved[rows_of[key]][in_steps[key]]),
        )
        for key in devices
    ]
    if not window.n_steps:
        return _empty("no complete step to analyze", _device_label(*chosen), device_rows)
    steps = _steps(trace, memory, rows, window)
    ops_outer, ops_inner = _by_op(trace, memory, rows, starts, ends, window.n_steps)
    peaks = [s.peak_allocated_bytes for s in steps if s.peak_allocated_bytes is not None]
    reserved = [s.peak_reserved_bytes for s in steps if s.peak_reserved_bytes is not None]
    outliving = [s for s in steps if s.outliving_allocations is not None]
    notes = [f"{_device_label(*chosen)}, over {window.n_steps} step{'s' if window.n_steps > 1 else ''}"]
    if not peaks:
        notes.append("peaks unknown: the memory events carry no Total Allocated / Total Reserved (older PyTorch)")
    if not outliving:
        notes.append("outliving allocations unknown: the memory events carry no Addr")
    return Memory(
        device=_device_label(*chosen),
        peak_allocated_bytes=_median_int(peaks),
        peak_reserved_bytes=_median_int(reserved),
        allocations_per_step=sum(s.allocations for s in steps) / len(steps),
        allocated_bytes_per_step=sum(s.allocated_bytes for s in steps) / len(steps),
        outliving_allocations_per_step=_median_float([s.outliving_allocations for s in outliving]),
        outliving_bytes_per_step=_median_float([s.outliving_bytes for s in outliving]),
        steps=steps,
        devices=device_rows,
        by_op=ops_outer,
        by_inner_op=ops_inner,
        timeline=[_series(memory, rows_of[key], _device_label(*key)) for key in devices],
        note="; ".join(notes),
    )


def _empty(note: str, device: str | None = None, devices: list[MemoryDevice] | None = None) -> Memory:
    return Memory(device, None, None, None, None, None, None, [], devices or [], [], [], [], note)


def _device_keys(memory: MemoryTable) -> list[tuple[int, int]]:
    key = memory.device_type.astype(np.int64) * (1 << 32) + (memory.device + 1)  # ids are small: no collision
    firsts = np.unique(key, return_index=True)[1]
    return sorted({(int(memory.device_type[i]), int(memory.device[i])) for i in firsts.tolist()})


def _device_label(device_type: int, device_id: int) -> str:
    if device_type == 0:
        return "CPU"
    return f"GPU {device_id}" if device_type in (1, 6) else f"device type {device_type} id {device_id}"


def _headline(devices: list[tuple[int, int]], maxima: dict[tuple[int, int], int | None]) -> tuple[int, int]:
    """The accelerator with the highest Total Allocated in the steps (the most events when none is known); the
    CPU when there is no accelerator."""
    accelerators = [key for key in devices if key[0] != 0] or devices
    return max(accelerators, key=lambda key: (maxima[key] if maxima[key] is not None else -1, key[1] * -1))


def _in_any(ts_ns: I64, starts: I64, ends: I64) -> np.ndarray:
    """Whether each time falls in one of the [start, end) windows (steps do not overlap)."""
    return _step_of(ts_ns, starts, ends) >= 0


def _step_of(ts_ns: I64, starts: I64, ends: I64) -> I64:
    """Index into `starts` of the window holding each time, -1 if none."""
    if not starts.size:
        return np.full(ts_ns.size, -1, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    at = np.searchsorted(starts[order], ts_ns, side="right") - 1
    hit = at >= 0
    index = np.where(hit, order[np.maximum(at, 0)], -1)
    hit &= ts_ns < ends[np.maximum(index, 0)]
    return np.where(hit, index, -1).astype(np.int64)


def _max_known(values: I64) -> int | None:
    known = values[values >= 0]
    return int(known.max()) if known.size else None


def _median_int(values: list[int]) -> int | None:
    return round(stats.median(np.array(values, dtype=np.float64))) if values else None


def _median_float(values: list[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(stats.median(np.array(known, dtype=np.float64))) if known else None


def _steps(trace: Trace, memory: MemoryTable, rows: I64, window: Window) -> list[MemoryStep]:
    """Each analyzed step's figures from the device's events `rows` (time order): events in [start, end)."""
    ts = memory.ts_ns[rows]
    size = memory.bytes[rows]
    index = window.step_indices
    end_ns = trace.steps.end_ns[index].astype(np.int64)
    lo = np.searchsorted(ts, trace.steps.start_ns[index], side="left")
    hi = np.searchsorted(ts, end_ns, side="left")
    allocations = _range_sums((size > 0).astype(np.int64), lo, hi)
    allocated = _range_sums(np.where(size > 0, size, 0), lo, hi)
    frees = _range_sums((size < 0).astype(np.int64), lo, hi)
    peak_allocated = _peaks(memory.total_allocated[rows], lo, hi)
    peak_reserved = _peaks(memory.total_reserved[rows], lo, hi)
    free_ts = _free_times(memory, rows)
    has_addr = bool((memory.addr[rows] >= 0).any())
    out = []
    for i, number in enumerate(window.step_numbers):
        outliving: np.ndarray | None = None
        if has_addr:  # allocations of the step not freed before its end
            outliving = np.flatnonzero((size[lo[i] : hi[i]] > 0) & (free_ts[lo[i] : hi[i]] >= end_ns[i])) + lo[i]
        out.append(
            MemoryStep(
                step=int(number),
                peak_allocated_bytes=peak_allocated[i],
                peak_reserved_bytes=peak_reserved[i],
                allocations=allocations[i],
                allocated_bytes=allocated[i],
                frees=frees[i],
                outliving_allocations=None if outliving is None else int(outliving.size),
                outliving_bytes=None if outliving is None else int(size[outliving].sum()),
            )
        )
    return out


def _range_sums(values: I64, lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """The sum of `values[lo[i]:hi[i]]` for each i (0 for an empty range)."""
    cumulative = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
    return (cumulative[hi] - cumulative[np.minimum(lo, hi)]).tolist()


def _peaks(level: I64, lo: np.ndarray, hi: np.ndarray) -> list[int | None]:
    """For each range [lo, hi) of rows: the highest known (≥ 0) level in it and of the last known row before it
    (carried in); None when neither is known."""
    if level.size == 0 or lo.size == 0:
        return [None] * lo.size
    last_known = np.maximum.accumulate(np.where(level >= 0, np.arange(level.size), -1))
    before = np.where(lo > 0, last_known[np.maximum(lo - 1, 0)], -1)
    carried = np.where(before >= 0, level[np.maximum(before, 0)], -1)
    padded = np.append(np.maximum(level, -1), -1)  # index `level.size` is valid for reduceat
    inside = np.maximum.reduceat(padded, np.stack((lo, hi), axis=1).ravel())[::2]
    inside = np.where(hi > lo, inside, -1)
    peak = np.maximum(inside, carried)
    return [None if value < 0 else value for value in peak.tolist()]


def _free_times(memory: MemoryTable, rows: I64) -> I64:
    """For each of `rows` (one device, in time order): the time of the free of its address that follows it (the
    next event of the same `Addr` if that is a free), else int64 max (never freed in the trace)."""
    never = np.iinfo(np.int64).max
    out = np.full(rows.size, never, dtype=np.int64)
    addr = memory.addr[rows]
    order = np.argsort(addr, kind="stable")  # by address, then time order (rows are in time order)
    same = addr[order[1:]] == addr[order[:-1]]
    next_is_free = same & (memory.bytes[rows][order[1:]] < 0) & (addr[order[:-1]] >= 0)
    current, following = order[:-1][next_is_free], order[1:][next_is_free]
    out[current] = memory.ts_ns[rows][following]
    return out


def _by_op(
    trace: Trace, memory: MemoryTable, rows: I64, starts: I64, ends: I64, n_steps: int
) -> tuple[list[MemoryOp], list[MemoryOp]]:
    in_step = _in_any(memory.ts_ns[rows], starts, ends) & (memory.bytes[rows] > 0)
    picked = rows[in_step]
    inner = memory.op[picked].astype(np.int64)
    outer = _outermost_ops(trace, inner)
    size = memory.bytes[picked].astype(np.float64)
    return _group(trace, outer, size, n_steps), _group(trace, inner, size, n_steps)


def _outermost_ops(trace: Trace, ops: I64) -> I64:
    """For each CPU op row (-1 = none), its outermost CPU op ancestor (itself when it has none); ProfilerStep
    annotations recorded as ops (older Kineto) are not ops here."""
    parent, kind = trace.links.parent, trace.events.kind
    step_name = np.array([name.startswith(STEP_PREFIX) for name in trace.events.names] + [False], dtype=bool)
    best = ops.copy()
    current = ops.copy()
    active = np.flatnonzero(current >= 0)
    while active.size:
        current[active] = parent[current[active]]
        active = active[current[active] >= 0]
        rows = current[active]
        is_op = active[(kind[rows] == Kind.CPU_OP) & ~step_name[trace.events.name[rows]]]
        best[is_op] = current[is_op]
    return best


def _group(trace: Trace, ops: I64, size: np.ndarray, n_steps: int) -> list[MemoryOp]:
    if not ops.size:
        return []
    codes = np.where(ops >= 0, trace.events.name[np.maximum(ops, 0)], -1).astype(np.int64)
    counts = np.bincount(codes + 1)  # bin 0: no op
    totals = np.bincount(codes + 1, weights=size, minlength=counts.size)
    present = np.flatnonzero(counts)
    counts, totals = counts[present], totals[present]
    uniques = np.array([trace.events.names[c - 1] if c > 0 else NO_OP for c in present.tolist()], dtype=object)
    whole = float(size.sum())
    order = np.lexsort((uniques, -totals))[:MAX_OPS]
    return [
        MemoryOp(
            op=str(uniques[i]),
            allocations_per_step=float(counts[i]) / n_steps,
            bytes_per_step=float(totals[i]) / n_steps,
            share_of_bytes=float(totals[i]) / whole if whole > 0 else 0.0,
        )
        for i in order.tolist()
    ]


def _series(memory: MemoryTable, rows: I64, label: str) -> MemorySeries:
    """The device's totals over time, thinned to `TIMELINE_POINTS` (each of equal-time bins keeps its lowest and
    highest allocated and reserved rows, so no peak is lost)."""
    known = rows[(memory.total_allocated[rows] >= 0) | (memory.total_reserved[rows] >= 0)]
    if known.size > TIMELINE_POINTS:
        ts = memory.ts_ns[known]
        edges = np.linspace(ts[0], ts[-1], TIMELINE_POINTS // 4 + 1)
        firsts = np.searchsorted(ts, edges[:-1], side="left")
        starts = firsts[np.r_[True, firsts[1:] != firsts[:-1]]]  # first row of each non-empty bin (sorted)
        bin_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, known.size)))
        keep = np.zeros(known.size, dtype=bool)
        for column in (memory.total_allocated[known], memory.total_reserved[known]):
            for reduce in (np.maximum, np.minimum):
                hits = np.flatnonzero(column == reduce.reduceat(column, starts)[bin_of])
                keep[hits[np.r_[True, bin_of[hits[1:]] != bin_of[hits[:-1]]]]] = True  # each bin's first hit
        keep[[0, -1]] = True
        known = known[keep]
    return MemorySeries(
        device=label,
        ts_us=np.round(memory.ts_ns[known] / NS_PER_US, 3).tolist(),
        allocated_bytes=memory.total_allocated[known].tolist(),
        reserved_bytes=memory.total_reserved[known].tolist(),
    )
