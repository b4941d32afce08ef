"""The first answers about a trace: facts, per-step figures, the kernel table and op → kernels.

Contract: `summary_of(trace, step=None) -> Summary`; pure, no I/O. Per-step figures are medians over
the analyzed steps (all complete steps, or the one chosen with `step`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from tracelens.analyses.activity import GpuActivity, gpu_activity, step_windows
from tracelens.analyses.keygroups import string_keys
from tracelens.analyses.profiler_overhead import ProfilerFree, profiler_free
from tracelens.analyses.window import (
    Window,
    per_step_counts,
    per_step_sums,
    select_window,
)
from tracelens.model.cuda_graphs import captured_mask, graph_launch_name_mask
from tracelens.model.events import API_KINDS, I64, EventTable, Kind, kind_mask
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.stats import distinct_ints, median
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    import pandas as pd

    from tracelens.analyses.context import AnalysisContext

LAUNCH_API = re.compile(r"launch|memcpy|memset", re.I)


class TraceFacts(msgspec.Struct, frozen=True):
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
    steps_inferred_from: str = ""  # step_source "inferred": what the steps are ("Torch-Compiled Region calls")
    steps_are_calls: bool = False  # each step is one call; the time until the next call is in no step


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
    "queue_backlog_us",
    "gpu_window_us",
)


class StepFigures(msgspec.Struct, frozen=True):
    """Figures of one step (or of the per-step median, with `number` = -1); None = cannot be computed
    (no analyzed step, or no GPU activity for the GPU figures; kernel, memcpy and memset counts where the trace
    has launches but no GPU activity: not recorded). Definitions: docs/definitions.md.

    `gpu_busy_us`: union of all GPU activity inside the step's GPU window (whoever launched it);
    `gpu_window_us`: that window's length (times the devices); `step_us`: the step's period (GPU end to GPU end
    when the GPU is the limiter, CPU start to CPU start when the CPU is); `queue_backlog_us`: how far the GPU
    work trails the CPU at the step's end. See `activity.StepWindows`."""

    number: int
    kernels: float | None
    memcpy: float | None
    memset: float | None
    launches: float | None
    cpu_ops: float | None
    cpu_us: float | None
    gpu_busy_us: float | None
    gpu_kernel_us: float | None
    step_us: float | None
    complete: bool = True
    queue_backlog_us: float | None = None
    gpu_window_us: float | None = None


class KernelRow(msgspec.Struct, frozen=True):
    name: str
    short_name: str
    category: str
    calls: int
    calls_per_step: float
    total_us: float
    mean_us: float
    op: str


class OpKernel(msgspec.Struct, frozen=True):
    name: str
    short_name: str
    calls_per_step: float
    us_per_step: float


NO_OP = "(no op)"  # an op row of kernels that no op launched (or whose op is not in the trace)


def replayed_ops_note(ops: list[OpRow]) -> str:
    """Why an op row of `ops` reads 0 calls per step beside kernels (it ran once, when its CUDA graph was
    captured; its kernels replay each step): the one sentence of every op table, "" where no row is such."""
    captured = [
        row.name for row in ops if row.replayed_kernels_per_step and not row.calls_per_step and row.name != NO_OP
    ]
    if not captured:
        return ""
    shown = ", ".join(captured[:3]) + (", …" if len(captured) > 3 else "")
    subject = "each op" if len(captured) > 1 else "the op"
    return (
        f"calls/step 0 ({shown}): {subject} ran when its CUDA graph was captured; its kernels replay in the graph "
        "each step"
    )


class OpRow(msgspec.Struct, frozen=True):
    """An op (aten op, compiled region, autograd Function) and the kernels it launched, per step;
    `replayed_kernels_per_step`: those of them a CUDA graph replayed (the op ran when the graph was captured, not
    in the step: its `calls_per_step` can be 0 beside kernels)."""

    name: str
    calls_per_step: float
    kernels_per_step: float
    gpu_us_per_step: float
    kernels: list[OpKernel]
    replayed_kernels_per_step: float = 0.0


class Summary(msgspec.Struct, frozen=True):
    facts: TraceFacts
    steps: int
    step_numbers: list[int]
    per_step: StepFigures
    step_table: list[StepFigures]
    kernels: list[KernelRow]
    ops: list[OpRow]
    warnings: list[str] = msgspec.field(default_factory=list)
    empty_reason: str | None = None  # why per-step figures are None (no analyzed step), else None
    # the profiler-free step time beside the profiled median step (measured or estimated: profiler_overhead.py)
    profiler_free: ProfilerFree | None = None


