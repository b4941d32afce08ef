"""Breakdown charts from the summary: GPU time by kernel category and by op, and per-step times.

Contract: each function takes analysis results and returns a `Panel`; pure, no I/O.
"""

from __future__ import annotations

import plotly.graph_objects as go

from tracelens.analyses.summary import Summary, replayed_ops_note
from tracelens.model.kernel_names import CATEGORIES
from tracelens.model.steps import step_label
from tracelens.report.document import Panel, Table, chart_text, unavailable
from tracelens.report.palette import category_color

TOP_OPS = 15
TOP_KERNELS = 20


def gpu_time_by_category(summary: Summary, panel_id: str = "gpu-by-category") -> Panel:
    """GPU time per step (µs) by kernel category, in the fixed category order."""
    title = "GPU time per step by kernel category"
    per_category = category_us_per_step(summary)
    if not per_category:
        return unavailable(panel_id, title, "the trace has no GPU activity in the analyzed steps")
    names = list(per_category)
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[per_category[n] for n in names],
            marker_color=[category_color(n) for n in names],
            hovertemplate="%{x}: %{y:,.1f} µs per step<extra></extra>",
        )
    )
    fig.update_layout(template="plotly_white", height=340, yaxis_title="µs per step", margin={"t": 30, "b": 40})
    return Panel(id=panel_id, title=title, figure=fig)


def category_us_per_step(summary: Summary) -> dict[str, float]:
    """µs per step of each category that occurs, in CATEGORIES order."""
    steps = max(summary.steps, 1)
    totals = dict.fromkeys(CATEGORIES, 0.0)
    for row in summary.kernels:
        totals[row.category if row.category in totals else "other"] += row.total_us
    return {name: round(total / steps, 3) for name, total in totals.items() if total > 0}


def gpu_time_by_op(summary: Summary, panel_id: str = "gpu-by-op") -> Panel:
    """The ops whose kernels take most GPU time per step (top 15), longest on top."""
    title = f"GPU kernel time per step by launching op (top {TOP_OPS})"
    ops = [row for row in summary.ops if row.gpu_us_per_step > 0][:TOP_OPS]
    if not ops:
        return unavailable(panel_id, title, "no kernel could be attributed to an op")
    ops = ops[::-1]
    fig = go.Figure(
        go.Bar(
            y=[chart_text(_cut(row.name)) for row in ops],
            x=[row.gpu_us_per_step for row in ops],
            orientation="h",
            marker_color="#4c78a8",
            customdata=[[row.kernels_per_step, row.calls_per_step] for row in ops],
            hovertemplate="%{y}<br>%{x:,.1f} µs per step<br>%{customdata[0]} kernels, %{customdata[1]} calls per "
            "step<extra></extra>",
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=max(260, 60 + 24 * len(ops)),
        xaxis_title="µs per step",
        margin={"t": 30, "b": 40, "l": 10},
        yaxis={"automargin": True},
    )
    return Panel(id=panel_id, title=title, figure=fig, note=replayed_ops_note(ops[::-1]))


def step_times(summary: Summary, panel_id: str = "step-times") -> Panel:
    """Per analyzed step: the CPU-side step length, the GPU busy time and the kernel time (µs)."""
    title = "Step times"
    rows = summary.step_table
    if not rows:
        return unavailable(panel_id, title, "the trace has no complete step")
    labels = [step_label(row.number) for row in rows]
    fig = go.Figure()
    for key, name, color in (
        ("step_us", "step (period)", "#9ecae1"),
        ("cpu_us", "CPU step", "#fdae6b"),
        ("gpu_busy_us", "GPU busy", "#d62728"),
    ):
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[getattr(row, key) for row in rows],
                name=name,
                marker_color=color,
                hovertemplate=f"step %{{x}}: %{{y:,.1f}} µs {name}<extra></extra>",
            )
        )
    fig.update_layout(
        template="plotly_white",
        height=320,
        barmode="group",
        xaxis={"title": {"text": "step"}, "type": "category"},
        yaxis_title="µs",
        margin={"t": 30, "b": 40},
    )
    return Panel(id=panel_id, title=title, figure=fig)


def kernel_table(summary: Summary, panel_id: str = "kernels") -> Panel:
    """The kernels with the most GPU time (top 20)."""
    title = f"Kernels (top {TOP_KERNELS} by GPU time)"
    if not summary.kernels:
        return unavailable(panel_id, title, "the trace has no GPU activity in the analyzed steps")
    rows = tuple(
        (
            row.short_name,
            row.category,
            f"{row.calls_per_step:g}",
            f"{row.total_us / max(summary.steps, 1):,.1f}",
            f"{row.mean_us:,.2f}",
            _cut(row.op),
        )
        for row in summary.kernels[:TOP_KERNELS]
    )
    columns = ("kernel", "category", "calls/step", "µs/step", "mean µs", "launched by")
    return Panel(id=panel_id, title=title, table=Table(columns, rows))


def _cut(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
