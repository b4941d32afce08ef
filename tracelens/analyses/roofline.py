"""Roofline: FLOPs and bytes per kernel from the shapes of the op that launched it, achieved TFLOP/s and TB/s,
and the share of the device's roofline each kernel reaches.

Contract: `roofline_of(trace, window, override=None) -> Roofline`; pure. For each kernel the launching op
and up to `MAX_OP_ANCESTORS` enclosing ops are tried (innermost first) until one has a model that fits the
kernel (see `opmodels.py`). When one op call launched several fitting kernels, its FLOPs and bytes are split
by kernel time. Per kernel name: achieved = summed FLOPs (bytes) / summed kernel time; `pct_of_peak` =
achieved / attainable roofline = achieved TFLOP/s ÷ dtype peak when compute-bound (intensity ≥ ridge), else
achieved TB/s ÷ memory peak. Device-to-device copies use their recorded bytes. Unknown device → no %.
An fp32 GEMM whose kernel runs on tensor cores (TF32) is held against the TF32 peak. A figure above 100 % of
its peak means the model does not fit the kernel (data served from cache, a wrong FLOP/byte count): the row
then has `pct_of_peak = None` and says why in `model_note`; no figure is capped. So has a row where another reading
of the kernel's writes (an in/out first argument) would exceed the memory peak; a row charged only part of a
buffer keeps its figure and says so in `model_note`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import msgspec
import numpy as np

from tracelens.analyses.activity import gpu_activity
from tracelens.analyses.devices import PeakOverride, Peaks, override_from_env, peaks_for
from tracelens.analyses.keygroups import (
    F64,
    descending_order,
    first_seen_groups,
    group_modes,
    group_sums,
    string_ranks,
)
from tracelens.analyses.opmodels import (
    CONV_FORWARD,
    FOREACH,
    GEMM_INPUTS,
    BufferKey,
    OpModel,
    gemm_out_buffer,
    model_op,
    peak_dtype,
)
from tracelens.analyses.shapes import op_shapes, signature_codes
from tracelens.analyses.window import Window
from tracelens.model.cuda_graphs import replaying_launch
from tracelens.model.events import I8, I64, Kind
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.stats import distinct_ints
from tracelens.model.trace import Trace

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

MAX_OP_ANCESTORS = 3
CONV_CONSUMER_LOOKAHEAD = 4  # ops after a convolution searched for the first one that reads a feature map
NS_PER_S = 1e9


class RooflineRow(msgspec.Struct, frozen=True):
    kernel: str
    short_name: str
    op: str  # the op whose shapes gave the model
    model: str
    ops: str  # decoded aten ops for Inductor kernels
    dtype: str
    calls: int
    gflop_per_call: float
    mb_per_call: float
    mean_us: float
    intensity_flop_per_byte: float | None
    achieved_tflops: float
    achieved_tbps: float
    peak_tflops: float | None
    peak_tbps: float | None
    limit: str  # "compute" | "memory"
    pct_of_peak: float | None  # None: unknown peak, or the model does not fit (see `model_note`)
    model_note: str | None = None  # why `pct_of_peak` is None although the peak is known; or what reading it rests on
    peak_dtype: str | None = None  # the dtype whose TFLOP/s peak bounds it (fp32 on tensor cores: tf32); None: no FLOPs


class Unmodelled(msgspec.Struct, frozen=True):
    """Kernel time of the window without a model, for one reason (see `UNMODELLED_REASONS`)."""

    reason: str
    pct_of_kernel_time: float
    ops: list[str] = msgspec.field(
        default_factory=list
    )  # "no model": the launching ops with most such time, largest first


UNMODELLED_REASONS = {
    "no_op": "no launching CPU op recorded (CUDA-graph replays, kernels launched outside an op)",
    "no_shapes": "the launching op recorded no shapes (record_shapes off, or a graph replay)",
    "no_model": "no FLOP/byte model for the op",
    "helper": "other kernels of modelled ops (layout transforms, workspace set-up, …)",
}
MAX_UNMODELLED_OPS = 3


class Roofline(msgspec.Struct, frozen=True):
    device: str
    peaks_tflops: dict[str, float]
    peak_tbps: float | None
    peaks_source: str
    modelled_kernel_time_pct: float  # share of kernel time in the window that has a model
    rows: list[RooflineRow] = msgspec.field(default_factory=list)
    unmodelled: list[Unmodelled] = msgspec.field(default_factory=list)  # why the rest has none, largest share first

    def by_kernel(self) -> dict[str, RooflineRow]:
        return {row.kernel: row for row in self.rows}


def device_peaks(trace: Trace, override: PeakOverride | None = None) -> Peaks:
    """Peaks of the first GPU the trace used (by `deviceProperties[].name`), with overrides applied."""
    ev, devices = trace.events, trace.meta.devices
    used = set(distinct_ints(ev.device[(ev.kind == Kind.KERNEL) & (ev.device >= 0)]).tolist())
    chosen = next((d for d in devices if d.index in used), devices[0] if devices else None)
    override = override if override is not None else override_from_env()
    if chosen is None:
        return peaks_for("unknown", None, override)
    return peaks_for(chosen.name, chosen.total_memory_bytes, override)


class KernelModels(msgspec.Struct, frozen=True):
    """The GPU activities of a window that have a model, one entry each: kernels that got an op's model (in row
    order), then device-to-device copies (in row order). Columns of equal length."""

    row: I64  # event row of the kernel or copy
    op_row: I64  # the op whose shapes gave the model (copies: the launching op, -1 if none)
    dur_ns: I64
    label: I64  # code into `labels`
    flops: F64  # this activity's share of its op call's FLOPs (split by kernel time)
    bytes: F64  # ... and of its bytes
    out_bytes: F64  # bytes of the op's output (not split)
    labels: tuple[ModelLabel, ...]
    alt_bytes: F64 | None = None  # (split like `bytes`) bytes if it also wrote its first argument; 0 = no such reading
    whole_bytes: F64 | None = None  # (split like `bytes`) bytes if it read every argument whole; 0 = none in part

    def __len__(self) -> int:
        return int(self.row.shape[0])


class ModelLabel(NamedTuple):
    model: str
    ops: str
    dtype: str


COPY_LABEL = ModelLabel("copy", "", "")


def kernel_models(trace: Trace, window: Window) -> KernelModels:
    """The modelled GPU activities of the window (see `KernelModels`)."""
    ev, links = trace.events, trace.links
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    category = kernel_categories(trace, kernels)
    chosen_op = np.full(kernels.size, -1, dtype=np.int64)
    chosen_model = np.full(kernels.size, -1, dtype=np.int64)
    models: list[OpModel] = []
    candidate = links.op[kernels].astype(np.int64)
    for _ in range(MAX_OP_ANCESTORS + 1):
        todo = np.flatnonzero((chosen_op < 0) & (candidate >= 0))
        if todo.size == 0:
            break
        found = _models_for(trace, candidate[todo], category[todo], kernels[todo], models)
        hit = todo[found >= 0]
        chosen_model[hit], chosen_op[hit] = found[found >= 0], candidate[hit]
        candidate[todo] = nearest_ancestor_of_kind(links.parent, ev.kind, Kind.CPU_OP, candidate[todo])
    hit = np.flatnonzero(chosen_op >= 0)
    labels: dict[ModelLabel, int] = {COPY_LABEL: 0}
    model_label = np.asarray(
        [labels.setdefault(ModelLabel(m.model, m.ops, m.dtype), len(labels)) for m in models], dtype=np.int64
    )
    model_figures = np.asarray(
        [(m.flops, m.bytes, m.out_bytes, m.bytes_if_in_place, m.bytes_if_whole) for m in models], dtype=np.float64
    ).reshape(-1, 5)
    rows, op_rows, picked = kernels[hit], chosen_op[hit], chosen_model[hit]
    share = _time_shares(op_rows, ev.dur_ns[rows], _replay_of(trace, rows))
    copies = _copies(trace, window)
    return KernelModels(
        row=np.concatenate([rows, copies]),
        op_row=np.concatenate([op_rows, links.op[copies].astype(np.int64)]),
        dur_ns=ev.dur_ns[np.concatenate([rows, copies])],
        label=np.concatenate([model_label[picked], np.zeros(copies.size, dtype=np.int64)]),
        flops=np.concatenate([model_figures[picked, 0] * share, np.zeros(copies.size)]),
        bytes=np.concatenate([model_figures[picked, 1] * share, ev.bytes[copies] * 2.0]),
        out_bytes=np.concatenate([model_figures[picked, 2], ev.bytes[copies].astype(np.float64)]),
        labels=tuple(labels),
        alt_bytes=np.concatenate([model_figures[picked, 3] * share, np.zeros(copies.size)]),
        whole_bytes=np.concatenate([model_figures[picked, 4] * share, np.zeros(copies.size)]),
    )


def kernel_categories(trace: Trace, kernels: np.ndarray) -> I8:
    """Category of each kernel at `kernels` (rows of GPU activity) as an index into `CATEGORIES`, from the
    trace's memoised GPU activity table (the summary has built it already)."""
    activity = gpu_activity(trace)
    return activity.category[np.searchsorted(activity.row, kernels)]


