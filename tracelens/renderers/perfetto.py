"""`tracelens annotate`'s output, the trace for Perfetto with the findings added: exposed GPU idle gaps (with
their cause) and fusion opportunities as slices on tracks of their own, and the launching op, category and
roofline figures in each GPU activity's args. This module decides what to add; `tracelens.loader.rewrite`
(the only other code that touches the trace's raw JSON) writes the file back with it.

Contract: `trace_additions(trace, results) -> Additions`; pure. Gaps and their causes come from
`analyses.bound` (the same gaps `tracelens analyze` counts), fusion runs from `results.fusion`, roofline figures
from `results.roofline` (per kernel name, over the analyzed steps).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracelens.analyses import AnalysisResults
from tracelens.analyses.bound import CAUSES, classify_gaps, gap_table
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.loader.rewrite import AddedSlice, Additions
from tracelens.model.kernel_names import short_name
from tracelens.model.trace import Trace

MIN_GAP_NS = 5_000  # idle gaps shorter than this are launch jitter, not findings
MAX_GAP_SLICES = 20_000
MAX_FUSION_SLICES = 20_000
ARG_PREFIX = "tracelens "
CAUSE_TEXT = {
    "launch": "waiting for a launch (exposed CPU dispatch)",
    "sync": "waiting for a CPU sync",
    "queued": "work already queued (cross-stream waits, device scheduling)",
    "other": "other (no launch recorded, or nothing queued after it)",
}


def trace_additions(trace: Trace, results: AnalysisResults) -> Additions:
    """Everything `tracelens annotate` adds to the trace."""
    gpu = gpu_activity_frame(trace)
    slices = gap_slices(trace) + fusion_slices(gpu, results)
    return Additions(slices=tuple(slices), row_args=kernel_args(gpu, results))


def exposed_gaps(trace: Trace, min_gap_ns: int = MIN_GAP_NS) -> pd.DataFrame:
    """GPU idle gaps per device of at least `min_gap_ns` inside complete steps, with ns per cause (columns
    named after `CAUSES`), sorted by device then time."""
    gaps = gap_table(trace, by="device")
    length = (gaps["gap_end_ns"] - gaps["gap_start_ns"]).to_numpy()
    step = gaps["step"].to_numpy()
    complete = np.zeros(step.size, dtype=bool)
    complete[step >= 0] = trace.steps.complete[step[step >= 0]]
    gaps = gaps[(length >= min_gap_ns) & complete].reset_index(drop=True)
    amounts = classify_gaps(trace, gaps)
    for index, cause in enumerate(CAUSES):
        gaps[cause] = amounts[:, index]
    gaps["device"] = trace.events.device[gaps["row"].to_numpy()]
    return gaps.sort_values(["device", "gap_start_ns"], kind="stable").reset_index(drop=True)


def gap_slices(trace: Trace) -> list[AddedSlice]:
    """One slice per exposed gap (the longest `MAX_GAP_SLICES` when there are more), named by its main cause."""
    gaps = exposed_gaps(trace)
    if len(gaps) > MAX_GAP_SLICES:
        longest = (gaps["gap_end_ns"] - gaps["gap_start_ns"]).nlargest(MAX_GAP_SLICES, keep="first").index
        gaps = gaps.loc[sorted(longest)]
    numbers = trace.steps.number
    amounts = gaps[list(CAUSES)].to_numpy()
    main_cause = [CAUSES[i] for i in np.argmax(amounts, axis=1)] if len(gaps) else []
    columns = gaps[["device", "step", "gap_start_ns", "gap_end_ns"]].itertuples(index=False, name=None)
    out = []
    for (device, step, start, end), cause, split in zip(columns, main_cause, amounts.tolist(), strict=True):
        out.append(
            AddedSlice(
                track=f"GPU {device} idle (exposed gaps)",
                name=f"GPU idle {(end - start) / 1000:,.1f} µs: {cause}",
                ts_ns=int(start),
                dur_ns=int(end - start),
                args={
                    "finding": "exposed GPU idle gap",
                    "cause": CAUSE_TEXT[cause],
                    **{f"{c} µs": round(a / 1000, 3) for c, a in zip(CAUSES, split, strict=True)},
                    "device": int(device),
                    "step": int(numbers[step]),
                },
            )
        )
    return out


def slice_prefix(opportunity: object) -> str:
    """A fusion opportunity's slice name before its rank: `fuse` for a chain, `epilogue` for a GEMM epilogue."""
    return "fuse" if getattr(opportunity, "kind", "chain") == "chain" else "epilogue"


