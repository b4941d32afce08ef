"""Critical path of a step, and what-if: "if X were k× faster, the step would shrink by Y µs".

Contract: `analyze_critical_path(ctx) -> CriticalPath` over the steady window (`ctx.steady`, compilation left
out; `critical_path_of(trace, window)` for any window) and
`what_if(trace, step_index, changes) -> WhatIf` (pure). The analysis re-times EVERY analyzed step with `replay`
(figures are means per step, what-ifs with their spread; `limit_of` says what limits each step and the window,
and `bound` takes that verdict; unrepresentative steps are named with why); `what_if` re-times one step.

The dependency graph of a step (the step's CPU span and the GPU activity launched in it):
- **CPU threads**: each thread that issues launch or sync calls in the step is a chain of those calls; between two
  calls (and from the step's start to the first) lies CPU work of the observed length (ops, Python, other API
  calls: everything that is not the call itself).
- **Launch → GPU activity** (by correlation): an activity can start once its launch call has started plus a
  launch latency.
- **Stream order**: an activity starts after the previous activity on its (device, stream) ends.
- **Earlier steps' work**: the first activity of the step on a stream also starts after that stream's earlier
  activities of other steps (or of none: launched before the trace or between steps) end (a queue from before);
  a fixed time. The step's span starts at its origin (`StepGraph.origin_ns`): its CPU start, or the latest end of
  that earlier work where later.
- **Cross-stream waits**: an activity that started later than both its launch and its stream allow, right
  after an activity of another stream on the same device ended (≤ `CROSS_STREAM_NS`), depends on that one
  (what `cudaStreamWaitEvent` does; the trace's records carry no event ids, so the dependency is read from time).
- **Syncs** (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, event syncs, blocking copies): the call returns
  after the latest GPU activity that was launched before it started and ended before it returned.

`replay` computes every node's time in observed order. Each node starts at the max over its constraints of the
constraint's time plus an offset; the *binding* constraint (the one that determined the observed start) keeps its
observed offset, the others get their minimum (launch latency: the median latency of launch-bound activities,
capped by the node's own; stream and cross-stream: 0). With no change the replay reproduces every observed time
exactly (a test checks this on every trace); with changes (CPU work k× faster, some activities k× faster or of a
new length) it predicts the step, its origin held where it was observed. The step ends at the later of its CPU end
and its last GPU end.

The **critical path** follows binding constraints back from the step's end to its origin (the stretch that crosses
the origin taken in part, so the path is the span); its time is split into CPU dispatch (work between calls and
the launch calls themselves), launch latency, GPU activity by category, GPU gaps on a stream (a wait behind
earlier steps' work after the origin among them) and waits the graph does not explain (`other_wait`). The replay
is a loop over one step's launch/sync calls and GPU activities (a graph walk is sequential; the constraints are
computed with numpy); steps above `MAX_NODES` nodes are not analyzed.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np

from tracelens import native
from tracelens.analyses.activity import GpuActivity, gpu_activity
from tracelens.analyses.dispatch import LAYERS, classify_layers
from tracelens.analyses.intervals import previous_running_max
from tracelens.analyses.window import Window
from tracelens.model.events import API_KINDS, I64, Bool, Kind, kind_mask
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.memo import per_trace
from tracelens.model.stats import distinct_ints, median
from tracelens.model.steps import is_whole_trace
from tracelens.model.trace import Trace
from tracelens.native import extension as _native
from tracelens.records import field_names
from tracelens.units import NS_PER_US, count_text
from tracelens.variants import QUEUED_NOTE_PCT

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

CROSS_STREAM_NS = 5_000
DEFAULT_LAUNCH_LATENCY_NS = 5_000
MAX_NODES = 200_000
STANDARD_CATEGORIES = 3  # what-ifs for the GPU categories with most time on the path
MAX_TOTAL_NODES = 200_000  # over all steps; beyond it every k-th step is replayed
LIMIT_RATIO = 2.0  # one side's 2x what-if must save this many times the other's to limit alone
FIRST_STEP_OFF = 1.15  # the first step is unrepresentative when its span is off the median by more
WARMUP_FIRST = "the first step (warm-up)"  # the first analyzed: the trace's, or the first after compiling/capturing
LEFT_OUT = "left out of the means"  # how such a step's reason ends where its span is over SPAN_OUTLIER × median
SPAN_OUTLIER = 1.5  # span off the median by more than this factor: unrepresentative
_LAUNCH = LAYERS.index("launch")
_SYNC = LAYERS.index("sync")

CPU, LAUNCH_LATENCY, SYNC, GPU_GAP, OTHER_WAIT = "cpu_dispatch", "launch_latency", "sync", "gpu_gap", "other_wait"
QUEUED = "queued"  # waiting behind GPU work of earlier steps still running on the stream (not in the step's graph)
PART_LABELS = {  # how every output names a part of the path (GPU parts: `part_label`)
    CPU: "CPU work",  # all host time between calls: not the dispatch section's self time (no Python there)
    LAUNCH_LATENCY: "launch latency",
    SYNC: "sync return",
    GPU_GAP: "GPU gap on a stream",
    OTHER_WAIT: "unexplained wait",
    QUEUED: "queued behind earlier steps",  # a walk code only: after the origin it is a GPU gap (`_timed_replay`)
}


def part_label(part: str) -> str:
    """A part of the path (`PathPart.part`) as outputs name it: `gpu:<category>` is `GPU <category>`."""
    return f"GPU {part[4:]}" if part.startswith("gpu:") else PART_LABELS.get(part, part)


# Path nodes: a call index (>= 0) or ~k for GPU activity k (<= -1); END marks where a walk stops (never a node)
END = -(2**62)

# `GpuConstraints.binding`: which constraint an activity's observed start followed (the C replay, `_native.c`,
# reads the same codes)
BOUND_NONE = -1  # none: launched outside the step's calls and first on its lane (its observed start is kept)
BOUND_LAUNCH = 0  # its launch call
BOUND_STREAM = 1  # its predecessor on the stream
BOUND_CROSS = 2  # an activity of another stream
BOUND_QUEUED = 3  # earlier steps' work still running on its stream


class Change(msgspec.Struct, frozen=True):
    """One what-if change. `target`: "cpu" (all CPU work and launch calls), "gpu" (all GPU activity),
    "category:NAME" (GPU activity of a kernel category), "kernel:PATTERN" (activities whose full or short name
    contains PATTERN, or matches it as a regex when it starts with `re:`), "op:NAME" (activities launched by that
    op). `speedup` divides durations (2 = twice as fast); `set_us`, when given, sets each matched GPU activity's
    duration instead."""

    target: str
    speedup: float = 1.0
    set_us: float | None = None


HALVES = (Change("cpu", 2.0), Change("gpu", 2.0))  # the first two standard what-ifs, which also set each step's limit


class GpuConstraints(msgspec.Struct, frozen=True):
    """What each activity's start waited for, one list entry per activity (predecessors are call indices for
    the launch, GPU indices else; -1 = no such constraint). `*_shift` moves a constraint observed after the
    activity's start (clock skew, overlapping records) back to the start (a cross-stream edge needs none);
    `launch_min` is the launch edge's minimum offset; `queued`: for the first activity of a lane, when the lane's
    previous activity belongs to no analyzed node (earlier steps' work), its end (fixed: no change in this step
    moves it), else -1; `binding`: the `BOUND_*` code of the constraint the observed start followed;
    `offset`: the observed start minus the binding constraint's time."""

    launch: list[int]
    launch_shift: list[int]
    launch_min: list[int]
    stream: list[int]
    stream_shift: list[int]
    cross: list[int]
    queued: list[int]
    binding: list[int]
    offset: list[int]


# the rows of the activities' array the C replay reads after start and length (`_native.replay`'s order)
_NATIVE_CONSTRAINTS = (
    "binding",
    "offset",
    "launch_min",
    "queued",
    "launch",
    "launch_shift",
    "stream",
    "stream_shift",
    "cross",
)


class GpuColumns(NamedTuple):
    lane: I64  # `StepGraph.gpu_lane`, numbered densely (0 = the lowest lane)
    name: I64
    category: I64
    launch_call: I64


class CallNodes(NamedTuple):
    """A step's launch and sync calls on CPU threads, in observed order, as columns."""

    thread: np.ndarray  # CPU track
    start_ns: I64
    dur_ns: I64
    is_sync: Bool
    row: I64  # event row
    prev: I64  # the previous call of the same thread, -1 for its first
    work_ns: I64  # observed CPU work before each call (since its thread's previous call or the step start)


class ActivityNodes(NamedTuple):
    """A step's GPU activities, in observed order, as columns."""

    start_ns: I64
    dur_ns: I64
    lane: I64
    launch_call: I64  # index into the calls, -1 = launched outside the step's calls
    category: np.ndarray
    name: np.ndarray
    op: np.ndarray  # op name code, -1 = none
    row: I64  # event row


