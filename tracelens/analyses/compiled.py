"""torch.compile awareness: compiled regions and their overhead, graph breaks, recompiles, compilation inside
the window, and CUDA-graph replays.

Contract: `analyze_compiled(trace, window) -> Compiled`; `steady_window(trace, window, compiled) -> Window`
drops steps that overlap compilation (or, with no usable steps, the events that overlap it) so steady-state
figures exclude it; `Compiled.note` says what was excluded. Pure, vectorised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelens.analyses.dispatch import GRAPH_LAUNCH_APIS, LAYERS, classify_layers, self_time_ns
from tracelens.analyses.window import Window, merge_intervals
from tracelens.model.events import CPU_KINDS, GPU_ACTIVITY_KINDS, Kind
from tracelens.model.trace import Trace

NS_PER_US = 1000.0
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
COMPILE_SPAN = re.compile(
    r"\(dynamo_timed\)$|^compile_fx_inner$|^_compile\.compile_inner$|^OutputGraph\.call_user_compiler$|"
    r"^fx_codegen_and_compile$|^async_compile\.wait$"
)


@dataclass(frozen=True)
class Region:
    name: str
    frame: int
    recompile: int
    calls_per_step: float
    us_per_step: float  # wall time inside the region (inclusive)
    overhead_us_per_step: float  # self time of compile wrappers inside it (guards, AOT wrappers, region)


@dataclass(frozen=True)
class GraphReplay:
    """CUDA-graph launches by the op (and compiled region) that issued them."""

    launch_api: str
    op: str
    region: str
    replays_per_step: float
    kernels_per_replay: float
    gpu_us_per_replay: float


@dataclass(frozen=True)
class Compiled:
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


def compile_intervals(trace: Trace) -> np.ndarray:
    """Merged [start, end) ns intervals of compile-phase spans, shape (k, 2)."""
    ev = trace.events
    codes = np.array([c for c, s in enumerate(ev.names) if COMPILE_SPAN.search(s)], dtype=np.int32)
    rows = np.flatnonzero(np.isin(ev.name, codes) & np.isin(ev.kind, np.array(CPU_KINDS, np.int8)))
    return merge_intervals(ev.ts_ns[rows], ev.end_ns[rows])


def overlaps_intervals(start: np.ndarray, end: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Whether each [start, end] overlaps any merged interval (sorted, disjoint)."""
    if intervals.shape[0] == 0:
        return np.zeros(start.size, dtype=bool)
    first = np.searchsorted(intervals[:, 1], start, side="right")
    inside = first < intervals.shape[0]
    hit = np.zeros(start.size, dtype=bool)
    hit[inside] = intervals[first[inside], 0] < np.maximum(end[inside], start[inside] + 1)
    return hit


def analyze_compiled(trace: Trace, window: Window) -> Compiled:
    ev, links = trace.events, trace.links
    spans = compile_intervals(trace)
    excluded_steps, excluded_mask = _exclusions(trace, window, spans)
    steady = _apply(window, excluded_steps, excluded_mask, trace)
    n = max(steady.n_steps, 1)
    layer = classify_layers(trace)
    self_ns = self_time_ns(ev, links.parent)
    compiled_layer = steady.in_window & (layer == LAYERS.index("compiled"))
    regions = _regions(trace, steady, compiled_layer, self_ns, n)
    lookup_codes = np.array([c for c, s in enumerate(ev.names) if s == "TorchDynamo Cache Lookup"], dtype=np.int32)
    lookup = steady.in_window & np.isin(ev.name, lookup_codes)
    fga_codes = np.array([c for c, s in enumerate(ev.names) if s == "cudaFuncGetAttributes"], dtype=np.int32)
    frames = sorted({r.frame for r in regions})
    compile_us = float((spans[:, 1] - spans[:, 0]).sum()) / NS_PER_US if spans.size else 0.0
    result = Compiled(
        regions=regions,
        frames=frames,
        graph_breaks=max(len(frames) - 1, 0),
        recompiles=[r.name for r in regions if r.recompile > 0],
        cache_lookup_us_per_step=_r(self_ns[lookup].sum() / NS_PER_US / n),
        overhead_us_per_step=_r(self_ns[compiled_layer].sum() / NS_PER_US / n),
        compile_in_window=bool(spans.shape[0]),
        compile_us=_r(compile_us),
        compile_spans=int(spans.shape[0]),
        func_get_attributes_calls=int(np.count_nonzero(np.isin(ev.name, fga_codes))),
        excluded_steps=excluded_steps,
        excluded_events=int(excluded_mask.sum()),
        graph_replays=_graph_replays(trace, steady, n),
        note="",
    )
    return _with_note(result, trace)


def steady_window(trace: Trace, window: Window, compiled: Compiled | None = None) -> Window:
    """`window` without the steps (or, failing that, the events) that overlap compilation."""
    spans = compile_intervals(trace)
    if spans.shape[0] == 0:
        return window
    excluded_steps, excluded_mask = _exclusions(trace, window, spans)
    return _apply(window, excluded_steps, excluded_mask, trace)


def _exclusions(trace: Trace, window: Window, spans: np.ndarray) -> tuple[list[int], np.ndarray]:
    ev, steps = trace.events, trace.steps
    none = np.zeros(len(ev), dtype=bool)
    if spans.shape[0] == 0:
        return [], none
    chosen = window.step_indices
    if steps.source == "ProfilerStep" and chosen.size:
        hit = overlaps_intervals(steps.start_ns[chosen], steps.end_ns[chosen], spans)
        if hit.any() and not hit.all():
            return [int(steps.number[i]) for i in chosen[hit]], none
    cpu = np.isin(ev.kind, np.array(CPU_KINDS, np.int8))
    mask = cpu & overlaps_intervals(ev.ts_ns, ev.end_ns, spans)
    gpu = np.flatnonzero(trace.links.launch >= 0)
    mask[gpu] = mask[trace.links.launch[gpu]]
    return [], mask