def fusion_slices(gpu: pd.DataFrame, results: AnalysisResults) -> list[AddedSlice]:
    """Each occurrence of each fusion opportunity: its kernels in stream order within one step (other kernels
    may run in between), as a slice from the first kernel's start to the last one's end."""
    fusion = getattr(results, "fusion", None)
    opportunities = list(getattr(fusion, "opportunities", None) or [])
    kernels = gpu[gpu["step"] >= 0].sort_values(["stream", "ts_ns"], kind="stable")
    out: list[AddedSlice] = []
    for rank, opportunity in enumerate(opportunities, start=1):
        on_stream = kernels[kernels["stream"] == opportunity.stream]
        pattern = list(opportunity.kernels)
        names = [short_name(n) for n in on_stream["name"]]
        first, last = occurrences(names, pattern, on_stream["step"].to_numpy())
        start_ns = on_stream["ts_ns"].to_numpy()
        end_ns = start_ns + on_stream["dur_ns"].to_numpy()
        for a, b in list(zip(first.tolist(), last.tolist(), strict=True))[: max(MAX_FUSION_SLICES - len(out), 0)]:
            out.append(
                AddedSlice(
                    track="fusion opportunities",
                    name=f"{slice_prefix(opportunity)} #{rank}: " + " → ".join(pattern),
                    ts_ns=int(start_ns[a]),
                    dur_ns=max(int(end_ns[b] - start_ns[a]), 0),
                    args={
                        "finding": "fusion opportunity"
                        if getattr(opportunity, "kind", "chain") == "chain"
                        else "GEMM-epilogue opportunity",
                        "ops": " → ".join(opportunity.ops),
                        "est. saving µs per step": opportunity.est_saving_us,
                        "stream": int(opportunity.stream),
                    },
                )
            )
    return out


def occurrences(sequence: list[str], pattern: list[str], group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) indices of each occurrence of `pattern` as a subsequence of `sequence` inside one group:
    from each element equal to pattern[0], the next pattern[1] after it, and so on; of chains ending at the
    same element the one starting latest is kept."""
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if not pattern or not sequence:
        return none
    codes, _ = pd.factorize(pd.Series(sequence + pattern))
    seq, pat = codes[: len(sequence)], codes[len(sequence) :]
    first = np.flatnonzero(seq == pat[0])
    current = first.copy()
    for code in pat[1:]:
        positions = np.flatnonzero(seq == code)
        index = np.searchsorted(positions, current, side="right")
        found = index < positions.size
        first, current = first[found], positions[index[found]]
    same_group = group[first] == group[current]
    first, current = first[same_group], current[same_group]
    _, keep = np.unique(current[::-1], return_index=True)  # per end: the latest start
    keep = current.size - 1 - keep
    order = np.sort(keep)
    return first[order].astype(np.int64), current[order].astype(np.int64)


def kernel_args(gpu: pd.DataFrame, results: AnalysisResults) -> dict[int, dict[str, Any]]:
    """Launching op, category and (when the kernel has a model) roofline figures for every GPU activity row.
    Rows of the same name, op and category share one dict (read it, do not change it): memory grows with the
    distinct kernels, not the rows (docs/benchmarks.md#annotate)."""
    roofline = _roofline_args(results)
    out: dict[int, dict[str, Any]] = {}
    shared: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    columns = zip(gpu["row"].tolist(), gpu["name"].tolist(), gpu["op"].tolist(), gpu["category"].tolist(), strict=True)
    for row, name, op, category in columns:
        extra = shared.get((name, op, category))
        if extra is None:
            extra = {f"{ARG_PREFIX}category": category}
            if op:
                extra[f"{ARG_PREFIX}launched by"] = op
            extra.update(roofline.get(name, {}))
            shared[(name, op, category)] = extra
        out[row] = extra
    return out


def _roofline_args(results: AnalysisResults) -> dict[str, dict[str, Any]]:
    """Roofline figures per kernel name, as args (`tracelens achieved TFLOP/s`, ...)."""
    roofline = getattr(results, "roofline", None)
    out: dict[str, dict[str, Any]] = {}
    for row in getattr(roofline, "rows", None) or []:
        figures = {
            "model": row.model,
            "GFLOP per call": row.gflop_per_call,
            "MB per call": row.mb_per_call,
            "achieved TFLOP/s": row.achieved_tflops,
            "achieved TB/s": row.achieved_tbps,
            "limit": row.limit,
            "% of peak": row.pct_of_peak,
        }
        out[row.kernel] = {f"{ARG_PREFIX}{key}": value for key, value in figures.items() if value is not None}
    return out