def gemm_out_buffers(trace: Trace, op_row: int) -> tuple[BufferKey, ...]:
    """(dims, dtype) of the `out=` buffers written by the GEMM calls that precede the op at `op_row` under the
    same parent, back to the previous Inductor kernel call (the extern calls of one stretch of a compiled graph)."""
    ev, parent = trace.events, trace.links.parent
    if parent[op_row] < 0:
        return ()
    siblings = np.flatnonzero((parent == parent[op_row]) & (ev.kind == Kind.CPU_OP) & (ev.ts_ns < ev.ts_ns[op_row]))
    found: list[BufferKey] = []
    for row in siblings[np.argsort(ev.ts_ns[siblings], kind="stable")][::-1].tolist():
        name = ev.names[int(ev.name[row])]
        if name.startswith("triton_"):
            break
        if name in GEMM_INPUTS:
            key = gemm_out_buffer(name, op_shapes(ev, row))
            if key is not None:
                found.append(key)
    return tuple(found)


def conv_consumer_dims(trace: Trace, op_row: int) -> tuple[int, ...] | None:
    """For a forward convolution op (None for other ops): the dims of the first feature map (rank ≥ 3) read by
    one of the next ops after the outermost enclosing convolution call (ResNet: the batch norm after
    `aten::conv2d`), taken as the convolution's output when its batch and channels match (checked by the model)."""
    ev, parent = trace.events, trace.links.parent
    if ev.names[int(ev.name[op_row])] not in CONV_FORWARD:
        return None
    top = op_row
    while parent[top] >= 0 and ev.names[int(ev.name[parent[top]])] in CONV_FORWARD:
        top = int(parent[top])
    end = ev.ts_ns[top] + ev.dur_ns[top]
    after = (parent == parent[top]) & (ev.kind == Kind.CPU_OP) & (ev.ts_ns >= end) & (ev.track == ev.track[top])
    rows = np.flatnonzero(after)
    for row in rows[np.argsort(ev.ts_ns[rows], kind="stable")][:CONV_CONSUMER_LOOKAHEAD].tolist():
        shapes = op_shapes(ev, row)
        first = next(iter(shapes.tensors), None) if shapes is not None else None
        if first is not None and len(first.dims) >= 3:
            return first.dims
    return None