def _apply(window: Window, excluded_steps: list[int], excluded_mask: np.ndarray, trace: Trace) -> Window:
    if excluded_steps:
        keep = ~np.isin(trace.steps.number[window.step_indices], np.array(excluded_steps))
        chosen = window.step_indices[keep]
        return Window(chosen, tuple(int(x) for x in trace.steps.number[chosen]), np.isin(trace.links.step, chosen))
    if excluded_mask.any():
        return Window(window.step_indices, window.step_numbers, window.in_window & ~excluded_mask)
    return window


def _region_of(trace: Trace, rows: np.ndarray, region_codes: np.ndarray) -> np.ndarray:
    """Nearest enclosing-or-self compiled region of each row (-1 if none)."""
    ev, parent = trace.events, trace.links.parent
    current = rows.astype(np.int64)
    result = np.full(rows.size, -1, dtype=np.int64)
    active = np.arange(rows.size)
    while active.size:
        here = current[active]
        found = np.isin(ev.name[here], region_codes) & (ev.kind[here] == Kind.CPU_OP)
        result[active[found]] = here[found]
        active = active[~found]
        current[active] = parent[current[active]]
        active = active[current[active] >= 0]
    return result


def _regions(trace: Trace, window: Window, compiled_layer: np.ndarray, self_ns: np.ndarray, n: int) -> list[Region]:
    ev = trace.events
    region_codes = np.array([c for c, s in enumerate(ev.names) if REGION.match(s)], dtype=np.int32)
    if region_codes.size == 0:
        return []
    calls = np.flatnonzero(window.in_window & np.isin(ev.name, region_codes) & (ev.kind == Kind.CPU_OP))
    wrappers = np.flatnonzero(compiled_layer)
    owner = _region_of(trace, wrappers, region_codes)
    overhead = pd.Series(self_ns[wrappers][owner >= 0]).groupby(ev.name[owner[owner >= 0]]).sum()
    frame = pd.DataFrame({"code": ev.name[calls], "dur": ev.dur_ns[calls]}).groupby("code")["dur"].agg(["size", "sum"])
    regions = []
    for code, row in frame.iterrows():
        name = ev.names[int(code)]
        match = REGION.match(name)
        assert match is not None
        regions.append(
            Region(
                name,
                int(match.group(1)),
                int(match.group(2)),
                _r(row["size"] / n),
                _r(row["sum"] / NS_PER_US / n),
                _r(float(overhead.get(code, 0)) / NS_PER_US / n),
            )
        )
    return sorted(regions, key=lambda r: (r.frame, r.recompile))


def _graph_replays(trace: Trace, window: Window, n: int) -> list[GraphReplay]:
    ev, links = trace.events, trace.links
    graph_codes = np.array([c for c, s in enumerate(ev.names) if s in GRAPH_LAUNCH_APIS], dtype=np.int32)
    gpu = np.flatnonzero(np.isin(ev.kind, np.array(GPU_ACTIVITY_KINDS, np.int8)) & (links.launch >= 0))
    gpu = gpu[window.in_window[gpu] & np.isin(ev.name[links.launch[gpu]], graph_codes)]
    if gpu.size == 0:
        return []
    launches = links.launch[gpu]
    region_codes = np.array([c for c, s in enumerate(ev.names) if REGION.match(s)], dtype=np.int32)
    unique_launch = np.unique(launches)
    region = _region_of(trace, unique_launch, region_codes)
    per_launch = pd.DataFrame({"launch": launches, "dur": ev.dur_ns[gpu]}).groupby("launch")["dur"].agg(["size", "sum"])
    per_launch["api"] = ev.names_at(per_launch.index.to_numpy())
    per_launch["op"] = ev.names_at(links.op[per_launch.index.to_numpy()])
    per_launch["region"] = ev.names_at(region[np.searchsorted(unique_launch, per_launch.index.to_numpy())])
    grouped = per_launch.groupby(["api", "op", "region"], sort=False).agg(
        replays=("size", "size"), kernels=("size", "sum"), gpu_ns=("sum", "sum")
    )
    return [
        GraphReplay(
            str(api),
            str(op) or "(no op)",
            str(reg) or "(none)",
            _r(g["replays"] / n),
            _r(g["kernels"] / g["replays"]),
            _r(g["gpu_ns"] / NS_PER_US / g["replays"]),
        )
        for (api, op, reg), g in grouped.iterrows()
    ]


def _with_note(result: Compiled, trace: Trace) -> Compiled:
    parts = []
    if result.compile_in_window:
        parts.append(
            f"compilation inside the window ({result.compile_spans} compile span(s), "
            f"{result.compile_us / 1000:,.1f} ms, {result.func_get_attributes_calls} cudaFuncGetAttributes calls)"
        )
        if result.excluded_steps:
            parts.append(f"steps {', '.join(map(str, result.excluded_steps))} excluded from steady-state figures")
        elif result.excluded_events:
            parts.append(
                f"{result.excluded_events} events overlapping compilation excluded from dispatch, bound, fusion and "
                "roofline figures; per-step summary figures still include them (no compile-free steps to choose)"
            )
    if result.graph_breaks:
        parts.append(f"{len(result.frames)} compiled frames: {result.graph_breaks} graph break(s) likely")
    if result.recompiles:
        parts.append(f"recompiled: {', '.join(result.recompiles)}")
    note = "; ".join(parts)
    return Compiled(**{**result.__dict__, "note": note})


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)
