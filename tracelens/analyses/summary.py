"""The first answers about a trace: facts, per-step figures, the kernel table and op → kernels.

Contract: `analyze_summary(trace, step=None) -> Summary`; pure, no I/O. Per-step figures are medians over
the analyzed steps (all complete steps, or the one chosen with `step`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tracelens.analyses.window import (
    Window,
    interval_union_per_group,
    per_step_counts,
    per_step_sums,
    select_window,
)
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, EventTable, Kind
from tracelens.model.kernel_names import categorize, short_name
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.trace import Trace

LAUNCH_API = re.compile(r"launch|memcpy|memset", re.I)
NS_PER_US = 1000.0


@dataclass(frozen=True)
class TraceFacts:
    path: str
    format: str
    gpus: list[str]
    cuda_runtime: str | None
    cuda_driver: str | None
    hip_runtime: str | None
    torch: str | None
    run: dict[str, Any]
    rank: int | None
    world_size: int | None
    events: int
    events_by_kind: dict[str, int]
    span_us: float
    uncompressed_bytes: int
    steps_in_trace: int
    step_source: str
    truncated: bool
    unattributed_gpu_activities: int
    launches_linked_by_external_id: int
    launches_linked_by_containment: int


STEP_FIGURE_KEYS = (
    "kernels",
    "memcpy",
    "memset",
    "launches",
    "cpu_ops",
    "cpu_us",
    "gpu_busy_us",
    "gpu_kernel_us",
    "step_us",
)


@dataclass(frozen=True)
class StepFigures:
    """Figures of one step (or of the per-step median, with `number` = -1)."""

    number: int
    kernels: float
    memcpy: float
    memset: float
    launches: float
    cpu_ops: float
    cpu_us: float
    gpu_busy_us: float
    gpu_kernel_us: float
    step_us: float
    complete: bool = True


@dataclass(frozen=True)
class KernelRow:
    name: str
    short_name: str
    category: str
    calls: int
    calls_per_step: float
    total_us: float
    mean_us: float
    op: str


@dataclass(frozen=True)
class OpKernel:
    name: str
    short_name: str
    calls_per_step: float
    us_per_step: float


@dataclass(frozen=True)
class OpRow:
    """An op (aten op, compiled region, autograd Function) and the kernels it launched, per step."""

    name: str
    calls_per_step: float
    kernels_per_step: float
    gpu_us_per_step: float
    kernels: list[OpKernel]


@dataclass(frozen=True)
class Summary:
    facts: TraceFacts
    steps: int
    step_numbers: list[int]
    per_step: StepFigures
    step_table: list[StepFigures]
    kernels: list[KernelRow]
    ops: list[OpRow]
    warnings: list[str] = field(default_factory=list)


def analyze_summary(trace: Trace, step: int | None = None, window: Window | None = None) -> Summary:
    """`window` (default: `select_window(trace, step)`) lets callers drop steps, e.g. ones that compiled."""
    window = window if window is not None else select_window(trace, step)
    gpu_frame = gpu_activity_frame(trace)
    in_window = gpu_frame[gpu_frame["step"].isin(window.step_indices)]
    step_table = _step_table(trace, window, gpu_frame)
    per_step = _median(step_table)
    n = max(window.n_steps, 1)
    return Summary(
        facts=_facts(trace),
        steps=window.n_steps,
        step_numbers=list(window.step_numbers),
        per_step=per_step,
        step_table=step_table,
        kernels=_kernel_rows(in_window, n),
        ops=_op_rows(trace, window, in_window, n),
        warnings=list(trace.warnings),
    )


# ---------------------------------------------------------------- GPU activity as a frame


def gpu_activity_frame(trace: Trace) -> pd.DataFrame:
    """One row per kernel/memcpy/memset: name, category, times, step, launching op (Inductor wrappers skipped)."""
    ev = trace.events
    rows = np.flatnonzero(np.isin(ev.kind, np.array(GPU_ACTIVITY_KINDS, np.int8)))
    launch = trace.links.launch[rows]
    op = _display_op(trace, rows)
    names = ev.names_at(rows)
    launch_names = ev.names_at(launch)
    return pd.DataFrame(
        {
            "row": rows,
            "kind": ev.kind[rows].astype(np.int64),
            "name": names,
            "category": [categorize(n, api) for n, api in zip(names, launch_names, strict=True)],
            "ts_ns": ev.ts_ns[rows],
            "dur_ns": ev.dur_ns[rows],
            "device": ev.device[rows],
            "stream": ev.stream[rows],
            "step": trace.links.step[rows],
            "launch": launch,
            "launch_api": launch_names,
            "op_row": op,
            "op": ev.names_at(op),
        }
    )


def _display_op(trace: Trace, gpu_rows: np.ndarray) -> np.ndarray:
    """The launching op, or its enclosing op when it is an Inductor/Triton wrapper named like a kernel."""
    ev = trace.events
    op = trace.links.op[gpu_rows].astype(np.int64)
    has = op >= 0
    wrapper = np.zeros(op.size, dtype=bool)
    wrapper[has] = ev.name[op[has]] == ev.name[gpu_rows[has]]
    wrapper[has] |= np.isin(ev.name[op[has]], _triton_name_codes(ev))
    if wrapper.any():
        op[wrapper] = nearest_ancestor_of_kind(trace.links.parent, ev.kind, Kind.CPU_OP, op[wrapper])
    return op


def _triton_name_codes(ev: EventTable) -> np.ndarray:
    return np.array([code for code, name in enumerate(ev.names) if name.startswith("triton_")], dtype=np.int32)


# ---------------------------------------------------------------- per-step figures


def _step_table(trace: Trace, window: Window, gpu: pd.DataFrame) -> list[StepFigures]:
    ev, links, steps = trace.events, trace.links, trace.steps
    n_all = len(steps)
    step_of_gpu = gpu["step"].to_numpy()
    kind = gpu["kind"].to_numpy()

    def count(kind_value: Kind) -> np.ndarray:
        return per_step_counts(np.where(kind == kind_value, step_of_gpu, -1), window, n_all)

    api = np.isin(ev.kind, np.array(API_KINDS, np.int8))
    launched_something = np.zeros(len(ev), dtype=bool)
    launched_something[links.launch[links.launch >= 0]] = True
    launch_named = np.isin(ev.name, _launch_name_codes(ev))
    is_launch = api & (launched_something | launch_named)
    launches = per_step_counts(np.where(is_launch, links.step, -1), window, n_all)
    cpu_ops = per_step_counts(np.where(ev.kind == Kind.CPU_OP, links.step, -1), window, n_all)
    kernel_rows = kind == Kind.KERNEL
    kernel_us = per_step_sums(
        np.where(kernel_rows, step_of_gpu, -1), gpu["dur_ns"].to_numpy() / NS_PER_US, window, n_all
    )
    busy_us, step_us = _gpu_busy_and_span(trace, window, gpu)
    cpu_us = steps.duration_ns[window.step_indices] / NS_PER_US
    kernels, memcpy, memset = count(Kind.KERNEL), count(Kind.MEMCPY), count(Kind.MEMSET)
    return [
        StepFigures(
            number=int(steps.number[index]),
            kernels=float(kernels[i]),
            memcpy=float(memcpy[i]),
            memset=float(memset[i]),
            launches=float(launches[i]),
            cpu_ops=float(cpu_ops[i]),
            cpu_us=round(float(cpu_us[i]), 3),
            gpu_busy_us=round(float(busy_us[i]), 3),
            gpu_kernel_us=round(float(kernel_us[i]), 3),
            step_us=round(float(step_us[i]), 3),
            complete=bool(steps.complete[index]),
        )
        for i, index in enumerate(window.step_indices)
    ]


def _launch_name_codes(ev: EventTable) -> np.ndarray:
    return np.array([c for c, name in enumerate(ev.names) if LAUNCH_API.search(name)], dtype=np.int32)


def _gpu_busy_and_span(trace: Trace, window: Window, gpu: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Union of GPU activity per step (summed over devices) and step span to its last GPU end, in µs."""
    position = {int(s): i for i, s in enumerate(window.step_indices)}
    sel = gpu[gpu["step"].isin(window.step_indices)]
    slot = np.array([position[int(s)] for s in sel["step"]], dtype=np.int64)
    n = window.n_steps
    devices, device_code = np.unique(sel["device"].to_numpy(), return_inverse=True)
    group = slot * max(devices.size, 1) + device_code
    start = sel["ts_ns"].to_numpy()
    end = start + sel["dur_ns"].to_numpy()
    union = interval_union_per_group(group, start, end, n * max(devices.size, 1))
    busy_us = union.reshape(n, max(devices.size, 1)).sum(axis=1) / NS_PER_US
    steps = trace.steps
    step_start = steps.start_ns[window.step_indices]
    last_end = steps.end_ns[window.step_indices].copy()
    if slot.size:
        np.maximum.at(last_end, slot, end)
    return busy_us, (last_end - step_start) / NS_PER_US


