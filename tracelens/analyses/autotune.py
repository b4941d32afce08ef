"""Inductor's autotuning inside a trace: compile cost, shown apart from the workload.

Contract: `autotune_mask(trace)` (cached per trace) marks the events of autotuning
(`model.steps.autotune_rows`: CPU events inside an `AUTOTUNE_RANGE` on their thread, and the GPU activity their
runtime calls launched); the model assigns them to no step, so per-step figures (busy, kernel tables,
fusion, compare) leave them out. `autotune_of(trace) -> Autotune | None` counts them (None when the trace has
none). Pure. Definitions: docs/definitions.md#autotuning.
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.model.events import GPU_ACTIVITY_KINDS, Kind, kind_mask
from tracelens.model.memo import per_trace
from tracelens.model.steps import autotune_rows
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

FILL_OPS = ("aten::fill_",)  # the L2-cache flush between timed runs: a zero_() of a buffer the size of L2


class Autotune(msgspec.Struct, frozen=True):
    """Inductor's autotuning GPU work in the whole trace (compile cost, in no step)."""

    kernels: int  # benchmark kernels (candidate kernels timed, and the fills below)
    l2_flush_fills: int  # of them, fill kernels launched by aten::fill_ (the L2 flush between timed runs)
    other_gpu_activities: int  # memcpy / memset launched while autotuning
    gpu_us: float  # summed duration of all of it (kernels, fills, copies)
    l2_flush_gpu_us: float  # of it, the fills'
    ranges: int  # outermost autotuning ranges on the CPU


@per_trace
def autotune_mask(trace: Trace) -> np.ndarray:
    """Events of Inductor's autotuning (`model.steps.autotune_rows`). Cached per trace: do not mutate."""
    return autotune_rows(trace.events, trace.links.parent, trace.links.launch)


def autotune_of(trace: Trace) -> Autotune | None:
    """Counts and GPU time of the trace's autotuning; None when it has none."""
    mask = autotune_mask(trace)
    ev, links = trace.events, trace.links
    gpu = mask & kind_mask(ev.kind, GPU_ACTIVITY_KINDS)
    if not gpu.any():
        return None
    kernel = gpu & (ev.kind == Kind.KERNEL)
    fill_codes = np.array([c for c, name in enumerate(ev.names) if name in FILL_OPS], dtype=np.int32)
    op = links.op
    by_fill = kernel & (op >= 0) & np.isin(ev.name[np.maximum(op, 0)], fill_codes)
    cpu = mask & ~gpu & (ev.kind != Kind.RUNTIME) & (ev.kind != Kind.DRIVER)
    parent = links.parent
    outermost = cpu & ~((parent >= 0) & mask[np.maximum(parent, 0)])
    return Autotune(
        kernels=int(kernel.sum()),
        l2_flush_fills=int(by_fill.sum()),
        other_gpu_activities=int((gpu & ~kernel).sum()),
        gpu_us=round(float(ev.dur_ns[gpu].sum()) / NS_PER_US, 1),
        l2_flush_gpu_us=round(float(ev.dur_ns[by_fill].sum()) / NS_PER_US, 1),
        ranges=int(outermost.sum()),
    )
