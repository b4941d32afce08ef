"""Memory and counter tables: the `[memory]` instant events of `profile_memory=True` traces and the counter
(`ph: "C"`) samples, columnar, in time order; and which CPU op each memory event happened in.

Times are integer nanoseconds on the event table's clock (`Trace.origin_us`). Missing integers are -1.
"""

from __future__ import annotations

import msgspec
import numpy as np
import numpy.typing as npt

from tracelens.model.events import CPU_KINDS, I32, I64, EventTable, Kind, kind_mask
from tracelens.model.nesting import nearest_ancestor_of_kind

F64 = npt.NDArray[np.float64]
# how the loader's warning starts when a file's memory and counter events could not be read (it needed repairs)
EXTRAS_NOT_READ = "memory and counter events, if any, were not read"


class MemoryTable(msgspec.Struct, frozen=True):
    """One row per `[memory]` event (an allocation, `bytes` > 0, or a free, `bytes` < 0), in time order (file
    order among equal times). `total_allocated` / `total_reserved`: the allocator's totals on that device right
    after the event. `track`: the CPU thread (index into `Trace.tracks`, -1 when the thread has no complete
    events); `op`: the innermost CPU op (`Kind.CPU_OP` row of the event table) running on that thread at `ts_ns`,
    -1 if none."""

    ts_ns: I64
    bytes: I64
    total_allocated: I64
    total_reserved: I64
    device: I64  # `Device Id` (-1 for the CPU)
    device_type: I64  # `Device Type` (c10::DeviceType: 0 CPU, 1 CUDA, also on ROCm)
    addr: I64
    track: I32
    op: I32

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @classmethod
    def empty(cls) -> MemoryTable:
        i64 = np.zeros(0, dtype=np.int64)
        i32 = np.zeros(0, dtype=np.int32)
        return cls(i64, i64, i64, i64, i64, i64, i64, i32, i32)


class CounterTable(msgspec.Struct, frozen=True):
    """One row per sample of a counter series: a `ph: "C"` event named `names[name]` in process `pids[pid]`
    gives a row per numeric `args` key (`series[series]`). In time order."""

    ts_ns: I64
    name: I32
    series: I32
    pid: I32
    value: F64
    names: tuple[str, ...]
    series_names: tuple[str, ...]
    pids: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @classmethod
    def empty(cls) -> CounterTable:
        i32 = np.zeros(0, dtype=np.int32)
        return cls(np.zeros(0, dtype=np.int64), i32, i32, i32, np.zeros(0, dtype=np.float64), (), (), ())

    def lane_keys(self) -> list[tuple[int, int, int]]:
        """The distinct (pid, name, series) codes, in order of the labels."""
        if not len(self):
            return []
        keys = np.unique(np.stack([self.pid, self.name, self.series], axis=1), axis=0)
        order = sorted(
            range(len(keys)),
            key=lambda i: (self.pids[keys[i][0]], self.names[keys[i][1]], self.series_names[keys[i][2]]),
        )
        return [(int(keys[i][0]), int(keys[i][1]), int(keys[i][2])) for i in order]


def enclosing_ops(
    events: EventTable, parent: I32, depth: I32, ts_ns: I64, track: I32, cpu_order: I64 | None = None
) -> I32:
    """For points (`ts_ns`, CPU `track`), the innermost `Kind.CPU_OP` event on that track running at the point
    (start <= ts < end, or an instant op at ts), -1 if none. `cpu_order`: the CPU-side rows sorted by (track,
    start, depth), stable (`nesting.nest_ordered` gives them); sorted here when not given.

    Vectorised: the CPU-side event of the track that started last at or before the point (the deepest among
    equal starts) is found by a sorted search; any event running at the point contains that event's start, so
    it is that event or one of its ancestors (`nest`'s contract), reached by climbing `parent` until an event
    still runs at the point; from there, the nearest CPU op at or above it."""
    n = ts_ns.size
    out = np.full(n, -1, dtype=np.int32)
    if n == 0:
        return out
    if cpu_order is None:
        cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
        cpu_order = cpu[np.lexsort((depth[cpu], events.ts_ns[cpu], events.track[cpu]))]
    order = cpu_order
    if order.size == 0:
        return out
    keys = events.ts_ns[order]  # becomes track * span + (start - base), built in place
    base = int(min(int(keys.min()), int(ts_ns.min())))
    span = int(max(int(keys.max()), int(ts_ns.max()))) - base + 1
    keys -= base
    keys += np.multiply(events.track[order], span, dtype=np.int64)
    points = track.astype(np.int64) * span + (ts_ns - base)
    at = np.searchsorted(keys, points, side="right") - 1
    del keys
    valid = (track >= 0) & (at >= 0)
    valid[valid] &= events.track[order[at[valid]]] == track[valid]
    candidate = np.where(valid, order[np.maximum(at, 0)], -1).astype(np.int64)
    active = np.flatnonzero(candidate >= 0)
    while active.size:  # climb until the candidate runs at the point
        c = candidate[active]
        runs = (events.ts_ns[c] + events.dur_ns[c] > ts_ns[active]) | (events.ts_ns[c] == ts_ns[active])
        moving = active[~runs]
        if not moving.size:
            break
        candidate[moving] = parent[candidate[moving]]
        active = moving[candidate[moving] >= 0]
    found = np.flatnonzero(candidate >= 0)
    rows = candidate[found]
    is_op = events.kind[rows] == Kind.CPU_OP
    op = np.where(is_op, rows, nearest_ancestor_of_kind(parent, events.kind, Kind.CPU_OP, rows))
    out[found] = op
    return out