def _models_for(trace: Trace, ops: I64, category: I8, kernels: I64, models: list[OpModel]) -> I64:
    """Index into `models` (appended to) of the model of each (op, kernel) pair, -1 where none fits; computed
    once per distinct (op name, shapes, kernel category, kernel name for `triton_*` ops)."""
    ev = trace.events
    result = np.full(ops.size, -1, dtype=np.int64)
    shape, _ = signature_codes(ev, ops)
    has = np.flatnonzero(shape >= 0)  # no shapes: no model
    if has.size == 0:
        return result
    op_code, kernel_code = ev.name[ops[has]], ev.name[kernels[has]]
    distinct_ops, op_index = np.unique(op_code, return_inverse=True)
    triton = np.asarray([ev.names[c].startswith("triton_") for c in distinct_ops.tolist()], dtype=bool)
    foreach = np.asarray([ev.names[c].startswith(FOREACH) for c in distinct_ops.tolist()], dtype=bool)
    triton, foreach = triton[op_index.ravel()], foreach[op_index.ravel()]
    named = triton | foreach  # the kernel name is part of the model (Inductor ops; a list's element type)
    group, first = first_seen_groups(op_code, shape[has], category[has], np.where(named, kernel_code, -1))
    index = np.full(first.size, -1, dtype=np.int64)
    for g, i in enumerate(first.tolist()):
        model = model_op(
            ev.names[int(op_code[i])],
            op_shapes(ev, int(ops[has[i]])),
            CATEGORIES[int(category[has[i]])],
            ev.names[int(kernel_code[i])] if named[i] else "",
            gemm_out_buffers(trace, int(ops[has[i]])) if triton[i] else (),
            conv_consumer_dims(trace, int(ops[has[i]])),
        )
        if model is not None:
            index[g] = len(models)
            models.append(model)
    result[has] = index[group]
    return result


