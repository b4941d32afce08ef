"""Fusion opportunities: runs of consecutive memory-bound kernels on one stream that a fuser would merge.

Contract: `analyze_fusion(trace, window, models=None) -> Fusion`; pure. A run is ≥ 2 candidate kernels in
stream order within one step: unfused elementwise / reduction / copy kernels whose launching op has a
memory-bound model (see `opmodels.py`), where consecutive candidates work on the same number of elements (the
output of one can feed the next: `Input Dims`). Up to `MAX_SKIPPED` other kernels (a GEMM, say) may sit between
two candidates when none of their ops touches a tensor of that element count, so a fuser could move them
(eager `gelu(gate(x)) * up(x)` runs gate GEMM, gelu, up GEMM, mul). GEMMs are never candidates;
already-fused kernels (Triton, Inductor, Liger: category "fused") are never part of a run.
Bytes now = the modelled bytes of the kernels; fused = now minus a write and a read of every intermediate
output; the saving in µs assumes the fused kernel runs at the bandwidth those kernels achieved:
saving = kernel time × (1 − fused / now).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracelens.analyses.roofline import kernel_models
from tracelens.analyses.shapes import decode_shapes, op_shapes
from tracelens.analyses.window import Window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import categorize, short_name
from tracelens.model.trace import Trace

MEMORY_CATEGORIES = ("elementwise", "reduction", "copy")
MEMORY_MODELS = ("elementwise", "norm", "reduction", "copy")
MAX_SKIPPED = 3
NUMELS_KEPT = 6  # element counts of an op's first tensors, for the "does a skipped kernel touch it" test
UNKNOWN = -2  # a kernel whose op has no shapes: it may touch anything


@dataclass(frozen=True)
class FusionOpportunity:
    ops: list[str]
    kernels: list[str]  # short names, in stream order
    calls_per_step: float
    kernel_us_per_step: float
    bytes_now: int  # per call of the run
    bytes_fused: int
    est_saving_us: float  # per step
    stream: int


@dataclass(frozen=True)
class Fusion:
    shapes_recorded: bool
    opportunities: list[FusionOpportunity]
    est_saving_us_per_step: float


def analyze_fusion(trace: Trace, window: Window, models: pd.DataFrame | None = None) -> Fusion:
    ev = trace.events
    models = kernel_models(trace, window) if models is None else models
    shapes_recorded = bool(np.any(ev.input_dims != None))  # noqa: E711 - elementwise on an object array
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    if kernels.size < 2 or models.empty:
        return Fusion(shapes_recorded, [], 0.0)
    order = np.lexsort((ev.ts_ns[kernels], ev.stream[kernels], ev.device[kernels]))
    kernels = kernels[order]
    info = _candidates(trace, kernels, models)
    linked_pairs = _links(trace, kernels, info)
    runs = _runs(linked_pairs)
    if not runs:
        return Fusion(shapes_recorded, [], 0.0)
    return _aggregate(trace, kernels, info, runs, max(window.n_steps, 1), shapes_recorded)


def _links(trace: Trace, kernels: np.ndarray, info: pd.DataFrame) -> np.ndarray:
    """Positions (into `kernels`) of candidates, and whether each is linked to the next candidate: shape (k, 2)
    array of [position, linked-to-next] rows."""
    ev, links = trace.events, trace.links
    cand = np.flatnonzero(info["candidate"].to_numpy())
    if cand.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    here, nxt = cand[:-1], cand[1:]
    lane = ev.device[kernels] * 1_000_003 + ev.stream[kernels]
    step = links.step[kernels]
    numel = info["numel"].to_numpy()
    touched = _numel_matrix(trace, info["any_op_row"].to_numpy())
    ok = (lane[here] == lane[nxt]) & (step[here] == step[nxt]) & (numel[here] == numel[nxt]) & (numel[here] > 0)
    ok &= nxt - here - 1 <= MAX_SKIPPED
    for offset in range(1, MAX_SKIPPED + 1):
        between = here + offset < nxt
        middle = np.minimum(here + offset, kernels.size - 1)
        row = touched[middle]
        conflict = ((row == numel[here][:, None]) | (row == UNKNOWN)).any(axis=1)
        ok &= ~(between & conflict)
    linked = np.zeros(cand.size, dtype=np.int64)
    linked[:-1] = ok
    return np.stack([cand, linked], axis=1)


def _numel_matrix(trace: Trace, op_rows: np.ndarray) -> np.ndarray:
    """Element counts of the first tensors of each op (−1 padding; UNKNOWN when the op has no shapes)."""
    ev = trace.events
    safe = np.maximum(op_rows, 0)
    keys = np.where(op_rows >= 0, ev.input_dims[safe], None)
    codes, uniques = pd.factorize(pd.Series(keys, dtype=object), use_na_sentinel=True)
    table = np.full((len(uniques) + 1, NUMELS_KEPT), -1, dtype=np.int64)
    table[-1, 0] = UNKNOWN  # code -1: no op or no shapes
    for i, raw in enumerate(uniques):
        shapes = decode_shapes(bytes(raw), b"[]", b"[]", dims_only=True)
        numels = [t.numel for t in shapes.tensors][:NUMELS_KEPT] if shapes else [UNKNOWN]
        table[i, : len(numels)] = numels
    return table[np.where(codes >= 0, codes, len(uniques))]


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
            "any_op_row": links.op[kernels].astype(np.int64),
        }
    )


def _runs(pairs: np.ndarray) -> list[list[int]]:
    """Positions of the kernels in each maximal chain of linked candidates."""
    if pairs.shape[0] == 0 or not pairs[:, 1].any():
        return []
    linked = pairs[:, 1].astype(bool)
    padded = np.concatenate(([False], linked, [False])).astype(np.int8)
    edges = np.diff(padded)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [pairs[a : b + 1, 0].tolist() for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _aggregate(
    trace: Trace, kernels: np.ndarray, info: pd.DataFrame, runs: list[list[int]], n: int, shapes: bool
) -> Fusion:
    ev = trace.events
    size = info["bytes"].to_numpy(dtype=np.float64)
    out_size = info["out_bytes"].to_numpy(dtype=np.float64)
    dur_ns = info["dur_ns"].to_numpy(dtype=np.float64)
    op_row = info["op_row"].to_numpy()
    names = info["name"].to_numpy(dtype=object)
    records = []
    for positions in runs:
        at = np.asarray(positions)
        now = float(size[at].sum())
        saved = min(2.0 * float(out_size[at[:-1]].sum()), 0.9 * now)
        dur = float(dur_ns[at].sum())
        records.append(
            {
                "ops": tuple(ev.names_at(op_row[at])),
                "kernels": tuple(short_name(k) for k in names[at]),
                "stream": int(ev.stream[kernels[positions[0]]]),
                "now": now,
                "fused": now - saved,
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