def _median(table: list[StepFigures]) -> StepFigures:
    if not table:
        return StepFigures(-1, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0)

    def med(attribute: str) -> float:
        return round(float(np.median([getattr(row, attribute) for row in table])), 3)

    return StepFigures(
        number=-1,
        kernels=med("kernels"),
        memcpy=med("memcpy"),
        memset=med("memset"),
        launches=med("launches"),
        cpu_ops=med("cpu_ops"),
        cpu_us=med("cpu_us"),
        gpu_busy_us=med("gpu_busy_us"),
        gpu_kernel_us=med("gpu_kernel_us"),
        step_us=med("step_us"),
    )


# ---------------------------------------------------------------- kernel table and op → kernels


def _kernel_rows(gpu: pd.DataFrame, n_steps: int) -> list[KernelRow]:
    if gpu.empty:
        return []
    grouped = gpu.groupby("name", sort=False).agg(
        calls=("dur_ns", "size"), total_ns=("dur_ns", "sum"), category=("category", "first")
    )
    grouped["op"] = _most_frequent_op(gpu).reindex(grouped.index).fillna("")
    grouped = grouped.sort_values(["total_ns", "calls"], ascending=[False, False], kind="stable")
    return [
        KernelRow(
            name=str(name),
            short_name=short_name(str(name)),
            category=str(category),
            calls=int(calls),
            calls_per_step=round(calls / n_steps, 3),
            total_us=round(total_ns / NS_PER_US, 3),
            mean_us=round(total_ns / NS_PER_US / calls, 3),
            op=str(op),
        )
        for name, calls, total_ns, category, op in grouped.itertuples()
    ]


