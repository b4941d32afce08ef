"""torch.compile awareness: compiled regions and their overhead, graph breaks, recompiles, compilation inside
the window, and CUDA-graph replays.

Contract: `analyze_compiled(ctx) -> Compiled` (`compiled_of(trace, window)` for any window);
`steady_window(trace, window, compiled) -> Window` keeps the steps after the last compilation (failing that,
the steps that overlap no compilation; failing that,
the events that overlap none) so steady-state figures exclude it; `Compiled.note` says which. Pure.

Compiles: compile-phase spans (`COMPILE_SPAN`) merged per thread; each cluster belongs to a compile id
`frame/recompile` — the id Dynamo's markers give it where it wrote some (`…_data: compile_id=f/r`, `_marked_id`;
`COMPILE_ID`: a frame resumed after a graph break compiles inside the previous frame's region), else that of the
thread's latest marked cluster when no region on the thread holds this one or started since (its first-call
autotuning), else the `Torch-Compiled Region: f/r` that contains it (first-call autotuning), else the first
region that thread enters after it (Dynamo compiles a frame, then runs it), else the latest region entered
before it on any thread (a lazily compiled backward, on the autograd thread). `compiles` has one entry per id,
with its compile time and the step where it started (with inferred steps, which are the calls only, a compile
that started between calls belongs to the next call: the one it compiled for).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

import msgspec
import numpy as np

from tracelens.analyses.autotune import Autotune, autotune_of
from tracelens.analyses.codes import (
    name_codes_at,
    name_mask,
    names_with_blank,
    unique_rows,
)
from tracelens.analyses.dispatch import GRAPH_LAUNCH_APIS, LAYERS, classify_layers, self_times
from tracelens.analyses.keygroups import first_seen_groups
from tracelens.analyses.window import Window, merge_intervals
from tracelens.model.cuda_graphs import capture_spans
from tracelens.model.events import CPU_KINDS, GPU_ACTIVITY_KINDS, Kind, kind_mask
from tracelens.model.memo import per_trace
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace
from tracelens.records import replace
from tracelens.units import NS_PER_US
from tracelens.variants import ProgramShape

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
COMPILE_ID = re.compile(r"_data: .*\bcompile_id=(\d+)/(\d+)")  # Dynamo's marker of the id being compiled
MARKER_LEAD_NS = 1_000_000  # how far before its span a compile-id marker may start
COMPILE_SPAN = re.compile(
    r"\(dynamo_timed\)$|^compile_fx_inner$|^_compile\.compile_inner$|^OutputGraph\.call_user_compiler$|"
    r"^fx_codegen_and_compile$|^async_compile\.wait$"
)


class Region(msgspec.Struct, frozen=True):
    name: str
    frame: int
    recompile: int
    calls_per_step: float
    us_per_step: float  # wall time inside the region (inclusive)
    overhead_us_per_step: float  # self time of compile wrappers inside it (guards, AOT wrappers, region)


class GraphReplay(msgspec.Struct, frozen=True):
    """CUDA-graph launches by the op (and compiled region) that issued them."""

    launch_api: str
    op: str
    region: str
    replays_per_step: float
    kernels_per_replay: float  # kernels only
    gpu_us_per_replay: float  # all GPU activity of a replay (kernels, copies, memsets)
    activities_per_replay: float = 0.0  # kernels, copies and memsets


class CompileEvent(msgspec.Struct, frozen=True):
    """Compilation of one compile id inside the trace: `id` "frame/recompile" (None when no compiled region
    follows it), `ms` of compile-phase spans (merged per thread), `step` the ProfilerStep it started in."""

    id: str | None
    ms: float
    step: int | None


class Compiled(msgspec.Struct, frozen=True):
    regions: list[Region]
    frames: list[int]
    graph_breaks: int  # distinct compiled frames - 1 (a graph break splits a function into frames)
    recompiles: list[str]  # regions with recompile index > 0
    cache_lookup_us_per_step: float
    overhead_us_per_step: float  # compiled-wrapper layer over the window
    compile_in_window: bool
    compile_us: float
    compile_spans: int
    func_get_attributes_calls: int
    excluded_steps: list[int]
    excluded_events: int
    graph_replays: list[GraphReplay]
    note: str
    compiles: list[CompileEvent] = msgspec.field(default_factory=list)
    steady_steps: list[int] = msgspec.field(default_factory=list)  # the steps the steady-state figures come from
    # the part of `cache_lookup_us_per_step` outside every compiled region (a nested compiled call looks up inside)
    cache_lookup_outside_us_per_step: float = 0.0
    # Inductor's autotuning in the whole trace (compile cost, in no step: analyses/autotune.py); None: none
    autotune: Autotune | None = None
    # every analyzed step overlaps warm-up (`warmup_intervals`: compilation or a CUDA-graph capture), so none could
    # be left out of the steady-state figures: they are the warm-up's (False without ProfilerSteps)
    warmup_only: bool = False


def program_shape(compiled: Compiled) -> ProgramShape:
    """What `compiled` says its program runs that an action changes: its compiled regions and CUDA-graph replay
    rows (the lengths of the lists `analyze --format json` writes as `compiled.regions` and
    `compiled.graph_replays`)."""
    return ProgramShape(
        compiled_regions=len(compiled.regions),
        graph_replays=len(compiled.graph_replays),
        warmup_only=compiled.warmup_only,
    )


@per_trace
def compile_intervals(trace: Trace) -> np.ndarray:
    """Merged [start, end) ns intervals of compile-phase spans, shape (k, 2). Cached per trace: do not mutate."""
    ev = trace.events
    rows = np.flatnonzero(name_mask(trace, COMPILE_SPAN.search, CPU_KINDS))
    return merge_intervals(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows])


@per_trace
def warmup_intervals(trace: Trace) -> np.ndarray:
    """Merged [start, end) ns intervals of what the steady window leaves out: compile-phase spans
    (`compile_intervals`) and CUDA-graph captures (`cuda_graphs.capture_spans`). Cached per trace: do not
    mutate."""
    spans = compile_intervals(trace)
    captures = np.asarray(capture_spans(trace.events), dtype=np.int64).reshape(-1, 2)
    if captures.size == 0:
        return spans
    return merge_intervals(np.concatenate([spans[:, 0], captures[:, 0]]), np.concatenate([spans[:, 1], captures[:, 1]]))


def overlaps_intervals(start: np.ndarray, end: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Whether each [start, end] overlaps any merged interval (sorted, disjoint)."""
    if intervals.shape[0] == 0:
        return np.zeros(start.size, dtype=bool)
    first = np.searchsorted(intervals[:, 1], start, side="right")
    inside = first < intervals.shape[0]
    hit = np.zeros(start.size, dtype=bool)
    hit[inside] = intervals[first[inside], 0] < np.maximum(end[inside], start[inside] + 1)
    return hit


