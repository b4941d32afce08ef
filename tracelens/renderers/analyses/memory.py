"""Memory shown: its section of `tracelens analyze` (`memory_parts`: peaks, allocations per step and the ops
that allocate most) and its panels of the report (`memory_panels`: the memory timeline, in "Where the
time goes"; the ops that allocate most, in "Findings"). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from tracelens.analyses.memory import Memory
from tracelens.renderers.analyses import Parts
from tracelens.units import GIB, bytes_text, whole_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


MAX_OPS_SHOWN = 8


def memory_parts(result: Memory, results: AnalysisResults) -> Parts:
    if result.allocations_per_step is None:
        return [Text(f"Memory: — ({result.note})")]
    head = Text(
        f"Memory ({result.note}): peak allocated {bytes_text(result.peak_allocated_bytes)}, peak reserved "
        f"{bytes_text(result.peak_reserved_bytes)} (medians over steps); "
        f"{result.allocations_per_step:,.0f} allocations, {bytes_text(result.allocated_bytes_per_step)} per step; "
        f"outliving the step: {whole_text(result.outliving_allocations_per_step)} allocations, "
        f"{bytes_text(result.outliving_bytes_per_step)}"
    )
    if not result.by_op:
        return [head]
    table = Table(title="Ops that allocate most (outermost CPU op), per step")
    for column in ("op", "allocs", "bytes", "share"):
        table.add_column(column, justify="left" if column == "op" else "right", overflow="fold")
    for row in result.by_op[:MAX_OPS_SHOWN]:
        table.add_row(
            row.op[:60],
            f"{row.allocations_per_step:,.0f}",
            bytes_text(row.bytes_per_step),
            f"{100 * row.share_of_bytes:.1f} %",
        )
    return [head, table]


def memory_panels(result: Memory | None, results: AnalysisResults) -> page.AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report import document as page

    panel_id, title = "memory-timeline", "Memory timeline"
    if result is None or not result.timeline or not any(s.ts_us for s in result.timeline):
        why = "the analysis did not run" if result is None else result.note
        if result is not None and result.timeline:
            why = "the memory events carry no Total Allocated / Total Reserved (older PyTorch)"
        return page.AnalysisPanels(breakdowns=(page.unavailable(panel_id, title, why),))
    fig = go.Figure()
    for series in result.timeline:
        if not series.ts_us:
            continue
        for values, name, dash in (
            (series.allocated_bytes, "allocated", "solid"),
            (series.reserved_bytes, "reserved", "dot"),
        ):
            fig.add_trace(
                go.Scattergl(
                    x=series.ts_us,
                    y=[v / GIB if v >= 0 else None for v in values],
                    mode="lines",
                    line={"shape": "hv", "dash": dash},
                    name=f"{series.device} {name}",
                    hovertemplate=f"{series.device} {name}: %{{y:.3f}} GiB at %{{x:,.1f}} µs<extra></extra>",
                )
            )
    fig.update_layout(
        template="plotly_white",
        height=360,
        xaxis_title="time since trace start (µs)",
        yaxis_title="GiB",
        margin={"t": 30},
    )
    note = (
        "Total Allocated (solid) and Total Reserved (dotted) by the caching allocator after each [memory] event, "
        f"per device. Figures: {result.note}; peak allocated {bytes_text(result.peak_allocated_bytes)}, peak "
        f"reserved {bytes_text(result.peak_reserved_bytes)} (medians over steps)."
    )
    timeline = page.Panel(id=panel_id, title=title, figure=fig, note=note)
    ops = page.Panel(
        id="memory-ops",
        title="Ops that allocate most (per step)",
        table=page.Table(
            columns=("op (outermost CPU op)", "allocations", "bytes", "share of bytes"),
            rows=tuple(
                (
                    row.op,
                    f"{row.allocations_per_step:,.0f}",
                    bytes_text(row.bytes_per_step),
                    f"{100 * row.share_of_bytes:.1f} %",
                )
                for row in result.by_op
            ),
        ),
        note=(
            f"Allocations outliving their step: {whole_text(result.outliving_allocations_per_step)} "
            f"({bytes_text(result.outliving_bytes_per_step)}) per step (median)."
        ),
    )
    return page.AnalysisPanels(breakdowns=(timeline,), findings=(ops,))
