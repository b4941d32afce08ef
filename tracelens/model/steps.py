"""Steps from `ProfilerStep#N` annotations (or inferred from repeated calls), and assigning events to them.

A step owns the CPU events that start inside its CPU span (any thread) and the GPU activity whose launch
starts inside it. GPU activity without a launch in the trace belongs to no step; neither does Inductor's
autotuning (`autotune_rows`: compile cost, not workload). A trace without ProfilerStep annotations has
steps inferred from a training loop's markers (`loop_marker_steps`: DataLoader or optimizer ranges, a step from
one call to the next), else from its repeated torch.compile calls (`infer_steps`: each outermost
`Torch-Compiled Region: f/r` call is one step, when there are at least two), else it is one whole-trace window,
on which no per-step claim is made (docs/definitions.md#inferred-steps).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec
import numpy as np

from tracelens import native
from tracelens.model.events import (
    API_KINDS,
    CPU_KINDS,
    GPU_ACTIVITY_KINDS,
    I32,
    I64,
    EventTable,
    Kind,
    codes_mask,
    kind_mask,
    kind_table,
)
from tracelens.model.stats import distinct_ints, percentiles
from tracelens.model.trace import WHOLE_TRACE_SOURCE, StepTable
from tracelens.native import extension as _native

_IS_CPU = kind_table(CPU_KINDS, np.uint8)
STEP_PREFIX = "ProfilerStep#"  # the profiler's step annotation: ProfilerStep#N
STEP_NAME = re.compile(rf"^{STEP_PREFIX}(\d+)$")
REGION_CALL = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
INFERRED_FROM = "Torch-Compiled Region calls"
# Inductor's autotuning (docs/definitions.md#autotuning): the ranges it benchmarks candidate kernels in, and the
# op name it launches template benchmark kernels under
AUTOTUNE_RANGE = re.compile(
    r"^(mm_template_autotuning|CachingAutotuner\.(benchmark_all_configs|coordinate_descent_tuning)|"
    r"benchmark_fused_nodes|benchmark_codegened_module)( \(dynamo_timed\))?$|^Placeholder\.DESCRIPTIVE_NAME$"
)
MIN_INFERRED_STEPS = 2
# The ranges torch emits once per iteration of a training loop (a DataLoader's next batch, the optimizer's
# zero_grad and step), in the order they are tried: each call's start begins a step that lasts until the next
# call of the same range starts (docs/definitions.md#inferred-steps)
DATALOADER_RANGE = "enumerate(DataLoader)#"  # prefixes of the names torch gives these `record_function` ranges
OPTIMIZER_RANGES = ("Optimizer.step#", "Optimizer.zero_grad#")
LOOP_MARKERS = (
    (DATALOADER_RANGE, "DataLoader iterations"),
    (OPTIMIZER_RANGES[1], "Optimizer.zero_grad calls"),
    (OPTIMIZER_RANGES[0], "Optimizer.step calls"),
)
# Every `record_function` range torch itself opens: the step, the loop markers, `with_stack`'s `## … ##` frames
# (annotations, though the 2021 Kineto format records them as `Operator`, a CPU op)
TORCH_RANGE = re.compile(
    "^("
    + "|".join(
        [STEP_NAME.pattern.strip("^$").replace(r"(\d+)", r"\d+") + "$", *(re.escape(p) for p, _ in LOOP_MARKERS)]
    )
    + "|## .* ##$)"
)
WHOLE_TRACE = -1  # the number of the one window of a trace without steps (`source == WHOLE_TRACE_SOURCE`)


def step_label(number: int) -> str:
    """How a step's number is shown to people in a column: the number, or "trace" for the whole-trace window."""
    return "trace" if number == WHOLE_TRACE else str(number)


def steps_words(count: int, source: str) -> str:
    """How many steps a figure is over, in words: "N steps", or "the whole trace (no steps)" for a trace without
    steps (`StepTable.source` `WHOLE_TRACE_SOURCE`)."""
    if source == WHOLE_TRACE_SOURCE:
        return "the whole trace (no steps)"
    return f"{count} step" + ("" if count == 1 else "s")


