"""GPU activity (kernels, memcpy, memset) as numpy columns, with category and launching op; no pandas.

Contract: `gpu_activity(trace) -> GpuActivity`, memoised per trace; one entry per GPU activity event, in event
row order. Names are codes into `trace.events.names` (-1 = none); `keygroups.string_keys` turns codes into keys that
group and sort exactly as the strings do, so analyses group by integers and make strings only for output.
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.analyses.autotune import autotune_mask
from tracelens.analyses.window import covered_ns, merge_intervals, step_mask
from tracelens.model.events import GPU_ACTIVITY_KINDS, I8, I32, I64, Bool, EventTable, Kind, kind_mask
from tracelens.model.kernel_names import CATEGORIES, categorize
from tracelens.model.memo import per_trace
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace
from tracelens.records import field_names


class GpuActivity(msgspec.Struct, frozen=True):
    """Columns of equal length, one entry per GPU activity; arrays are read-only."""

    row: I64  # event row
    kind: I8
    name: I32  # code into events.names
    category: I8  # index into kernel_names.CATEGORIES
    ts_ns: I64
    dur_ns: I64
    device: I64
    stream: I64
    step: I32  # step index of the launch, -1 = none
    launch: I32  # row of the launching runtime/driver call, -1 = none
    launch_name: I32  # its name code, -1 = none
    op_row: I64  # launching op (Inductor/Triton wrappers skipped), -1 = none
    op_name: I32  # its name code, -1 = none

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def subset(self, mask: Bool) -> GpuActivity:
        """The entries where `mask` is true, in the same order."""
        return GpuActivity(**{name: _frozen(getattr(self, name)[mask]) for name in field_names(self)})

    def in_steps(self, step_indices: np.ndarray) -> GpuActivity:
        """Entries launched in one of the steps `step_indices` (indices into `trace.steps`)."""
        return self.subset(step_mask(self.step, step_indices))


@per_trace
def gpu_activity(trace: Trace) -> GpuActivity:
    """The GPU activity of `trace` (computed once per trace)."""
    ev = trace.events
    rows = np.flatnonzero(kind_mask(ev.kind, GPU_ACTIVITY_KINDS))
    launch = trace.links.launch[rows]
    op = _display_op(trace, rows)
    name = ev.name[rows]
    launch_name = _name_codes(ev, launch)
    columns: dict[str, np.ndarray] = {
        "row": rows.astype(np.int64),
        "kind": ev.kind[rows],
        "name": name,
        "category": _categories(ev, name, launch_name),
        "ts_ns": ev.ts_ns[rows],
        "dur_ns": ev.dur_ns[rows],
        "device": ev.device[rows],
        "stream": ev.stream[rows],
        "step": trace.links.step[rows],
        "launch": launch,
        "launch_name": launch_name,
        "op_row": op,
        "op_name": _name_codes(ev, op),
    }
    return GpuActivity(**{key: _frozen(value) for key, value in columns.items()})


class StepWindows(msgspec.Struct, frozen=True):
    """Each step's GPU window and period, for every step of `trace.steps` (arrays in step order, ns).

    `gpu_end_ns[k]` = max(CPU end of step k, end of the last GPU activity launched in it, gpu_end_ns[k-1]);
    the window is [max(CPU start of k, gpu_end_ns[k-1]), gpu_end_ns[k]) (the first step's starts at its CPU
    start), so windows never overlap and a CPU-bound step's window is its CPU span. `busy_ns`: per step, the
    union of ALL GPU activity inside the window, whoever launched it, summed over `devices`; `window_ns` is
    the window's length times the number of devices, so idle = window_ns - busy_ns. `period_ns`: the step
    time (GPU end to GPU end when the GPU is the limiter, i.e. the previous step's GPU work ended after this
    step's CPU start; else CPU start to the next step's CPU start; the window length for the trace's first
    step, and for its last when it is not GPU-limited). `backlog_ns`: how far GPU work trails the CPU at the
    step's CPU end. When GPU work launched before the recording (the queue of earlier steps) still runs after the
    first step's CPU start and the step's GPU work trails its CPU end, that step is GPU-limited by it: its period
    runs from when that work ended to its own GPU end; when the first recorded GPU activity is such work, its
    window starts there (what the GPU did before is not in the trace).
    """

    start_ns: I64
    end_ns: I64
    devices: I64
    window_ns: I64
    busy_ns: I64
    period_ns: I64
    gpu_limited: Bool
    backlog_ns: I64


@per_trace
def device_busy_intervals(trace: Trace) -> dict[int, np.ndarray]:
    """Per device: merged (k, 2) ns intervals when some GPU activity (any stream) ran, Inductor's autotuning
    left out (`analyses.autotune`)."""
    gpu = gpu_activity(trace)
    work = ~autotune_mask(trace)[gpu.row]  # Inductor's autotuning is compile cost, not busy time
    return {
        int(device): merge_intervals(
            gpu.ts_ns[(gpu.device == device) & work], (gpu.ts_ns + gpu.dur_ns)[(gpu.device == device) & work]
        )
        for device in distinct_ints(gpu.device).tolist()
    }


@per_trace
def step_windows(trace: Trace) -> StepWindows:
    """`StepWindows` of every step of `trace` (computed once per trace)."""
    steps, gpu = trace.steps, gpu_activity(trace)
    n = len(steps)
    end = gpu.ts_ns + gpu.dur_ns
    launched_end = steps.end_ns.astype(np.int64).copy()
    in_step = gpu.step >= 0
    np.maximum.at(launched_end, gpu.step[in_step], end[in_step])
    if not steps.per_step and n and gpu.ts_ns.size:  # one whole-trace window covers all GPU work
        launched_end[0] = max(int(launched_end[0]), int(end.max()))
    gpu_end = np.maximum.accumulate(launched_end) if n else launched_end
    previous_end = np.concatenate(([np.iinfo(np.int64).min], gpu_end[:-1])) if n else gpu_end
    start = np.minimum(np.maximum(steps.start_ns, previous_end), gpu_end)
    if not steps.per_step and n and gpu.ts_ns.size:
        start[0] = min(int(start[0]), int(gpu.ts_ns.min()))
    earlier_end = -1  # when the work launched before the recording that ran into the first step ended
    first_start = int(start[0]) if n else 0  # the first window's start before that work is taken into account
    if steps.per_step and n and gpu.ts_ns.size:
        start[0], earlier_end = _earlier_work(gpu, end, int(steps.start_ns[0]), int(start[0]))
        start[0] = min(int(start[0]), int(gpu_end[0]))
    busy = device_busy_intervals(trace)
    busy_ns = np.zeros(n, dtype=np.float64)
    for intervals in busy.values():
        busy_ns += covered_ns(intervals, start, gpu_end)
    gpu_limited = previous_end > steps.start_ns
    gpu_limited[:1] = False
    next_start = np.concatenate((steps.start_ns[1:], [-1])) if n else steps.start_ns
    if steps.spans_calls:  # a call's step is the call: the time until the next call is not its period
        next_start = np.full_like(next_start, -1)
    period = np.where(
        gpu_limited,
        gpu_end - previous_end,
        np.where(next_start >= 0, next_start - steps.start_ns, gpu_end - steps.start_ns),
    )
    if n:
        # no previous step: its window; GPU-limited by the earlier work when that ran into it and the GPU trails
        gpu_limited[0] = earlier_end > int(steps.start_ns[0]) and int(gpu_end[0]) > int(steps.end_ns[0])
        period[0] = gpu_end[0] - (max(int(start[0]), earlier_end) if gpu_limited[0] else first_start)
        if not gpu_limited[-1] and n > 1:  # a last step without a next one (a single step is the first)
            period[-1] = gpu_end[-1] - start[-1]
    return StepWindows(
        start_ns=start,
        end_ns=gpu_end,
        devices=np.asarray(sorted(busy), dtype=np.int64),
        window_ns=(gpu_end - start) * max(len(busy), 1),
        busy_ns=np.rint(busy_ns).astype(np.int64),
        period_ns=period.astype(np.int64),
        gpu_limited=gpu_limited,
        backlog_ns=np.maximum(gpu_end - steps.end_ns, 0),
    )


def _earlier_work(gpu: GpuActivity, end: I64, step_start: int, start: int) -> tuple[int, int]:
    """(window start, end of earlier work) of the trace's first step (index 0). Earlier work is the queue of
    earlier steps: GPU activity launched before the recording (no launch in the trace) that ends after the step's
    CPU start and starts before the first activity the step launched (-1: none). As a later step's window starts
    where the previous step's GPU work ends, the first one's starts where that work ends (or where the step's own
    first activity starts, if that is sooner: another stream)."""
    own = gpu.ts_ns[gpu.step == 0]
    first_own = int(own.min()) if own.size else np.iinfo(np.int64).max
    earlier = np.flatnonzero((gpu.launch < 0) & (end > step_start) & (gpu.ts_ns < first_own))
    if earlier.size == 0:
        return start, -1
    earlier_end = int(end[earlier].max())
    return max(start, min(earlier_end, first_own)), earlier_end


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _name_codes(ev: EventTable, rows: np.ndarray) -> I32:
    """Name codes of the events at `rows` (-1 gives -1)."""
    return np.where(rows >= 0, ev.name[np.maximum(rows, 0)], -1).astype(np.int32)


def _categories(ev: EventTable, name: I32, launch_name: I32) -> I8:
    """`categorize(name, launch API)` computed once per distinct (name, launch API) pair."""
    if name.size == 0:
        return np.zeros(0, dtype=np.int8)
    distinct_names, distinct_launches = distinct_ints(name), distinct_ints(launch_name)
    name_rank = np.searchsorted(distinct_names, name)
    launch_rank = np.searchsorted(distinct_launches, launch_name)
    if distinct_names.size * distinct_launches.size <= 4 * name.size + 65536:  # pairs by counting, no sort
        pair = name_rank * distinct_launches.size + launch_rank
        present = np.bincount(pair, minlength=distinct_names.size * distinct_launches.size) > 0
        pairs = np.flatnonzero(present)
        inverse = (np.cumsum(present) - 1)[pair]
        names_rank, launches_rank = np.divmod(pairs, distinct_launches.size)
        names, launches = distinct_names[names_rank], distinct_launches[launches_rank] + 1
    else:
        pair = name.astype(np.int64) * (len(ev.names) + 1) + (launch_name.astype(np.int64) + 1)
        pairs, inverse = np.unique(pair, return_inverse=True)
        names, launches = np.divmod(pairs, len(ev.names) + 1)
    index = {category: code for code, category in enumerate(CATEGORIES)}
    codes = [
        index[categorize(ev.names[n], ev.names[a - 1] if a > 0 else "")]
        for n, a in zip(names.tolist(), launches.tolist(), strict=True)
    ]
    return np.asarray(codes, dtype=np.int8)[inverse.ravel()]


def _display_op(trace: Trace, gpu_rows: np.ndarray) -> I64:
    """The launching op, or its enclosing op when it is an Inductor/Triton wrapper named like a kernel."""
    ev = trace.events
    op = trace.links.op[gpu_rows].astype(np.int64)
    has = op >= 0
    wrapper = np.zeros(op.size, dtype=bool)
    wrapper[has] = ev.name[op[has]] == ev.name[gpu_rows[has]]
    triton = np.zeros(len(ev.names), dtype=bool)
    triton[_triton_name_codes(ev)] = True
    wrapper[has] |= triton[ev.name[op[has]]]
    if wrapper.any():
        op[wrapper] = nearest_ancestor_of_kind(trace.links.parent, ev.kind, Kind.CPU_OP, op[wrapper])
    return op


def _triton_name_codes(ev: EventTable) -> I32:
    return np.array([code for code, name in enumerate(ev.names) if name.startswith("triton_")], dtype=np.int32)