def analyze_compiled(ctx: AnalysisContext) -> Compiled:
    return compiled_of(ctx.trace, ctx.window)


def compiled_of(trace: Trace, window: Window) -> Compiled:
    spans = compile_intervals(trace)
    excluded_steps, excluded_mask = _steady_exclusions(trace, window)
    steady = _apply(window, excluded_steps, excluded_mask, trace)
    n = max(steady.n_steps, 1)
    layer = classify_layers(trace)
    self_ns = self_times(trace)
    compiled_layer = steady.in_window & (layer == LAYERS.index("compiled"))
    regions = _regions(trace, steady, compiled_layer, self_ns, n)
    lookup = steady.in_window & _named(trace, "TorchDynamo Cache Lookup")
    frames = sorted({r.frame for r in regions})
    compile_us = float((spans[:, 1] - spans[:, 0]).sum()) / NS_PER_US if spans.size else 0.0
    compiles = compile_events(trace)
    result = Compiled(
        regions=regions,
        frames=frames,
        graph_breaks=max(len(frames) - 1, 0),
        recompiles=_recompiles(trace, window, compiles),
        cache_lookup_us_per_step=_r(self_ns[lookup].sum() / NS_PER_US / n),
        overhead_us_per_step=_r(self_ns[compiled_layer].sum() / NS_PER_US / n),
        compile_in_window=bool(spans.shape[0]),
        compile_us=_r(compile_us),
        compile_spans=int(spans.shape[0]),
        func_get_attributes_calls=int(np.count_nonzero(_named(trace, "cudaFuncGetAttributes"))),
        excluded_steps=excluded_steps,
        excluded_events=int(excluded_mask.sum()),
        graph_replays=_graph_replays(trace, steady, n),
        note="",
        compiles=compiles,
        steady_steps=list(steady.step_numbers) if trace.steps.per_step else [],
        cache_lookup_outside_us_per_step=_r(_outside_regions(trace, lookup, self_ns) / NS_PER_US / n),
        autotune=autotune_of(trace),
        warmup_only=_warmup_only(trace, window),
    )
    return _with_note(result, trace)