def analyze_summary(ctx: AnalysisContext) -> Summary:
    """Over the analyzed steps less those that compiled (`ctx.steady_steps`)."""
    return summary_of(ctx.trace, window=ctx.steady_steps)


def summary_of(trace: Trace, step: int | None = None, window: Window | None = None) -> Summary:
    """`window` (default: `select_window(trace, step)`) lets callers drop steps, e.g. ones that compiled."""
    window = window if window is not None else select_window(trace, step)
    gpu = gpu_activity(trace)
    in_window = gpu.in_steps(window.step_indices)
    step_table = _step_table(trace, window, gpu)
    per_step = _median(step_table)
    n = max(window.n_steps, 1)
    return Summary(
        facts=_facts(trace),
        steps=window.n_steps,
        step_numbers=list(window.step_numbers),
        per_step=per_step,
        step_table=step_table,
        kernels=_kernel_rows(trace.events.names, in_window, n),
        ops=_op_rows(trace, window, in_window, n),
        warnings=list(trace.warnings),
        empty_reason=_empty_reason(trace, window),
        profiler_free=profiler_free(trace, per_step.step_us, per_step.gpu_busy_us, window.step_indices.tolist()),
    )


def _empty_reason(trace: Trace, window: Window) -> str | None:
    """Why there are no per-step figures, or None when some step was analyzed."""
    if window.n_steps:
        return None
    steps = trace.steps
    if steps.per_step and len(steps):
        cut = " (the trace is cut off)" if trace.truncation.truncated else ""
        return f"no complete step: {len(steps)} step(s) ({steps.label}) in the trace, none complete{cut}"
    if len(steps) and not steps.complete.all():  # the one whole-trace window, cut off: what followed is unknown
        return "no step to analyze: the trace is cut off and has no ProfilerStep, so its one window is incomplete"
    return "no step to analyze: the trace has no CPU events"


# ---------------------------------------------------------------- GPU activity as a frame


def gpu_activity_frame(trace: Trace) -> pd.DataFrame:
    """One row per kernel/memcpy/memset: name, category, times, step, launching op (Inductor wrappers skipped).

    Columns: row, kind, name, category, ts_ns, dur_ns, device, stream, step, launch, launch_api, op_row, op.
    A pandas view of `activity.gpu_activity(trace)` for reports and notebooks; analyses use the arrays."""
    import pandas as pd

    gpu = gpu_activity(trace)
    names = np.asarray((*trace.events.names, ""), dtype=object)  # code -1 picks the trailing ""
    return pd.DataFrame(
        {
            "row": gpu.row,
            "kind": gpu.kind.astype(np.int64),
            "name": names[gpu.name].tolist(),
            "category": np.asarray(CATEGORIES, dtype=object)[gpu.category].tolist(),
            "ts_ns": gpu.ts_ns,
            "dur_ns": gpu.dur_ns,
            "device": gpu.device,
            "stream": gpu.stream,
            "step": gpu.step,
            "launch": gpu.launch,
            "launch_api": names[gpu.launch_name].tolist(),
            "op_row": gpu.op_row,
            "op": names[gpu.op_name].tolist(),
        }
    )


# ---------------------------------------------------------------- per-step figures