class StepGraph(msgspec.Struct, frozen=True, dict=True):
    """One step's nodes in observed order (`calls`, `activities`: columns; Python's loops read them as the lists
    `call_*` and `gpu_*`, each made on first use), and the arrays the C replay and the actions read (built once by
    `build_graph`, replayed many times)."""

    step_index: int
    start_ns: int  # the step's CPU start
    cpu_end_ns: int
    origin_ns: int  # where its span starts: max(CPU start, the end of earlier work on its streams; `_origin_ns`)
    calls: CallNodes
    last_call: int  # the last call of the thread whose calls end last (it carries the step to its end), -1 = none
    activities: ActivityNodes
    launch_latency_ns: int
    awaited: list[int]  # per call: the activity a sync waited for, -1
    # for `_native.replay`: (the processing order [2][n]: `order`'s columns, the calls' fixed rows [4][n_calls]:
    # call_prev, call_start_ns, call_dur_ns, awaited, the activities' fixed rows [11][n_gpu]: gpu_start_ns,
    # gpu_dur_ns and the constraints in `_NATIVE_CONSTRAINTS` order); the rows that change per replay (CPU work,
    # call lengths, activity lengths) are added by `_replay_native`
    native_arrays: tuple[I64, I64, I64]
    cpu_columns: tuple[I64, I64, Bool]  # call_work_ns, call_dur_ns, call_is_sync as arrays
    gpu_columns: GpuColumns

    @functools.cached_property
    def call_thread(self) -> list[int]:
        return self.calls.thread.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_start_ns(self) -> list[int]:
        return self.calls.start_ns.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_dur_ns(self) -> list[int]:
        return self.calls.dur_ns.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_is_sync(self) -> list[bool]:
        return self.calls.is_sync.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_row(self) -> list[int]:
        return self.calls.row.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_prev(self) -> list[int]:
        return self.calls.prev.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def call_work_ns(self) -> list[int]:
        return self.calls.work_ns.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_start_ns(self) -> list[int]:
        return self.activities.start_ns.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_dur_ns(self) -> list[int]:
        return self.activities.dur_ns.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_lane(self) -> list[int]:
        return self.activities.lane.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_launch_call(self) -> list[int]:
        return self.activities.launch_call.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_category(self) -> list[int]:
        return self.activities.category.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_name(self) -> list[int]:
        return self.activities.name.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_op(self) -> list[int]:
        return self.activities.op.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def gpu_row(self) -> list[int]:
        return self.activities.row.tolist()  # type: ignore[no-any-return]

    @functools.cached_property
    def order(self) -> list[tuple[int, int]]:
        """Processing order: (what, index) with what 0 = a sync call returns, 1 = a call starts, 2 = GPU activity
        (the Python replay's loop reads it)."""
        what, index = self.native_arrays[0].tolist()
        return list(zip(what, index, strict=True))

    @functools.cached_property
    def constraints(self) -> GpuConstraints:
        """Per GPU activity, from the observed times (see `_constraint_arrays`): column lists of the launch, stream,
        cross-stream and queue constraints, the binding one and its observed offset (the Python replay's loop
        reads them; the C replay reads `native_arrays`)."""
        rows = self.native_arrays[2][2:].tolist()
        return GpuConstraints(**dict(zip(_NATIVE_CONSTRAINTS, rows, strict=True)))

    @functools.cached_property
    def fixed_magnitude(self) -> float:
        """The sum of the absolute values of the inputs every C replay reads unchanged (and of the step's start):
        with those of the rows a replay changes, it bounds every time the replay computes."""
        _, fixed_calls, fixed_gpu = self.native_arrays
        fixed = sum(float(np.abs(a, dtype=np.float64).sum()) for a in (fixed_calls, fixed_gpu))
        return fixed + abs(self.start_ns)

    @functools.cached_property
    def call_from(self) -> list[int]:
        """Per call, the node its start is reached from: its thread's previous call, END for the first."""
        return [p if p >= 0 else END for p in self.call_prev]

    @functools.cached_property
    def walk_arrays(self) -> tuple[I64, I64, int]:
        """What every C walk (`_native.walk`) reads unchanged: per call the node its start is reached from and its
        event row; per activity its event row, its category's part (an index of `_WALK_PARTS`, -1 where a category
        code is out of range: the Python walk answers), name code and op code; and a bound above every code."""
        prev = self.native_arrays[1][0]
        calls = np.stack((np.where(prev >= 0, prev, END), self.calls.row.astype(np.int64)))
        category = self.gpu_columns.category
        n_categories = len(_GPU_CATEGORY_PARTS)
        known = (category >= -n_categories) & (category < n_categories)
        part = np.where(known, category % n_categories + _WALK_PARTS.index(_GPU_CATEGORY_PARTS[0]), -1)
        name, op = self.gpu_columns.name, self.activities.op.astype(np.int64)
        gpu = np.stack((self.activities.row.astype(np.int64), part, name, op))
        return calls, gpu, int(max(name.max(initial=0), op.max(initial=0))) + 1


class Replay(msgspec.Struct, frozen=True):
    step_ns: int  # from the step's start to its end
    cpu_end_ns: int
    gpu_end_ns: int
    path: dict[str, float]  # critical-path composition, ns by part (GPU parts as "gpu:<category>")
    path_kernels: dict[int, int]  # name code -> ns on the path
    path_ops: dict[int, int]  # op name code -> ns of GPU time on the path
    path_rows: list[int]  # event rows of the calls and GPU activities on the path, from the end back


class PathPart(msgspec.Struct, frozen=True):
    part: str  # cpu_dispatch, launch_latency, sync, gpu_gap, other_wait, or gpu:<category>
    us: float
    pct: float


def queued_pct(path: CriticalPath) -> float | None:
    """The share (%) of the mean time from a step's CPU start to its end that lies before its span starts (its
    CPU started before earlier steps' GPU work ended: it ran ahead, or waited for that work; `CriticalPath.queued_us`),
    where it is at least `QUEUED_NOTE_PCT`; else None."""
    share = path.queued_pct
    return share if share is not None and path.queued_us and share >= QUEUED_NOTE_PCT else None


def steps_in_means(trace: Trace, indices: list[int], path: CriticalPath) -> list[int]:
    """`indices` (step rows) less the steps `path` left out of its means (`StepPath.in_means`): the steps every
    mean over the window's steps is over (the actions' replays too)."""
    apart = {s.number for s in path.steps if not s.in_means}
    return [i for i in indices if int(trace.steps.number[i]) not in apart]


def _share_pct(queued_us: float, step_us: float) -> float:
    """`queued_us` as a share (%) of the time from a step's CPU start to its end (`queued_us` + its span)."""
    return _r(100.0 * queued_us / (queued_us + step_us)) if queued_us + step_us > 0 else 0.0


class PathItem(msgspec.Struct, frozen=True):
    name: str
    us: float


class WhatIf(msgspec.Struct, frozen=True):
    """One what-if over the analyzed steps: `step_us`, `predicted_step_us` and `saved_us` are means per step;
    `saved_us_min`/`saved_us_max` the spread over the `steps` replayed (None for a single-step `what_if`)."""

    change: str
    step_us: float
    predicted_step_us: float
    saved_us: float
    saved_us_min: float | None = None
    saved_us_max: float | None = None
    steps: int = 1


class StepPath(msgspec.Struct, frozen=True):
    """One analyzed step: its span (from `StepGraph.origin_ns`), what limits it by its own what-ifs (`limit`, see
    `limit_of`), the saving of all CPU work 2× faster and of all GPU work 2× faster, the share (%) of the time
    from its CPU start to its end that lies before its span starts (`queued_pct`: its CPU started before earlier
    steps' GPU work), and why it is unrepresentative of the window (None when it is not)."""

    number: int
    span_us: float
    limit: str
    cpu_2x_saved_us: float
    gpu_2x_saved_us: float
    queued_pct: float
    unrepresentative: str | None = None
    queued_us: float = 0.0  # from its CPU start to its span's start (`StepGraph.origin_ns`)
    in_means: bool = True  # False: the first analyzed step marked warm-up, left out of the window's means


class CriticalPath(msgspec.Struct, frozen=True):
    """The critical path over the analyzed steps less a first step marked warm-up (`steps[].in_means`;
    `steps_analyzed` of them): `step_us`, `composition`,
    `top_kernels`, `top_ops` and `what_if` are means per step over them; `step` is the step of median length,
    whose path `path_rows` holds (the report draws it). `limit`: what limits the window by the what-ifs summed
    over the steps (`limit_of`); `steps`: each step's figures."""

    step: int | None  # the step of median length (its path is drawn), None when none
    step_us: float | None  # mean span (origin → later of CPU end and last GPU end) over the analyzed steps
    replay_error_us: float | None  # max |replayed − observed| span with no change (0 when the graph is sound)
    composition: list[PathPart]
    top_kernels: list[PathItem]
    top_ops: list[PathItem]
    what_if: list[WhatIf]
    note: str
    path_rows: list[int] = msgspec.field(default_factory=list)  # event rows on the path (the report highlights them)
    steps_analyzed: int = 0
    step_us_min: float | None = None
    step_us_max: float | None = None
    limit: str = "unknown"
    limit_note: str = ""
    steps: list[StepPath] = msgspec.field(default_factory=list)
    queued_us: float | None = None  # mean time from a step's CPU start to its span's start (None: no step)
    queued_pct: float | None = None  # its share (%) of the mean time from a step's CPU start to its end (None: no step)


def analyze_critical_path(ctx: AnalysisContext) -> CriticalPath:
    """The critical path and standard what-ifs over every analyzed step that launched GPU work."""
    return critical_path_of(ctx.trace, ctx.steady, ctx.compile_intervals)


def limit_of(cpu_saved_us: float, gpu_saved_us: float) -> str:
    """What limits a step by its what-ifs: "cpu" when all CPU work 2× faster saves at least `LIMIT_RATIO` times
    what all GPU work 2× faster saves, "gpu" the other way round, "mixed" when both save and neither dominates,
    "unknown" when neither saves anything (the step waits on something neither speeds up)."""
    if cpu_saved_us <= 0 and gpu_saved_us <= 0:
        return "unknown"
    if cpu_saved_us >= LIMIT_RATIO * gpu_saved_us:
        return "cpu"
    if gpu_saved_us >= LIMIT_RATIO * cpu_saved_us:
        return "gpu"
    return "mixed"


class _Analyzed(msgspec.Struct, frozen=True, dict=True):
    number: int
    index: int
    graph: StepGraph
    base: Replay
    observed_ns: int


