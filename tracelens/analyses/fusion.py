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

from tracelens.analyses.keygroups import (
    F64,
    descending_order,
    first_seen_groups,
    group_means,
    group_sums,
    string_ranks,
)
from tracelens.analyses.roofline import KernelModels, kernel_categories, kernel_models
from tracelens.analyses.shapes import decode_shapes, op_shapes, signature_codes
from tracelens.analyses.window import Window
from tracelens.model.events import I64, Bool, EventTable, Kind
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace

MEMORY_CATEGORIES = ("elementwise", "norm", "reduction", "copy")
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


def analyze_fusion(trace: Trace, window: Window, models: KernelModels | None = None) -> Fusion:
    ev = trace.events
    models = kernel_models(trace, window) if models is None else models
    shapes_recorded = bool(np.flatnonzero(ev.input_dims).size)  # raw JSON is never empty: only None is false
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    if kernels.size < 2 or len(models) == 0:
        return Fusion(shapes_recorded, [], 0.0)
    order = np.lexsort((ev.ts_ns[kernels], ev.stream[kernels], ev.device[kernels]))
    kernels = kernels[order]
    info = _candidates(trace, kernels, models)
    starts, ends = _runs(_links(trace, kernels, info))
    if starts.size == 0:
        return Fusion(shapes_recorded, [], 0.0)
    return _aggregate(trace, kernels, info, (starts, ends), max(window.n_steps, 1), shapes_recorded)


@dataclass(frozen=True)
class _Kernels:
    """Per kernel, in stream order: whether it is a fusion candidate, and its modelled figures."""

    candidate: Bool
    numel: I64  # largest tensor of the op whose model it got (0 = unknown)
    op_row: I64  # that op, -1 = no model
    bytes: F64
    out_bytes: F64
    dur_ns: F64
    any_op_row: I64  # the launching op, whether or not it gave a model


def _links(trace: Trace, kernels: np.ndarray, info: _Kernels) -> np.ndarray:
    """Positions (into `kernels`) of candidates, and whether each is linked to the next candidate: shape (k, 2)
    array of [position, linked-to-next] rows."""
    ev, links = trace.events, trace.links
    cand = np.flatnonzero(info.candidate)
    if cand.size < 2:
        return np.zeros((0, 2), dtype=np.int64)
    here, nxt = cand[:-1], cand[1:]
    lane = ev.device[kernels] * 1_000_003 + ev.stream[kernels]
    step = links.step[kernels]
    numel = info.numel
    touched = _numel_matrix(trace, info.any_op_row)
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
    codes, first = signature_codes(ev, op_rows, dims_only=True)
    table = np.full((first.size + 1, NUMELS_KEPT), -1, dtype=np.int64)
    table[-1, 0] = UNKNOWN  # code -1: no op or no shapes
    for i, row in enumerate(op_rows[first].tolist()):
        shapes = decode_shapes(bytes(ev.input_dims[row]), b"[]", b"[]", dims_only=True)
        numels = [t.numel for t in shapes.tensors][:NUMELS_KEPT] if shapes else [UNKNOWN]
        table[i, : len(numels)] = numels
    return table[codes]


def _candidates(trace: Trace, kernels: np.ndarray, models: KernelModels) -> _Kernels:
    ev, links = trace.events, trace.links
    by_row = np.argsort(models.row, kind="stable")
    at = np.minimum(np.searchsorted(models.row[by_row], kernels), by_row.size - 1)
    entry = np.where(models.row[by_row[at]] == kernels, by_row[at], -1)
    modelled = entry >= 0
    entry = np.maximum(entry, 0)
    memory_category = np.isin(np.asarray(CATEGORIES, dtype=object), MEMORY_CATEGORIES)[
        kernel_categories(trace, kernels)
    ]
    memory_model = np.asarray([label.model in MEMORY_MODELS for label in models.labels], dtype=bool)
    op_row = np.where(modelled, models.op_row[entry], -1)
    candidate = memory_category & modelled & memory_model[models.label[entry]] & (op_row >= 0)
    numel = np.zeros(kernels.size, dtype=np.int64)
    chosen = np.flatnonzero(candidate)
    codes, first = signature_codes(ev, op_row[chosen])
    largest = np.zeros(first.size + 1, dtype=np.int64)  # code -1: no shapes
    for i, row in enumerate(op_row[chosen][first].tolist()):
        shapes = op_shapes(ev, row)
        largest[i] = max((t.numel for t in shapes.tensors), default=0) if shapes else 0
    numel[chosen] = largest[codes]
    return _Kernels(
        candidate=candidate,
        numel=numel,
        op_row=op_row,
        bytes=np.where(modelled, models.bytes[entry], 0.0),
        out_bytes=np.where(modelled, models.out_bytes[entry], 0.0),
        dur_ns=ev.dur_ns[kernels].astype(np.float64),
        any_op_row=links.op[kernels].astype(np.int64),
    )