def _replay_of(trace: Trace, kernels: I64) -> I64:
    """Per kernel row: the row of the CUDA-graph launch that replayed it, -1 for a kernel launched on its own (a
    replayed kernel's op is the captured op, the same row on every replay)."""
    return replaying_launch(trace.events, trace.links.launch, kernels)


def _time_shares(op_rows: I64, dur_ns: I64, replay: I64 | None = None) -> F64:
    """Share of each kernel in its op call's FLOPs/bytes among the kernels of that call that got its model: by
    kernel time, or evenly when they took no time. A call is an op row, and with `replay` (the graph launch of each
    kernel, -1 for none) each replay of a captured op is a call of its own."""
    if op_rows.size == 0:
        return np.zeros(0, dtype=np.float64)
    keys = np.stack([op_rows, replay if replay is not None else np.full(op_rows.size, -1, dtype=np.int64)], axis=1)
    call = np.unique(keys, axis=0, return_inverse=True)[1].ravel()
    total = np.bincount(call, weights=dur_ns)[call]
    count = np.bincount(call).astype(np.float64)[call]
    return np.where(total > 0, dur_ns / np.maximum(total, 1), 1 / count)


def _copies(trace: Trace, window: Window) -> I64:
    """Rows of device-to-device copies (recorded bytes, read and written). Memsets are left out: small ones
    land in L2 and "beat" DRAM bandwidth, which says nothing useful (docs/roofline.md)."""
    ev = trace.events
    rows = np.flatnonzero(window.in_window & (ev.kind == Kind.MEMCPY) & (ev.bytes > 0))
    codes, index = np.unique(ev.name[rows], return_inverse=True)
    dtod = np.asarray([("DtoD" in ev.names[c] or "Device -> Device" in ev.names[c]) for c in codes.tolist()], bool)
    return rows[dtod[index.ravel()]] if rows.size else rows


def analyze_roofline(ctx: AnalysisContext) -> Roofline:
    return roofline_of(ctx.trace, ctx.steady, ctx.peaks, ctx.kernel_models)


def roofline_of(
    trace: Trace, window: Window, override: PeakOverride | None = None, models: KernelModels | None = None
) -> Roofline:
    """`models` (from `kernel_models`) may be passed in to share the work with the fusion analysis."""
    peaks = device_peaks(trace, override)
    models = kernel_models(trace, window) if models is None else models
    ev = trace.events
    kernel_time = float(ev.dur_ns[window.in_window & (ev.kind == Kind.KERNEL)].sum())
    modelled = float(models.dur_ns[ev.kind[models.row] == Kind.KERNEL].sum())
    rows = _rows(trace, models, peaks) if len(models) else []
    return Roofline(
        device=peaks.device,
        peaks_tflops=dict(peaks.tflops),
        peak_tbps=peaks.hbm_tbps,
        peaks_source=peaks.source,
        modelled_kernel_time_pct=round(100 * min(modelled / kernel_time, 1.0), 1) if kernel_time > 0 else 0.0,
        rows=rows,
        unmodelled=_unmodelled(trace, window, models, kernel_time),
    )


