"""Roofline: FLOPs and bytes per kernel from the shapes of the op that launched it, achieved TFLOP/s and TB/s,
and the share of the device's roofline each kernel reaches.

Contract: `analyze_roofline(trace, window, override=None) -> Roofline`; pure. For each kernel the launching op
and up to `MAX_OP_ANCESTORS` enclosing ops are tried (innermost first) until one has a model that fits the
kernel (see `opmodels.py`). When one op call launched several fitting kernels, its FLOPs and bytes are split
by kernel time. Per kernel name: achieved = summed FLOPs (bytes) / summed kernel time; `pct_of_peak` =
achieved / attainable roofline = achieved TFLOP/s ÷ dtype peak when compute-bound (intensity ≥ ridge), else
achieved TB/s ÷ memory peak. Device-to-device copies use their recorded bytes. Unknown device → no %.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracelens.analyses.devices import PeakOverride, Peaks, override_from_env, peaks_for
from tracelens.analyses.opmodels import OpModel, model_op
from tracelens.analyses.shapes import op_shapes
from tracelens.analyses.window import Window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import categorize, short_name
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.trace import Trace

MAX_OP_ANCESTORS = 3
NS_PER_S = 1e9


@dataclass(frozen=True)
class RooflineRow:
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
    pct_of_peak: float | None


@dataclass(frozen=True)
class Roofline:
    device: str
    peaks_tflops: dict[str, float]
    peak_tbps: float | None
    peaks_source: str
    modelled_kernel_time_pct: float  # share of kernel time in the window that has a model
    rows: list[RooflineRow] = field(default_factory=list)

    def by_kernel(self) -> dict[str, RooflineRow]:
        return {row.kernel: row for row in self.rows}


def device_peaks(trace: Trace, override: PeakOverride | None = None) -> Peaks:
    """Peaks of the first GPU the trace used (by `deviceProperties[].name`), with overrides applied."""
    ev, devices = trace.events, trace.meta.devices
    used = set(np.unique(ev.device[(ev.kind == Kind.KERNEL) & (ev.device >= 0)]).tolist())
    chosen = next((d for d in devices if d.index in used), devices[0] if devices else None)
    override = override if override is not None else override_from_env()
    if chosen is None:
        return peaks_for("unknown", None, override)
    return peaks_for(chosen.name, chosen.total_memory_bytes, override)


def kernel_models(trace: Trace, window: Window) -> pd.DataFrame:
    """One row per GPU activity in the window with a model: row, name, op_row, model fields, flops, bytes."""
    ev, links = trace.events, trace.links
    kernels = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    names = ev.names_at(kernels)
    apis = ev.names_at(links.launch[kernels])
    category = np.asarray([categorize(n, a) for n, a in zip(names, apis, strict=True)], dtype=object)
    chosen_op = np.full(kernels.size, -1, dtype=np.int64)
    models: list[OpModel | None] = [None] * kernels.size
    candidate = links.op[kernels].astype(np.int64)
    for _ in range(MAX_OP_ANCESTORS + 1):
        todo = np.flatnonzero((chosen_op < 0) & (candidate >= 0))
        if todo.size == 0:
            break
        for i, model in zip(todo, _models_for(trace, candidate[todo], category[todo], kernels[todo]), strict=True):
            if model is not None:
                models[i], chosen_op[i] = model, candidate[i]
        candidate[todo] = nearest_ancestor_of_kind(links.parent, ev.kind, Kind.CPU_OP, candidate[todo])
    hit = np.flatnonzero(chosen_op >= 0)
    frame = pd.DataFrame(
        {
            "row": kernels[hit],
            "name": [names[i] for i in hit],
            "op_row": chosen_op[hit],
            "dur_ns": ev.dur_ns[kernels[hit]],
            "model": [models[i].model for i in hit],  # type: ignore[union-attr]
            "ops": [models[i].ops for i in hit],  # type: ignore[union-attr]
            "dtype": [models[i].dtype for i in hit],  # type: ignore[union-attr]
            "op_flops": [models[i].flops for i in hit],  # type: ignore[union-attr]
            "op_bytes": [models[i].bytes for i in hit],  # type: ignore[union-attr]
            "out_bytes": [models[i].out_bytes for i in hit],  # type: ignore[union-attr]
        }
    )
    frame = pd.concat([_split_by_time(frame), _copies(trace, window)], ignore_index=True)
    frame["op"] = ev.names_at(frame["op_row"].to_numpy(dtype=np.int64)) if len(frame) else []
    return frame


def _models_for(trace: Trace, ops: np.ndarray, category: np.ndarray, kernels: np.ndarray) -> list[OpModel | None]:
    """Models for (op, kernel) pairs, computed once per distinct (op name, shapes, kernel category/name)."""
    ev = trace.events
    if ops.size == 0:
        return []
    op_code = ev.name[ops]
    triton = np.isin(op_code, np.array([c for c, n in enumerate(ev.names) if n.startswith("triton_")], np.int32))
    keys = pd.DataFrame(
        {
            "op": op_code,
            "dims": ev.input_dims[ops],
            "types": ev.input_types[ops],
            "concrete": ev.concrete_inputs[ops],
            "category": category,
            "kernel": np.where(triton, ev.name[kernels], -1),
        }
    )
    group = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy()
    firsts = np.unique(group, return_index=True)[1]
    models = [
        model_op(
            ev.names[int(op_code[i])],
            op_shapes(ev, int(ops[i])),
            str(category[i]),
            ev.names[int(ev.name[kernels[i]])] if triton[i] else "",
        )
        for i in firsts
    ]
    return [models[g] for g in group.tolist()]


def _split_by_time(frame: pd.DataFrame) -> pd.DataFrame:
    """Share each op call's FLOPs/bytes among the kernels it launched that got its model, by kernel time."""
    if frame.empty:
        return frame.assign(flops=[], bytes=[]).drop(columns=["op_flops", "op_bytes"])
    total = frame.groupby("op_row")["dur_ns"].transform("sum").to_numpy(dtype=np.float64)
    count = frame.groupby("op_row")["dur_ns"].transform("size").to_numpy(dtype=np.float64)
    share = np.where(total > 0, frame["dur_ns"].to_numpy() / np.maximum(total, 1), 1 / count)
    return frame.assign(flops=frame["op_flops"] * share, bytes=frame["op_bytes"] * share).drop(
        columns=["op_flops", "op_bytes"]
    )