def _warmup_only(trace: Trace, window: Window) -> bool:
    """Whether every step of `window` overlaps warm-up (`warmup_intervals`): its ProfilerSteps (or inferred steps)
    each, or its one whole-trace window, which then holds compilation or a capture (no repeated step to predict)."""
    chosen, steps, spans = window.step_indices, trace.steps, warmup_intervals(trace)
    if chosen.size == 0 or spans.shape[0] == 0:
        return False
    return bool(overlaps_intervals(steps.start_ns[chosen], steps.end_ns[chosen], spans).all())


def _outside_regions(trace: Trace, mask: np.ndarray, self_ns: np.ndarray) -> float:
    """Self time (ns) of the events in `mask` that no compiled region encloses."""
    rows = np.flatnonzero(mask)
    return float(self_ns[rows[_region_of(trace, rows, _region_calls(trace)) < 0]].sum())


def steady_window(trace: Trace, window: Window, compiled: Compiled | None = None) -> Window:
    """`window` without the steps that overlap compilation or a CUDA-graph capture (`warmup_intervals`), or,
    failing that, the events that overlap compilation (`_steady_exclusions`)."""
    if warmup_intervals(trace).shape[0] == 0:
        return window
    excluded_steps, excluded_mask = _steady_exclusions(trace, window)
    return _apply(window, excluded_steps, excluded_mask, trace)


def steady_steps(trace: Trace, window: Window) -> Window:
    """The steps the per-step figures are over: `steady_window` where it leaves steps out, else `window` itself
    (events that overlap compilation stay in the per-step figures; the analyses that leave them out say so)."""
    steady = steady_window(trace, window)
    return steady if steady.n_steps != window.n_steps else window


def _steady_exclusions(trace: Trace, window: Window) -> tuple[list[int], np.ndarray]:
    """`_exclusions` of the warm-up (compilation and CUDA-graph captures) where they leave out steps; where they
    would leave out single events instead (no step after), of compilation alone: a trace of nothing but a capture
    keeps its capture's events."""
    excluded_steps, excluded_mask = _exclusions(trace, window, warmup_intervals(trace))
    if excluded_steps or not excluded_mask.any():
        return excluded_steps, excluded_mask
    return _exclusions(trace, window, compile_intervals(trace))