def critical_path_of(trace: Trace, window: Window, compile_ns: np.ndarray | None = None) -> CriticalPath:
    """`analyze_critical_path` for any window; `compile_ns`: merged (k, 2) compilation spans (a step that
    overlaps one is marked unrepresentative)."""
    indices = _steps_with_gpu(trace, window)
    if not indices:
        return _empty("no analyzed step" if window.n_steps == 0 else "no analyzed step launched GPU work")
    indices, sampled = _within_budget(trace, indices)
    analyzed: list[_Analyzed] = []
    too_big = 0
    for index in indices:
        graph = step_graph(trace, index)
        if graph is None:
            too_big += 1
            continue
        analyzed.append(
            _Analyzed(int(trace.steps.number[index]), index, graph, replay(graph), _observed_step_ns(graph))
        )
    if not analyzed:
        return _empty(f"every analyzed step has more than {MAX_NODES:,} nodes; not analyzed")
    halves = [[_saved_ns(trace, a, change) for a in analyzed] for change in HALVES]
    steps = _step_rows(analyzed, halves[0], halves[1], trace, compile_ns)
    kept = [i for i, row in enumerate(steps) if row.in_means]
    analyzed = [analyzed[i] for i in kept]
    halves = [[row[i] for i in kept] for row in halves]
    n = len(analyzed)
    median_step = sorted(analyzed, key=lambda a: (a.observed_ns, a.index))[(n - 1) // 2]
    names = trace.events.names
    path = _summed(a.base.path for a in analyzed)
    total = sum(path.values()) or 1.0
    composition = [
        PathPart(part=part, us=_r(ns / n / NS_PER_US), pct=_r(100.0 * ns / total))
        for part, ns in sorted(path.items(), key=lambda item: -item[1])
        if ns > 0
    ]
    kernels = _summed(a.base.path_kernels for a in analyzed)
    ops = _summed(a.base.path_ops for a in analyzed)
    top_kernels = [
        PathItem(short_name(names[code]), _r(ns / n / NS_PER_US))
        for code, ns in sorted(kernels.items(), key=lambda item: -item[1])[:5]
    ]
    top_ops = [
        PathItem(names[code] if code >= 0 else "(no op)", _r(ns / n / NS_PER_US))
        for code, ns in sorted(ops.items(), key=lambda item: -item[1])[:5]
    ]
    changes = _standard_changes(path)
    saved = [*halves, *([_saved_ns(trace, a, change) for a in analyzed] for change in changes[2:])]
    what_ifs = [_what_if_row(change, analyzed, row) for change, row in zip(changes, saved, strict=True)]
    cpu_mean, gpu_mean = what_ifs[0].saved_us, what_ifs[1].saved_us
    limit = limit_of(cpu_mean, gpu_mean)
    spans = [a.base.step_ns / NS_PER_US for a in analyzed]
    odd = sum(1 for s in steps if s.unrepresentative)
    apart = [s.number for s in steps if not s.in_means]
    whole = is_whole_trace([s.number for s in steps])  # the whole-trace window: no steps
    note = (
        ("replayed as one window" if whole else f"{len(steps)} of {window.n_steps} analyzed steps replayed")
        + (f" (every {sampled}th: the steps' graphs exceed {MAX_TOTAL_NODES:,} nodes in all)" if sampled > 1 else "")
        + (f", {too_big} above {MAX_NODES:,} nodes left out" if too_big else "")
        + ("; the path drawn is " if whole else "; figures are means per step; the path drawn is ")
        + (f"step {median_step.number}'s (median length)" if median_step.number >= 0 else "the whole trace's")
        + (f"; {odd} unrepresentative (see steps)" if odd else "")
        + (f"; step {apart[0]}, the first (warm-up), {LEFT_OUT}" if apart else "")
    )
    queued = _r(sum(a.graph.origin_ns - a.graph.start_ns for a in analyzed) / n / NS_PER_US)
    return CriticalPath(
        step=median_step.number,
        step_us=_r(sum(spans) / n),
        replay_error_us=_r(max(abs(a.base.step_ns - a.observed_ns) for a in analyzed) / NS_PER_US),
        composition=composition,
        top_kernels=top_kernels,
        top_ops=top_ops,
        what_if=what_ifs,
        path_rows=median_step.base.path_rows,
        note=note,
        steps_analyzed=n,
        step_us_min=_r(min(spans)),
        step_us_max=_r(max(spans)),
        limit=limit,
        limit_note=_limit_note(limit, cpu_mean, gpu_mean, [s for s in steps if s.in_means]),
        steps=steps,
        queued_us=queued,
        queued_pct=_share_pct(queued, _r(sum(spans) / n)),
    )


def _summed(dicts: Iterable[dict[Any, Any]]) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for d in dicts:
        for key, value in d.items():
            out[key] = out.get(key, 0) + value
    return out


def _within_budget(trace: Trace, indices: list[int]) -> tuple[list[int], int]:
    """`indices`, or every k-th of them (k returned, 1 = all) when their activities exceed `MAX_TOTAL_NODES`."""
    activity = gpu_activity(trace)
    counts = np.bincount(activity.step[activity.step >= 0], minlength=len(trace.steps) + 1)
    total = int(sum(int(counts[i]) for i in indices)) * 2  # about one call per activity
    every = max(1, -(-total // MAX_TOTAL_NODES))
    return indices[::every], every


def _standard_changes(path: dict[str, float]) -> list[Change]:
    """All CPU work 2× faster, all GPU work 2× faster, and each of the GPU categories with most time on the
    summed path 2× faster."""
    on_path = sorted(((ns, part[4:]) for part, ns in path.items() if part.startswith("gpu:") and ns > 0), reverse=True)
    return [
        *HALVES,
        *(Change(f"category:{category}", 2.0) for _, category in on_path[:STANDARD_CATEGORIES]),
    ]


def _saved_ns(trace: Trace, step: _Analyzed, change: Change) -> int:
    """The step's span minus its span with `change` (times only). A change to GPU activities by column (all of
    them, a category) goes to the C replay as a column of new lengths; others through `_resolve`."""
    graph = step.graph
    fast = native.ENABLED and change.target != "cpu" and change.speedup > 0
    columns = _column_durations(graph, change) if fast else None
    if columns is not None:
        length = graph.native_arrays[2][1].copy()
        length[columns[0]] = columns[1]
        work_ns, duration_ns = _scaled_cpu_columns(graph, 1.0)
        timed = _replay_native(graph, work_ns, duration_ns, {}, walk=False, gpu_length=length)
        if timed is not None:
            c_end, c_from, g_end, g_from, g_start = timed
            return step.base.step_ns - _finish(graph, 1.0, c_end, c_from, g_end, g_from, g_start, walk=False).step_ns
    return step.base.step_ns - replay(graph, _resolve(trace, graph, (change,)), walk=False).step_ns


def _what_if_row(change: Change, analyzed: list[_Analyzed], saved_ns: list[int]) -> WhatIf:
    n = len(analyzed)
    base = sum(a.base.step_ns for a in analyzed) / n / NS_PER_US
    mean = sum(saved_ns) / n / NS_PER_US
    return WhatIf(
        change=_describe(change),
        step_us=_r(base),
        predicted_step_us=_r(base - mean),
        saved_us=_r(mean),
        saved_us_min=_r(min(saved_ns) / NS_PER_US),
        saved_us_max=_r(max(saved_ns) / NS_PER_US),
        steps=n,
    )


def _step_rows(
    analyzed: list[_Analyzed], cpu_ns: list[int], gpu_ns: list[int], trace: Trace, compile_ns: np.ndarray | None
) -> list[StepPath]:
    """Per step figures, each marked unrepresentative when (first reason that applies): compilation ran inside
    its CPU span (`compile_ns`); it is the trace's first
    step (warm-up) and its span is off the median by more than `FIRST_STEP_OFF` times or its limit is not the
    majority's; its own limit differs from the window's majority; its span is off the median by more than
    `SPAN_OUTLIER` times."""
    limits = [limit_of(c / NS_PER_US, g / NS_PER_US) for c, g in zip(cpu_ns, gpu_ns, strict=True)]
    spans = [a.base.step_ns / NS_PER_US for a in analyzed]
    median_span = float(median(np.array(spans)))
    majority = max(set(limits), key=lambda v: (limits.count(v), v))
    first_number = analyzed[0].number  # the trace's first step, or the first after compiling or capturing
    rows = []
    for a, limit, span, c, g in zip(analyzed, limits, spans, cpu_ns, gpu_ns, strict=True):
        why, left_out = None, False
        compiling = _overlap_ns(compile_ns, a.graph.start_ns, a.graph.cpu_end_ns)
        off = median_span > 0 and not 1 / FIRST_STEP_OFF <= span / median_span <= FIRST_STEP_OFF
        if compiling > 0:
            why = f"compilation ran inside it ({compiling / NS_PER_US:,.1f} µs)"
        elif a.number == first_number and len(analyzed) > 2 and (off or limit != majority):
            left_out = span > SPAN_OUTLIER * median_span  # an outlier: warm-up's cost, left out of the means
            why = f"{WARMUP_FIRST}: span {span:,.1f} µs, limited by {limit} (median {median_span:,.1f} µs)" + (
                f"; {LEFT_OUT}" if left_out else ""
            )
        elif limit != majority and len(analyzed) > 2:
            why = f"limited by {limit} where most steps are {majority}"
        elif median_span > 0 and not 1 / SPAN_OUTLIER <= span / median_span <= SPAN_OUTLIER:
            why = f"its span {span:,.1f} µs is far from the median {median_span:,.1f} µs"
        ahead_ns = a.graph.origin_ns - a.graph.start_ns
        rows.append(
            StepPath(
                number=a.number,
                span_us=_r(span),
                limit=limit,
                cpu_2x_saved_us=_r(c / NS_PER_US),
                gpu_2x_saved_us=_r(g / NS_PER_US),
                queued_pct=_share_pct(ahead_ns / NS_PER_US, a.base.step_ns / NS_PER_US),
                unrepresentative=why,
                queued_us=_r(ahead_ns / NS_PER_US),
                in_means=not left_out,
            )
        )
    return rows


def _overlap_ns(intervals: np.ndarray | None, start_ns: int, end_ns: int) -> int:
    """ns of [start_ns, end_ns) covered by the merged (k, 2) `intervals` (0 for None)."""
    if intervals is None or intervals.shape[0] == 0:
        return 0
    lo = np.maximum(intervals[:, 0], start_ns)
    hi = np.minimum(intervals[:, 1], end_ns)
    return int(np.maximum(hi - lo, 0).sum())


def _limit_note(limit: str, cpu_us: float, gpu_us: float, steps: list[StepPath]) -> str:
    """The limit in a sentence with its what-ifs and how many steps alone say the same (none said for the
    whole-trace window: one window, no steps)."""
    agree = sum(1 for s in steps if s.limit == limit)
    whole = is_whole_trace([s.number for s in steps])
    head = {
        "cpu": "CPU work limits the steps",
        "gpu": "GPU work limits the steps",
        "mixed": "both CPU and GPU work limit the steps",
        "unknown": "neither faster CPU nor faster GPU work shortens the steps",
    }[limit]
    return (
        (
            f"{head}: all CPU work 2× faster saves {cpu_us:,.1f} µs per step, all GPU work 2× faster {gpu_us:,.1f} µs "
            f"(mean of {len(steps)}; {agree} of {count_text(len(steps), 'step')} alone say {limit})"
        )
        if not whole
        else (
            f"{head.replace('the steps', 'the whole trace')}: all CPU work 2× faster saves {cpu_us:,.1f} µs, all GPU "
            f"work 2× faster {gpu_us:,.1f} µs (the whole trace: no steps)"
        )
    )


def what_if(trace: Trace, step_index: int, changes: tuple[Change, ...] | list[Change]) -> WhatIf:
    """The step `step_index` (index into `trace.steps`) re-timed with `changes` applied."""
    graph = build_graph(trace, step_index)
    if graph is None:
        raise ValueError(f"step index {step_index} has more than {MAX_NODES} nodes")
    base = replay(graph)
    after = replay(graph, _resolve(trace, graph, tuple(changes)))
    return WhatIf(
        change=", ".join(_describe(c) for c in changes),
        step_us=base.step_ns / NS_PER_US,
        predicted_step_us=after.step_ns / NS_PER_US,
        saved_us=(base.step_ns - after.step_ns) / NS_PER_US,
    )


# --- graph --------------------------------------------------------------------------------------------------


@per_trace
def _graphs(trace: Trace) -> dict[int, StepGraph | None]:
    return {}


def step_graph(trace: Trace, index: int) -> StepGraph | None:
    """`build_graph(trace, index)`, kept for as long as `trace` lives (the critical path and the actions replay
    the same steps; their number is bounded by `MAX_TOTAL_NODES`)."""
    cache = _graphs(trace)
    if index not in cache:
        cache[index] = build_graph(trace, index)
    return cache[index]


def build_graph(trace: Trace, index: int) -> StepGraph | None:
    """The dependency graph of step `index` (see the module docstring); None when it is too large."""
    ev, steps = trace.events, trace.steps
    start, cpu_end = int(steps.start_ns[index]), int(steps.end_ns[index])
    activity = gpu_activity(trace)
    mine = activity.subset(activity.step == index)
    candidates, candidate_layer = _launch_and_sync_calls(trace)
    at = ev.ts_ns[candidates]
    launched_calls = np.zeros(len(ev), dtype=bool)
    launched_calls[mine.launch[mine.launch >= 0]] = True
    keep = (at >= start) & (at < cpu_end) & ((candidate_layer == _SYNC) | launched_calls[candidates])
    calls = candidates[keep]
    if calls.size + len(mine) > MAX_NODES:
        return None
    calls = calls[np.lexsort((calls, ev.ts_ns[calls]))]
    order_g = np.lexsort((mine.row, mine.ts_ns))
    g = _reordered(mine, order_g)
    lanes = g.device * (int(g.stream.max(initial=0)) + 2) + (g.stream + 1)
    launch_call = _positions(calls, g.launch.astype(np.int64))
    queued = _queued_behind(activity, index, g)
    latency = _typical_latency(ev.ts_ns[calls], g, lanes, launch_call, queued)
    call_start, call_dur = ev.ts_ns[calls], ev.dur_ns[calls]
    call_end = call_start + call_dur
    is_sync = classify_layers(trace)[calls] == _SYNC
    what, node = _order(call_start, call_end, is_sync, g.ts_ns)
    chains = _thread_chains(
        ev.track[calls].astype(np.int64), call_start, call_end, start, _autograd_tracks(trace)[ev.track[calls]]
    )
    constraints = _constraint_arrays(call_start, g.ts_ns, g.dur_ns, lanes, launch_call, latency, queued, g.device)
    awaited = _awaited(call_start, call_end, is_sync, g.ts_ns + g.dur_ns, launch_call)
    c = constraints
    awaited_column = np.asarray(awaited, dtype=np.int64).reshape(-1)
    return StepGraph(
        step_index=index,
        start_ns=start,
        cpu_end_ns=cpu_end,
        origin_ns=_origin_ns(start, g.ts_ns, queued),
        calls=CallNodes(ev.track[calls], call_start, call_dur, is_sync, calls, chains.previous, chains.work),
        last_call=chains.last,
        activities=ActivityNodes(g.ts_ns, g.dur_ns, lanes, launch_call, g.category, g.name, g.op_name, g.row),
        launch_latency_ns=latency,
        awaited=awaited,
        native_arrays=(
            np.stack((what, node)),
            np.stack((chains.previous, call_start, call_dur, awaited_column)),
            np.stack([g.ts_ns, g.dur_ns, *(c[name] for name in _NATIVE_CONSTRAINTS)]).astype(np.int64),
        ),
        cpu_columns=(chains.work, call_dur, is_sync),
        gpu_columns=GpuColumns(
            np.searchsorted(distinct_ints(lanes), lanes).astype(np.int64),
            *(np.asarray(column, dtype=np.int64) for column in (g.name, g.category, launch_call)),
        ),
    )


@per_trace
def _launch_and_sync_calls(trace: Trace) -> tuple[I64, np.ndarray]:
    """(rows, layers) of the trace's launch and sync API calls, in row order (each step's graph takes its own)."""
    layer = classify_layers(trace)
    rows = np.flatnonzero(kind_mask(trace.events.kind, API_KINDS) & ((layer == _LAUNCH) | (layer == _SYNC)))
    layers = layer[rows]
    rows.setflags(write=False)
    layers.setflags(write=False)
    return rows, layers


def _awaited(call_start: I64, call_end: I64, is_sync: Bool, gpu_end: I64, launch_call: I64) -> list[int]:
    """For each sync call, the latest-ending activity (then the highest index) that was launched before the
    sync started and ended while it waited (after it started, at or before it returned); -1 for other calls
    and syncs that awaited nothing."""
    out = [-1] * len(call_start)
    syncs = np.flatnonzero(is_sync).tolist()
    if not syncs or not len(gpu_end):
        return out
    end = np.asarray(gpu_end, dtype=np.int64)
    by_end = np.lexsort((np.arange(end.size), end))
    ends, owners = end[by_end].tolist(), by_end.tolist()
    stops = np.searchsorted(end[by_end], np.asarray(call_end, dtype=np.int64)[syncs], side="right").tolist()
    starts, launches = np.asarray(call_start).tolist(), np.asarray(launch_call).tolist()
    for i, stop in zip(syncs, stops, strict=True):
        for position in range(stop - 1, -1, -1):
            if ends[position] <= starts[i]:
                break
            launch = launches[owners[position]]
            if launch < 0 or starts[launch] <= starts[i]:
                out[i] = owners[position]
                break
    return out


def _constraint_arrays(
    call_start: I64,
    gpu_start: I64,
    gpu_dur: I64,
    lanes: I64,
    launch_call: I64,
    latency_ns: int,
    queued: I64,
    device: np.ndarray,
) -> dict[str, I64]:
    """The dependencies of every GPU activity (in start order) read from observed times, once per graph: the
    launch edge, the stream edge and the queue edge (`queued`, the end of earlier steps' work on the lane) for all
    activities at once; the cross-stream edge, only for activities that started more than `CROSS_STREAM_NS` after
    all of those allowed, is the latest-ending earlier activity of another lane that ended within
    `CROSS_STREAM_NS` before the start."""
    start = np.asarray(gpu_start, dtype=np.int64)
    end = start + np.asarray(gpu_dur, dtype=np.int64)
    lane = np.asarray(lanes, dtype=np.int64)
    call = np.asarray(launch_call, dtype=np.int64)
    n = start.size
    called = call >= 0
    at = np.asarray(call_start, dtype=np.int64)[call[called]] if called.any() else np.zeros(0, dtype=np.int64)
    launch_at = np.zeros(n, dtype=np.int64)
    launch_at[called] = at
    launch_shift = np.where(called, np.maximum(0, launch_at - start), 0)
    launch_obs = launch_at - launch_shift
    launch_min = np.where(called, np.minimum(latency_ns, np.maximum(0, start - launch_at)), 0)
    previous = _previous_on_lane(lane)
    streamed = previous >= 0
    stream_at = np.where(streamed, end[np.maximum(previous, 0)], 0)
    stream_shift = np.where(streamed, np.maximum(0, stream_at - start), 0)
    stream_obs = stream_at - stream_shift
    never = -(2**62)
    waits = queued >= 0
    queue_obs = np.minimum(queued, start)
    explained = np.maximum(np.where(called, launch_obs + launch_min, never), np.where(streamed, stream_obs, never))
    explained = np.maximum(explained, np.where(waits, queue_obs, never))
    waiting = np.flatnonzero(start - explained > CROSS_STREAM_NS)
    cross, cross_obs = _cross_stream(start, end, lane, np.asarray(device, dtype=np.int64), waiting)
    keys = (
        (BOUND_LAUNCH, called, launch_obs + launch_min, launch_obs),
        (BOUND_STREAM, streamed, stream_obs, stream_obs),
        (BOUND_CROSS, cross >= 0, cross_obs, cross_obs),
        (BOUND_QUEUED, waits, queue_obs, queue_obs),
    )
    binding = np.full(n, BOUND_NONE, dtype=np.int64)
    best_key = np.full(n, never, dtype=np.int64)
    best_obs = np.full(n, never, dtype=np.int64)
    for code, present, key, observed in keys:  # max of (key, observed); the first wins a tie
        better = present & ((binding < 0) | (key > best_key) | ((key == best_key) & (observed > best_obs)))
        binding[better], best_key[better], best_obs[better] = code, key[better], observed[better]
    return {
        "launch": call,
        "launch_shift": launch_shift,
        "launch_min": launch_min,
        "stream": previous,
        "stream_shift": stream_shift,
        "cross": cross,
        "queued": np.where(waits, queue_obs, -1),
        "binding": binding,
        "offset": np.where(binding >= 0, start - best_obs, 0),
    }


def _previous_on_lane(lane: np.ndarray) -> np.ndarray:
    """For activities in start order: the index of the previous activity on the same lane, -1 for the first."""
    order = np.argsort(lane, kind="stable")
    previous = np.full(lane.size, -1, dtype=np.int64)
    same = lane[order[1:]] == lane[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    return previous


def _origin_ns(start_ns: int, gpu_start: I64, queued: I64) -> int:
    """Where the step's span starts: the later of its CPU start and the latest end of the earlier work on its
    streams (`queued`, per stream's first activity of the step, capped at that activity's start: so never after
    the step's end). Before it, the step's CPU work overlapped GPU work of earlier steps, or its GPU work waited
    behind theirs: time the earlier steps' spans hold (they end with that work), counted once."""
    waits = queued >= 0
    if not waits.any():
        return start_ns
    return max(start_ns, int(np.minimum(queued, gpu_start)[waits].max()))


def _queued_behind(activity: GpuActivity, index: int, g: GpuActivity) -> I64:
    """For the step's activities `g` (in start order): for the first one on each (device, stream), the latest
    end of that stream's earlier-starting activities of other steps (earlier steps' work ahead of it in the
    queue); -1 otherwise. The loop runs once per stream."""
    out = np.full(len(g), -1, dtype=np.int64)
    if len(g) == 0:
        return out
    key = g.device * 1_000_003 + g.stream
    others = activity.step != index
    other_key = activity.device * 1_000_003 + activity.stream
    other_end = activity.ts_ns + activity.dur_ns
    for k in np.unique(key, return_index=True)[1].tolist():
        before = others & (other_key == key[k]) & (activity.ts_ns < g.ts_ns[k])
        if before.any():
            out[k] = int(other_end[before].max())
    return out


def _cross_stream(
    start: np.ndarray, end: np.ndarray, lane: np.ndarray, device: np.ndarray, waiting: np.ndarray
) -> tuple[I64, I64]:
    """(predecessor, its end) of the cross-stream edge of each activity, -1 where none; looked up only for the
    activities at `waiting`: among earlier activities (lower index) ending at or before the start, the latest
    end (then the highest index) within `CROSS_STREAM_NS` on another stream of the same device. The candidates
    of every waiting activity are compared at once when there are at most `MAX_CROSS_PAIRS` of them in all,
    else one activity at a time (same answer)."""
    cross = np.full(start.size, -1, dtype=np.int64)
    cross_end = np.full(start.size, -1, dtype=np.int64)
    if waiting.size == 0:
        return cross, cross_end
    by_end = np.lexsort((np.arange(end.size), end))
    sorted_end = end[by_end]
    stops = np.searchsorted(sorted_end, start[waiting], side="right")
    firsts = np.searchsorted(sorted_end, start[waiting] - CROSS_STREAM_NS, side="left")
    counts = np.maximum(stops - firsts, 0)
    if int(counts.sum()) <= MAX_CROSS_PAIRS:
        _cross_stream_pairs(by_end, sorted_end, lane, device, waiting, firsts, counts, cross, cross_end)
        return cross, cross_end
    ends, owners, lanes, devices = sorted_end.tolist(), by_end.tolist(), lane.tolist(), device.tolist()
    for k, stop in zip(waiting.tolist(), stops.tolist(), strict=True):
        earliest = int(start[k]) - CROSS_STREAM_NS
        position = stop - 1
        while position >= 0 and ends[position] >= earliest:
            j = owners[position]
            if j < k and lanes[j] != lanes[k] and devices[j] == devices[k]:
                cross[k], cross_end[k] = j, ends[position]
                break
            position -= 1
    return cross, cross_end


MAX_CROSS_PAIRS = 1 << 20  # (activity, candidate) pairs `_cross_stream` compares at once


def _cross_stream_pairs(
    by_end: I64,
    sorted_end: I64,
    lane: np.ndarray,
    device: np.ndarray,
    waiting: np.ndarray,
    firsts: I64,
    counts: I64,
    cross: I64,
    cross_end: I64,
) -> None:
    """`_cross_stream`'s search for every waiting activity at once: each with each of its candidates (the
    activities ending within `CROSS_STREAM_NS` before its start, by end), the last qualifying candidate wins."""
    total = int(counts.sum())
    if total == 0:
        return
    k = np.repeat(waiting, counts)
    group_start = np.cumsum(counts) - counts
    position = np.repeat(firsts, counts) + (np.arange(total) - np.repeat(group_start, counts))
    j = by_end[position]
    ok = (j < k) & (lane[j] != lane[k]) & (device[j] == device[k])
    if not ok.any():
        return
    # pairs run by activity, then by ascending end position: the last qualifying pair of each activity wins
    k_ok, position_ok = k[ok], position[ok]
    last = np.r_[k_ok[1:] != k_ok[:-1], True]
    cross[k_ok[last]] = by_end[position_ok[last]]
    cross_end[k_ok[last]] = sorted_end[position_ok[last]]


def _reordered(activity: GpuActivity, order: np.ndarray) -> GpuActivity:
    return GpuActivity(**{name: getattr(activity, name)[order] for name in field_names(activity)})


def _order(call_start: I64, call_end: I64, is_sync: np.ndarray, gpu_start: I64) -> tuple[I64, I64]:
    """Observed order, as (what, index) columns: call starts, sync returns and GPU activity starts by time; at
    one time a sync return first, then a call, then an activity (then by index)."""
    syncs = np.flatnonzero(is_sync)
    when = np.concatenate((call_start, gpu_start, call_end[syncs]))
    what = np.repeat(np.array([1, 2, 0], dtype=np.int64), [call_start.size, gpu_start.size, syncs.size])
    index = np.concatenate((np.arange(call_start.size), np.arange(gpu_start.size), syncs))
    order = np.lexsort((index, what, when))
    return what[order], index[order].astype(np.int64)


def _positions(calls: I64, rows: I64) -> I64:
    """The position in `calls` of each of `rows` (-1 where it is not one of `calls`)."""
    if calls.size == 0:
        return np.full(rows.size, -1, dtype=np.int64)
    sorter = np.argsort(calls, kind="stable")
    at = np.minimum(np.searchsorted(calls, rows, sorter=sorter), calls.size - 1)
    return np.where(calls[sorter[at]] == rows, sorter[at], -1).astype(np.int64)


class _Chains(NamedTuple):
    previous: I64  # `StepGraph.call_prev`
    work: I64  # `StepGraph.call_work_ns`
    last: int  # `StepGraph.last_call`


def _thread_chains(thread: I64, call_start: I64, call_end: I64, step_start: int, autograd: Bool) -> _Chains:
    """`call_prev`, `call_work_ns` and `last_call` of `StepGraph` for calls in start order: each thread's calls
    form a chain, except where the backward pass hands off (`_handoffs`); the main thread is the one whose last call
    ends last (the earliest-starting thread on a tie)."""
    previous = _previous_on_lane(thread)
    is_last = np.ones(thread.size, dtype=bool)
    is_last[previous[previous >= 0]] = False
    previous = _handoffs(thread, call_start, call_end, previous, autograd)
    anchor = np.where(previous >= 0, call_end[np.maximum(previous, 0)], step_start)
    work = np.maximum(0, call_start - anchor)
    lasts = np.flatnonzero(is_last)  # each thread's last call
    if lasts.size == 0:
        return _Chains(previous, work.astype(np.int64), -1)
    threads, first_call = np.unique(thread, return_index=True)
    # the threads in order of appearance; argmax keeps the first of equal ends
    lasts = lasts[np.argsort(first_call[np.searchsorted(threads, thread[lasts])], kind="stable")]
    return _Chains(previous, work.astype(np.int64), int(lasts[np.argmax(call_end[lasts])]))


def _handoffs(thread: I64, call_start: I64, call_end: I64, previous: I64, autograd: Bool) -> I64:
    """`previous` (each call's previous call on its thread, -1 for a thread's first) with the backward pass's
    handoffs: where every call of a thread that runs backward ops (`autograd`, per call) lies in a gap between two
    calls of another thread — the caller of `backward()` blocked while the autograd thread ran — the first call of
    each such burst follows the caller's call before its gap (the fork) and the caller's call after the gap follows
    the burst's last (the join); one burst per backward pass (two under gradient accumulation). Without it the
    caller's wait counts as CPU work of its own and the backward as starting from the step's start (or from the
    previous burst), so nothing that shortens the backward shortens the step. A copy; `previous` is not changed."""
    out = previous.copy()
    for one in distinct_ints(thread[autograd]).tolist():
        mine = np.flatnonzero(thread == one)
        gaps = _enclosing_gaps(thread, call_start, call_end, one, mine, autograd)
        if gaps is None:
            continue
        theirs, gap = gaps
        for g in distinct_ints(gap).tolist():
            burst = mine[gap == g]
            out[burst[0]] = theirs[g]  # the fork
            out[theirs[g + 1]] = burst[-1]  # the join
    return out


def _enclosing_gaps(
    thread: I64, call_start: I64, call_end: I64, one: int, mine: I64, autograd: Bool
) -> tuple[I64, I64] | None:
    """(another thread's calls in start order, per call of `mine` (thread `one`'s) the index among them of the call
    that opens the gap it lies in) for the other thread whose gaps hold every call of `mine`, none running
    beside a call of its own; of several such threads, the caller: one that runs no backward op, then the one
    with the most calls in the step (the loop's thread, not a side thread's odd sync), then the shortest gaps.
    None where no other thread has one."""
    best: tuple[I64, I64] | None = None
    best_key: tuple[int, int, int] | None = None
    for other in distinct_ints(thread).tolist():
        if other == one:
            continue
        theirs = np.flatnonzero(thread == other)
        opens = np.searchsorted(call_end[theirs], call_start[mine], side="right") - 1  # last call ending before
        closes = np.searchsorted(call_start[theirs], call_end[mine], side="left")  # first call starting after
        if (opens < 0).any() or (closes != opens + 1).any() or (closes >= theirs.size).any():
            continue  # a call of `mine` runs beside one of `other`'s, or lies before its first or after its last
        used = distinct_ints(opens)
        span_ns = int((call_start[theirs[used + 1]] - call_end[theirs[used]]).sum())
        key = (int(autograd[theirs].any()), -int(theirs.size), span_ns)
        if best_key is None or key < best_key:
            best, best_key = (theirs, opens), key
    return best


@per_trace
def _autograd_tracks(trace: Trace) -> Bool:
    """Per CPU track code: whether it runs backward ops (a name holding `Backward`, as `MulBackward0`: the
    autograd engine's thread, or the caller's where the backward runs inline)."""
    ev = trace.events
    tracks = np.zeros(int(ev.track.max(initial=0)) + 1, dtype=bool)
    tracks[distinct_ints(ev.track[backward_op_rows(trace)])] = True
    return tracks


@per_trace
def backward_op_rows(trace: Trace) -> I64:
    """Rows of the CPU ops that run a backward node (a name holding `Backward`, as `MulBackward0`). Cached per
    trace: do not mutate."""
    ev = trace.events
    codes = [code for code, name in enumerate(ev.names) if "Backward" in name]
    rows = np.flatnonzero((ev.kind == Kind.CPU_OP) & np.isin(ev.name, codes))
    rows.setflags(write=False)
    return rows


def _typical_latency(call_start: I64, g: GpuActivity, lanes: I64, launch_call: I64, queued: I64) -> int:
    """Median launch → start latency of activities (in start order) launched onto an idle lane, that started
    when nothing else held them back: launched after, and started more than `CROSS_STREAM_NS` after, every
    earlier activity of their lane had ended (earlier steps' work included, `queued`);
    `DEFAULT_LAUNCH_LATENCY_NS` when there are none."""
    start = g.ts_ns.astype(np.int64)
    if start.size == 0:
        return DEFAULT_LAUNCH_LATENCY_NS
    order = np.argsort(lanes, kind="stable")
    lane, end = lanes[order], (start + g.dur_ns)[order]
    first = np.r_[True, lane[1:] != lane[:-1]]
    before = previous_running_max(lane, end)  # the latest end of earlier activities on the lane
    before[first] = queued[order][first]  # the first of a lane: earlier steps' work on it, -1 if none
    previous_end = np.empty_like(before)
    previous_end[order] = before
    launched_at = np.where(launch_call >= 0, call_start[np.maximum(launch_call, 0)], -1) if call_start.size else start
    sampled = (launch_call >= 0) & (start > previous_end + CROSS_STREAM_NS) & (launched_at >= previous_end)
    samples = start[sampled] - launched_at[sampled]
    return int(median(samples)) if samples.size else DEFAULT_LAUNCH_LATENCY_NS


# --- replay -------------------------------------------------------------------------------------------------


def replay(graph: StepGraph, new_dur: tuple[float, dict[int, int]] | None = None, walk: bool = True) -> Replay:
    """Re-time the step. `new_dur` is `_resolve`'s output: (CPU factor, {gpu index: new duration ns}). The loop
    and the path's walk run in the C extension (`_native.replay`, `_native.walk`: same integers, same order; their
    Python twins `_replay_python` and `_walk` under TRACELENS_NO_NATIVE=1). `walk=False`: only the times (`path`,
    `path_kernels`, `path_ops`, `path_rows` empty)."""
    cpu_factor, gpu_dur = new_dur if new_dur is not None else (1.0, {})
    timed = None
    if native.ENABLED:
        work_ns, duration_ns = _scaled_cpu_columns(graph, cpu_factor)
        columns = _native_columns(graph, work_ns, duration_ns, gpu_dur) if walk else None
        if columns is not None:  # the walk too in C (`_walk_columns`)
            walker = functools.partial(_walk_columns, graph, columns)
            return _timed_replay(graph, cpu_factor, columns[1], columns[6], walker)
        timed = _replay_native(graph, work_ns, duration_ns, gpu_dur, walk)
    if timed is None:
        work, duration = _scaled_cpu(graph, cpu_factor)
        timed = _replay_python(graph, work, duration, gpu_dur)
    c_end, c_from, g_end, g_from, g_start = timed
    return _finish(graph, cpu_factor, c_end, c_from, g_end, g_from, g_start, walk)


def replay_calls(graph: StepGraph, work: list[int] | I64, duration: list[int] | I64, gpu_dur: dict[int, int]) -> Replay:
    """Re-time the step with each call's CPU work before it (`work`) and length (`duration`, lists or int64
    arrays) given (a removed launch: 0 and 0) and some activities of a new length (`gpu_dur`); the step's CPU tail
    keeps its observed length. The actions' models use this (times only: no path walk)."""
    timed = _replay_native(graph, work, duration, gpu_dur, walk=False) if native.ENABLED else None
    if timed is None:
        timed = _replay_python(graph, _as_list(work), _as_list(duration), gpu_dur)
    c_end, c_from, g_end, g_from, g_start = timed
    return _finish(graph, 1.0, c_end, c_from, g_end, g_from, g_start, walk=False)


# rows of `native_arrays[2]` (after start and length)
_OFFSET_ROW, _LAUNCH_MIN_ROW = (_NATIVE_CONSTRAINTS.index(name) + 2 for name in ("offset", "launch_min"))


def with_offsets(graph: StepGraph, offsets: dict[int, int], launch_min: dict[int, int] | None = None) -> StepGraph:
    """`graph` with each activity in `offsets` starting that many ns after its binding constraint (in place of its
    observed offset: its gap behind its stream predecessor, or its start-up after its launch; the launch edge's
    minimum offset lowered to it where above), and each in `launch_min` allowed to start that soon after its
    launch (its minimum lowered to it where above); every replay of the result reads them. `graph` is
    unchanged."""
    if not offsets and not launch_min:
        return graph
    order, calls, gpu = graph.native_arrays
    gpu = gpu.copy()
    for row, values in ((_OFFSET_ROW, offsets), (_LAUNCH_MIN_ROW, offsets), (_LAUNCH_MIN_ROW, launch_min or {})):
        if values:
            at, ns = np.fromiter(values, np.int64, len(values)), np.fromiter(values.values(), np.int64, len(values))
            gpu[row, at] = ns if row == _OFFSET_ROW else np.minimum(gpu[row, at], ns)
    return msgspec.structs.replace(graph, native_arrays=(order, calls, gpu))


def savings_of_calls(
    graph: StepGraph, work: list[int] | I64, duration: list[int] | I64, gpu_dur: dict[int, int], step_ns: int
) -> tuple[int, int]:
    """(all CPU work 2× faster, all GPU work 2× faster): what each saves (ns) on the step re-timed by
    `replay_calls(graph, work, duration, gpu_dur)` (whose span is `step_ns`), changed as the standard what-ifs
    change the observed step (`critical_path_of`: syncs keep their length, the CPU tail is scaled too), so that
    `limit_of` says of a changed step what it says of an observed one."""
    work_ns, duration_ns = np.asarray(work, np.int64), np.asarray(duration, np.int64)
    fast_work, fast_duration = _scaled(work_ns, duration_ns, graph.cpu_columns[2], 2.0)
    halved = np.rint(gpu_lengths(graph, gpu_dur) / 2.0).astype(np.int64)
    timed_cpu = _replay_native(graph, fast_work, fast_duration, gpu_dur, walk=False) if native.ENABLED else None
    if timed_cpu is None:
        timed_cpu = _replay_python(graph, fast_work.tolist(), fast_duration.tolist(), gpu_dur)
    timed_gpu = (
        _replay_native(graph, work_ns, duration_ns, {}, walk=False, gpu_length=halved) if native.ENABLED else None
    )
    if timed_gpu is None:
        every = dict(enumerate(halved.tolist()))
        timed_gpu = _replay_python(graph, work_ns.tolist(), duration_ns.tolist(), every)
    cpu_ns = _finish(graph, 2.0, *timed_cpu, walk=False).step_ns
    gpu_ns = _finish(graph, 1.0, *timed_gpu, walk=False).step_ns
    return step_ns - cpu_ns, step_ns - gpu_ns


def _as_list(values: list[int] | I64) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else values


_Ends = list[int] | I64  # the calls' or activities' replayed ends (the C replay's times-only answer: arrays)
_Edge = tuple[str, int, int]  # how a node's time was reached: (path part, predecessor node or END, ns)


class _Edges:
    """The C replay's edges as its columns, `(parts[code[k]], predecessor[k], ns[k])` for node k (code None: 0
    for all): a walk reads the nodes on the path only, so no tuple is made for the others. Equal to the list of
    those tuples (what `_replay_python` gives)."""

    def __init__(self, parts: tuple[str, ...], code: list[int] | None, predecessor: list[int], ns: list[int]) -> None:
        self.parts, self.code, self.predecessor, self.ns = parts, code, predecessor, ns

    def __len__(self) -> int:
        return len(self.ns)

    def __getitem__(self, k: int) -> _Edge:
        return self.parts[self.code[k] if self.code is not None else 0], self.predecessor[k], self.ns[k]

    def tuples(self) -> list[_Edge]:
        return [self[k] for k in range(len(self))]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Edges):
            return self.tuples() == other.tuples()
        return isinstance(other, list) and self.tuples() == other

    __hash__ = None  # type: ignore[assignment]


_EdgeList = list[_Edge] | _Edges
_Timed = tuple[
    _Ends,
    tuple[_EdgeList, _EdgeList],
    _Ends,
    _EdgeList,
    list[int],
]
_GPU_PARTS = (OTHER_WAIT, QUEUED, LAUNCH_LATENCY, GPU_GAP, "")  # the C extension's part codes; -1 reads ""
_CALL_PARTS = (CPU, SYNC)


_NATIVE_LIMIT = float(2**62)  # every replayed time is a sum of these inputs: below this in all, int64 cannot wrap


def _replay_native(
    graph: StepGraph,
    work: list[int] | I64,
    duration: list[int] | I64,
    gpu_dur: dict[int, int],
    walk: bool = True,
    gpu_length: I64 | None = None,
) -> _Timed | None:
    """`_replay_python`'s result, from the C extension's loop; None where int64 could not hold the integers the
    Python loop computes (absurd what-if durations) or the graph is malformed (an `awaited` list of another
    length): the Python loop answers those. `gpu_length`: every activity's length (int64), given instead of
    the changed ones in `gpu_dur`."""
    columns = _native_columns(graph, work, duration, gpu_dur, gpu_length)
    if columns is None:
        return None
    if not walk:  # times only: the ends (what `_finish` reads without a walk), no constraint tuples
        return columns[1], ([], []), columns[6], [], []
    return _timed_lists(graph, columns)


def _native_columns(
    graph: StepGraph,
    work: list[int] | I64,
    duration: list[int] | I64,
    gpu_dur: dict[int, int],
    gpu_length: I64 | None = None,
) -> list[I64] | None:
    """The C replay's 10 columns (`_native.replay`: the calls' starts, ends and own edges (part, predecessor, ns),
    the activities' starts, ends and edges), with the CPU work before each call `work` (its last column); None
    where `_replay_native` says."""
    if len(graph.awaited) != len(graph.calls.start_ns):
        return None
    order, fixed_calls, fixed_gpu = graph.native_arrays
    prev, call_start, call_dur, awaited = fixed_calls
    try:
        length = gpu_lengths(graph, gpu_dur) if gpu_length is None else gpu_length
        if gpu_dur and gpu_length is not None:
            length = length.copy()
            length[np.fromiter(gpu_dur, np.int64, len(gpu_dur))] = np.fromiter(gpu_dur.values(), np.int64)
        changing = (np.asarray(work, np.int64), np.asarray(duration, np.int64))
    except OverflowError:
        return None
    magnitude = graph.fixed_magnitude + sum(float(np.abs(a, dtype=np.float64).sum()) for a in (*changing, length))
    if magnitude >= _NATIVE_LIMIT:
        return None
    calls = np.stack((prev, *changing, call_start, call_dur, awaited))
    gpu = np.concatenate((fixed_gpu[:2], length[None], fixed_gpu[2:]))
    raw = _native.replay(order, calls, gpu, graph.start_ns, END)
    return [*(np.frombuffer(b, dtype=np.int64) for b in raw), changing[0]]


def _timed_lists(graph: StepGraph, columns: list[I64]) -> _Timed:
    """The C replay's columns (`_native_columns`) as `_replay_python` gives them: lists, and the edges as `_Edges`."""
    _, c_end, own_part, own_pred, own_ns, g_start, g_end, g_part, g_pred, g_ns, work = (c.tolist() for c in columns)
    c_from = _Edges((CPU,), None, graph.call_from, work)
    c_own = _Edges(_CALL_PARTS, own_part, own_pred, own_ns)
    g_from = _Edges(_GPU_PARTS, g_part, g_pred, g_ns)
    return c_end, (c_from, c_own), g_end, g_from, g_start


def _walk_columns(
    graph: StepGraph,
    columns: list[I64],
    node: int,
    path: dict[str, float],
    kernels: dict[int, int],
    ops: dict[int, int],
    rows: list[int],
    limit: int,
) -> None:
    """`_walk` over the C replay's columns (`_native_columns`), by the C extension (`_native.walk`: the same
    parts, in the same order, and integers); where it cannot (an index out of range, a sum beyond int64), by
    `_walk` over the same edges as lists."""
    _, _, own_part, own_pred, own_ns, g_start, g_end, g_part, g_pred, g_ns, work = columns
    fixed_calls, fixed_gpu, n_codes = graph.walk_arrays
    calls = np.stack((fixed_calls[0], work, own_part, own_pred, own_ns, fixed_calls[1]))
    gpu = np.concatenate((np.stack((g_start, g_end, _GPU_PART_INDEX[g_part], g_pred, g_ns)), fixed_gpu))
    latency, parts = graph.launch_latency_ns, len(_WALK_PARTS)
    walked = _native.walk(node, calls, gpu, END, latency, _WALK_LAUNCH, _WALK_OTHER, parts, n_codes, limit)
    if walked is None:
        _, c_from, g_end_list, g_from, g_start_list = _timed_lists(graph, columns)
        _walk(graph, node, c_from, g_from, g_start_list, g_end_list, path, kernels, ops, rows, limit)
        return
    visited, part_keys, part_ns, name_keys, name_ns, op_keys, op_ns = (
        np.frombuffer(b, dtype=np.int64).tolist() for b in walked
    )
    for key, ns in zip(part_keys, part_ns, strict=True):
        part = _WALK_PARTS[key]
        path[part] = path.get(part, 0) + ns
    kernels.update(zip(name_keys, name_ns, strict=True))
    ops.update(zip(op_keys, op_ns, strict=True))
    rows.extend(visited)


def _call_starts(graph: StepGraph, work: list[int]) -> list[tuple[str, int, int]]:
    """How each call's start is reached in any replay: CPU work after its thread's previous call (END: the
    step's start)."""
    return [(CPU, p if p >= 0 else END, ns) for p, ns in zip(graph.call_prev, work, strict=True)]


def _replay_python(graph: StepGraph, work: list[int], duration: list[int], gpu_dur: dict[int, int]) -> _Timed:
    """The replay's loop: every node in processing order, its start (and end) from its binding constraint."""
    n_calls, n_gpu = len(graph.call_start_ns), len(graph.gpu_start_ns)
    c_start = [0] * n_calls
    c_end = [0] * n_calls
    c_from = _call_starts(graph, work)
    c_own = list(zip(itertools.repeat(CPU), itertools.repeat(END), duration))  # how its end was (syncs: GPU)
    g_start = [0] * n_gpu
    g_end = [0] * n_gpu
    g_from: list[tuple[str, int, int]] = [("", END, 0)] * n_gpu
    start_gpu = _gpu_starter(graph, gpu_dur, c_start, g_start, g_end, g_from)
    previous_of, step_start = graph.call_prev, graph.start_ns
    for what, node in graph.order:
        if what == 2:
            start_gpu(node)
        elif what == 1:  # a call starts after the CPU work since its thread's previous call
            previous = previous_of[node]
            c_start[node] = (c_end[previous] if previous >= 0 else step_start) + work[node]
            c_end[node] = c_start[node] + duration[node]  # a sync's end is settled when it returns
        else:
            _return_sync(graph, node, c_start, c_end, c_own, g_end)
    return c_end, (c_from, c_own), g_end, g_from, g_start


def _scaled_cpu(graph: StepGraph, cpu_factor: float) -> tuple[list[int], list[int]]:
    """(CPU work before each call, each call's length) with CPU work `cpu_factor`× faster (a sync keeps its
    observed length: it waits); rounded to the ns half to even, as Python's `round`."""
    if cpu_factor == 1.0:
        return graph.call_work_ns, graph.call_dur_ns
    work, length = _scaled_cpu_columns(graph, cpu_factor)
    return work.tolist(), length.tolist()


def _scaled_cpu_columns(graph: StepGraph, cpu_factor: float) -> tuple[I64, I64]:
    """`_scaled_cpu` as int64 columns (what the C replay reads)."""
    work, length, is_sync = graph.cpu_columns
    if cpu_factor == 1.0:
        return work, length
    return _scaled(work, length, is_sync, cpu_factor)


def _scaled(work: I64, length: I64, is_sync: Bool, cpu_factor: float) -> tuple[I64, I64]:
    """Each call's CPU work before it and its length divided by `cpu_factor` (rounded half to even), a sync's
    length kept (it waits for the GPU)."""
    scaled = np.rint(length / cpu_factor).astype(np.int64)
    return np.rint(work.astype(np.float64) / cpu_factor).astype(np.int64), np.where(is_sync, length, scaled)


def gpu_lengths(graph: StepGraph, gpu_dur: dict[int, int]) -> I64:
    """Every activity's length (ns) with those in `gpu_dur` set to theirs (the observed column where it is
    empty: not a copy)."""
    length = graph.native_arrays[2][1]
    if gpu_dur:
        length = length.copy()
        length[np.fromiter(gpu_dur, np.int64, len(gpu_dur))] = np.fromiter(gpu_dur.values(), np.int64, len(gpu_dur))
    return length


def _gpu_starter(
    graph: StepGraph,
    gpu_dur: dict[int, int],
    c_start: list[int],
    g_start: list[int],
    g_end: list[int],
    g_from: list[tuple[str, int, int]],
) -> Callable[[int], None]:
    """The replay of an activity's start: its binding constraint's replayed time plus its observed offset, and
    no earlier than any other constraint allows. The graph's lists are bound once (this runs once per activity
    per replay)."""
    c = graph.constraints
    binding_of, offset, launch_min, queued_at = c.binding, c.offset, c.launch_min, c.queued
    launch_of, launch_shift, stream_of, stream_shift, cross_of = (
        c.launch,
        c.launch_shift,
        c.stream,
        c.stream_shift,
        c.cross,
    )
    observed, length, step_start = graph.gpu_start_ns, graph.gpu_dur_ns, graph.start_ns

    def start_gpu(k: int) -> None:
        binding = binding_of[k]
        if binding == BOUND_NONE:  # launched outside the step's calls and first on its lane: its observed start
            start = observed[k]
            g_from[k] = (OTHER_WAIT, END, start - step_start)
        elif binding == BOUND_QUEUED:  # behind earlier steps' work on its stream: it ends when it ended (fixed)
            start = queued_at[k] + offset[k]
            g_from[k] = (QUEUED, END, start - step_start)
        else:
            launch_pred, stream_pred, cross_pred = launch_of[k], stream_of[k], cross_of[k]
            launch = c_start[launch_pred] - launch_shift[k] if launch_pred >= 0 else 0
            stream = g_end[stream_pred] - stream_shift[k] if stream_pred >= 0 else 0
            cross = g_end[cross_pred] if cross_pred >= 0 else 0
            if binding == BOUND_LAUNCH:
                base, part, pred = launch, LAUNCH_LATENCY, launch_pred
            elif binding == BOUND_STREAM:
                base, part, pred = stream, GPU_GAP, ~stream_pred
            else:
                base, part, pred = cross, GPU_GAP, ~cross_pred
            start = base + offset[k]
            if launch_pred >= 0 and launch + launch_min[k] > start:
                start = launch + launch_min[k]
            if stream_pred >= 0 and stream > start:
                start = stream
            if cross_pred >= 0 and cross > start:
                start = cross
            if queued_at[k] > start:
                start = queued_at[k]
            g_from[k] = (part, pred, start - base)
        g_start[k] = start
        g_end[k] = start + gpu_dur.get(k, length[k])

    return start_gpu


def _return_sync(
    graph: StepGraph,
    i: int,
    c_start: list[int],
    c_end: list[int],
    c_own: list[tuple[str, int, int]],
    g_end: list[int],
) -> None:
    """A sync returns after the activity it awaited (`StepGraph.awaited`) plus the observed return time, or
    after its own observed length when it awaited nothing."""
    awaited = graph.awaited[i]
    if awaited < 0:
        return  # nothing awaited: the call takes its observed time (set when it started)
    after = graph.call_start_ns[i] + graph.call_dur_ns[i] - (graph.gpu_start_ns[awaited] + graph.gpu_dur_ns[awaited])
    if g_end[awaited] + after >= c_start[i]:
        c_end[i] = g_end[awaited] + after
        c_own[i] = (SYNC, ~awaited, after)
    else:  # the awaited work finished before the sync was reached: it returns at once
        c_end[i] = c_start[i] + min(after, graph.call_dur_ns[i])
        c_own[i] = (SYNC, END, c_end[i] - c_start[i])


def _finish(
    graph: StepGraph,
    cpu_factor: float,
    c_end: _Ends,
    c_from: tuple[_EdgeList, _EdgeList],
    g_end: _Ends,
    g_from: _EdgeList,
    g_start: list[int],
    walk: bool = True,
) -> Replay:
    """The replay's result from its times and edges (the path walked by `_walk` unless `walk` is False)."""

    def walk_lists(
        node: int, path: dict[str, float], kernels: dict[int, int], ops: dict[int, int], rows: list[int], limit: int
    ) -> None:
        _walk(graph, node, c_from, g_from, g_start, g_end, path, kernels, ops, rows, limit)

    return _timed_replay(graph, cpu_factor, c_end, g_end, walk_lists if walk else None)


_Walker = Callable[[int, dict[str, float], dict[int, int], dict[int, int], list[int], int], None]
NO_LIMIT = 2**62  # a walk's `limit` where the span starts at the CPU start: the walk runs to the step's start


def _timed_replay(graph: StepGraph, cpu_factor: float, c_end: _Ends, g_end: _Ends, walker: _Walker | None) -> Replay:
    """The replay's result from the calls' and activities' ends; `walker(node, path, kernels, ops, rows, limit)`
    follows the path back from the node that ends the step (none: times only), `limit` ns of it: where the span
    starts after the CPU start (`StepGraph.origin_ns`), the walk stops at the origin, so the path is the span."""
    last, calls = graph.last_call, graph.calls
    tail_obs = graph.cpu_end_ns - (int(calls.start_ns[last]) + int(calls.dur_ns[last]) if last >= 0 else graph.start_ns)
    cpu_end = (int(c_end[last]) if last >= 0 else graph.start_ns) + round(max(0, tail_obs) / cpu_factor)
    gpu_end, ends_last = _latest_end(g_end, graph.start_ns)
    step_ns = max(cpu_end, gpu_end) - graph.origin_ns
    limit = NO_LIMIT if graph.origin_ns == graph.start_ns else max(0, step_ns)
    path: dict[str, float] = {}
    kernels: dict[int, int] = {}
    ops: dict[int, int] = {}
    if gpu_end > cpu_end:
        node = ~ends_last
    else:
        tail = min(cpu_end - (int(c_end[last]) if last >= 0 else graph.start_ns), limit)
        path[CPU] = path.get(CPU, 0) + tail
        limit -= tail
        node = last if last >= 0 and limit > 0 else END
    rows: list[int] = []
    if walker is not None and node != END:
        walker(node, path, kernels, ops, rows, limit)
    if walker is not None and QUEUED in path:  # after the origin: the stream's gap once earlier work had ended
        path[GPU_GAP] = path.get(GPU_GAP, 0) + path.pop(QUEUED)
    return Replay(
        step_ns=step_ns,
        cpu_end_ns=cpu_end,
        gpu_end_ns=gpu_end,
        path=path,
        path_kernels=kernels,
        path_ops=ops,
        path_rows=list(dict.fromkeys(rows)),
    )


def _latest_end(g_end: _Ends, default: int) -> tuple[int, int]:
    """(the latest end, the first activity that ends then); (`default`, -1) when there is no activity."""
    if len(g_end) == 0:
        return default, -1
    if isinstance(g_end, np.ndarray):
        first = int(np.argmax(g_end))
        return int(g_end[first]), first
    latest = max(g_end)
    return latest, g_end.index(latest)


def _walk(
    graph: StepGraph,
    node: int,
    c_from: tuple[_EdgeList, _EdgeList],
    g_from: _EdgeList,
    g_start: list[int],
    g_end: _Ends,
    path: dict[str, float],
    kernels: dict[int, int],
    ops: dict[int, int],
    rows: list[int],
    limit: int = NO_LIMIT,
) -> None:
    """Follow binding constraints back from `node` (a call's end when >= 0, a GPU activity when < 0) and add
    each stretch of time to its part of the path, `limit` ns in all: the stretches run back in time without a
    gap, so the walk stops where `limit` runs out, the stretch it is in taken in part (a launch edge's latency
    lies after what exceeds it). Reads the edges as columns (`_edge_columns`)."""
    start_parts, start_code, start_pred, start_ns = _edge_columns(c_from[0])
    own_parts, own_code, own_pred, own_ns = _edge_columns(c_from[1])
    g_parts, g_code, g_pred, g_ns = _edge_columns(g_from)
    call_row, gpu_row, gpu_category = graph.call_row, graph.gpu_row, graph.gpu_category
    gpu_name, gpu_op, latency = graph.gpu_name, graph.gpu_op, graph.launch_latency_ns
    get, kernel_get, op_get, add_row = path.get, kernels.get, ops.get, rows.append
    left = limit
    at_start = False  # a call is entered at its end (from its thread's next call or the step's end)...
    for _ in range(2 * (len(start_pred) + len(g_pred)) + 2):
        if node == END or left <= 0:
            return
        if node >= 0 and not at_start:
            add_row(call_row[node])
            part = own_parts[own_code[node] if own_code is not None else 0]
            taken = min(own_ns[node], left)
            path[part] = get(part, 0) + taken
            left -= taken
            predecessor = own_pred[node]
            if predecessor != END:  # a sync that waited for GPU work
                node = predecessor
                continue
            at_start = True
            continue
        if node >= 0:  # ... or at its start (from an activity it launched)
            part = start_parts[start_code[node] if start_code is not None else 0]
            taken = min(start_ns[node], left)
            path[part] = get(part, 0) + taken
            left -= taken
            node = start_pred[node]
            at_start = False
            continue
        k = ~node
        add_row(gpu_row[k])
        duration = min(g_end[k] - g_start[k], left)
        left -= duration
        category = _GPU_CATEGORY_PARTS[gpu_category[k]]
        path[category] = get(category, 0) + duration
        name, op = gpu_name[k], gpu_op[k]
        kernels[name] = kernel_get(name, 0) + duration
        ops[op] = op_get(op, 0) + duration
        if left <= 0:
            return
        part = g_parts[g_code[k] if g_code is not None else 0]
        node, ns = g_pred[k], g_ns[k]
        if part == LAUNCH_LATENCY and ns > latency:  # beyond the usual latency: unexplained
            usual = min(latency, left)
            beyond = min(ns - latency, left - usual)
            path[OTHER_WAIT] = get(OTHER_WAIT, 0) + beyond
            left -= beyond
            ns = usual
        ns = min(ns, left)
        path[part] = get(part, 0) + ns
        left -= ns
        at_start = part == LAUNCH_LATENCY  # a launch edge enters the call at its start


_GPU_CATEGORY_PARTS = tuple(f"gpu:{category}" for category in CATEGORIES)  # a GPU activity's part of the path
# every part of the path, indexed for the C walk (`_native.walk`): the calls' parts (`_CALL_PARTS`: the C replay's
# codes), the activities' edges' parts (`_GPU_PARTS`, at the C replay's code + 2 by `_GPU_PART_INDEX`) and categories
_WALK_PARTS = (*_CALL_PARTS, *_GPU_PARTS, *_GPU_CATEGORY_PARTS)
_GPU_PART_INDEX = np.arange(len(_CALL_PARTS), len(_CALL_PARTS) + len(_GPU_PARTS), dtype=np.int64)  # code -1: ""
_WALK_LAUNCH, _WALK_OTHER = _WALK_PARTS.index(LAUNCH_LATENCY), _WALK_PARTS.index(OTHER_WAIT)


def _edge_columns(edges: _EdgeList) -> tuple[tuple[str, ...], list[int] | None, list[int], list[int]]:
    """`edges` as columns (parts, code or None for all 0, predecessor, ns): node k's edge is
    `(parts[code[k]], predecessor[k], ns[k])`."""
    if isinstance(edges, _Edges):
        return edges.parts, edges.code, edges.predecessor, edges.ns
    parts = tuple(dict.fromkeys(part for part, _, _ in edges))
    code = {part: i for i, part in enumerate(parts)}
    return (
        parts,
        [code[part] for part, _, _ in edges],
        [predecessor for _, predecessor, _ in edges],
        [ns for _, _, ns in edges],
    )


def _observed_step_ns(graph: StepGraph) -> int:
    start, length = graph.native_arrays[2][:2]
    gpu_end = int((start + length).max()) if start.size else 0
    return max(graph.cpu_end_ns, gpu_end) - graph.origin_ns


# --- what-if ------------------------------------------------------------------------------------------------


def _resolve(trace: Trace, graph: StepGraph, changes: tuple[Change, ...]) -> tuple[float, dict[int, int]]:
    """(CPU factor, {GPU activity index: new duration ns}) for `changes` (later changes win)."""
    cpu_factor = 1.0
    durations: dict[int, int] = {}
    names = trace.events.names
    for change in changes:
        if change.speedup <= 0:
            raise ValueError(f"speedup must be > 0: {change.target}")
        if change.target == "cpu":
            cpu_factor = change.speedup
            continue
        if _resolve_columns(graph, change, durations):
            continue
        match = _matcher(change.target, names)
        for k in range(len(graph.gpu_start_ns)):
            if match(graph.gpu_name[k], graph.gpu_category[k], graph.gpu_op[k]):
                base = graph.gpu_dur_ns[k]
                durations[k] = (
                    round(change.set_us * NS_PER_US) if change.set_us is not None else round(base / change.speedup)
                )
    return cpu_factor, durations


def _resolve_columns(graph: StepGraph, change: Change, durations: dict[int, int]) -> bool:
    """`_resolve`'s loop for one change to all GPU work or to a kernel category, on the graph's columns
    (`_column_durations`); False (nothing done) for other targets, or where the loop must answer."""
    columns = _column_durations(graph, change)
    if columns is None:
        return False
    hit, new = columns
    durations.update(zip(hit.tolist(), new.tolist(), strict=True))
    return True


def _column_durations(graph: StepGraph, change: Change) -> tuple[I64, I64] | None:
    """(indices, new durations ns) of the activities a change to all GPU work or to a kernel category sets, from
    the graph's columns (the same integers as `_resolve`'s loop: float division, then rounding half to even as
    `round` does); None for other targets, or where the new durations are not all finite and well inside int64
    (the loop gives Python's integers)."""
    if change.target == "gpu":
        hit = np.arange(len(graph.gpu_start_ns))
    elif change.target.startswith("category:"):
        pattern = change.target.partition(":")[2]
        code = CATEGORIES.index(pattern) if pattern in CATEGORIES else -99
        hit = np.flatnonzero(graph.gpu_columns.category == code)
    else:
        return None
    if change.set_us is not None:
        new = np.full(hit.size, change.set_us * NS_PER_US, dtype=np.float64)
    else:
        new = graph.native_arrays[2][1][hit].astype(np.float64) / change.speedup
    if new.size and not float(np.abs(new).max()) < _NATIVE_LIMIT:  # NaN, inf and huge values take the loop
        return None
    return hit, np.rint(new).astype(np.int64)


def _matcher(target: str, names: tuple[str, ...]) -> Callable[[int, int, int], bool]:
    kind, _, pattern = target.partition(":")
    if kind == "category":
        code = CATEGORIES.index(pattern) if pattern in CATEGORIES else -99
        return lambda name, category, op: category == code
    if kind == "op":
        return lambda name, category, op: op >= 0 and names[op] == pattern
    if kind == "kernel":  # the full name or the short name (`vectorized_elementwise_kernel[gelu]`)
        regex = re.compile(pattern[3:]) if pattern.startswith("re:") else None
        if regex is not None:
            return lambda name, category, op: bool(regex.search(names[name]) or regex.search(short_name(names[name])))
        return lambda name, category, op: pattern in names[name] or pattern in short_name(names[name])
    raise ValueError(f"unknown what-if target {target!r} (cpu, category:NAME, kernel:PATTERN, op:NAME)")


def _describe(change: Change) -> str:
    kind, _, what = change.target.partition(":")
    subject = {
        "cpu": "all CPU work",
        "gpu": "all GPU work",
        "category": f"GPU {what} kernels",
        "kernel": f"kernels matching {what!r}",
        "op": f"kernels launched by {what}",
    }.get(kind, change.target)
    if change.set_us is not None:
        return f"{subject} → {change.set_us:g} µs each"
    return f"{subject} {change.speedup:g}× faster"


def _steps_with_gpu(trace: Trace, window: Window) -> list[int]:
    """Indices of the analyzed steps that launched GPU work, in order."""
    activity = gpu_activity(trace)
    with_gpu = np.zeros(len(trace.steps) + 1, dtype=bool)
    with_gpu[activity.step[activity.step >= 0]] = True
    return [int(i) for i in window.step_indices.tolist() if with_gpu[i]]


def _median_step(trace: Trace, window: Window) -> int | None:
    """Index of the analyzed step of median length among those that launched GPU work."""
    candidates = _steps_with_gpu(trace, window)
    if not candidates:
        return None
    lengths = sorted((int(trace.steps.duration_ns[i]), i) for i in candidates)
    return lengths[(len(lengths) - 1) // 2][1]


def _empty(note: str) -> CriticalPath:
    return CriticalPath(
        step=None,
        step_us=None,
        replay_error_us=None,
        composition=[],
        top_kernels=[],
        top_ops=[],
        what_if=[],
        note=note,
    )


def _r(value: float) -> float:
    """Figures are reported to the ns (3 decimals of µs)."""
    return round(float(value), 3)