def _copies(trace: Trace, window: Window) -> pd.DataFrame:
    """Device-to-device copies: recorded bytes, read and written. Memsets are left out: small ones land in L2
    and "beat" DRAM bandwidth (measured: 127 % of an RTX 4090 D's 1 TB/s), which says nothing useful."""
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(window.in_window & (ev.kind == Kind.MEMCPY) & (ev.bytes > 0))
    names = ev.names_at(rows)
    dtod = np.array([("DtoD" in n or "Device -> Device" in n) for n in names], dtype=bool)
    rows = rows[dtod]
    return pd.DataFrame(
        {
            "row": rows,
            "name": [n for n, k in zip(names, dtod, strict=True) if k],
            "op_row": links.op[rows].astype(np.int64),
            "dur_ns": ev.dur_ns[rows],
            "model": "copy",
            "ops": "",
            "dtype": "",
            "flops": 0.0,
            "bytes": ev.bytes[rows] * 2.0,
            "out_bytes": ev.bytes[rows].astype(np.float64),
        }
    )


def analyze_roofline(
    trace: Trace, window: Window, override: PeakOverride | None = None, models: pd.DataFrame | None = None
) -> Roofline:
    """`models` (from `kernel_models`) may be passed in to share the work with the fusion analysis."""
    peaks = device_peaks(trace, override)
    frame = kernel_models(trace, window) if models is None else models
    ev = trace.events
    kernel_time = float(ev.dur_ns[window.in_window & (ev.kind == Kind.KERNEL)].sum())
    modelled = float(frame.loc[np.isin(frame["row"], np.flatnonzero(ev.kind == Kind.KERNEL)), "dur_ns"].sum())
    rows = _rows(frame, peaks) if len(frame) else []
    return Roofline(
        device=peaks.device,
        peaks_tflops=dict(peaks.tflops),
        peak_tbps=peaks.hbm_tbps,
        peaks_source=peaks.source,
        modelled_kernel_time_pct=round(100 * min(modelled / kernel_time, 1.0), 1) if kernel_time > 0 else 0.0,
        rows=rows,
    )


def _rows(frame: pd.DataFrame, peaks: Peaks) -> list[RooflineRow]:
    grouped = frame.groupby("name", sort=False).agg(
        calls=("row", "size"),
        dur_ns=("dur_ns", "sum"),
        flops=("flops", "sum"),
        bytes=("bytes", "sum"),
        op=("op", lambda s: s.mode().iat[0]),
        model=("model", "first"),
        ops=("ops", "first"),
        dtype=("dtype", lambda s: s.mode().iat[0]),
    )
    grouped = grouped.sort_values("dur_ns", ascending=False, kind="stable")
    return [_row(str(name), r, peaks) for name, r in grouped.iterrows() if r["dur_ns"] > 0]


def _row(name: str, r: pd.Series, peaks: Peaks) -> RooflineRow:
    seconds = float(r["dur_ns"]) / NS_PER_S
    flops, moved = float(r["flops"]), float(r["bytes"])
    tflops, tbps = flops / seconds / 1e12, moved / seconds / 1e12
    intensity = flops / moved if moved > 0 else None
    peak_flops = peaks.flops_peak(str(r["dtype"])) if flops > 0 else None
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
    calls = int(r["calls"])
    return RooflineRow(
        kernel=name,
        short_name=short_name(name),
        op=str(r["op"]),
        model=str(r["model"]),
        ops=str(r["ops"]),
        dtype=str(r["dtype"]),
        calls=calls,
        gflop_per_call=_sig(flops / calls / 1e9),
        mb_per_call=_sig(moved / calls / 1e6),
        mean_us=round(float(r["dur_ns"]) / calls / 1000, 3),
        intensity_flop_per_byte=round(intensity, 3) if intensity is not None else None,
        achieved_tflops=round(tflops, 3),
        achieved_tbps=round(tbps, 4),
        peak_tflops=peak_flops,
        peak_tbps=peak_bw,
        limit="compute" if compute_bound else "memory",
        pct_of_peak=round(pct, 2) if pct is not None else None,
    )


def _sig(value: float, digits: int = 6) -> float:
    """`value` to `digits` significant digits (tiny kernels keep their figures)."""
    return float(f"{value:.{digits}g}")
