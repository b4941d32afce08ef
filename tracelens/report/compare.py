"""The comparison of several traces (variants): the study's table, the fused kernels, and side-by-side charts.

Contract: `comparison_section([(name, trace, results), ...]) -> Section`; pure. The figures come from
`analyses.compare.compare_variants` (the same table `tracelens compare` prints) and the summaries.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from tracelens.analyses import AnalysisResults
from tracelens.analyses.compare import Comparison, compare_variants
from tracelens.analyses.shapes_sweep import FIRST_GEMM_VARIES, SWEEP
from tracelens.model.kernel_names import CATEGORIES
from tracelens.model.trace import WHOLE_TRACE_SOURCE, Trace
from tracelens.report.breakdowns import category_us_per_step
from tracelens.report.cells import (
    FIRST_GEMM_VARIES_COLUMNS,
    FIRST_GEMM_VARIES_TITLE,
    FIRST_GEMM_VARIES_WHY,
    FUSION_COLUMNS,
    PREDICTION_COLUMNS,
    PREDICTIONS_TITLE,
    WHOLE_TRACE_NOTE,
    balance_line,
    fusion_cells,
    prediction_cells,
    queued_caption,
    skipped_line,
    step_us_cell,
    variant_label,
    weak_caption,
)
from tracelens.report.document import Panel, Section, Table, chart_text
from tracelens.report.generic import format_value
from tracelens.report.palette import category_color, variant_colors
from tracelens.units import us_text

Item = tuple[str, Trace, AnalysisResults]
STUDY_COLUMNS = (
    "variant",
    "steps",
    "kernels",
    "kernel µs",
    "GPU busy µs",
    "CPU µs",
    "step µs",
    "launches",
    "CPU ops",
    "metadata ops",
    "dispatch µs",
    "exposed dispatch µs",
    "bound",
)


def comparison_section(items: Sequence[Item]) -> Section:
    comparison = compare_variants(list(items))
    panels = [study_table(comparison)]
    if comparison.fusions:
        panels.append(fusion_table(comparison))
    if any(v.shape_pattern == SWEEP for v in comparison.variants):
        panels.append(shapes_table(comparison))
    if any(v.shape_pattern == FIRST_GEMM_VARIES for v in comparison.variants):
        panels.append(first_gemm_varies_table(comparison))
    if comparison.break_even:
        panels.append(break_even_table(comparison))
    if comparison.predictions_checked or comparison.predictions_skipped:
        panels.append(predictions_table(comparison))
    panels += [gpu_category_chart(items), kernel_count_chart(comparison), step_chart(items)]
    return Section(id="compare", title="Comparison", panels=tuple(panels))


def study_table(comparison: Comparison) -> Panel:
    """Per variant, per step (median over complete steps): the table `tracelens compare` prints."""
    rows = tuple(
        (
            variant_label(v),
            str(v.steps),
            format_value(v.per_step.kernels),
            us_text(v.per_step.gpu_kernel_us),
            us_text(v.per_step.gpu_busy_us),
            us_text(v.per_step.cpu_us),
            step_us_cell(v),
            format_value(v.per_step.launches),
            format_value(v.per_step.cpu_ops),
            format_value(v.metadata_ops_per_step),
            us_text(v.dispatch_us_per_step),
            us_text(v.exposed_dispatch_us_per_step),
            v.bound or "—",
        )
        for v in comparison.variants
    )
    note = WHOLE_TRACE_NOTE if any(v.step_source == WHOLE_TRACE_SOURCE for v in comparison.variants) else ""
    title = "Variants (per step, median)"
    return Panel(id="compare-table", title=title, table=Table(STUDY_COLUMNS, rows), note=note)


def fusion_table(comparison: Comparison) -> Panel:
    """Fused kernels of each variant and the eager ops (of the baseline) they replace, per step."""
    rows = tuple(fusion_cells(f) for f in comparison.fusions)
    columns = FUSION_COLUMNS
    note = "; ".join(balance_line(b) for b in comparison.fusion_balance)
    return Panel(
        id="compare-fusions",
        title="Fused kernels and the eager ops they replace",
        table=Table(columns, rows),
        note=note,
    )


def predictions_table(comparison: Comparison) -> Panel:
    """The first trace's predictions against each later trace that took the action, and the traces that check
    none and why: the table `tracelens compare` prints (docs/actions.md#in-compare)."""
    checks = comparison.predictions_checked
    parts = (weak_caption(checks), queued_caption(checks), skipped_line(comparison.predictions_skipped))
    note = "; ".join(n for n in parts if n)
    if not checks:
        return Panel(id="compare-predictions", title=PREDICTIONS_TITLE, note=note)
    rows = tuple(prediction_cells(c) for c in checks)
    return Panel(id="compare-predictions", title=PREDICTIONS_TITLE, table=Table(PREDICTION_COLUMNS, rows), note=note)


SHAPE_COLUMNS = (
    *("variant", "shape", "steps", "step #"),
    *("kernel µs", "repeat step µs", "first step ms", "compile ms", "compiles"),
)
BREAK_EVEN_COLUMNS = ("variant", "vs", "shape", "compile ms", "saving µs per step", "steps to break even")


def shapes_table(comparison: Comparison) -> Panel:
    """Shape sweeps: per variant and input shape, its steps (how many, which), kernel µs, first-step cost and
    compiles (docs/shapes.md)."""
    rows = tuple(
        (
            v.name,
            r.shape,
            str(len(r.steps)),
            ", ".join(map(str, r.steps)),
            us_text(r.kernel_us),
            us_text(r.step_us),
            f"{r.first_step_us / 1000:,.1f}",
            f"{r.compile_ms:,.1f}",
            ", ".join(r.compile_ids) or "—",
        )
        for v in comparison.variants
        if v.shape_pattern == SWEEP
        for r in v.shapes
    )
    title = "Shape sweep: steps by first GEMM's input shape (kernel µs without compilation's kernels)"
    return Panel(id="compare-shapes", title=title, table=Table(SHAPE_COLUMNS, rows))


def first_gemm_varies_table(comparison: Comparison) -> Panel:
    """Variants whose steps ran different GEMMs first: their shapes and steps, no per-shape figures."""
    rows = tuple(
        (v.name, r.shape, str(len(r.steps)), ", ".join(map(str, r.steps)))
        for v in comparison.variants
        if v.shape_pattern == FIRST_GEMM_VARIES
        for r in v.shapes
    )
    note = f"{FIRST_GEMM_VARIES_WHY[0].upper()}{FIRST_GEMM_VARIES_WHY[1:]} (docs/shapes.md)"
    table = Table(FIRST_GEMM_VARIES_COLUMNS, rows)
    return Panel(id="compare-first-gemm", title=FIRST_GEMM_VARIES_TITLE, table=table, note=note)


def break_even_table(comparison: Comparison) -> Panel:
    """Steps of each shape after which a compiled variant's faster kernels pay back its compile time."""
    rows = tuple(
        (
            b.variant,
            b.baseline,
            b.shape,
            f"{b.compile_ms:,.1f}",
            f"{b.saving_us_per_step:,.1f}",
            "never" if b.steps is None else f"{b.steps:,}",
        )
        for b in comparison.break_even
    )
    title = "Break-even of compiling: compile ms / GPU kernel µs saved per step (docs/shapes.md)"
    return Panel(id="compare-break-even", title=title, table=Table(BREAK_EVEN_COLUMNS, rows))


def gpu_category_chart(items: Sequence[Item]) -> Panel:
    """Stacked bars: GPU µs per step by kernel category, one bar per variant."""
    per_variant = [category_us_per_step(results.summary) for _, _, results in items]
    fig = _stacked_by_category([name for name, _, _ in items], per_variant, "GPU µs per step", ":,.1f} µs per step")
    return Panel(id="compare-gpu", title="GPU time per step by kernel category", figure=fig)


def kernel_count_chart(comparison: Comparison) -> Panel:
    """Stacked bars: kernels per step by category, one bar per variant."""
    per_variant = [v.kernels_by_category for v in comparison.variants]
    fig = _stacked_by_category(
        [v.name for v in comparison.variants], per_variant, "kernels per step", ":g} kernels per step"
    )
    return Panel(id="compare-kernels", title="Kernels per step by category", figure=fig)


def _stacked_by_category(
    labels: list[str], per_variant: Sequence[dict[str, float]], y_title: str, hover_format: str
) -> go.Figure:
    """One stacked bar per variant, one colour per kernel category present in any variant."""
    fig = go.Figure()
    for category in CATEGORIES:
        values = [p.get(category, 0.0) for p in per_variant]
        if any(values):
            fig.add_trace(
                go.Bar(
                    x=[chart_text(label) for label in labels],
                    y=values,
                    name=category,
                    marker_color=category_color(category),
                    hovertemplate=f"%{{x}}<br>{category}: %{{y{hover_format}<extra></extra>",
                )
            )
    fig.update_layout(template="plotly_white", barmode="stack", height=360, yaxis_title=y_title, margin={"t": 30})
    return fig


def step_chart(items: Sequence[Item]) -> Panel:
    """Grouped bars per variant: median step, CPU step and GPU busy time (µs)."""
    metrics = (("step_us", "step µs"), ("cpu_us", "CPU step µs"), ("gpu_busy_us", "GPU busy µs"))
    fig = go.Figure()
    for color, (label, _, results) in zip(variant_colors(len(items)), items, strict=True):
        figures = results.summary.per_step
        fig.add_trace(
            go.Bar(
                x=[name for _, name in metrics],
                y=[getattr(figures, key) for key, _ in metrics],
                name=chart_text(label),
                marker_color=color,
                hovertemplate=f"{chart_text(label)}<br>%{{x}}: %{{y:,.1f}}<extra></extra>",
            )
        )
    fig.update_layout(template="plotly_white", barmode="group", height=360, yaxis_title="µs (median step)")
    return Panel(id="compare-steps", title="Median step by variant", figure=fig)
