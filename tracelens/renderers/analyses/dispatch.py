"""CPU dispatch shown: its section of `tracelens analyze` (`dispatch_parts`: CPU time per step by layer, by op
name, the runtime queries and syncs by the op that issued them) and its panels of the report (`dispatch_panels`: CPU
time per step by layer and by op, in "Where the time goes"). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from tracelens.analyses.dispatch import Dispatch
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import count as _count
from tracelens.renderers.tables import droppable
from tracelens.units import us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


MAX_API_ROWS = 12
MAX_OP_ROWS = 10
OP_LAYER_WORDS = {"ops_launching": "launching", "cpu_only_ops": "cpu-only", "compiled": "compiled"}  # short


def dispatch_parts(dispatch: Dispatch, results: AnalysisResults) -> Parts:
    return [dispatch_table(dispatch), ops_table(dispatch), api_table(dispatch)]


def ops_table(dispatch: Dispatch) -> Table | None:
    """The ops with the most CPU self time per step (`Dispatch.ops`, the first `MAX_OP_ROWS`)."""
    if not dispatch.ops:
        return None
    table = Table(
        title=f"CPU self time per step by op (the {min(len(dispatch.ops), MAX_OP_ROWS)} with the most)",
        title_justify="left",
        caption="self time: the op's time less its children's (other ops, runtime calls); %: of the CPU time per "
        "step above; layer: the one holding most of its self time",
    )
    for column in ("op", "layer", "calls/step", "µs/step", "%"):
        table.add_column(column, justify="left" if column in ("op", "layer") else "right", overflow="fold")
    droppable(table, "layer")
    for op in dispatch.ops[:MAX_OP_ROWS]:
        layer = OP_LAYER_WORDS.get(op.layer, op.layer)
        table.add_row(op.name, layer, _count(op.calls_per_step), us_text(op.self_us_per_step), f"{op.share_pct:.1f}")
    return table


def dispatch_table(dispatch: Dispatch) -> Table | Text:
    if dispatch.steps == 0:
        return Text("CPU time per step by layer: — (no analyzed step)")
    table = Table(
        title=f"CPU time per step by layer (self time, all threads; mean): {us_text(dispatch.cpu_us_per_step)} µs",
        title_justify="left",
    )
    table.add_column("layer")
    table.add_column("calls/step", justify="right")
    table.add_column("µs/step", justify="right")
    table.add_column("what", overflow="fold")
    droppable(table, "what")
    for layer in dispatch.layers:
        if layer.calls_per_step or layer.us_per_step:
            table.add_row(layer.name, _count(layer.calls_per_step), us_text(layer.us_per_step), layer.description)
    if dispatch.launch_latency:
        latency = dispatch.launch_latency[0]
        table.caption = (
            f"launch → GPU start over {latency.launches:,} launches: p50 {us_text(latency.p50_us)} µs, "
            f"p90 {us_text(latency.p90_us)} µs, max {us_text(latency.max_us)} µs"
        )
    return table


def api_table(dispatch: Dispatch) -> Table | None:
    rows = [a for a in dispatch.api_calls if a.layer in ("query", "sync", "other_api")][:MAX_API_ROWS]
    if not rows:
        return None
    table = Table(title="Runtime queries and syncs per step, by the op that issued them", title_justify="left")
    for column in ("API", "layer", "issued by", "calls/step", "µs/step"):
        table.add_column(column, justify="right" if column in ("calls/step", "µs/step") else "left")
    droppable(table, "layer")
    for a in rows:
        table.add_row(a.name, a.layer, a.issued_by, _count(a.calls_per_step), us_text(a.us_per_step))
    return table


def dispatch_panels(dispatch: Any, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    return page.AnalysisPanels(breakdowns=(dispatch_panel(results), ops_panel(results)))


def ops_panel(results: AnalysisResults) -> page.Panel:
    """The ops with the most CPU self time per step (`Dispatch.ops`, every row): the same figures as `analyze`'s
    table."""
    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding

    panel_id, title = "dispatch-ops", "CPU self time per step by op"
    dispatch = finding(results, "dispatch")
    if dispatch is None:
        return page.unavailable(panel_id, title, MISSING)
    ops = getattr(dispatch, "ops", None) or []
    if not ops:
        return page.unavailable(panel_id, title, "no CPU op in the analyzed steps")
    rows = tuple(
        (
            str(op.name),
            OP_LAYER_WORDS.get(op.layer, op.layer),
            _count(op.calls_per_step),
            us_text(op.self_us_per_step),
            f"{op.share_pct:.1f}",
        )
        for op in ops
    )
    note = (
        f"The {len(ops)} op names with the most self time: an op's time less its children's (other ops, runtime "
        "calls), per step; %: of the CPU time per step (all layers)."
    )
    return page.Panel(
        id=panel_id,
        title=title,
        table=page.Table(("op", "layer", "calls/step", "µs/step", "% of CPU"), rows),
        note=note,
    )


def dispatch_panel(results: AnalysisResults) -> page.Panel:
    """CPU time per step by dispatch layer (Python, aten ops, launches, syncs, ...)."""
    import plotly.graph_objects as go

    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding, format_value, generic_panel

    panel_id, title = "dispatch", "CPU time per step by dispatch layer"
    dispatch = finding(results, "dispatch")
    if dispatch is None:
        return page.unavailable(panel_id, title, MISSING)
    layers = [layer for layer in getattr(dispatch, "layers", None) or [] if float(layer.us_per_step) > 0]
    if not layers:
        return (
            generic_panel(dispatch, panel_id, title)
            if not hasattr(dispatch, "layers")
            else page.unavailable(panel_id, title, "no CPU time in the analyzed steps")
        )
    layers = layers[::-1]
    fig = go.Figure(
        go.Bar(
            y=[page.chart_text(str(layer.name)) for layer in layers],
            x=[float(layer.us_per_step) for layer in layers],
            orientation="h",
            marker_color="#fdae6b",
            customdata=[
                [float(getattr(layer, "calls_per_step", 0.0)), page.chart_text(str(getattr(layer, "description", "")))]
                for layer in layers
            ],
            hovertemplate="%{y}: %{x:,.1f} µs per step<br>%{customdata[0]:,.1f} calls per step<br>%{customdata[1]}"
            "<extra></extra>",
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=max(260, 60 + 28 * len(layers)),
        xaxis_title="CPU µs per step (self time)",
        yaxis={"automargin": True},
        margin={"t": 30, "l": 10},
    )
    total = getattr(dispatch, "dispatch_us_per_step", None)
    note = (
        f"Dispatch (every layer but python and sync): {format_value(total)} µs per step." if total is not None else ""
    )
    return page.Panel(id=panel_id, title=title, figure=fig, note=note)
