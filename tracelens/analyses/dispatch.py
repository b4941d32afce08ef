"""CPU dispatch per step: where host time goes, in layers that add up, and how long launches take to start.

Contract: `dispatch_of(trace, window) -> Dispatch`; pure. Every CPU-side event gets one layer; its SELF
time (duration minus its direct children's, via `Links.parent`) is charged to that layer, so the layers sum to
the CPU time covered by events on all threads. Figures per step are totals over the analyzed steps divided by
their number. Launch latency = first GPU start of a launch's activities − the launch call's start.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.codes import (
    name_codes_at,
    name_mask,
    names_of_kinds,
    names_with_blank,
    unique_rows,
)
from tracelens.analyses.keygroups import first_seen_groups
from tracelens.analyses.window import Window
from tracelens.model.cuda_graphs import GRAPH_LAUNCH_NAMES, KERNEL_LAUNCH_NAMES
from tracelens.model.events import API_KINDS, CPU_KINDS, EventTable, Kind, kind_mask
from tracelens.model.memo import per_trace
from tracelens.model.nesting import OVERHANG_TOLERANCE_NS, started_in
from tracelens.model.stats import percentiles
from tracelens.model.steps import STEP_NAME, TORCH_RANGE
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

from tracelens.units import NS_PER_US

LAYERS = ("python", "ops_launching", "cpu_only_ops", "launch", "query", "sync", "compiled", "other_api")
LAYER_HELP = {
    "python": "Python / module code and annotations between ops (step self time when no Python frames)",
    "ops_launching": "aten ops (and Inductor kernel wrappers) whose call tree launched GPU work, self time",
    "cpu_only_ops": "ops that launched nothing: aten::t, transpose, view, as_strided, reshape, expand, empty …",
    "launch": "kernel/graph launch and async copy/memset API calls",
    "query": "runtime queries: cudaOccupancy*, cudaStreamIsCapturing, cudaDeviceGetAttribute, cudaFuncGetAttributes …",
    "sync": "synchronisations: cudaDeviceSynchronize, cudaStreamSynchronize, event syncs, blocking copies",
    "compiled": "torch.compile wrappers: TorchDynamo Cache Lookup, guards, compiled-region and AOT wrappers",
    "other_api": "other runtime calls: allocation, events, stream waits …",
}

GRAPH_LAUNCH_APIS = frozenset(GRAPH_LAUNCH_NAMES)  # one set: model.cuda_graphs
LAUNCH_APIS = (
    frozenset(KERNEL_LAUNCH_NAMES)
    | frozenset(
        {
            "cudaMemcpyAsync",
            "cudaMemsetAsync",
            "cudaMemcpy2DAsync",
            "cuMemcpyAsync",
            "cuMemsetD8Async",
            "cuMemsetD32Async",
            "hipMemcpyAsync",
            "hipMemsetAsync",
        }
    )
    | GRAPH_LAUNCH_APIS
)
SYNC_API = re.compile(
    r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize|^(cuda|hip)Memcpy(2D)?$|^cuMemcpy(DtoH|HtoD)?$|"
    r"^hipMemcpyWithStream$"  # HIP's blocking copy (PyTorch's `copy_` without non_blocking): returns when it is done
)
QUERY_API = re.compile(
    r"Occupancy|IsCapturing|GetAttribute|FuncGetAttributes|FuncSetAttribute|PeekAtLastError|GetLastError|"
    r"GetDevice|DeviceGet|EventQuery|StreamQuery|GetDriverEntryPoint|PointerGetAttributes|GetProperties|"
    r"StreamGetCaptureInfo|GetSymbolAddress|GetFuncBySymbol|ModuleGetFunction|CtxGetCurrent|DriverGetVersion|"
    r"RuntimeGetVersion|GetDeviceCount",
    re.I,
)
COMPILED_OP = re.compile(
    r"^(TorchDynamo Cache Lookup|Torch-Compiled Region: |Pregraph bytecode|AOTDispatcher Runtime Wrapper|"
    r"CompiledFunction(Backward)?$|## Call CompiledFxGraph|Guard|.*[Gg]uard)"
)
BLOCKING_COPY = re.compile(r"DtoH.*Pageable|Device -> Pageable|DtoH \(Device -> Pageable\)")


class Layer(msgspec.Struct, frozen=True):
    name: str
    description: str
    calls_per_step: float
    us_per_step: float


class ApiCall(msgspec.Struct, frozen=True):
    """One runtime/driver API by the op that issued it (innermost CPU op, `Links.op`)."""

    name: str
    layer: str
    issued_by: str
    calls_per_step: float
    us_per_step: float


class OpSelfTime(msgspec.Struct, frozen=True):
    """One CPU op (or compile wrapper) name's self time in the analyzed steps: the time it is the innermost event
    on its thread (its duration less its children's: other ops, API calls), per step."""

    name: str
    layer: str  # ops_launching, cpu_only_ops or compiled: the one holding most of its self time (one row per name)
    calls_per_step: float
    self_us_per_step: float
    share_pct: float  # of `Dispatch.cpu_us_per_step`


class LaunchLatency(msgspec.Struct, frozen=True):
    """Launch call start → first GPU start of what it launched, over the analyzed steps, µs."""

    api: str
    launches: int
    p50_us: float
    p90_us: float
    max_us: float


class StepLayers(msgspec.Struct, frozen=True):
    number: int
    us: dict[str, float]


class Dispatch(msgspec.Struct, frozen=True):
    """Per-step figures; with no analyzed step (`steps` 0) the totals are None and the lists empty."""

    steps: int
    cpu_us_per_step: float | None  # sum of all layers
    dispatch_us_per_step: float | None  # host work to issue GPU work: all layers but python and sync (waiting)
    layers: list[Layer]
    api_calls: list[ApiCall]
    launch_latency: list[LaunchLatency]  # first entry "all"
    step_layers: list[StepLayers]
    ops: list[OpSelfTime] = []  # the `MAX_OPS` op names with the most self time per step, most first


MAX_OPS = 15  # rows of `Dispatch.ops`
OP_LAYERS = ("ops_launching", "cpu_only_ops", "compiled")  # the layers whose events are ops (by name)


@per_trace
def classify_layers(trace: Trace) -> np.ndarray:
    """Layer index (into LAYERS) of every event; -1 for non-CPU events. Cached per trace: do not mutate.

    One table over (kind, name) gives each event its layer; then blocking copies become `sync` and CPU ops
    without a launch below them `cpu_only_ops`."""
    ev = trace.events
    table = _layer_by_kind_and_name(trace)
    layer = table.ravel()[ev.kind.astype(np.intp) * table.shape[1] + ev.name]  # flat: twice as fast as 2-D
    blocking = _blocking_copy_launches(trace)
    layer[blocking[kind_mask(ev.kind[blocking], API_KINDS)]] = LAYERS.index("sync")
    launches = _subtree_launches(trace, layer == LAYERS.index("launch"))
    layer[(layer == LAYERS.index("ops_launching")) & ~launches] = LAYERS.index("cpu_only_ops")
    return layer


def _layer_by_kind_and_name(trace: Trace) -> np.ndarray:
    """Layer of each (kind, name code), shape (len(Kind), len(names)): API calls by name, CPU ops
    `ops_launching` (refined later), annotations and Python `python`, compile wrappers `compiled`."""
    names = trace.events.names
    table = np.full((len(Kind), len(names)), -1, dtype=np.int8)
    api_layer = _api_layer_by_code(trace)
    for kind in API_KINDS:
        table[kind] = api_layer
    table[Kind.CPU_OP] = LAYERS.index("ops_launching")
    # torch's own ranges (model.steps.TORCH_RANGE) recorded as CPU ops (the 2021 format): their layer is python
    ranges = [c for c in names_of_kinds(trace, (Kind.CPU_OP,)).tolist() if TORCH_RANGE.match(names[c])]
    table[Kind.CPU_OP, ranges] = LAYERS.index("python")
    table[Kind.USER_ANNOTATION] = LAYERS.index("python")
    table[Kind.PYTHON] = LAYERS.index("python")
    wrappers = (Kind.CPU_OP, Kind.USER_ANNOTATION)
    compiled = [c for c in names_of_kinds(trace, wrappers).tolist() if COMPILED_OP.match(names[c])]
    for kind in wrappers:
        table[kind, compiled] = LAYERS.index("compiled")
    return table


def _api_layer_by_code(trace: Trace) -> np.ndarray:
    """Layer of every name code that API calls use; other codes get `other_api`."""

    def one(name: str) -> int:
        if name in LAUNCH_APIS:
            return LAYERS.index("launch")
        if SYNC_API.match(name):
            return LAYERS.index("sync")
        if QUERY_API.search(name):
            return LAYERS.index("query")
        return LAYERS.index("other_api")

    names = trace.events.names
    table = np.full(len(names), LAYERS.index("other_api"), dtype=np.int8)
    codes = names_of_kinds(trace, API_KINDS)
    table[codes] = [one(names[c]) for c in codes.tolist()]
    return table


def _blocking_copy_launches(trace: Trace) -> np.ndarray:
    """Rows of the API calls whose copy lands in pageable host memory (D2H to pageable blocks the CPU:
    `.item()`)."""
    links = trace.links
    copies = np.flatnonzero(name_mask(trace, BLOCKING_COPY.search, (Kind.MEMCPY,)) & (links.launch >= 0))
    return links.launch[copies]


def _subtree_launches(trace: Trace, is_launch: np.ndarray) -> np.ndarray:
    """True for every event with a launch call somewhere below it (pointer walk up from the launches; a walk
    stops at an event already marked; duplicates within one level are cheaper to keep than to deduplicate)."""
    parent = trace.links.parent
    has = np.zeros(len(parent), dtype=bool)
    frontier = parent[is_launch]
    frontier = frontier[frontier >= 0]
    while frontier.size:
        frontier = frontier[~has[frontier]]
        has[frontier] = True
        frontier = parent[frontier]
        frontier = frontier[frontier >= 0]
    return has


@per_trace
def self_times(trace: Trace) -> np.ndarray:
    """Every event's self time, ns: the time during which it is the innermost event running on its thread, so
    that a thread's self times add up to the time it was busy (docs/definitions.md#nesting-which-event-is-whose-
    child). Cached per trace: do not mutate.

    Its duration less its direct children's for properly nested events, with two corrections: an annotation the
    profiler closed at the end of the recording (it outlived the event it started in and was still open when the
    profiler stopped) ends with its last child (`_closed_by_profiler`); and the time an event shares with the one
    it started in but outlived (`model.nesting.started_in`) is the later one's: taken from the earlier one and
    from each enclosing event it outlived too, and given back to their common parent, which had subtracted it
    twice (`_overhang_corrections`)."""
    events, parent = trace.events, trace.links.parent
    rows, inside = started_in(events, parent)
    end_ns = _closed_by_profiler(events, parent, rows, inside)
    dur_ns = end_ns - events.ts_ns
    self_ns = dur_ns - _children_ns(parent, dur_ns)  # not clipped yet: the corrections may give some back
    if rows.size:
        _overhang_corrections(self_ns, parent, events.ts_ns, end_ns, rows, inside)
    return np.maximum(self_ns, 0)


def _closed_by_profiler(events: EventTable, parent: np.ndarray, rows: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Every event's end, ns, where an annotation the profiler closed ends sooner. Closed by the profiler: other
    than `ProfilerStep#N` (the profiler's step boundary is its end), it ends with the last CPU event (within 1 µs)
    and either outlived the event it started in (`rows`, started in `inside`: `model.nesting.started_in`: a range
    opened in one call and still open when the profiler stopped) or lies in one that did. It ends with the last
    of its children, else with the event it started in (else, nested, where it starts: how long it ran is not
    known); the innermost first, so that an enclosing one ends with its children's new ends."""
    end_ns = (events.ts_ns + events.dur_ns).astype(np.int64)
    open_at_end = _open_annotations(events, end_ns)
    closed = np.sort(rows[np.isin(rows, open_at_end)])  # (np.intersect1d would import numpy.ma)
    if closed.size == 0:
        return end_ns
    fallback_ns = np.full(len(events), -1, dtype=np.int64)
    fallback_ns[rows] = end_ns[inside]
    for _ in range(MAX_OVERHANG_CHAIN):  # and the open annotations inside them
        inner = open_at_end[np.isin(parent[open_at_end], closed) & ~np.isin(open_at_end, closed)]
        if inner.size == 0:
            break
        closed = np.sort(np.concatenate([closed, inner]))
    fallback_ns[closed] = np.where(fallback_ns[closed] >= 0, fallback_ns[closed], events.ts_ns[closed])
    child = np.flatnonzero(np.isin(parent, closed))
    slot = np.searchsorted(closed, parent[child])  # `closed` is sorted
    for _ in range(MAX_OVERHANG_CHAIN):  # an annotation open inside another: its new end first, then the outer's
        last_ns = np.full(closed.size, -1, dtype=np.int64)
        np.maximum.at(last_ns, slot, end_ns[child])
        new_ns = np.where(last_ns >= 0, last_ns, fallback_ns[closed])
        if np.array_equal(new_ns, end_ns[closed]):
            break
        end_ns[closed] = new_ns
    return end_ns


def _open_annotations(events: EventTable, end_ns: np.ndarray) -> np.ndarray:
    """The annotations other than `ProfilerStep#N` that end with the last CPU event (within 1 µs), sorted."""
    annotations = np.flatnonzero(events.kind == Kind.USER_ANNOTATION)
    if annotations.size == 0:
        return annotations.astype(np.int64)
    recording_end_ns = int(end_ns[kind_mask(events.kind, CPU_KINDS)].max())
    at_end = annotations[end_ns[annotations] >= recording_end_ns - OVERHANG_TOLERANCE_NS]
    steps = [bool(STEP_NAME.match(events.names[c])) for c in events.name[at_end].tolist()]
    return at_end[~np.array(steps, dtype=bool)].astype(np.int64) if at_end.size else at_end.astype(np.int64)


MAX_OVERHANG_CHAIN = 64  # enclosing events walked per overhanging event


def _overhang_corrections(
    self_ns: np.ndarray,
    parent: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    rows: np.ndarray,
    inside: np.ndarray,
) -> None:
    """In place: for each event of `rows` that started in `inside` and outlived it, the time both ran is taken
    from `inside` (and from each enclosing event the row also outlived, up to the row's parent), and the part
    its parent subtracted twice (the row's and its sibling's durations overlap) is given back."""
    parents = parent.tolist()
    starts, ends = start_ns.tolist(), end_ns.tolist()
    for row, first in zip(rows.tolist(), inside.tolist(), strict=True):
        row_start, row_end, top = starts[row], ends[row], -1
        covered_ns, node = row_start, first
        for _ in range(MAX_OVERHANG_CHAIN):
            if node < 0 or node == parents[row]:
                break
            shared_ns = min(ends[node], row_end) - max(covered_ns, row_start)
            if shared_ns > 0:
                self_ns[node] -= shared_ns
            covered_ns, top, node = max(covered_ns, ends[node]), node, parents[node]
        if node >= 0 and node == parents[row] and top >= 0:
            self_ns[node] += max(0, min(ends[top], row_end) - row_start)


def _children_ns(parent: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Every event's direct children's summed duration, ns."""
    by_parent_ns = np.bincount(parent + 1, weights=dur_ns, minlength=len(parent) + 1)  # bin 0: no parent
    return by_parent_ns[1:].astype(np.int64)


def analyze_dispatch(ctx: AnalysisContext) -> Dispatch:
    return dispatch_of(ctx.trace, ctx.steady)


def dispatch_of(trace: Trace, window: Window) -> Dispatch:
    if window.n_steps == 0:
        return Dispatch(0, None, None, [], [], [], [])
    n_steps = window.n_steps
    layer = classify_layers(trace)
    rows = np.flatnonzero(window.in_window & (layer >= 0))  # CPU-side events (only they have a layer)
    row_layer, row_self_ns = layer[rows], self_times(trace)[rows]
    totals_ns = np.bincount(row_layer, weights=row_self_ns, minlength=len(LAYERS))
    counts = np.bincount(row_layer, minlength=len(LAYERS))
    layers = [
        Layer(name, LAYER_HELP[name], _r(counts[i] / n_steps), _r(totals_ns[i] / NS_PER_US / n_steps))
        for i, name in enumerate(LAYERS)
    ]
    cpu_us = float(totals_ns.sum()) / NS_PER_US / n_steps
    not_dispatch = totals_ns[LAYERS.index("python")] + totals_ns[LAYERS.index("sync")]
    python_and_sync_us = float(not_dispatch) / NS_PER_US / n_steps
    return Dispatch(
        steps=window.n_steps,
        cpu_us_per_step=round(cpu_us, 3),
        dispatch_us_per_step=round(cpu_us - python_and_sync_us, 3),
        layers=layers,
        api_calls=_api_calls(trace, window, layer, n_steps),
        launch_latency=launch_latency(trace, window),
        step_layers=_step_layers(trace, window, rows, row_layer, row_self_ns),
        ops=_ops(trace, rows, row_layer, row_self_ns, n_steps, float(totals_ns.sum())),
    )


def _ops(
    trace: Trace, rows: np.ndarray, row_layer: np.ndarray, row_self_ns: np.ndarray, n_steps: int, total_ns: float
) -> list[OpSelfTime]:
    """The op names of the CPU-side `rows` (events of the `OP_LAYERS`) with the most self time, `MAX_OPS` of them
    (ties: more calls, then first seen); each with the layer that holds most of its self time (an op that
    launched GPU work in some calls and none in others is in two layers)."""
    is_op = np.isin(row_layer, [LAYERS.index(name) for name in OP_LAYERS])
    if not is_op.any() or total_ns <= 0:
        return []
    name, layer, self_ns = trace.events.name[rows[is_op]], row_layer[is_op], row_self_ns[is_op]
    group, first = first_seen_groups(name)
    calls = np.bincount(group)
    group_ns = np.bincount(group, weights=self_ns)
    cell = group * len(LAYERS) + layer.astype(np.int64)
    by_layer_ns = np.bincount(cell, weights=self_ns, minlength=first.size * len(LAYERS)).reshape(-1, len(LAYERS))
    main_layer = np.argmax(by_layer_ns, axis=1)  # ties: the first layer of LAYERS
    order = np.lexsort((-calls, -group_ns))[:MAX_OPS]
    return [
        OpSelfTime(
            trace.events.names[name[first[g]]],
            LAYERS[main_layer[g]],
            _r(calls[g] / n_steps),
            _r(group_ns[g] / NS_PER_US / n_steps),
            _r(100.0 * group_ns[g] / total_ns),
        )
        for g in order.tolist()
    ]


def _step_layers(
    trace: Trace, window: Window, rows: np.ndarray, row_layer: np.ndarray, row_self_ns: np.ndarray
) -> list[StepLayers]:
    """Self time per analyzed step and layer, µs, of the CPU-side `rows` (their layers and self times given)."""
    if not rows.size or not window.n_steps:
        return []
    lookup = np.full(len(trace.steps), -1, dtype=np.int64)
    lookup[window.step_indices] = np.arange(window.n_steps)
    cell = lookup[trace.links.step[rows]] * len(LAYERS) + row_layer  # rows in the window are in analyzed steps
    grid = np.bincount(cell, weights=row_self_ns / NS_PER_US, minlength=window.n_steps * len(LAYERS))
    grid = grid.reshape(window.n_steps, len(LAYERS))
    return [
        StepLayers(int(number), {name: round(float(grid[i, j]), 3) for j, name in enumerate(LAYERS)})
        for i, number in enumerate(window.step_numbers)
    ]


def _api_calls(trace: Trace, window: Window, layer: np.ndarray, n_steps: int) -> list[ApiCall]:
    """Calls grouped by (API name, layer, issuing op), most time first (then most calls, then first seen)."""
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(window.in_window & kind_mask(ev.kind, API_KINDS))
    if rows.size == 0:
        return []
    name, op = ev.name[rows], name_codes_at(ev, links.op[rows])
    group, first = first_seen_groups(name, layer[rows], op)
    calls = np.bincount(group)
    total_ns = np.bincount(group, weights=ev.dur_ns[rows])  # exact: sums stay far below 2**53 ns
    order = np.lexsort((-calls, -total_ns))
    labels = names_with_blank(ev)
    calls_per_step = calls / n_steps
    us_per_step = total_ns / NS_PER_US / n_steps
    return [
        ApiCall(
            ev.names[name[first[g]]],
            LAYERS[layer[rows[first[g]]]],
            labels[op[first[g]]] or "(no op)",
            _r(calls_per_step[g]),
            _r(us_per_step[g]),
        )
        for g in order.tolist()
    ]


def launch_latencies(trace: Trace, window: Window) -> tuple[np.ndarray, np.ndarray]:
    """(launch call rows, µs from each call's start to the first GPU start of what it launched) in the window."""
    ev, links = trace.events, trace.links
    gpu = np.flatnonzero(links.launch >= 0)
    gpu = gpu[window.in_window[gpu]]
    if gpu.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    first_start = np.full(len(ev), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_start, links.launch[gpu], ev.ts_ns[gpu])
    launches = unique_rows(links.launch[gpu], len(ev))
    return launches, (first_start[launches] - ev.ts_ns[launches]) / NS_PER_US


def launch_latency(trace: Trace, window: Window) -> list[LaunchLatency]:
    """Latency distribution over all launches, then per launch API (sorted by name)."""
    launches, latency_us = launch_latencies(trace, window)
    if launches.size == 0:
        return []
    ev = trace.events
    codes = ev.name[launches]
    result = [_latency("all", latency_us)]
    for code in sorted(unique_rows(codes, len(ev.names)).tolist(), key=lambda c: ev.names[c]):
        result.append(_latency(ev.names[code], latency_us[codes == code]))
    return result


def _latency(api: str, values: np.ndarray) -> LaunchLatency:
    p50, p90 = percentiles(values, [50, 90])
    return LaunchLatency(
        api,
        int(values.size),
        _r(p50),
        _r(p90),
        _r(values.max()),
    )


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)