def _exclusions(trace: Trace, window: Window, spans: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Steps to leave out of steady-state figures (those up to the step of the last compilation; if no step
    follows it, those overlapping compilation), or, with no step left, the events overlapping compilation."""
    ev, steps = trace.events, trace.steps
    none = np.zeros(len(ev), dtype=bool)
    if spans.shape[0] == 0:
        return [], none
    chosen = window.step_indices
    if steps.per_step and chosen.size:
        hit = overlaps_intervals(steps.start_ns[chosen], steps.end_ns[chosen], spans)
        if hit.any():
            last_compile_end = int(spans[:, 1].max())
            after = steps.start_ns[chosen] >= last_compile_end
            if after.any():
                return [int(steps.number[i]) for i in chosen[~after]], none
            if not hit.all():
                return [int(steps.number[i]) for i in chosen[hit]], none
        else:
            return [], none
    cpu = kind_mask(ev.kind, CPU_KINDS)
    mask = cpu & overlaps_intervals(ev.ts_ns, ev.end_ns, spans)
    gpu = np.flatnonzero(trace.links.launch >= 0)
    mask[gpu] = mask[trace.links.launch[gpu]]
    return [], mask


@per_trace
def compile_events(trace: Trace) -> list[CompileEvent]:
    """One `CompileEvent` per compile id, in order of its first compile-phase span."""
    ev = trace.events
    rows = np.flatnonzero(name_mask(trace, COMPILE_SPAN.search, CPU_KINDS))
    if rows.size == 0:
        return []
    rows_of_regions = np.flatnonzero(_region_calls(trace))
    calls = _RegionCalls(
        rows_of_regions,
        ev.track[rows_of_regions],
        ev.ts_ns[rows_of_regions],
        ev.ts_ns[rows_of_regions] + ev.dur_ns[rows_of_regions],
    )
    clusters: list[tuple[int, int, int]] = []  # (start, end, track)
    for track in distinct_ints(ev.track[rows]).tolist():
        on = rows[ev.track[rows] == track]
        for start, end in merge_intervals(ev.ts_ns[on], ev.ts_ns[on] + ev.dur_ns[on]).tolist():
            clusters.append((start, end, track))
    clusters.sort()
    markers = _compile_id_markers(trace)
    by_id: dict[str | None, list[float]] = {}
    first_start: dict[str | None, int] = {}
    marked_on: dict[int, tuple[str, int]] = {}  # track → (id, end) of its latest cluster that carried a marker
    anonymous = 0
    for start, end, track in clusters:
        key = _marked_id(markers, start, end, track)
        if key is not None:
            marked_on[track] = (key, end)
        else:
            key = _continued(marked_on.get(track), calls, start, end, track)
        if key is None:
            region = _owning_region(calls, start, end, track)
            match = REGION.match(ev.names[ev.name[region]]) if region >= 0 else None
            key = _frame_id(match) if match else None
        slot: str | None = key if key is not None else f"?{anonymous}"
        anonymous += key is None
        by_id.setdefault(slot, []).append((end - start) / 1e6)
        first_start.setdefault(slot, start)
    steps = trace.steps
    result = []
    for slot, durations in by_id.items():
        at = first_start[slot]
        index = int(np.searchsorted(steps.start_ns, at, side="right")) - 1
        in_step = steps.per_step and index >= 0 and at < int(steps.end_ns[index])
        if steps.spans_calls and not in_step and index + 1 < len(steps):
            index, in_step = index + 1, True  # between calls: Dynamo compiles a frame, then runs it (the next call)
        result.append(
            CompileEvent(
                id=None if slot is None or slot.startswith("?") else slot,
                ms=round(sum(durations), 3),
                step=int(steps.number[index]) if in_step else None,
            )
        )
    return result


def _compile_id_markers(trace: Trace) -> list[tuple[int, int, str]]:
    """(ts ns, track, id) of the compile-id markers Dynamo writes where the trace has them
    (`entire_frame_compile_data: …, compile_id=1/0`, `compile_fx.<locals>.bw_compiler_data: compile_id=0/0`),
    sorted; each distinct name is parsed once."""
    ev = trace.events
    rows = np.flatnonzero(name_mask(trace, COMPILE_ID.search, CPU_KINDS))
    ids: dict[int, str] = {}
    for code in distinct_ints(ev.name[rows]).tolist():
        match = COMPILE_ID.search(ev.names[code])
        if match:
            ids[code] = _frame_id(match)
    return sorted(
        zip(ev.ts_ns[rows].tolist(), ev.track[rows].tolist(), [ids[c] for c in ev.name[rows].tolist()], strict=True)
    )


def _frame_id(match: re.Match[str]) -> str:
    """`frame/recompile` from a match of `REGION` or `COMPILE_ID`."""
    return f"{match.group(1)}/{match.group(2)}"


class _RegionCalls(NamedTuple):
    """The compiled-region calls of a trace: their rows, tracks, start and end (ns)."""

    rows: np.ndarray
    track: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray


def _marked_id(markers: list[tuple[int, int, str]], start: int, end: int, track: int) -> str | None:
    """The compile id Dynamo's markers give a cluster: the last marker on its thread at most `MARKER_LEAD_NS`
    before its start (Dynamo writes each `…_data` marker just before the span it labels), else the earliest inside
    it; None where neither exists."""
    lead = [i for at, on, i in markers if on == track and start - MARKER_LEAD_NS <= at <= start]
    if lead:
        return lead[-1]
    return next((i for at, on, i in markers if on == track and start < at <= end), None)


def _continued(marked: tuple[str, int] | None, calls: _RegionCalls, start: int, end: int, track: int) -> str | None:
    """The id of the thread's latest marked compile when this unmarked cluster continues it (first-call
    autotuning of what that compile produced): no compiled region on the thread holds the cluster or started
    since that compile ended. None otherwise."""
    if marked is None:
        return None
    same = calls.track == track
    holds = same & (calls.start_ns <= start) & (calls.end_ns >= end)
    since = same & (calls.start_ns >= marked[1]) & (calls.start_ns <= start)
    return None if holds.any() or since.any() else marked[0]


def _owning_region(calls: _RegionCalls, start: int, end: int, track: int) -> int:
    """The compiled-region call a compile cluster belongs to (see the module docstring), -1 if none."""
    same = calls.track == track
    inside = same & (calls.start_ns <= start) & (calls.end_ns >= end)
    if inside.any():
        return int(calls.rows[np.flatnonzero(inside)[-1]])
    later = same & (calls.start_ns >= end)
    if later.any():
        return int(calls.rows[np.flatnonzero(later)[np.argmin(calls.start_ns[later])]])
    earlier = calls.start_ns <= start
    if earlier.any():
        return int(calls.rows[np.flatnonzero(earlier)[np.argmax(calls.start_ns[earlier])]])
    return -1


def _recompiles(trace: Trace, window: Window, compiles: list[CompileEvent]) -> list[str]:
    """Region names of the distinct compile ids with a recompile index > 0 that ran or compiled in the window."""
    ev = trace.events
    ids = {c.id for c in compiles if c.id is not None and (c.step is None or c.step in window.step_numbers)}
    calls = np.flatnonzero(window.in_window & _region_calls(trace))
    for code in distinct_ints(ev.name[calls]).tolist():
        match = REGION.match(ev.names[code])
        if match:
            ids.add(_frame_id(match))
    recompiled = [i for i in ids if int(i.split("/")[1]) > 0]
    return [f"Torch-Compiled Region: {i}" for i in sorted(recompiled, key=lambda i: tuple(map(int, i.split("/"))))]


def _apply(window: Window, excluded_steps: list[int], excluded_mask: np.ndarray, trace: Trace) -> Window:
    if excluded_steps:
        keep = ~np.isin(trace.steps.number[window.step_indices], np.array(excluded_steps))
        chosen = window.step_indices[keep]
        return Window(chosen, tuple(int(x) for x in trace.steps.number[chosen]), np.isin(trace.links.step, chosen))
    if excluded_mask.any():
        return Window(window.step_indices, window.step_numbers, window.in_window & ~excluded_mask)
    return window


def _named(trace: Trace, name: str) -> np.ndarray:
    """Events called exactly `name`."""
    ev = trace.events
    code = ev.names.index(name) if name in ev.names else -1
    return ev.name == code


def _region_of(trace: Trace, rows: np.ndarray, is_region: np.ndarray) -> np.ndarray:
    """Nearest enclosing-or-self compiled region of each row (-1 if none); `is_region`: mask over events."""
    parent = trace.links.parent
    current = rows.astype(np.int64)
    result = np.full(rows.size, -1, dtype=np.int64)
    active = np.arange(rows.size)
    while active.size:
        here = current[active]
        found = is_region[here]
        result[active[found]] = here[found]
        active = active[~found]
        current[active] = parent[current[active]]
        active = active[current[active] >= 0]
    return result


@per_trace
def _region_calls(trace: Trace) -> np.ndarray:
    """CPU ops named like a compiled region (`Torch-Compiled Region: frame/recompile`). Cached per trace."""
    return name_mask(trace, REGION.match, (Kind.CPU_OP,))


def _regions(trace: Trace, window: Window, compiled_layer: np.ndarray, self_ns: np.ndarray, n: int) -> list[Region]:
    ev = trace.events
    is_region = _region_calls(trace)
    calls = np.flatnonzero(window.in_window & is_region)
    if calls.size == 0:
        return []
    wrappers = np.flatnonzero(compiled_layer)
    owner = _region_of(trace, wrappers, is_region)
    owned = owner >= 0
    n_names = len(ev.names)
    overhead_ns = np.bincount(ev.name[owner[owned]], weights=self_ns[wrappers][owned], minlength=n_names)
    code = ev.name[calls]
    count = np.bincount(code, minlength=n_names)
    total_ns = np.bincount(code, weights=ev.dur_ns[calls], minlength=n_names)  # exact below 2**53 ns
    regions = []
    for c in np.flatnonzero(count).tolist():
        name = ev.names[c]
        match = REGION.match(name)
        assert match is not None
        regions.append(
            Region(
                name,
                int(match.group(1)),
                int(match.group(2)),
                _r(count[c] / n),
                _r(total_ns[c] / NS_PER_US / n),
                _r(float(overhead_ns[c]) / NS_PER_US / n),
            )
        )
    return sorted(regions, key=lambda r: (r.frame, r.recompile))


def _graph_replays(trace: Trace, window: Window, n: int) -> list[GraphReplay]:
    """Per (launch API, op, region), in order of the first launch: replays, kernels each, GPU time each."""
    ev, links = trace.events, trace.links
    graph_launch = name_mask(trace, GRAPH_LAUNCH_APIS.__contains__)
    gpu = np.flatnonzero(kind_mask(ev.kind, GPU_ACTIVITY_KINDS) & (links.launch >= 0))
    gpu = gpu[window.in_window[gpu] & graph_launch[links.launch[gpu]]]
    if gpu.size == 0:
        return []
    launch = unique_rows(links.launch[gpu], len(ev))
    slot = np.searchsorted(launch, links.launch[gpu])
    activities = np.bincount(slot)
    kernels = np.bincount(slot, weights=(ev.kind[gpu] == Kind.KERNEL).astype(np.float64), minlength=activities.size)
    gpu_ns = np.bincount(slot, weights=ev.dur_ns[gpu])  # exact below 2**53 ns
    api, op = ev.name[launch], name_codes_at(ev, links.op[launch])
    region = name_codes_at(ev, _region_of(trace, launch, _region_calls(trace)))
    group, first = first_seen_groups(api, op, region)
    replays = np.bincount(group)
    kernels_per_replay = np.bincount(group, weights=kernels) / replays
    activities_per_replay = np.bincount(group, weights=activities) / replays
    gpu_us_per_replay = np.bincount(group, weights=gpu_ns) / NS_PER_US / replays
    labels = names_with_blank(ev)
    return [
        GraphReplay(
            ev.names[api[f]],
            labels[op[f]] or "(no op)",
            labels[region[f]] or "(none)",
            _r(replays[g] / n),
            _r(kernels_per_replay[g]),
            _r(gpu_us_per_replay[g]),
            _r(activities_per_replay[g]),
        )
        for g, f in enumerate(first.tolist())
    ]


def _excluded_steps_note(result: Compiled, why: str = "") -> str:
    steady = ", ".join(map(str, result.steady_steps)) or "none"
    return (
        f"steps {', '.join(map(str, result.excluded_steps))} excluded from steady-state figures "
        f"({why}steady state from step(s) {steady})"
    )


def _with_note(result: Compiled, trace: Trace) -> Compiled:
    parts = []
    if result.compile_in_window:
        listed = ", ".join(
            f"{c.id or '?'}" + (f" in step {c.step}" if c.step is not None else "") + f" {c.ms:,.1f} ms"
            for c in result.compiles
        )
        parts.append(
            f"{len(result.compiles)} compile(s) in the trace ({listed}; {result.compile_us / 1000:,.1f} ms, "
            f"{result.func_get_attributes_calls} cudaFuncGetAttributes calls)"
        )
        if result.excluded_steps:
            parts.append(_excluded_steps_note(result))
        elif result.excluded_events:
            parts.append(
                f"{result.excluded_events} events overlapping compilation excluded from dispatch, bound, fusion and "
                "roofline figures; per-step summary figures still include them (no compile-free steps to choose)"
            )
    elif result.excluded_steps:  # no compilation: a CUDA-graph capture ran in them
        parts.append(_excluded_steps_note(result, "a CUDA-graph capture ran in them: "))
    if result.graph_breaks:
        parts.append(f"{len(result.frames)} compiled frames: {result.graph_breaks} graph break(s) likely")
    if result.recompiles:
        ids = ", ".join(r.rsplit(" ", 1)[-1] for r in result.recompiles)
        parts.append(f"{len(result.recompiles)} recompiled id(s): {ids}")
    note = "; ".join(parts)
    return replace(result, note=note)


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)
