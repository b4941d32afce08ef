"""CUDA-graph replays → the launches recorded while the graph was captured (issue #29).

Rule (docs/cuda_graphs.md): a capture is the span from `cudaStreamBeginCapture` to the next
`cudaStreamEndCapture` on the same thread; its captured launches are the kernel-launch API calls on that thread
inside the span that own no GPU activity, in time order. Each `cudaGraphLaunch` replays the most recent capture
that ended before it and has as many captured launches as the replay runs kernels; replayed kernel k (by start
time) takes the op of captured launch k. A replay with no capture of its kernel count is counted in one warning
and keeps no op (never a guess).
"""

from __future__ import annotations

import numpy as np

from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, EventTable, Kind, kind_mask

GRAPH_LAUNCH_NAMES = ("cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "cuGraphLaunch")
KERNEL_LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelExC_v11060",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchCooperativeKernel",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
)


def _codes(events: EventTable, names: tuple[str, ...]) -> np.ndarray:
    wanted = set(names)
    return np.array([i for i, n in enumerate(events.names) if n in wanted], dtype=np.int64)


def _captures(events: EventTable, launch: I32) -> list[tuple[int, np.ndarray]]:
    """(end ns, captured launch rows in time order) of each capture, ordered by end."""
    api = kind_mask(events.kind, API_KINDS)
    begin = np.flatnonzero(
        api & np.isin(events.name, _codes(events, ("cudaStreamBeginCapture", "hipStreamBeginCapture")))
    )
    end = np.flatnonzero(api & np.isin(events.name, _codes(events, ("cudaStreamEndCapture", "hipStreamEndCapture"))))
    launches = np.flatnonzero(api & np.isin(events.name, _codes(events, KERNEL_LAUNCH_NAMES)))
    owners = np.zeros(len(events), dtype=bool)
    owners[launch[launch >= 0]] = True
    launches = launches[~owners[launches]]
    result = []
    for b in begin:
        track, start = events.track[b], events.ts_ns[b]
        ends = end[(events.track[end] == track) & (events.ts_ns[end] >= start)]
        if ends.size == 0:
            continue
        stop = int(events.ts_ns[ends].min())
        inside = launches[
            (events.track[launches] == track) & (events.ts_ns[launches] >= start) & (events.ts_ns[launches] <= stop)
        ]
        result.append((stop, inside[np.argsort(events.ts_ns[inside], kind="stable")]))
    result.sort(key=lambda c: c[0])
    return result


def attribute_replays(events: EventTable, launch: I32, op: I32) -> tuple[I32, list[str]]:
    """`op` with each replayed kernel given its captured launch's op, and the warnings/notes (see the module)."""
    gpu = np.flatnonzero(kind_mask(events.kind, GPU_ACTIVITY_KINDS) & (events.kind == Kind.KERNEL) & (launch >= 0))
    graph_codes = _codes(events, GRAPH_LAUNCH_NAMES)
    if gpu.size == 0 or graph_codes.size == 0:
        return op, []
    replayed = gpu[np.isin(events.name[launch[gpu]], graph_codes)]
    if replayed.size == 0:
        return op, []
    captures = _captures(events, launch)
    if not captures:
        return op, [
            f"{replayed.size:,} kernels replayed by CUDA graphs have no capture in the trace, so they keep "
            "only the op enclosing their cudaGraphLaunch: start the profiler before the graph is captured "
            "(before torch.compile's cudagraph warm-up), or record with "
            "`tracelens record --skip 0`"
        ]
    out = op.copy()
    unmatched = 0
    graph_of = launch[replayed]
    for g in np.unique(graph_of):
        kernels = replayed[graph_of == g]
        kernels = kernels[np.argsort(events.ts_ns[kernels], kind="stable")]
        when = int(events.ts_ns[g])
        chosen = None
        for stop, captured in reversed(captures):
            if stop <= when and captured.size == kernels.size:
                chosen = captured
                break
        if chosen is None:
            unmatched += 1
            continue
        out[kernels] = op[chosen]
    notes = []
    if unmatched:
        notes.append(
            f"{unmatched:,} CUDA-graph launches match no capture in the trace (no earlier capture with as many "
            "launches as the replay ran kernels): their kernels keep only the op enclosing their graph launch"
        )
    return out, notes
