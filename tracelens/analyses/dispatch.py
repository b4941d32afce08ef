"""CPU dispatch per step: where host time goes, in layers that add up, and how long launches take to start.

Contract: `analyze_dispatch(trace, window) -> Dispatch`; pure. Every CPU-side event gets one layer; its SELF
time (duration minus its direct children's, via `Links.parent`) is charged to that layer, so the layers sum to
the CPU time covered by events on all threads. Figures per step are totals over the analyzed steps divided by
their number. Launch latency = first GPU start of a launch's activities − the launch call's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelens.analyses.window import Window
from tracelens.model.events import API_KINDS, CPU_KINDS, EventTable, Kind
from tracelens.model.memo import per_trace
from tracelens.model.trace import Trace

NS_PER_US = 1000.0

LAYERS = ("python", "ops_launching", "cpu_only_ops", "launch", "query", "sync", "compiled", "other_api")
LAYER_HELP = {
    "python": "Python / module code and annotations between ops (step self time when no Python frames)",
    "ops_launching": "aten ops (and Inductor kernel wrappers) whose call tree launched GPU work, self time",
    "cpu_only_ops": "ops that launched nothing: aten::t, transpose, view, as_strided, reshape, expand, empty …",
    "launch": "kernel/graph launch and async copy/memset API calls",
    "query": "runtime queries: cudaOccupancy*, cudaStreamIsCapturing, cudaDeviceGetAttribute, cudaFuncGetAttributes …",
    "sync": "synchronisations: cudaDeviceSynchronize, cudaStreamSynchronize, event syncs, blocking D2H copies",
    "compiled": "torch.compile wrappers: TorchDynamo Cache Lookup, guards, compiled-region and AOT wrappers",
    "other_api": "other runtime calls: allocation, events, stream waits …",
}

LAUNCH_APIS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cudaGraphLaunch",
        "cuGraphLaunch",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipGraphLaunch",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaMemcpy2DAsync",
        "cuMemcpyAsync",
        "cuMemsetD8Async",
        "cuMemsetD32Async",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
    }
)
GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
SYNC_API = re.compile(
    r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize|^(cuda|hip)Memcpy(2D)?$|^cuMemcpy(DtoH|HtoD)?$"
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


@dataclass(frozen=True)
class Layer:
    name: str
    description: str
    calls_per_step: float
    us_per_step: float


@dataclass(frozen=True)
class ApiCall:
    """One runtime/driver API by the op that issued it (innermost CPU op, `Links.op`)."""

    name: str
    layer: str
    issued_by: str
    calls_per_step: float
    us_per_step: float


@dataclass(frozen=True)
class LaunchLatency:
    """Launch call start → first GPU start of what it launched, over the analyzed steps, µs."""

    api: str
    launches: int
    p50_us: float
    p90_us: float
    max_us: float


@dataclass(frozen=True)
class StepLayers:
    number: int
    us: dict[str, float]


@dataclass(frozen=True)
class Dispatch:
    steps: int
    cpu_us_per_step: float  # sum of all layers
    dispatch_us_per_step: float  # host work to issue GPU work: all layers but python and sync (waiting)
    layers: list[Layer]
    api_calls: list[ApiCall]
    launch_latency: list[LaunchLatency]  # first entry "all"
    step_layers: list[StepLayers]


@per_trace
def classify_layers(trace: Trace) -> np.ndarray:
    """Layer index (into LAYERS) of every event; -1 for non-CPU events. Cached per trace: do not mutate."""
    ev = trace.events
    layer = np.full(len(ev), -1, dtype=np.int8)
    names = np.asarray(ev.names, dtype=object)
    code_layer = _api_layer_by_code(names)
    compiled_code = np.array([bool(COMPILED_OP.match(str(s))) for s in names], dtype=bool)
    kind = ev.kind
    api = np.isin(kind, np.array(API_KINDS, np.int8))
    layer[api] = code_layer[ev.name[api]]
    layer[api & _blocking_copy_launches(trace)] = LAYERS.index("sync")
    cpu_op = kind == Kind.CPU_OP
    launches = _subtree_launches(trace, api & (layer == LAYERS.index("launch")))
    layer[cpu_op] = np.where(launches[cpu_op], LAYERS.index("ops_launching"), LAYERS.index("cpu_only_ops"))
    layer[(kind == Kind.USER_ANNOTATION) | (kind == Kind.PYTHON)] = LAYERS.index("python")
    layer[(cpu_op | (kind == Kind.USER_ANNOTATION)) & compiled_code[ev.name]] = LAYERS.index("compiled")
    return layer


def _api_layer_by_code(names: np.ndarray) -> np.ndarray:
    def one(name: str) -> int:
        if name in LAUNCH_APIS:
            return LAYERS.index("launch")
        if SYNC_API.match(name):
            return LAYERS.index("sync")
        if QUERY_API.search(name):
            return LAYERS.index("query")
        return LAYERS.index("other_api")

    return np.array([one(str(s)) for s in names], dtype=np.int8)


def _blocking_copy_launches(trace: Trace) -> np.ndarray:
    """API calls whose copy lands in pageable host memory (D2H to pageable blocks the CPU: `.item()`)."""
    ev, links = trace.events, trace.links
    out = np.zeros(len(ev), dtype=bool)
    codes = np.array([c for c, s in enumerate(ev.names) if BLOCKING_COPY.search(s)], dtype=np.int32)
    copies = np.flatnonzero((ev.kind == Kind.MEMCPY) & np.isin(ev.name, codes) & (links.launch >= 0))
    out[links.launch[copies]] = True
    return out


def _subtree_launches(trace: Trace, is_launch: np.ndarray) -> np.ndarray:
    """True for every event with a launch call somewhere below it (pointer walk up from the launches)."""
    parent = trace.links.parent
    has = np.zeros(len(parent), dtype=bool)
    frontier = np.unique(parent[is_launch])
    frontier = frontier[frontier >= 0]
    while frontier.size:
        frontier = frontier[~has[frontier]]
        has[frontier] = True
        frontier = np.unique(parent[frontier])
        frontier = frontier[frontier >= 0]
    return has


def self_time_ns(events: EventTable, parent: np.ndarray) -> np.ndarray:
    """Duration minus the summed duration of direct children (clipped at 0), for every event."""
    child = np.flatnonzero(parent >= 0)
    children_ns = np.bincount(parent[child], weights=events.dur_ns[child], minlength=len(events))
    return np.maximum(events.dur_ns - children_ns, 0).astype(np.int64)


def analyze_dispatch(trace: Trace, window: Window) -> Dispatch:
    ev, links = trace.events, trace.links
    n_steps = max(window.n_steps, 1)
    layer = classify_layers(trace)
    self_ns = self_time_ns(ev, links.parent)
    cpu = window.in_window & np.isin(ev.kind, np.array(CPU_KINDS, np.int8)) & (layer >= 0)
    totals_ns = np.bincount(layer[cpu], weights=self_ns[cpu], minlength=len(LAYERS))
    counts = np.bincount(layer[cpu], minlength=len(LAYERS))
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
        step_layers=_step_layers(trace, window, layer, self_ns, cpu),
    )


def _step_layers(
    trace: Trace, window: Window, layer: np.ndarray, self_ns: np.ndarray, cpu: np.ndarray
) -> list[StepLayers]:
    step = trace.links.step
    rows = np.flatnonzero(cpu)
    slot = {int(s): i for i, s in enumerate(window.step_indices)}
    if not rows.size or not slot:
        return []
    lookup = np.full(len(trace.steps), -1, dtype=np.int64)
    lookup[window.step_indices] = np.arange(window.n_steps)
    position = lookup[step[rows]]
    grid = np.zeros((window.n_steps, len(LAYERS)))
    np.add.at(grid, (position, layer[rows]), self_ns[rows] / NS_PER_US)
    return [
        StepLayers(int(number), {name: round(float(grid[i, j]), 3) for j, name in enumerate(LAYERS)})
        for i, number in enumerate(window.step_numbers)
    ]


def _api_calls(trace: Trace, window: Window, layer: np.ndarray, n_steps: int) -> list[ApiCall]:
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(window.in_window & np.isin(ev.kind, np.array(API_KINDS, np.int8)))
    if rows.size == 0:
        return []
    frame = pd.DataFrame(
        {
            "name": ev.names_at(rows),
            "layer": [LAYERS[i] for i in layer[rows]],
            "op": ev.names_at(links.op[rows]),
            "dur_ns": ev.dur_ns[rows],
        }
    )
    grouped = frame.groupby(["name", "layer", "op"], sort=False)["dur_ns"].agg(["size", "sum"])
    grouped = grouped.sort_values(["sum", "size"], ascending=False, kind="stable")
    return [
        ApiCall(
            str(name),
            str(lay),
            str(op_name) or "(no op)",
            _r(r["size"] / n_steps),
            _r(r["sum"] / NS_PER_US / n_steps),
        )
        for (name, lay, op_name), r in grouped.iterrows()
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
    launches = np.unique(links.launch[gpu])
    return launches, (first_start[launches] - ev.ts_ns[launches]) / NS_PER_US


def launch_latency(trace: Trace, window: Window) -> list[LaunchLatency]:
    """Latency distribution over all launches, then per launch API."""
    launches, latency_us = launch_latencies(trace, window)
    if launches.size == 0:
        return []
    names = np.asarray(trace.events.names_at(launches), dtype=object)
    result = [_latency("all", latency_us)]
    for api in sorted(set(names.tolist())):
        result.append(_latency(str(api), latency_us[names == api]))
    return result


def _latency(api: str, values: np.ndarray) -> LaunchLatency:
    return LaunchLatency(
        api,
        int(values.size),
        _r(np.percentile(values, 50)),
        _r(np.percentile(values, 90)),
        _r(values.max()),
    )


def _r(value: float | np.floating) -> float:
    return round(float(value), 3)
