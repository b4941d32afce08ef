"""The roofline shown: its section of `tracelens analyze` (`roofline_parts`: achieved against peak per modelled
kernel, and why the rest has no model) and its panel of the report (`roofline_panels`: achieved TFLOP/s
against arithmetic intensity under the device's roofs, in "Findings"). The contract:
`tracelens.renderers.analyses`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from tracelens.analyses.roofline import Roofline
from tracelens.escapes import escape_controls
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import display_name, droppable

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


MAX_ROOFLINE_ROWS = 15


def roofline_parts(roofline: Roofline, results: AnalysisResults) -> Parts:
    if results.summary.empty_reason:
        return [Text(f"Roofline: — ({results.summary.empty_reason})")]
    return [roofline_table(roofline)]


def roofline_table(roofline: Roofline) -> Table | Text:
    if not roofline.rows:
        return Text("Roofline: no kernel has a FLOP/byte model" + (unmodelled_text(roofline) or " (no kernels)"))
    shown = {"bf16", "fp16", "fp32", "fp8"} | {r.peak_dtype for r in roofline.rows[:MAX_ROOFLINE_ROWS] if r.peak_dtype}
    peaks = ", ".join(f"{k} {v:g}" for k, v in roofline.peaks_tflops.items() if k in shown)
    table = Table(
        title=f"Roofline on {roofline.device} ({roofline.modelled_kernel_time_pct:g} % of kernel time modelled)",
        title_justify="left",
    )
    for column in (
        "kernel",
        "op",
        "dtype",
        "calls total",
        "GFLOP/call",
        "MB/call",
        "TFLOP/s",
        "TB/s",
        "limit",
        "% peak",
    ):
        table.add_column(column, justify="left" if column in ("kernel", "op", "dtype", "limit") else "right")
    droppable(table, "dtype", "calls total", "op", "MB/call", "GFLOP/call", "TB/s", "TFLOP/s")
    for r in roofline.rows[:MAX_ROOFLINE_ROWS]:
        table.add_row(
            display_name(r.kernel),
            r.ops or r.op.removeprefix("aten::"),
            r.dtype,
            f"{r.calls:,}",
            f"{r.gflop_per_call:,.3f}",
            f"{r.mb_per_call:,.2f}",
            f"{r.achieved_tflops:,.1f}",
            f"{r.achieved_tbps:,.2f}",
            r.limit,
            f"{r.pct_of_peak:,.1f}" if r.pct_of_peak is not None else "—",
        )
    if roofline.peak_tbps is None and not roofline.peaks_tflops:
        table.caption = "unknown GPU: pass --peak-tflops / --peak-tbps (or TRACELENS_PEAKS) for % of peak"
    else:
        table.caption = f"peaks: TFLOP/s {peaks or 'n/a'}; {roofline.peak_tbps or 'n/a'} TB/s — {roofline.peaks_source}"
    misfits = [r for r in roofline.rows[:MAX_ROOFLINE_ROWS] if r.model_note]
    if misfits:
        table.caption += "".join(f"\n— {r.short_name}: {r.model_note}" for r in misfits)
    table.caption += unmodelled_text(roofline)
    return table


def unmodelled_text(roofline: Roofline) -> str:
    """Why the kernel time outside the table has no model (empty when everything is modelled)."""
    parts = []
    for u in roofline.unmodelled:
        names = (escape_controls(op.removeprefix("aten::")) for op in u.ops)  # trace data: no terminal codes
        ops = f" ({', '.join(names)})" if u.ops else ""
        parts.append(f"{u.pct_of_kernel_time:g} %: {u.reason}{ops}")
    return "\nnot modelled: " + "; ".join(parts) if parts else ""


def roofline_panels(roofline: Any, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    return page.AnalysisPanels(findings=(roofline_panel(results),))


def roofline_panel(results: AnalysisResults) -> page.Panel:
    """Achieved TFLOP/s against arithmetic intensity per kernel, under the device's roofs."""
    import plotly.graph_objects as go

    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding, format_value

    panel_id, title = "roofline", "Roofline: achieved vs peak"
    roofline = finding(results, "roofline")
    if roofline is None:
        return page.unavailable(panel_id, title, MISSING)
    rows = [
        r
        for r in getattr(roofline, "rows", None) or []
        if _positive(r.intensity_flop_per_byte) and _positive(r.achieved_tflops)
    ]
    if not rows:
        return page.unavailable(panel_id, title, "no kernel has a FLOP/byte model (shapes not recorded or unknown ops)")
    fig = go.Figure()
    _add_roofs(fig, roofline, rows)
    for limit, color in (("compute", "#1f77b4"), ("memory", "#d62728")):
        chosen = [r for r in rows if r.limit == limit]
        if not chosen:
            continue
        total_us = [float(r.calls) * float(r.mean_us) for r in chosen]
        biggest = max(total_us) or 1.0
        fig.add_trace(
            go.Scatter(
                x=[float(r.intensity_flop_per_byte) for r in chosen],
                y=[float(r.achieved_tflops) for r in chosen],
                mode="markers",
                name=f"{limit}-limited kernels",
                marker={"color": color, "size": [8 + 22 * math.sqrt(t / biggest) for t in total_us], "opacity": 0.75},
                text=[_roofline_hover(r) for r in chosen],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        template="plotly_white",
        height=420,
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        yaxis={"type": "log", "title": {"text": "achieved TFLOP/s"}},
        margin={"t": 30},
        legend={"orientation": "h", "y": -0.2},
    )
    share = getattr(roofline, "modelled_kernel_time_pct", None)
    note = f"{getattr(roofline, 'device', '')}: peaks from {getattr(roofline, 'peaks_source', '?')}."
    if share is not None:
        note += f" Kernels with a model cover {format_value(share)} % of kernel time. Marker area ∝ total time."
    for part in getattr(roofline, "unmodelled", None) or []:  # why the rest has no model
        ops = f" ({', '.join(part.ops)})" if part.ops else ""
        note += f" Not modelled: {format_value(part.pct_of_kernel_time)} %, {part.reason}{ops}."
    return page.Panel(id=panel_id, title=title, figure=fig, note=note)


def _add_roofs(fig: go.Figure, roofline: Any, rows: list[Any]) -> None:
    """One roof per dtype peak: min(peak, intensity × bandwidth), over the plotted intensity range."""
    import plotly.graph_objects as go

    from tracelens.report.generic import format_value

    bandwidth = getattr(roofline, "peak_tbps", None)
    peaks = dict(getattr(roofline, "peaks_tflops", None) or {})
    used = {str(getattr(r, "peak_dtype", None) or getattr(r, "dtype", "")) for r in rows}  # tf32 rows: the TF32 roof
    if used & set(peaks):  # only the roofs of the dtypes on the chart
        peaks = {dtype: peak for dtype, peak in peaks.items() if dtype in used}
    if not peaks:
        return
    low = min(float(r.intensity_flop_per_byte) for r in rows) / 4
    high = max(float(r.intensity_flop_per_byte) for r in rows) * 4
    for dtype, peak in sorted(peaks.items()):
        ridge = peak / bandwidth if bandwidth else None
        xs = [low, ridge, high] if ridge is not None and low < ridge < high else [low, high]
        ys = [min(peak, x * bandwidth) if bandwidth else peak for x in xs]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=f"roof {dtype} ({format_value(peak)} TFLOP/s)",
                line={"dash": "dot", "width": 1},
                hoverinfo="name",
            )
        )


def _roofline_hover(row: Any) -> str:
    from tracelens.report import document as page
    from tracelens.report.generic import format_value

    parts = [
        f"<b>{page.chart_text(str(row.short_name))}</b>",
        f"op: {page.chart_text(str(row.op))}" if row.op else "",
        f"model: {page.chart_text(str(row.model))}",
        f"{format_value(float(row.achieved_tflops))} TFLOP/s, {format_value(float(row.achieved_tbps))} TB/s",
        f"{format_value(row.pct_of_peak)} % of the {row.limit} roof" if row.pct_of_peak is not None else "",
        f"{row.calls:,} calls, mean {format_value(float(row.mean_us))} µs",
    ]
    return "<br>".join(p for p in parts if p)


def _positive(value: Any) -> bool:
    return value is not None and isinstance(value, int | float) and math.isfinite(value) and value > 0
