"""What a CUDA graph removed from a step, eager against graph variant (`compare`, issue #29).

Contract: `graph_side(trace, results) -> GraphSide` (pure) gives one variant's per-step counts over the steps its
summary analyzed (`Summary.step_numbers`), each the median over those steps; `graph_removals(sides,
same_program)` pairs every variant that has graph launches with the first variant with none that is the same
program (the eager baseline; `compare` passes its another-program rule), as `GraphRemoval` rows (baseline −
variant). Definitions (docs/cuda_graphs.md#compare-what-the-graph-removed):

- `launch_calls`: kernel-launch runtime/driver calls (`cudaLaunchKernel`, `cuLaunchKernel`, ...; the names of
  `model.cuda_graphs.KERNEL_LAUNCH_NAMES`) in the step; `graph_launches`: `cudaGraphLaunch` calls;
- `cpu_op_us`: the summed duration of the step's outermost CPU ops (`cpu_op` events inside no other);
- `runtime_call_us`: the summed duration of the step's runtime/driver calls, sync calls left out;
- `sync_calls`: runtime calls whose name contains `Synchronize`; `host_copies`: memcpy activities to or from
  the host (`HtoD`, `DtoH` in the name) launched in the step;
- `kernels`, `gpu_busy_us`: the summary's; `gpu_idle_us`: the step's GPU window less GPU busy (the summary's
  per-step figures, then the median).
A step's CPU events belong to it by start, GPU activity by its launch (`Links.step`).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np

from tracelens.analyses import AnalysisResults
from tracelens.model.cuda_graphs import KERNEL_LAUNCH_NAMES, graph_launch_name_mask
from tracelens.model.events import API_KINDS, Kind, kind_mask
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.trace import Trace

GRAPH_REMOVAL_FIELDS = (
    "launch_calls",
    "cpu_op_us",
    "runtime_call_us",
    "gpu_idle_us",
    "kernels",
    "graph_launches",
    "sync_calls",
    "host_copies",
    "gpu_busy_us",
)


class GraphSide(msgspec.Struct, frozen=True):
    """One variant's per-step medians (module docstring); None where the trace has no analyzed step."""

    variant: str
    steps: int
    launch_calls: float | None
    cpu_op_us: float | None
    runtime_call_us: float | None
    gpu_idle_us: float | None
    kernels: float | None
    graph_launches: float | None
    sync_calls: float | None
    host_copies: float | None
    gpu_busy_us: float | None


class GraphRemoval(msgspec.Struct, frozen=True):
    """Eager `baseline` against graph `variant`: both sides, and `removed` = baseline − variant per field
    (None where either side is unknown)."""

    baseline: GraphSide
    variant: GraphSide
    removed: dict[str, float | None]


def _median(values: list[float]) -> float | None:
    return round(float(np.median(values)), 3) if values else None


def graph_side(name: str, trace: Trace, results: AnalysisResults) -> GraphSide:
    """Per-step medians of one variant (module docstring)."""
    summary = results.summary
    ev, links = trace.events, trace.links
    indices = [i for n in summary.step_numbers if (i := trace.step_index(n)) is not None]
    names = ev.names
    launch_codes = {i for i, n in enumerate(names) if n in KERNEL_LAUNCH_NAMES}
    sync_codes = {i for i, n in enumerate(names) if "Synchronize" in n}
    copy_codes = {i for i, n in enumerate(names) if "HtoD" in n or "DtoH" in n}
    api = kind_mask(ev.kind, API_KINDS)
    is_launch = api & np.isin(ev.name, list(launch_codes))
    is_graph = api & graph_launch_name_mask(ev)[ev.name]
    is_sync = api & np.isin(ev.name, list(sync_codes))
    is_copy = (ev.kind == Kind.MEMCPY) & np.isin(ev.name, list(copy_codes))
    ops = np.flatnonzero(ev.kind == Kind.CPU_OP)
    outer = np.zeros(len(ev), dtype=bool)
    outer[ops[nearest_ancestor_of_kind(links.parent, ev.kind, Kind.CPU_OP, ops) < 0]] = True
    per: dict[str, list[float]] = {k: [] for k in ("launch", "graph", "sync", "copy", "op_us", "api_us")}
    for index in indices:
        here = links.step == index
        per["launch"].append(float(np.count_nonzero(here & is_launch)))
        per["graph"].append(float(np.count_nonzero(here & is_graph)))
        per["sync"].append(float(np.count_nonzero(here & is_sync)))
        per["copy"].append(float(np.count_nonzero(here & is_copy)))
        per["op_us"].append(float(ev.dur_ns[here & outer].sum()) / 1e3)
        per["api_us"].append(float(ev.dur_ns[here & api & ~is_sync].sum()) / 1e3)
    idle = [
        row.gpu_window_us - row.gpu_busy_us
        for row in summary.step_table
        if row.gpu_window_us is not None and row.gpu_busy_us is not None
    ]
    return GraphSide(
        variant=name,
        steps=len(indices),
        launch_calls=_median(per["launch"]),
        cpu_op_us=_median(per["op_us"]),
        runtime_call_us=_median(per["api_us"]),
        gpu_idle_us=_median(idle),
        kernels=summary.per_step.kernels,
        graph_launches=_median(per["graph"]),
        sync_calls=_median(per["sync"]),
        host_copies=_median(per["copy"]),
        gpu_busy_us=summary.per_step.gpu_busy_us,
    )


def graph_removals(
    sides: list[GraphSide], same_program: Callable[[str, str], bool] = lambda before, after: True
) -> list[GraphRemoval]:
    """Each variant with graph launches against the first variant without any that is the same program as it
    (`same_program(eager variant, graph variant)`; module docstring); none where no such variant is given."""
    rows = []
    for side in sides:
        if side.graph_launches is None or side.graph_launches <= 0:
            continue
        eager = next((s for s in sides if s.graph_launches == 0 and same_program(s.variant, side.variant)), None)
        if eager is None:
            continue
        removed: dict[str, float | None] = {}
        for field in GRAPH_REMOVAL_FIELDS:
            a, b = getattr(eager, field), getattr(side, field)
            removed[field] = None if a is None or b is None else round(a - b, 3)
        rows.append(GraphRemoval(eager, side, removed))
    return rows


def removal_sentence(row: GraphRemoval) -> str:
    """One line of `compare`'s verdicts: launches and dispatch the graph removed per step."""
    r = row.removed

    def change(value: float | None, what: str) -> str:
        if value is None:
            return f"— {what}"
        return f"{'removed' if value >= 0 else 'added'} {abs(value):,.1f} {what}"

    launches = r["launch_calls"]
    launch_words = "— kernel-launch calls" if launches is None else f"{launches:,.0f} kernel-launch calls"
    idle = r["gpu_idle_us"]
    idle_words = (
        "— GPU idle" if idle is None else f"{abs(idle):,.1f} µs/step {'less' if idle >= 0 else 'more'} GPU idle"
    )
    return (
        f"{row.variant.variant} against {row.baseline.variant}: the graph removed {launch_words}, "
        f"{change(r['cpu_op_us'], 'CPU op µs')} and {change(r['runtime_call_us'], 'runtime µs')} per step; "
        f"{idle_words}"
    )