def is_whole_trace(numbers: Sequence[int]) -> bool:
    """Whether the steps numbered `numbers` are the one whole-trace window of a trace without steps."""
    return len(numbers) == 1 and numbers[0] == WHOLE_TRACE


def per_step(source: str) -> str:
    """How a per-step figure's unit ends in a sentence: "/step", or "" for a trace without steps
    (`StepTable.source` `WHOLE_TRACE_SOURCE`: the figure is the whole trace's, as the window's heading says)."""
    return "" if source == WHOLE_TRACE_SOURCE else "/step"


def step_words(number: int | None) -> str:
    """How a step is named in a sentence: "step N", "the whole trace" for the whole-trace window, "no step"
    (None)."""
    if number is None:
        return "no step"
    return "the whole trace" if number == WHOLE_TRACE else f"step {number}"


MAX_STEP_NUMBER = 2**63 - 1  # a larger number does not fit the step column: such a name is not a step


def step_numbers_by_code(names: tuple[str, ...]) -> dict[int, int]:
    """{name code: step number} of the names that are step annotations (`ProfilerStep#N`, N within int64)."""
    numbers = {}
    for code, name in enumerate(names):
        match = STEP_NAME.match(name)
        if match is not None and (number := _step_number(match.group(1))) is not None:
            numbers[code] = number
    return numbers


def _step_number(digits: str) -> int | None:
    """The step number `digits` spell, or None when it does not fit int64 (compared by length first: a
    5,000-digit name is never converted, which Python refuses past 4,300 digits)."""
    if len(digits) > len(str(MAX_STEP_NUMBER)):
        return None
    number = int(digits)
    return number if number <= MAX_STEP_NUMBER else None


def oversized_step_names(names: tuple[str, ...]) -> list[str]:
    """Names shaped like a step annotation whose number is too large to be one (they are ordinary events)."""
    return [name for name in names if (match := STEP_NAME.match(name)) and _step_number(match.group(1)) is None]