def _unmodelled(trace: Trace, window: Window, models: KernelModels, kernel_time_ns: float) -> list[Unmodelled]:
    """The window's kernel time without a model, split by reason: no launching op; no shapes on the launching op
    or the ancestors a model is looked for in; shapes but no model (with the ops that have most such time)."""
    ev, links = trace.events, trace.links
    if kernel_time_ns <= 0:
        return []
    has_model = np.zeros(len(ev), dtype=bool)
    has_model[models.row] = True
    rest = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL) & ~has_model)
    op = links.op[rest].astype(np.int64)
    op_modelled = np.zeros(len(ev), dtype=bool)
    op_modelled[models.op_row[models.op_row >= 0]] = True
    shaped = np.zeros(rest.size, dtype=bool)
    helper = np.zeros(rest.size, dtype=bool)  # the launching op (or an ancestor) has a model for other kernels
    current = op.copy()
    for _ in range(MAX_OP_ANCESTORS + 1):
        alive = current >= 0
        shaped[alive] |= ev.input_dims[current[alive]].astype(bool)  # raw JSON is never empty: only None is false
        helper[alive] |= op_modelled[current[alive]]
        current[alive] = nearest_ancestor_of_kind(links.parent, ev.kind, Kind.CPU_OP, current[alive])
    reason = np.where(op < 0, 0, np.where(helper, 3, np.where(shaped, 2, 1)))
    dur = ev.dur_ns[rest].astype(np.float64)
    out = []
    for code, key in enumerate(UNMODELLED_REASONS):
        picked = reason == code
        if not picked.any():
            continue
        ops: list[str] = []
        if key == "no_model":
            names = ev.name[op[picked]]
            by_name = np.bincount(names, weights=dur[picked])
            ranked = sorted((-float(by_name[c]), ev.names[c]) for c in np.flatnonzero(by_name > 0).tolist())
            ops = [name for _, name in ranked[:MAX_UNMODELLED_OPS]]  # most time first, then by name
        pct = round(100 * float(dur[picked].sum()) / kernel_time_ns, 1)
        if pct > 0:  # under 0.05 % is left out, as it rounds to nothing
            out.append(Unmodelled(UNMODELLED_REASONS[key], pct, ops))
    return sorted(out, key=lambda u: -u.pct_of_kernel_time)


def _rows(trace: Trace, models: KernelModels, peaks: Peaks) -> list[RooflineRow]:
    """One row per kernel (or copy) name, by total time, largest first: summed time, FLOPs and bytes, the most
    common op and dtype (alphabetically first on ties), the first entry's model."""
    ev = trace.events
    group, first = first_seen_groups(ev.name[models.row])
    n = first.size
    calls = np.bincount(group, minlength=n)
    dur_ns = np.bincount(group, weights=models.dur_ns, minlength=n)
    flops = group_sums(models.flops, group, n)
    moved = group_sums(models.bytes, group, n)
    alt = group_sums(models.alt_bytes, group, n) if models.alt_bytes is not None else np.zeros(n)
    whole = group_sums(models.whole_bytes, group, n) if models.whole_bytes is not None else np.zeros(n)
    op_code = np.where(models.op_row >= 0, ev.name[np.maximum(models.op_row, 0)], -1)
    distinct_ops, op_index = np.unique(op_code, return_inverse=True)
    op_rank, op_names = string_ranks([ev.names[c] if c >= 0 else "" for c in distinct_ops.tolist()])
    op = group_modes(group, op_rank[op_index.ravel()], n)
    dtype_rank, dtypes = string_ranks([label.dtype for label in models.labels])
    dtype = group_modes(group, dtype_rank[models.label], n)
    label = models.label[first]
    return [
        _row(
            ev.names[int(ev.name[models.row[first[g]]])],
            int(calls[g]),
            float(dur_ns[g]),
            float(flops[g]),
            float(moved[g]),
            op_names[op[g]],
            models.labels[label[g]],
            dtypes[dtype[g]],
            peaks,
            float(alt[g]),
            float(whole[g]),
        )
        for g in descending_order(dur_ns).tolist()
        if dur_ns[g] > 0
    ]


