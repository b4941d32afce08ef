"""Fusion opportunities: runs of consecutive memory-bound kernels on one stream that a fuser would merge.

Contract: `analyze_fusion(trace, window, models=None) -> Fusion`; pure. A run is ≥ 2 kernels that follow each
other on one stream within one step, each an unfused elementwise / reduction / copy kernel whose launching op
has a memory-bound model (see `opmodels.py`), where consecutive ops work on the same number of elements (the
output of one can feed the next: `Input Dims`). GEMMs break runs; already-fused kernels (Triton, Inductor,
Liger: category "fused") are never part of one. Bytes now = the modelled bytes of the kernels; fused = now
minus a write and a read of every intermediate output; the saving in µs assumes the fused kernel runs at the
bandwidth those kernels achieved: saving = kernel time × (1 − fused / now).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelens.analyses.roofline import kernel_models
from tracelens.analyses.shapes import op_shapes
from tracelens.analyses.window import Window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import categorize, short_name
from tracelens.model.trace import Trace

MEMORY_CATEGORIES = ("elementwise", "reduction", "copy")
MEMORY_MODELS = ("elementwise", "norm", "reduction", "copy")


@dataclass(frozen=True)
class FusionOpportunity:
    ops: list[str]
    kernels: list[str]  # short names, in stream order
    calls_per_step: float
    kernel_us_per_step: float
    bytes_now: float  # per call of the run
    bytes_fused: float
    est_saving_us: float  # per step
    stream: int


@dataclass(frozen=True)
class Fusion:
    shapes_recorded: bool
    opportunities: list[FusionOpportunity]
    est_saving_us_per_step: float


def analyze_fusion(trace: Trace, window: Window, models: pd.DataFrame | None = None) -> Fusion:
    ev, links = trace.events, trace.links
    models = kernel_models(trace, window) if models is None else models
    shapes_recorded = bool(np.any(ev.input_dims != None))  # noqa: E711 - elementwise on an object array
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    if kernels.size < 2 or models.empty:
        return Fusion(shapes_recorded, [], 0.0)
    order = np.lexsort((ev.ts_ns[kernels], ev.stream[kernels], ev.device[kernels]))
    kernels = kernels[order]
    info = _candidates(trace, kernels, models)
    same_stream = (ev.stream[kernels][1:] == ev.stream[kernels][:-1]) & (
        ev.device[kernels][1:] == ev.device[kernels][:-1]
    )
    same_step = links.step[kernels][1:] == links.step[kernels][:-1]
    ok = info["candidate"].to_numpy()
    numel = info["numel"].to_numpy()
    linked = same_stream & same_step & ok[1:] & ok[:-1] & (numel[1:] == numel[:-1]) & (numel[1:] > 0)
    runs = _runs(linked)
    if not runs:
        return Fusion(shapes_recorded, [], 0.0)
    return _aggregate(trace, kernels, info, runs, max(window.n_steps, 1), shapes_recorded)


def _candidates(trace: Trace, kernels: np.ndarray, models: pd.DataFrame) -> pd.DataFrame:
    ev, links = trace.events, trace.links
    by_row = models.set_index("row")
    names = ev.names_at(kernels)
    apis = ev.names_at(links.launch[kernels])
    category = np.array([categorize(n, a) for n, a in zip(names, apis, strict=True)], dtype=object)
    model = by_row["model"].reindex(kernels).to_numpy()
    op_row = by_row["op_row"].reindex(kernels).fillna(-1).to_numpy(dtype=np.int64)
    candidate = np.isin(category, MEMORY_CATEGORIES) & np.isin(model, MEMORY_MODELS) & (op_row >= 0)
    numel = np.zeros(kernels.size, dtype=np.int64)
    cache: dict[int, int] = {}
    for i in np.flatnonzero(candidate):
        row = int(op_row[i])
        if row not in cache:
            shapes = op_shapes(ev, row)
            cache[row] = max((t.numel for t in shapes.tensors), default=0) if shapes else 0
        numel[i] = cache[row]
    return pd.DataFrame(
        {
            "candidate": candidate,
            "numel": numel,
            "op_row": op_row,
            "bytes": by_row["bytes"].reindex(kernels).fillna(0).to_numpy(),
            "out_bytes": by_row["out_bytes"].reindex(kernels).fillna(0).to_numpy(),
            "dur_ns": ev.dur_ns[kernels],
            "name": names,
        }
    )


def _runs(linked: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) positions of maximal chains of links (kernel p linked to p+1)."""
    if not linked.any():
        return []
    padded = np.concatenate(([False], linked, [False])).astype(np.int8)
    edges = np.diff(padded)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _aggregate(
    trace: Trace, kernels: np.ndarray, info: pd.DataFrame, runs: list[tuple[int, int]], n: int, shapes: bool
) -> Fusion:
    ev = trace.events
    records = []
    for first, last in runs:
        part = info.iloc[first : last + 1]
        now = float(part["bytes"].sum())
        saved = min(2.0 * float(part["out_bytes"].iloc[:-1].sum()), 0.9 * now)
        fused = now - saved
        dur = float(part["dur_ns"].sum())
        records.append(
            {
                "ops": tuple(ev.names_at(part["op_row"].to_numpy())),
                "kernels": tuple(short_name(k) for k in part["name"]),
                "stream": int(ev.stream[kernels[first]]),
                "now": now,
                "fused": fused,
                "dur_ns": dur,
                "saving_ns": dur * (saved / now) if now > 0 else 0.0,
            }
        )
    frame = pd.DataFrame(records)
    grouped = frame.groupby(["ops", "kernels", "stream"], sort=False).agg(
        calls=("now", "size"),
        now=("now", "mean"),
        fused=("fused", "mean"),
        dur_ns=("dur_ns", "sum"),
        saving_ns=("saving_ns", "sum"),
    )
    grouped = grouped.sort_values("saving_ns", ascending=False, kind="stable")
    opportunities = [
        FusionOpportunity(
            ops=list(ops),
            kernels=list(kernel_names),
            calls_per_step=round(float(g["calls"]) / n, 3),
            kernel_us_per_step=round(float(g["dur_ns"]) / 1000 / n, 3),
            bytes_now=round(float(g["now"])),
            bytes_fused=round(float(g["fused"])),
            est_saving_us=round(float(g["saving_ns"]) / 1000 / n, 3),
            stream=int(stream),
        )
        for (ops, kernel_names, stream), g in grouped.iterrows()
    ]
    total = round(sum(o.est_saving_us for o in opportunities), 3)
    return Fusion(shapes, opportunities, total)