def _step_table(trace: Trace, window: Window, gpu: GpuActivity) -> list[StepFigures]:
    ev, links, steps = trace.events, trace.links, trace.steps
    n_all = len(steps)
    step_of_gpu = gpu.step
    kind = gpu.kind

    def count(kind_value: Kind) -> np.ndarray:
        return per_step_counts(np.where(kind == kind_value, step_of_gpu, -1), window, n_all)

    api = kind_mask(ev.kind, API_KINDS)
    launched_something = np.zeros(len(ev), dtype=bool)
    launched_something[links.launch[links.launch >= 0]] = True
    launch_name = np.zeros(len(ev.names), dtype=bool)
    launch_name[_launch_name_codes(ev)] = True
    launch_named = np.take(launch_name, ev.name)
    # a launch call that launched nothing counts (its GPU work may be unrecorded), unless a graph captured it
    silent = api & launch_named & ~launched_something
    is_launch = api & (launched_something | (silent & ~captured_mask(ev, silent)))
    launches = per_step_counts(np.where(is_launch, links.step, -1), window, n_all)
    cpu_ops = per_step_counts(np.where(ev.kind == Kind.CPU_OP, links.step, -1), window, n_all)
    kernel_rows = kind == Kind.KERNEL
    kernel_us = per_step_sums(np.where(kernel_rows, step_of_gpu, -1), gpu.dur_ns / NS_PER_US, window, n_all)
    windows = step_windows(trace)
    chosen = window.step_indices
    has_gpu = windows.devices.size > 0
    busy_us = windows.busy_ns[chosen] / NS_PER_US
    window_us = windows.window_ns[chosen] / NS_PER_US
    step_us = windows.period_ns[chosen] / NS_PER_US
    backlog_us = windows.backlog_ns[chosen] / NS_PER_US
    cpu_us = steps.duration_ns[window.step_indices] / NS_PER_US
    kernels, memcpy, memset = count(Kind.KERNEL), count(Kind.MEMCPY), count(Kind.MEMSET)
    # launches but no GPU activity in the trace: what they ran was not recorded, so its counts are unknown (a
    # trace that launched nothing ran no kernel: 0)
    counted = has_gpu or not int(launches.sum())
    return [
        StepFigures(
            number=int(steps.number[index]),
            kernels=float(kernels[i]) if counted else None,
            memcpy=float(memcpy[i]) if counted else None,
            memset=float(memset[i]) if counted else None,
            launches=float(launches[i]),
            cpu_ops=float(cpu_ops[i]),
            cpu_us=round(float(cpu_us[i]), 3),
            gpu_busy_us=round(float(busy_us[i]), 3) if has_gpu else None,
            gpu_kernel_us=round(float(kernel_us[i]), 3) if has_gpu else None,
            step_us=round(float(step_us[i]), 3),
            complete=bool(steps.complete[index]),
            queue_backlog_us=round(float(backlog_us[i]), 3) if has_gpu else None,
            gpu_window_us=round(float(window_us[i]), 3) if has_gpu else None,
        )
        for i, index in enumerate(window.step_indices)
    ]


def _launch_name_codes(ev: EventTable) -> np.ndarray:
    return np.array([c for c, name in enumerate(ev.names) if LAUNCH_API.search(name)], dtype=np.int32)


def _median(table: list[StepFigures]) -> StepFigures:
    """Per-figure medians over the steps that have the figure; None where no step has it."""

    def med(attribute: str) -> float | None:
        values = [getattr(row, attribute) for row in table if getattr(row, attribute) is not None]
        return round(median(values), 3) if values else None

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
        queue_backlog_us=med("queue_backlog_us"),
        gpu_window_us=med("gpu_window_us"),
    )


# ---------------------------------------------------------------- kernel table and op → kernels


def _kernel_rows(names: tuple[str, ...], gpu: GpuActivity, n_steps: int) -> list[KernelRow]:
    """Per kernel name: calls and time, the first entry's category and the most frequent op; by total time,
    then calls (descending), then first appearance."""
    if len(gpu) == 0:
        return []
    name_key, name_text = string_keys(names, gpu.name)  # dense: every key 0..len(name_text)-1 occurs
    first = np.unique(name_key, return_index=True)[1]
    calls = np.bincount(name_key)
    total_ns = np.bincount(name_key, weights=gpu.dur_ns).astype(np.int64)  # exact below 2**53 ns
    op_key, op_text = string_keys(names, gpu.op_name)
    op = most_frequent(name_key, op_key, len(name_text))
    order = np.lexsort((first, -calls, -total_ns))
    return [
        KernelRow(
            name=name_text[key],
            short_name=short_name(name_text[key]),
            category=CATEGORIES[category],
            calls=n_calls,
            calls_per_step=round(n_calls / n_steps, 3),
            total_us=round(total / NS_PER_US, 3),
            mean_us=round(total / NS_PER_US / n_calls, 3),
            op=op_text[op_of_kernel],
        )
        for key, category, n_calls, total, op_of_kernel in zip(
            order.tolist(),
            gpu.category[first[order]].tolist(),
            calls[order].tolist(),
            total_ns[order].tolist(),
            op[order].tolist(),
            strict=True,
        )
    ]


