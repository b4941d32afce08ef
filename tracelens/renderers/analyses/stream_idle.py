"""Idle time per GPU stream shown: its section of `tracelens analyze` (`stream_idle_parts`: a table, one row
per stream) and its panel of the report (`stream_idle_panels`: busy and idle by cause per stream, in
"Where the time goes"). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from tracelens.analyses.stream_idle import STREAMS_SHOWN, StreamIdle
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import droppable
from tracelens.units import pct_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


def stream_idle_parts(result: StreamIdle, results: AnalysisResults) -> Parts:
    if not result.streams:
        return [Text(f"Idle time per stream: — ({result.note})")]
    table = Table(
        title=f"Idle time per GPU stream, µs per step (kernel wait: gaps < {result.kernel_wait_threshold_us:g} µs)"
        + (f", {result.window}" if result.window else "")
    )
    for column in ("stream", "busy", "idle", "host wait", "kernel wait", "other", "busy %"):
        table.add_column(
            column if column in ("stream", "busy %") else f"{column} µs/step",
            justify="left" if column == "stream" else "right",
        )
    table.caption = (
        "over each stream's own activity: gaps between its consecutive kernels (HTA's idle breakdown), not the "
        "step's GPU window of the bound section, whose busy share and launch waits differ (docs/critical_path.md)"
    )
    droppable(table, "other µs/step", "kernel wait µs/step")
    for row in result.streams[:STREAMS_SHOWN]:
        table.add_row(
            f"GPU {row.device} stream {row.stream}",
            us_text(row.busy_us_per_step),
            us_text(row.idle_us_per_step),
            us_text(row.host_wait_us_per_step),
            us_text(row.kernel_wait_us_per_step),
            us_text(row.other_us_per_step),
            pct_text(row.busy_pct),
        )
    return [table]


def stream_idle_panels(result: StreamIdle | None, results: AnalysisResults) -> page.AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report import document as page

    panel_id, title = "stream-idle", "Idle time per GPU stream"
    if result is None or not result.streams:
        return page.AnalysisPanels(
            breakdowns=(page.unavailable(panel_id, title, result.note if result else "not run"),)
        )
    labels = [f"GPU {r.device} stream {r.stream}" for r in result.streams[:STREAMS_SHOWN]]
    fig = go.Figure()
    for key, name, color in (
        ("busy_us_per_step", "busy", "#2ca02c"),
        ("host_wait_us_per_step", "idle: host wait", "#d62728"),
        ("kernel_wait_us_per_step", "idle: kernel wait", "#ff7f0e"),
        ("other_us_per_step", "idle: other", "#9e9e9e"),
    ):
        values: list[Any] = [getattr(r, key) for r in result.streams[:STREAMS_SHOWN]]
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color))
    fig.update_layout(template="plotly_white", barmode="stack", height=360, yaxis_title="µs per step", margin={"t": 30})
    note = (
        "HTA's split: host wait = the launch came after the stream ran dry; kernel wait = gaps under "
        f"{result.kernel_wait_threshold_us:g} µs between queued work; other = queued work that waited on "
        "something else."
    )
    return page.AnalysisPanels(breakdowns=(page.Panel(id=panel_id, title=title, figure=fig, note=note),))
