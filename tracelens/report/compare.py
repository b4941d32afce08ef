"""The comparison of several traces (variants): the per-step table and side-by-side charts.

Contract: `comparison_section(variants) -> Section` where `variants` is [(label, AnalysisReport)]; pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from tracelens.analyses import AnalysisReport
from tracelens.model.kernel_names import CATEGORIES
from tracelens.report.breakdowns import category_us_per_step
from tracelens.report.document import Panel, Section, Table
from tracelens.report.overview import STEP_COLUMNS, per_step_row
from tracelens.report.palette import category_color, variant_colors

Variant = tuple[str, AnalysisReport]


def comparison_section(variants: Sequence[Variant]) -> Section:
    panels = (per_step_table(variants), gpu_category_chart(variants), step_chart(variants))
    return Section(id="compare", title="Comparison", panels=panels)


def per_step_table(variants: Sequence[Variant]) -> Panel:
    columns = ("variant", "steps", *(label for _, label in STEP_COLUMNS))
    rows = tuple((label, str(r.summary.steps), *per_step_row(r.summary.per_step)) for label, r in variants)
    return Panel(id="compare-table", title="Per step (median) by variant", table=Table(columns, rows))


def gpu_category_chart(variants: Sequence[Variant]) -> Panel:
    """Stacked bars: GPU µs per step by category, one bar per variant."""
    labels = [label for label, _ in variants]
    per_variant = [category_us_per_step(r.summary) for _, r in variants]
    fig = go.Figure()
    for category in CATEGORIES:
        values = [p.get(category, 0.0) for p in per_variant]
        if any(values):
            fig.add_trace(
                go.Bar(
                    x=labels,
                    y=values,
                    name=category,
                    marker_color=category_color(category),
                    hovertemplate=f"%{{x}}<br>{category}: %{{y:,.1f}} µs per step<extra></extra>",
                )
            )
    fig.update_layout(
        template="plotly_white", barmode="stack", height=360, yaxis_title="GPU µs per step", margin={"t": 30}
    )
    return Panel(id="compare-gpu", title="GPU time per step by category", figure=fig)


def step_chart(variants: Sequence[Variant]) -> Panel:
    """Grouped bars per variant: median CPU step, GPU busy and kernel counts per step."""
    metrics = (("step_us", "step µs"), ("cpu_us", "CPU step µs"), ("gpu_busy_us", "GPU busy µs"))
    fig = go.Figure()
    for color, (label, report) in zip(variant_colors(len(variants)), variants, strict=True):
        figures = report.summary.per_step
        fig.add_trace(
            go.Bar(
                x=[name for _, name in metrics],
                y=[getattr(figures, key) for key, _ in metrics],
                name=label,
                marker_color=color,
                hovertemplate=f"{label}<br>%{{x}}: %{{y:,.1f}}<extra></extra>",
            )
        )
    fig.update_layout(template="plotly_white", barmode="group", height=360, yaxis_title="µs (median step)")
    return Panel(id="compare-steps", title="Median step by variant", figure=fig)