def _row(
    name: str,
    calls: int,
    dur_ns: float,
    flops: float,
    moved: float,
    op: str,
    label: ModelLabel,
    dtype: str,
    peaks: Peaks,
    alt_moved: float = 0.0,
    whole_moved: float = 0.0,
) -> RooflineRow:
    seconds = dur_ns / NS_PER_S
    tflops, tbps = flops / seconds / 1e12, moved / seconds / 1e12
    intensity = flops / moved if moved > 0 else None
    bounding_dtype = peak_dtype(dtype, name) if flops > 0 else None
    peak_flops = peaks.flops_peak(bounding_dtype) if bounding_dtype is not None else None
    peak_bw = peaks.hbm_tbps
    compute_bound = flops > 0 and (
        moved <= 0
        or (
            peak_flops is not None
            and peak_bw is not None
            and intensity is not None
            and intensity >= peak_flops / peak_bw
        )
    )
    if compute_bound:
        pct = 100 * tflops / peak_flops if peak_flops else None
    else:
        pct = 100 * tbps / peak_bw if peak_bw else None
    note = _misfit(tflops, tbps, peak_flops, peak_bw)
    if note is None and not compute_bound and pct is not None:
        note = _ambiguous(alt_moved, moved, seconds, peak_bw, pct)
    if note is not None:
        pct = None
    part = _in_part(whole_moved, moved, calls, seconds, peak_bw) if not compute_bound else None
    note = "; ".join(n for n in (note, part) if n) or None
    return RooflineRow(
        kernel=name,
        short_name=short_name(name),
        op=op,
        model=label.model,
        ops=label.ops,
        dtype=dtype,
        calls=calls,
        gflop_per_call=_sig(flops / calls / 1e9),
        mb_per_call=_sig(moved / calls / 1e6),
        mean_us=round(dur_ns / calls / 1000, 3),
        intensity_flop_per_byte=round(intensity, 3) if intensity is not None else None,
        achieved_tflops=round(tflops, 3),
        achieved_tbps=round(tbps, 4),
        peak_tflops=peak_flops,
        peak_tbps=peak_bw,
        limit="compute" if compute_bound else "memory",
        pct_of_peak=round(pct, 2) if pct is not None else None,
        model_note=note,
        peak_dtype=bounding_dtype,
    )


def _ambiguous(alt_moved: float, moved: float, seconds: float, peak_bw: float | None, pct: float) -> str | None:
    """When the kernel may also write its first argument (`OpModel.bytes_if_in_place`) and that reading would be
    above the memory peak, the figure is no measurement: say both readings."""
    if alt_moved <= moved or not peak_bw or alt_moved / seconds / 1e12 <= peak_bw:
        return None
    return (
        f"ambiguous bytes: {pct:.1f} % of peak if it writes only its outputs; if it also writes its first "
        f"argument in place, {alt_moved / seconds / 1e12:,.2f} TB/s, above the {peak_bw:g} TB/s peak"
    )


def _in_part(whole_moved: float, moved: float, calls: int, seconds: float, peak_bw: float | None) -> str | None:
    """When an Inductor kernel was charged only part of an argument larger than its outputs (`_pointwise_reads`:
    a packed buffer), the figure rests on that reading: say so, and what reading it whole would give."""
    if whole_moved <= moved:
        return None
    tbps = whole_moved / seconds / 1e12
    whole = f"{whole_moved / calls / 1e6:,.1f} MB/call, {tbps:,.2f} TB/s"
    if peak_bw:
        above = tbps > peak_bw
        whole += ", above the peak: it cannot read all of it" if above else f", {100 * tbps / peak_bw:.1f} % of peak"
    return (
        "part of a buffer: an argument larger than the kernel's outputs is charged one element per output element "
        f"(the trace does not say which part it reads); read whole, {whole}"
    )


def _misfit(tflops: float, tbps: float, peak_flops: float | None, peak_bw: float | None) -> str | None:
    """Why the model does not fit the kernel, when an achieved figure exceeds its peak (None when it fits)."""
    if peak_flops and tflops > peak_flops:
        return f"model does not fit: {tflops:,.1f} TFLOP/s modelled is above the {peak_flops:g} TFLOP/s peak"
    if peak_bw and tbps > peak_bw:
        return (
            f"model does not fit: {tbps:,.2f} TB/s modelled is above the {peak_bw:g} TB/s memory peak "
            "(data served from cache, or bytes over-counted)"
        )
    return None


def _sig(value: float, digits: int = 6) -> float:
    """`value` to `digits` significant digits (tiny kernels keep their figures)."""
    return float(f"{value:.{digits}g}")
