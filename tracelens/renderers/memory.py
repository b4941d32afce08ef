"""The `memory` analysis' text section, report panels (memory timeline, top allocating ops) and JSON keys.
The registry names these functions; rich and plotly are imported inside them (`analyze --format json` imports
neither)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracelens.analyses.memory import Memory
from tracelens.units import bytes_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisReport
    from tracelens.report.document import AnalysisPanels

MAX_OPS_SHOWN = 8
GIB = 1 << 30
MIB = 1 << 20


format_bytes = bytes_text


def json_keys(result: Memory, report: AnalysisReport) -> dict[str, Any]:
    """`memory`: every field but the thinned `timeline` (the report draws it; the JSON has the figures)."""
    from tracelens.renderers.jsonout import plain

    return {"memory": plain(result, leave_out=("timeline",))}


def text_section(result: Memory, report: AnalysisReport) -> list[Any]:
    from rich.table import Table
    from rich.text import Text

    if result.allocations_per_step is None:
        return [Text(f"Memory: — ({result.note})")]
    head = Text(
        f"Memory ({result.note}): peak allocated {format_bytes(result.peak_allocated_bytes)}, peak reserved "
        f"{format_bytes(result.peak_reserved_bytes)} (medians over steps); "
        f"{result.allocations_per_step:,.0f} allocations, {format_bytes(result.allocated_bytes_per_step)} per step; "
        f"outliving the step: {_count(result.outliving_allocations_per_step)} allocations, "
        f"{format_bytes(result.outliving_bytes_per_step)}"
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
            format_bytes(row.bytes_per_step),
            f"{100 * row.share_of_bytes:.1f} %",
        )
    return [head, table]


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def panels(result: Memory | None, report: AnalysisReport) -> AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report.document import AnalysisPanels, Panel, Table, unavailable

    panel_id, title = "memory-timeline", "Memory timeline"
    if result is None or not result.timeline or not any(s.ts_us for s in result.timeline):
        why = "the analysis did not run" if result is None else result.note
        if result is not None and result.timeline:
            why = "the memory events carry no Total Allocated / Total Reserved (older PyTorch)"
        return AnalysisPanels(breakdowns=(unavailable(panel_id, title, why),))
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
        f"per device. Figures: {result.note}; peak allocated {format_bytes(result.peak_allocated_bytes)}, peak "
        f"reserved {format_bytes(result.peak_reserved_bytes)} (medians over steps)."
    )
    timeline = Panel(id=panel_id, title=title, figure=fig, note=note)
    ops = Panel(
        id="memory-ops",
        title="Ops that allocate most (per step)",
        table=Table(
            columns=("op (outermost CPU op)", "allocations", "bytes", "share of bytes"),
            rows=tuple(
                (
                    row.op,
                    f"{row.allocations_per_step:,.0f}",
                    format_bytes(row.bytes_per_step),
                    f"{100 * row.share_of_bytes:.1f} %",
                )
                for row in result.by_op
            ),
        ),
        note=(
            f"Allocations outliving their step: {_count(result.outliving_allocations_per_step)} "
            f"({format_bytes(result.outliving_bytes_per_step)}) per step (median)."
        ),
    )
    return AnalysisPanels(breakdowns=(timeline,), findings=(ops,))
