"""Communication/computation overlap: how much of the time collectives run is hidden behind compute kernels.

Contract: `analyze_comm_overlap(ctx) -> CommOverlap` over the analyzed steps (`ctx.window`); pure.
`comm_overlap_of(trace, window)` is the same for any window.

Definitions (per GPU device, then summed over devices):
- *communication*: GPU kernels of category `communication` (NCCL/RCCL collectives and point-to-point,
  see `model/kernel_names.py`); *compute*: every other kernel (memcpy and memset are neither, as in HTA);
- `comm_us`: the union of a step's communication kernels (a kernel belongs to the step its launch lies in);
- `overlapped_us`: the part of that union during which at least one compute kernel runs on the same device
  (any stream, any step);
- `exposed_us = comm_us − overlapped_us`: communication time that nothing hides;
- `overlap_pct = overlapped_us / comm_us`, `null` when the step has no communication.
`overlap_pct` over all analyzed steps is the figure HolisticTraceAnalysis' `get_comm_comp_overlap` reports for a
rank loaded with `include_last_profiler_step=True` when every step is complete (HTA keeps the kernels launched
before the last step ends; its default also drops the last step). Tests compare the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.activity import GpuActivity, gpu_activity
from tracelens.analyses.intervals import union
from tracelens.analyses.window import Window, covered_ns
from tracelens.model.events import Kind
from tracelens.model.kernel_names import CATEGORIES
from tracelens.model.stats import distinct_ints, median
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

_COMM = CATEGORIES.index("communication")


class StepOverlap(msgspec.Struct, frozen=True):
    number: int
    comm_us: float
    overlapped_us: float
    exposed_us: float
    overlap_pct: float | None  # None: no communication in the step


class CommOverlap(msgspec.Struct, frozen=True):
    """Medians over the analyzed steps; `None` where the trace has no communication kernels."""

    comm_kernels: int  # communication kernels in the analyzed steps
    comm_us_per_step: float | None
    overlapped_us_per_step: float | None
    exposed_us_per_step: float | None
    overlap_pct: float | None  # overlapped / comm over all analyzed steps together
    steps: list[StepOverlap]
    note: str


def analyze_comm_overlap(ctx: AnalysisContext) -> CommOverlap:
    """Communication/computation overlap per analyzed step (see the module docstring)."""
    return comm_overlap_of(ctx.trace, ctx.window)


def comm_overlap_of(trace: Trace, window: Window) -> CommOverlap:
    """`analyze_comm_overlap` for any window."""
    activity = gpu_activity(trace)
    kernels = activity.subset(activity.kind == Kind.KERNEL)
    is_comm = kernels.category == _COMM
    position = np.full(len(trace.steps) + 1, -1, dtype=np.int64)
    position[window.step_indices] = np.arange(window.n_steps)
    group = position[kernels.step]  # -1 (no step) reads position[-1] == -1
    per_step = _overlap_by_group(kernels, is_comm & (group >= 0), np.maximum(group, 0), window.n_steps)
    steps = [
        StepOverlap(
            number=number,
            comm_us=float(_r(comm / NS_PER_US) or 0.0),
            overlapped_us=float(_r(hidden / NS_PER_US) or 0.0),
            exposed_us=float(_r((comm - hidden) / NS_PER_US) or 0.0),
            overlap_pct=_r(100.0 * hidden / comm) if comm > 0 else None,
        )
        for number, comm, hidden in zip(window.step_numbers, per_step[0].tolist(), per_step[1].tolist(), strict=True)
    ]
    n_comm = int((is_comm & (group >= 0)).sum())
    total_comm, total_hidden = float(per_step[0].sum()), float(per_step[1].sum())
    if not is_comm.any():
        note = "no communication kernels in the trace"
    elif window.n_steps == 0:
        note = "no analyzed step"
    elif n_comm == 0:
        note = "communication kernels exist but none was launched in the analyzed steps"
    else:
        note = f"{n_comm} communication kernels in {window.n_steps} steps"
    return CommOverlap(
        comm_kernels=n_comm,
        comm_us_per_step=_r(_median_us([s.comm_us for s in steps])) if n_comm else None,
        overlapped_us_per_step=_r(_median_us([s.overlapped_us for s in steps])) if n_comm else None,
        exposed_us_per_step=_r(_median_us([s.exposed_us for s in steps])) if n_comm else None,
        overlap_pct=_r(100.0 * total_hidden / total_comm) if total_comm > 0 else None,
        steps=steps,
        note=note,
    )


def _overlap_by_group(
    kernels: GpuActivity, is_comm: np.ndarray, group: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(comm ns, overlapped ns) per group: the union of each group's communication kernels on each device,
    and how much of it overlaps the union of that device's compute kernels."""
    comm_ns = np.zeros(n_groups, dtype=np.float64)
    hidden_ns = np.zeros(n_groups, dtype=np.float64)
    end_ns = kernels.ts_ns + kernels.dur_ns
    for device in distinct_ints(kernels.device).tolist():
        on_device = kernels.device == device
        compute = union(kernels.ts_ns[on_device & ~is_comm], end_ns[on_device & ~is_comm])
        pick = on_device & is_comm
        merged, merged_group = _union_by_group(kernels.ts_ns[pick], end_ns[pick], group[pick])
        lengths = (merged[:, 1] - merged[:, 0]).astype(np.float64)
        comm_ns += np.bincount(merged_group, weights=lengths, minlength=n_groups)
        hidden = covered_ns(compute, merged[:, 0], merged[:, 1])
        hidden_ns += np.bincount(merged_group, weights=hidden, minlength=n_groups)
    return comm_ns, hidden_ns


def _union_by_group(start_ns: np.ndarray, end_ns: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of each group's intervals (k×2, sorted by group then time) and the group of each merged row: the
    groups are laid end to end on one axis, so one merge serves them all."""
    if start_ns.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    base = int(start_ns.min())
    span = int(np.maximum(end_ns, start_ns).max()) - base + 1
    shift = group.astype(np.int64) * span - base
    merged = union(start_ns + shift, end_ns + shift)
    merged_group = merged[:, 0] // span
    return merged - (merged_group * span - base)[:, None], merged_group


def _median_us(values: list[float]) -> float:
    return float(median(np.asarray(values, dtype=np.float64)))


def _r(value: float | None) -> float | None:
    """Figures are reported to 3 decimals (ns for µs)."""
    return None if value is None else round(float(value), 3)