def find_steps(events: EventTable, truncated: bool) -> StepTable:
    """Steps sorted by start. The last step of a truncated trace, or one running past the last CPU event,
    is marked incomplete; so is the one whole-trace window of a truncated trace without steps (what followed
    the cut is unknown). Without ProfilerStep annotations: `infer_steps`, failing that the whole trace."""
    by_code = step_numbers_by_code(events.names)
    cpu = kind_mask(events.kind, CPU_KINDS)
    codes = np.fromiter(by_code, dtype=np.int32, count=len(by_code))
    is_step = cpu & codes_mask(events.name, codes) & (events.kind != Kind.RUNTIME)
    rows = np.flatnonzero(is_step)
    if rows.size == 0:
        inferred = infer_steps(events, truncated)
        return inferred if inferred is not None else _whole_trace(events, cpu, complete=not truncated)
    numbers = np.array([by_code[int(c)] for c in events.name[rows]], dtype=np.int64)
    unique, inverse = np.unique(numbers, return_inverse=True)
    start = np.full(unique.size, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(unique.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inverse, events.ts_ns[rows])
    np.maximum.at(end, inverse, events.ts_ns[rows] + events.dur_ns[rows])
    order = np.argsort(start, kind="stable")
    unique, start, end = unique[order], start[order], end[order]
    spans = end > start  # a step of zero length holds nothing: it is no step (`empty_steps` says how many)
    if not spans.all():
        if not spans.any():
            return _whole_trace(events, cpu, complete=not truncated)
        unique, start, end = unique[spans], start[spans], end[spans]
    last_cpu_end = int((events.ts_ns[cpu] + events.dur_ns[cpu]).max())
    complete = end <= last_cpu_end
    if truncated:
        complete[-1] = False
    return StepTable(unique.astype(np.int64), start, end, complete, "ProfilerStep")


def infer_steps(events: EventTable, truncated: bool) -> StepTable | None:
    """Steps of a trace without ProfilerStep: `loop_marker_steps` where a loop marker repeats, else one per
    outermost `Torch-Compiled Region: f/r` call (a cpu_op or user_annotation not inside another such call on
    its thread), numbered 1, 2, ... in start order, each spanning its call; None when fewer than
    `MIN_INFERRED_STEPS` calls have a length. A call that runs past the last CPU event, or the last call of a
    truncated trace, is incomplete. Where those calls come from several frames: `_first_frame_steps`."""
    marked = loop_marker_steps(events)  # a training loop's own markers cover the whole iteration: they come first
    if marked is not None:
        return marked
    codes = np.array([c for c, name in enumerate(events.names) if REGION_CALL.match(name)], dtype=np.int32)
    if codes.size == 0:
        return None
    calls = kind_mask(events.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & np.isin(events.name, codes)
    rows = np.flatnonzero(calls & (events.dur_ns > 0))
    rows = rows[np.lexsort((-events.dur_ns[rows], events.ts_ns[rows], events.track[rows]))]
    keep = np.zeros(rows.size, dtype=bool)
    reach: dict[int, int] = {}  # per track: the end of the outermost call seen so far
    for i, row in enumerate(rows.tolist()):
        track, start, end = int(events.track[row]), int(events.ts_ns[row]), int(events.ts_ns[row] + events.dur_ns[row])
        if start >= reach.get(track, np.iinfo(np.int64).min):
            keep[i] = True
            reach[track] = end
    rows = rows[keep]
    if rows.size < MIN_INFERRED_STEPS:
        return None
    rows = rows[np.argsort(events.ts_ns[rows], kind="stable")]
    frame = np.array([_frame_of(events.names[code]) for code in events.name[rows].tolist()], dtype=np.int64)
    if (frame != frame[0]).any():  # graph breaks: an iteration calls several frames; it starts with the first's
        loop = _loop_frame(frame)
        return _first_frame_steps(events.ts_ns[rows[frame == loop]].astype(np.int64), loop)
    start_ns = events.ts_ns[rows].astype(np.int64)
    end_ns = (events.ts_ns[rows] + events.dur_ns[rows]).astype(np.int64)
    cpu = kind_mask(events.kind, CPU_KINDS)
    complete = end_ns <= int((events.ts_ns[cpu] + events.dur_ns[cpu]).max())
    if truncated:
        complete[-1] = False
    number = np.arange(1, rows.size + 1, dtype=np.int64)
    return StepTable(number, start_ns, end_ns, complete, "inferred", INFERRED_FROM, spans_calls=True)


def _frame_of(name: str) -> int:
    """The frame number `f` of a `Torch-Compiled Region: f/r` name (its recompiles `r` are the same frame)."""
    return int(name.rsplit(" ", 1)[1].split("/", 1)[0])


def _loop_frame(frame: I64) -> int:
    """The frame whose calls mark the iterations: the one called most, of those the first called (a function
    compiled and called once before the loop does not set the steps)."""
    values, first, counts = np.unique(frame, return_index=True, return_counts=True)
    most = counts == counts.max()
    return int(values[most][np.argmin(first[most])])


def _first_frame_steps(starts: I64, frame: int) -> StepTable | None:
    """Steps of a program whose outermost compiled calls come from several frames (graph breaks, or other compiled
    functions): step k from the start of `frame`'s call k (`_loop_frame`) to the start of its call k + 1,
    numbered 1, 2, ...; all complete (the next call is in the trace). None with fewer than
    `MIN_INFERRED_STEPS` + 1 such calls: a frame called once per iteration, once, is no repeated step (a trace
    of each frame's first call, after its compilation, is warm-up only)."""
    starts = np.unique(starts)
    if starts.size <= MIN_INFERRED_STEPS:
        return None
    number = np.arange(1, starts.size, dtype=np.int64)
    complete = np.ones(starts.size - 1, dtype=bool)
    return StepTable(number, starts[:-1], starts[1:], complete, "inferred", f"{INFERRED_FROM} of frame {frame}")


def loop_marker_steps(events: EventTable) -> StepTable | None:
    """Steps of a training loop without ProfilerStep (tried before compiled calls), from the first of
    `LOOP_MARKERS` that has at least `MIN_INFERRED_STEPS` + 1 calls (user_annotation ranges whose name starts
    with the marker) on one thread (the thread with the most): step k runs from the start of call k to the
    start of call k + 1, numbered 1, 2, ...; all are complete (the next call is in the trace). What comes
    before the first call and after the last one's start belongs to no step. None when no marker repeats."""
    annotation = events.kind == Kind.USER_ANNOTATION
    for prefix, described in LOOP_MARKERS:
        codes = np.array([c for c, name in enumerate(events.names) if name.startswith(prefix)], dtype=np.int32)
        if codes.size == 0:
            continue
        rows = np.flatnonzero(annotation & np.isin(events.name, codes))
        if rows.size <= MIN_INFERRED_STEPS:
            continue
        tracks, counts = np.unique(events.track[rows], return_counts=True)
        rows = rows[events.track[rows] == tracks[int(np.argmax(counts))]]
        starts = np.unique(events.ts_ns[rows].astype(np.int64))  # sorted; a call recorded twice counts once
        if starts.size <= MIN_INFERRED_STEPS:
            continue
        number = np.arange(1, starts.size, dtype=np.int64)
        complete = np.ones(starts.size - 1, dtype=bool)
        return StepTable(number, starts[:-1], starts[1:], complete, "inferred", described)
    return None


def autotune_rows(events: EventTable, parent: I32, launch: I32) -> np.ndarray:
    """Mask of Inductor's autotuning work: CPU events inside (or being) an `AUTOTUNE_RANGE` on their thread,
    the runtime calls among them, and the GPU activity those calls launched (benchmark kernels, the L2-flush
    fills between them, their inputs' random fills). Compile cost: it belongs to no step."""
    codes = np.array([c for c, name in enumerate(events.names) if AUTOTUNE_RANGE.match(name)], dtype=np.int32)
    inside = np.zeros(len(events), dtype=bool)
    if codes.size == 0:
        return inside
    inside = kind_mask(events.kind, CPU_KINDS) & np.isin(events.name, codes)
    if not inside.any():
        return inside
    ancestor = parent.astype(np.int64)
    while (ancestor >= 0).any():  # pointer doubling: after k rounds, 2**k ancestors up are seen
        up = ancestor >= 0
        inside[up] |= inside[ancestor[up]]
        ancestor[up] = ancestor[ancestor[up]]
    gpu = launch >= 0
    inside[gpu] = inside[launch[gpu]]
    return inside


def empty_steps(events: EventTable) -> int:
    """How many ProfilerStep numbers have a range of zero length (their events all of duration 0): left out of
    the steps by `find_steps`, and said so in a warning (negative durations are left out by the loader)."""
    by_code = step_numbers_by_code(events.names)
    cpu = kind_mask(events.kind, CPU_KINDS)
    codes = np.fromiter(by_code, dtype=np.int32, count=len(by_code))
    rows = np.flatnonzero(cpu & codes_mask(events.name, codes) & (events.kind != Kind.RUNTIME))
    if rows.size == 0:
        return 0
    numbers = np.array([by_code[int(c)] for c in events.name[rows]], dtype=np.int64)
    unique, inverse = np.unique(numbers, return_inverse=True)
    longest = np.zeros(unique.size, dtype=np.int64)
    np.maximum.at(longest, inverse, events.dur_ns[rows])
    return int((longest <= 0).sum())


def _whole_trace(events: EventTable, cpu: np.ndarray, complete: bool) -> StepTable:
    scope = cpu if cpu.any() else np.ones(len(events), dtype=bool)
    if not scope.any():
        zero = np.zeros(1, dtype=np.int64)
        return StepTable(np.array([WHOLE_TRACE]), zero, zero, np.full(1, complete), WHOLE_TRACE_SOURCE)
    start = int(events.ts_ns[scope].min())
    end = int((events.ts_ns[scope] + events.dur_ns[scope]).max())
    return StepTable(
        np.array([WHOLE_TRACE], dtype=np.int64),
        np.array([start], dtype=np.int64),
        np.array([end], dtype=np.int64),
        np.full(1, complete),
        WHOLE_TRACE_SOURCE,
    )


def assign_steps(events: EventTable, steps: StepTable, launch: I32) -> I32:
    """Step index for CPU events (by start) and GPU activity (by its launch's start); -1 outside steps. In one
    pass of the C extension (its twin, numpy, under TRACELENS_NO_NATIVE=1: same steps)."""
    if native.ENABLED:
        steps_of = _native.step_of(
            np.ascontiguousarray(events.ts_ns, dtype=np.int64),
            np.ascontiguousarray(events.kind, dtype=np.int8),
            np.ascontiguousarray(launch, dtype=np.int32),
            _IS_CPU,
            np.ascontiguousarray(steps.start_ns, dtype=np.int64),
            np.ascontiguousarray(steps.end_ns, dtype=np.int64),
        )
        return np.frombuffer(steps_of, np.int32)
    n = len(events)
    step = np.full(n, -1, dtype=np.int32)
    if len(steps) == 0:
        return step
    cpu = np.flatnonzero(kind_mask(events.kind, CPU_KINDS))
    step[cpu] = _step_at(steps, events.ts_ns[cpu])
    gpu = np.flatnonzero(launch >= 0)
    step[gpu] = step[launch[gpu]]
    return step


def _step_at(steps: StepTable, times_ns: np.ndarray) -> I32:
    index = np.searchsorted(steps.start_ns, times_ns, side="right") - 1
    safe = np.maximum(index, 0)
    inside = (index >= 0) & (times_ns < steps.end_ns[safe])
    return np.where(inside, index, -1).astype(np.int32)


_MIN_CORRELATION_GAP = 512


def exclude_lossy_steps(
    events: EventTable, steps: StepTable, step: I32, launch: I32, op: I32, file_position: I64, expect_gpu: bool
) -> StepTable:
    """For a trace cut off mid-write: also mark incomplete every step that shows signs of lost events.

    Kineto writes all CPU ops first, then CUPTI buffers (runtime calls and GPU activity together) in an
    order unrelated to time, so a cut loses launch+kernel pairs from any step. Evidence of loss in a step:
    a launch without its GPU activity or GPU activity without its launch starting in it; an op whose name
    launched in every instance of some other step launching nothing here; a step past the point where the
    last CPU thread written was cut; a jump in correlation ids over the step; an op of a launching name that
    launched nothing before the first or after the last runtime call kept; or no GPU activity at all in a
    GPU trace (cut before the activities).
    """
    if steps.source != "ProfilerStep" or len(steps) == 0:
        return steps
    lossy = np.zeros(len(steps), dtype=bool)
    gpu = kind_mask(events.kind, GPU_ACTIVITY_KINDS)
    api = kind_mask(events.kind, API_KINDS)
    if expect_gpu and not (gpu.any() or api.any()):
        lossy[:] = True
    launched = np.zeros(len(events), dtype=bool)
    launched[launch[launch >= 0]] = True
    launch_codes = distinct_ints(events.name[launched]) if launched.any() else np.zeros(0, np.int32)
    orphan_launch = api & ~launched & (events.correlation >= 0) & np.isin(events.name, launch_codes)
    _mark(lossy, step[orphan_launch])
    orphan_gpu = gpu & (launch < 0)
    _mark(lossy, _step_at(steps, events.ts_ns[orphan_gpu]))
    _mark(lossy, _silent_launchers(events, step, op, launched, len(steps)))
    lossy |= _correlation_gaps(events, steps, api)
    _mark(lossy, _silent_outside_calls(events, step, op, launched, api))
    cpu_side = np.flatnonzero(kind_mask(events.kind, CPU_KINDS) & ~api)
    if cpu_side.size:
        last_written = cpu_side[np.argmax(file_position[cpu_side])]
        on_track = cpu_side[events.track[cpu_side] == events.track[last_written]]
        lossy |= steps.end_ns > int(events.ts_ns[on_track].max())
    return msgspec.structs.replace(steps, complete=steps.complete & ~lossy)


def _mark(lossy: np.ndarray, step_indices: np.ndarray) -> None:
    lossy[step_indices[step_indices >= 0]] = True


def _correlation_gaps(events: EventTable, steps: StepTable, api: np.ndarray) -> np.ndarray:
    """Steps overlapping a jump in the runtime calls' correlation ids (ids rise with time; a lost CUPTI
    buffer leaves a gap far wider than the usual few ids of unrecorded calls)."""
    rows = np.flatnonzero(api & (events.correlation >= 0))
    lossy = np.zeros(len(steps), dtype=bool)
    if rows.size == 0:
        return lossy
    rows = rows[np.argsort(events.correlation[rows], kind="stable")]
    ts = events.ts_ns[rows]
    gaps = np.diff(events.correlation[rows])
    if gaps.size:
        big = np.flatnonzero(gaps > max(_MIN_CORRELATION_GAP, 8 * percentiles(gaps, [99])[0]))
        low, high = ts[big], ts[big + 1]
        lossy |= ((steps.start_ns[None, :] < high[:, None]) & (steps.end_ns[None, :] > low[:, None])).any(axis=0)
    return lossy


def _silent_outside_calls(events: EventTable, step: I32, op: I32, launched: np.ndarray, api: np.ndarray) -> I32:
    """Steps of ops that launched nothing, of a name that launched elsewhere, before the first or after the
    last runtime call kept (calls with lower or higher correlation ids may have been lost there)."""
    calls = np.flatnonzero(api & (events.correlation >= 0))
    ops = np.flatnonzero((events.kind == Kind.CPU_OP) & (step >= 0))
    if calls.size == 0 or ops.size == 0:
        return np.zeros(0, dtype=np.int32)
    launches_of = np.bincount(op[launched & (op >= 0)], minlength=len(events))
    silent = launches_of[ops] == 0
    launcher_names = distinct_ints(events.name[ops[~silent]])
    first = int(events.ts_ns[calls[np.argmin(events.correlation[calls])]])
    last = int(events.ts_ns[calls[np.argmax(events.correlation[calls])]])
    outside = (events.ts_ns[ops] < first) | (events.ts_ns[ops] > last)
    return step[ops[silent & outside & np.isin(events.name[ops], launcher_names)]]


def _silent_launchers(events: EventTable, step: I32, op: I32, launched: np.ndarray, n_steps: int) -> np.ndarray:
    """Steps holding an op that launched nothing while the op at the same place in another step launched.

    "The same place": the k-th op of that name on that thread within its step (steps repeat one iteration).
    """
    ops = np.flatnonzero((events.kind == Kind.CPU_OP) & (step >= 0))
    if ops.size == 0 or not launched.any():
        return np.zeros(0, dtype=np.int64)
    launches_of = np.bincount(op[launched & (op >= 0)], minlength=len(events))
    ops = ops[np.lexsort((events.ts_ns[ops], step[ops], events.track[ops], events.name[ops]))]
    place = np.stack([events.name[ops].astype(np.int64), events.track[ops].astype(np.int64), step[ops]])
    new_group = np.ones(ops.size, dtype=bool)
    new_group[1:] = (place[:, 1:] != place[:, :-1]).any(axis=0)
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(ops.size), 0))
    rank = np.arange(ops.size) - group_start  # k: position among same-name ops of the thread in the step
    key = np.stack([place[0], place[1], rank])
    _, key_code = np.unique(key, axis=1, return_inverse=True)
    key_code = key_code.ravel()
    silent = launches_of[ops] == 0
    launched_somewhere = np.bincount(key_code, weights=~silent) > 0
    suspect = silent & launched_somewhere[key_code]
    return step[ops[suspect]].astype(np.int64)