def most_frequent(group: np.ndarray, value: np.ndarray, n_groups: int) -> I64:
    """Per group 0..n_groups-1, the value (a non-negative integer key) occurring most often in it; ties: the
    smallest value; -1 for a group without entries."""
    result = np.full(n_groups, -1, dtype=np.int64)
    if group.size == 0:
        return result
    n_values = int(value.max()) + 1
    pairs, counts = np.unique(group.astype(np.int64) * n_values + value, return_counts=True)
    groups, values = np.divmod(pairs, n_values)
    order = np.lexsort((values, -counts, groups))
    groups, values = groups[order], values[order]
    first = np.ones(groups.size, dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    result[groups[first]] = values[first]
    return result


def _op_rows(trace: Trace, window: Window, gpu: GpuActivity, n_steps: int) -> list[OpRow]:
    """Ops by GPU time per step (then name); each op's kernels by time, then first appearance."""
    kernels = gpu.subset(gpu.kind == Kind.KERNEL)
    if len(kernels) == 0:
        return []
    ev = trace.events
    op_calls = _calls_by_name(ev, window.in_window & (ev.kind == Kind.CPU_OP))
    op_key, op_text = string_keys(ev.names, kernels.op_name)
    name_key, name_text = string_keys(ev.names, kernels.name)
    pair_key = op_key * len(name_text) + name_key
    pairs, first, group = np.unique(pair_key, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    calls = np.bincount(group)
    total_ns = np.bincount(group, weights=kernels.dur_ns).astype(np.int64)
    replayed_of_pair = np.bincount(group, weights=_replayed(ev, kernels), minlength=len(pairs))
    op_of_pair, name_of_pair = np.divmod(pairs, len(name_text))
    order = np.lexsort((first, -total_ns, op_of_pair))
    launched: dict[str, list[OpKernel]] = {}
    totals: dict[str, list[float]] = {}
    for op, kernel, n_calls, total, replayed in zip(
        op_of_pair[order].tolist(),
        name_of_pair[order].tolist(),
        calls[order].tolist(),
        total_ns[order].tolist(),
        replayed_of_pair[order].tolist(),
        strict=True,
    ):
        op_name, kernel_name = op_text[op], name_text[kernel]
        launched.setdefault(op_name, []).append(
            OpKernel(
                name=kernel_name,
                short_name=short_name(kernel_name),
                calls_per_step=round(float(n_calls) / n_steps, 3),
                us_per_step=round(float(total) / NS_PER_US / n_steps, 3),
            )
        )
        sums = totals.setdefault(op_name, [0.0, 0.0, 0.0])
        sums[0] += float(n_calls)
        sums[1] += float(total)
        sums[2] += float(replayed)
    rows = [
        OpRow(
            name=op_name or NO_OP,
            calls_per_step=round(float(op_calls.get(op_name, 0)) / n_steps, 3),
            kernels_per_step=round(totals[op_name][0] / n_steps, 3),
            gpu_us_per_step=round(totals[op_name][1] / NS_PER_US / n_steps, 3),
            kernels=op_kernels,
            replayed_kernels_per_step=round(totals[op_name][2] / n_steps, 3),
        )
        for op_name, op_kernels in launched.items()
    ]
    rows.sort(key=lambda r: (-r.gpu_us_per_step, r.name))
    return rows


def _replayed(ev: EventTable, kernels: GpuActivity) -> np.ndarray:
    """Per kernel of `kernels`: 1.0 where a CUDA-graph launch replayed it, else 0.0."""
    graph_launch = graph_launch_name_mask(ev)
    code = kernels.launch_name
    return ((code >= 0) & graph_launch[np.maximum(code, 0)]).astype(np.float64)


def _calls_by_name(ev: EventTable, mask: np.ndarray) -> dict[str, int]:
    """Number of events under `mask` per name."""
    counts = np.bincount(ev.name[mask], minlength=len(ev.names))
    calls: dict[str, int] = {}
    for code in np.flatnonzero(counts).tolist():
        calls[ev.names[code]] = calls.get(ev.names[code], 0) + int(counts[code])
    return calls


# ---------------------------------------------------------------- facts


def _facts(trace: Trace) -> TraceFacts:
    ev, meta = trace.events, trace.meta
    used_devices = set(distinct_ints(ev.device[ev.device >= 0]).tolist())
    gpus = [d.name for d in meta.devices if d.index in used_devices] or [d.name for d in meta.devices[:1]]
    counts = np.bincount(ev.kind) if len(ev) else np.zeros(0, dtype=np.int64)
    by_kind = {Kind(k).name.lower(): int(counts[k]) for k in np.flatnonzero(counts).tolist()}
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
        steps_in_trace=len(trace.steps) if trace.steps.per_step else 0,
        step_source=trace.steps.source,
        steps_inferred_from=trace.steps.inferred_from,
        steps_are_calls=trace.steps.spans_calls,
        truncated=trace.truncation.truncated,
        unattributed_gpu_activities=int((gpu_activity(trace).launch < 0).sum()),
        launches_linked_by_external_id=trace.links.op_by_external_id,
        launches_linked_by_containment=trace.links.op_by_containment,
    )