def _runs(pairs: np.ndarray) -> tuple[I64, I64]:
    """Each maximal chain of linked candidates as a slice of the candidates: (first, last) indices into
    `pairs`; the run's kernels are at `pairs[first : last + 1, 0]`."""
    if pairs.shape[0] == 0 or not pairs[:, 1].any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    linked = pairs[:, 1].astype(bool)
    padded = np.concatenate(([False], linked, [False])).astype(np.int8)
    edges = np.diff(padded)
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


@dataclass(frozen=True)
class _RunFigures:
    """Per run (in order): its group key and figures."""

    key: I64  # equal for runs of the same ops, kernel short names and stream
    now: F64
    fused: F64
    dur_ns: F64
    saving_ns: F64


def _run_figures(trace: Trace, kernels: I64, info: _Kernels, cand: I64, runs: tuple[I64, I64]) -> _RunFigures:
    """Bytes now and fused, time and saving of each run; runs of one length are done together (a row sum of a
    2-D array adds up exactly as the sum of that row alone)."""
    ev = trace.events
    starts, ends = runs
    length = ends - starts + 1
    short_code = _short_name_codes(ev, kernels)
    figures = np.zeros((4, starts.size), dtype=np.float64)
    key = np.zeros(starts.size, dtype=np.int64)
    offset = 0
    for size in distinct_ints(length).tolist():
        which = np.flatnonzero(length == size)
        at = cand[starts[which][:, None] + np.arange(size)]
        now = info.bytes[at].sum(axis=1)
        saved = np.minimum(2.0 * info.out_bytes[at[:, :-1]].sum(axis=1), 0.9 * now)
        dur = info.dur_ns[at].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            saving = np.where(now > 0, dur * (saved / now), 0.0)
        figures[:, which] = (now, now - saved, dur, saving)
        signature = np.concatenate(
            [ev.name[info.op_row[at]], short_code[at], ev.stream[kernels[at[:, :1]]]], axis=1
        ).astype(np.int64)
        local = np.unique(signature, axis=0, return_inverse=True)[1].ravel()
        key[which] = offset + local
        offset += int(local.max()) + 1
    return _RunFigures(key, figures[0], figures[1], figures[2], figures[3])


def _short_name_codes(ev: EventTable, kernels: I64) -> I64:
    """Codes of the kernels' short names (equal short names, equal codes), one `short_name` per distinct name."""
    distinct, index = np.unique(ev.name[kernels], return_inverse=True)
    codes, _ = string_ranks([short_name(ev.names[c]) for c in distinct.tolist()])
    return codes[index.ravel()] if kernels.size else np.zeros(0, dtype=np.int64)


def _aggregate(trace: Trace, kernels: I64, info: _Kernels, runs: tuple[I64, I64], n: int, shapes: bool) -> Fusion:
    """Runs with the same ops, kernels and stream make one opportunity: count, mean bytes, summed time and
    saving; largest saving first."""
    ev = trace.events
    cand = np.flatnonzero(info.candidate)
    starts, ends = runs
    figures = _run_figures(trace, kernels, info, cand, runs)
    group, first = first_seen_groups(figures.key)
    k = first.size
    calls = np.bincount(group, minlength=k)
    now = group_means(figures.now, group, k)
    fused = group_means(figures.fused, group, k)
    dur_ns = group_sums(figures.dur_ns, group, k)
    saving_ns = group_sums(figures.saving_ns, group, k)
    opportunities = []
    for g in descending_order(saving_ns).tolist():
        run = int(first[g])
        at = cand[starts[run] : ends[run] + 1]  # the first run of the group: its kernels' positions
        opportunities.append(
            FusionOpportunity(
                ops=ev.names_at(info.op_row[at]),
                kernels=[short_name(name) for name in ev.names_at(kernels[at])],
                calls_per_step=round(float(calls[g]) / n, 3),
                kernel_us_per_step=round(float(dur_ns[g]) / 1000 / n, 3),
                bytes_now=round(float(now[g])),
                bytes_fused=round(float(fused[g])),
                est_saving_us=round(float(saving_ns[g]) / 1000 / n, 3),
                stream=int(ev.stream[kernels[at[0]]]),
            )
        )
    total = round(sum(o.est_saving_us for o in opportunities), 3)
    return Fusion(shapes, opportunities, total)