def _most_frequent_op(gpu: pd.DataFrame) -> pd.Series:
    """Per kernel name, the op that launched it most often (ties: the alphabetically first)."""
    counts = gpu.groupby(["name", "op"], sort=False).size().rename("count").reset_index()
    counts = counts.sort_values(["name", "count", "op"], ascending=[True, False, True], kind="stable")
    return counts.drop_duplicates("name").set_index("name")["op"]


def _op_rows(trace: Trace, window: Window, gpu: pd.DataFrame, n_steps: int) -> list[OpRow]:
    kernels = gpu[gpu["kind"] == int(Kind.KERNEL)]
    if kernels.empty:
        return []
    ev = trace.events
    op_calls = pd.Series(ev.names_at(np.flatnonzero(window.in_window & (ev.kind == Kind.CPU_OP)))).value_counts()
    pairs = kernels.groupby(["op", "name"], sort=False).agg(calls=("dur_ns", "size"), total_ns=("dur_ns", "sum"))
    pairs = pairs.reset_index().assign(first_seen=np.arange(len(pairs)))
    pairs = pairs.sort_values(["op", "total_ns", "first_seen"], ascending=[True, False, True], kind="stable")
    launched: dict[str, list[OpKernel]] = {}
    totals: dict[str, list[float]] = {}
    for op_name, kernel, calls, total_ns, _ in pairs.itertuples(index=False):
        launched.setdefault(op_name, []).append(
            OpKernel(
                name=str(kernel),
                short_name=short_name(str(kernel)),
                calls_per_step=round(float(calls) / n_steps, 3),
                us_per_step=round(float(total_ns) / NS_PER_US / n_steps, 3),
            )
        )
        sums = totals.setdefault(op_name, [0.0, 0.0])
        sums[0] += float(calls)
        sums[1] += float(total_ns)
    rows = [
        OpRow(
            name=str(op_name) or "(no op)",
            calls_per_step=round(float(op_calls.get(op_name, 0)) / n_steps, 3),
            kernels_per_step=round(totals[op_name][0] / n_steps, 3),
            gpu_us_per_step=round(totals[op_name][1] / NS_PER_US / n_steps, 3),
            kernels=op_kernels,
        )
        for op_name, op_kernels in launched.items()
    ]
    rows.sort(key=lambda r: (-r.gpu_us_per_step, r.name))
    return rows


# ---------------------------------------------------------------- facts


def _facts(trace: Trace) -> TraceFacts:
    ev, meta = trace.events, trace.meta
    used_devices = set(np.unique(ev.device[ev.device >= 0]).tolist())
    gpus = [d.name for d in meta.devices if d.index in used_devices] or [d.name for d in meta.devices[:1]]
    kinds, counts = np.unique(ev.kind, return_counts=True)
    by_kind = {Kind(int(k)).name.lower(): int(c) for k, c in zip(kinds, counts, strict=True)}
    gpu = np.isin(ev.kind, np.array(GPU_ACTIVITY_KINDS, np.int8))
    span_ns = int((ev.ts_ns + ev.dur_ns).max() - ev.ts_ns.min()) if len(ev) else 0
    torch_version = meta.run.get("torch")
    return TraceFacts(
        path=str(trace.path) if trace.path else "",
        format=meta.format,
        gpus=gpus,
        cuda_runtime=meta.cuda_runtime_version,
        cuda_driver=meta.cuda_driver_version,
        hip_runtime=meta.hip_runtime_version,
        torch=str(torch_version) if torch_version is not None else None,
        run=dict(meta.run),
        rank=meta.rank,
        world_size=meta.world_size,
        events=len(ev),
        events_by_kind=by_kind,
        span_us=round(span_ns / NS_PER_US, 3),
        uncompressed_bytes=trace.uncompressed_bytes,
        steps_in_trace=len(trace.steps) if trace.steps.source == "ProfilerStep" else 0,
        step_source=trace.steps.source,
        truncated=trace.truncation.truncated,
        unattributed_gpu_activities=int((gpu & (trace.links.launch < 0)).sum()),
        launches_linked_by_external_id=trace.links.op_by_external_id,
        launches_linked_by_containment=trace.links.op_by_containment,
    )
