"""The report panels of every analysis (the registry's `panels`): what to do next, what bounds a step, GPU idle by
cause, CPU dispatch by layer, fusion opportunities, the roofline, torch.compile facts, the critical path with its
what-ifs, communication/computation overlap, idle time per stream, and the memory timeline with the ops that
allocate most.

Contract: the registry names each analysis' `x_panels(result | None, report) -> AnalysisPanels`, which places its
panels on the page (overview, breakdowns or findings); pure. Given None (the analysis did not run) or a result
with nothing to show, a panel says so. The panels of the first analyses (`x_panel(report) -> Panel`) read their
optional fields of the report (`dispatch`, `bound`, `fusion`, `roofline`, `compiled`) by name, so that the report
works with any version of them.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from tracelens.analyses import AnalysisResults
from tracelens.analyses.actions import Actions, range_notes
from tracelens.analyses.comm_overlap import CommOverlap
from tracelens.analyses.critical_path import CriticalPath, part_label
from tracelens.analyses.memory import Memory
from tracelens.analyses.stream_idle import STREAMS_SHOWN, StreamIdle
from tracelens.report.document import AnalysisPanels, Panel, Table, chart_text, unavailable
from tracelens.report.generic import format_value, result_table
from tracelens.units import GIB, bytes_text, pct_text, us_text, whole_text

MISSING = "this version of tracelens does not compute it"
IDLE_CAUSES = (
    ("gpu_busy_us", "GPU busy", "#2ca02c"),
    ("launch_wait_us", "idle: waiting for launches (exposed CPU dispatch)", "#d62728"),
    ("sync_wait_us", "idle: waiting for a CPU sync", "#ff7f0e"),
    ("queued_idle_us", "idle: work already queued (cross-stream waits, device scheduling)", "#bcbd22"),
    ("other_idle_us", "idle: other (no launch recorded, nothing queued after)", "#9e9e9e"),
    ("compile_idle_us", "idle: during torch.compile compilation", "#8c564b"),
)
MAX_FUSION_ROWS = 20


def dispatch_panels(dispatch: Any, report: AnalysisResults) -> AnalysisPanels:
    return AnalysisPanels(breakdowns=(dispatch_panel(report),))


def bound_panels(bound: Any, report: AnalysisResults) -> AnalysisPanels:
    return AnalysisPanels(breakdowns=(idle_panel(report),), findings=(bound_panel(report),))


def fusion_panels(fusion: Any, report: AnalysisResults) -> AnalysisPanels:
    return AnalysisPanels(findings=(fusion_panel(report),))


def roofline_panels(roofline: Any, report: AnalysisResults) -> AnalysisPanels:
    return AnalysisPanels(findings=(roofline_panel(report),))


def compiled_panels(compiled: Any, report: AnalysisResults) -> AnalysisPanels:
    return AnalysisPanels(findings=(compiled_panel(report),))


def finding(report: AnalysisResults, field: str) -> Any:
    """The optional analysis result `field` of `report`, or None."""
    return getattr(report, field, None)


def bound_panel(report: AnalysisResults) -> Panel:
    """The verdict (CPU-, GPU-bound or mixed) and the figures behind it, per step."""
    panel_id, title = "bound", "What bounds a step"
    bound = finding(report, "bound")
    if bound is None:
        return unavailable(panel_id, title, MISSING)
    fields = (
        ("verdict", "bound"),
        ("GPU busy µs/step", "gpu_busy_us_per_step"),
        ("GPU idle waiting for launches µs/step", "launch_wait_us_per_step"),
        ("GPU idle waiting for syncs µs/step", "sync_wait_us_per_step"),
        ("GPU idle with work already queued µs/step", "queued_idle_us_per_step"),
        ("GPU idle, other µs/step", "other_idle_us_per_step"),
        ("GPU window µs/step", "gpu_window_us_per_step"),
        ("CPU dispatch µs/step", "dispatch_us_per_step"),
        ("exposed dispatch µs/step", "exposed_dispatch_us_per_step"),
        ("exposed dispatch, % of dispatch", "exposed_dispatch_pct"),
        ("exposed dispatch, % of GPU time", "exposed_dispatch_pct_of_gpu"),
        ("idle gaps per step", "gaps_per_step"),
    )
    rows = tuple((label, format_value(getattr(bound, name, None))) for label, name in fields if hasattr(bound, name))
    if not rows:
        return _generic(bound, panel_id, title)
    verdict = str(getattr(bound, "bound", ""))
    note = {
        "cpu": "CPU-bound: the GPU waits for kernel launches longer than it computes.",
        "gpu": "GPU-bound: the GPU is busy most of each step.",
        "mixed": "Mixed: neither launch waits nor GPU work clearly dominate.",
    }.get(verdict, "")
    return Panel(id=panel_id, title=title, table=Table(("", ""), rows), note=note)


def idle_panel(report: AnalysisResults) -> Panel:
    """Stacked bars per step: GPU busy, then idle time split by cause."""
    panel_id, title = "gpu-idle", "GPU busy and idle by cause, per step"
    bound = finding(report, "bound")
    steps = list(getattr(bound, "steps", None) or []) if bound is not None else []
    if bound is None:
        return unavailable(panel_id, title, MISSING)
    if not steps:
        return unavailable(panel_id, title, "no analyzed step has GPU activity")
    labels = [str(getattr(s, "number", i)) for i, s in enumerate(steps)]
    fig = go.Figure()
    for key, name, color in IDLE_CAUSES:
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[float(getattr(s, key, 0.0)) for s in steps],
                name=name,
                marker_color=color,
                hovertemplate=f"step %{{x}}<br>{name}: %{{y:,.1f}} µs<extra></extra>",
            )
        )
    fig.update_layout(
        template="plotly_white",
        barmode="stack",
        height=360,
        xaxis={"title": {"text": "step"}, "type": "category"},
        yaxis_title="µs",
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 30},
    )
    return Panel(id=panel_id, title=title, figure=fig)


def dispatch_panel(report: AnalysisResults) -> Panel:
    """CPU time per step by dispatch layer (Python, aten ops, launches, syncs, ...)."""
    panel_id, title = "dispatch", "CPU time per step by dispatch layer"
    dispatch = finding(report, "dispatch")
    if dispatch is None:
        return unavailable(panel_id, title, MISSING)
    layers = [layer for layer in getattr(dispatch, "layers", None) or [] if float(layer.us_per_step) > 0]
    if not layers:
        return (
            _generic(dispatch, panel_id, title)
            if not hasattr(dispatch, "layers")
            else unavailable(panel_id, title, "no CPU time in the analyzed steps")
        )
    layers = layers[::-1]
    fig = go.Figure(
        go.Bar(
            y=[chart_text(str(layer.name)) for layer in layers],
            x=[float(layer.us_per_step) for layer in layers],
            orientation="h",
            marker_color="#fdae6b",
            customdata=[
                [float(getattr(layer, "calls_per_step", 0.0)), chart_text(str(getattr(layer, "description", "")))]
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
    note = f"Dispatch (everything but Python): {format_value(total)} µs per step." if total is not None else ""
    return Panel(id=panel_id, title=title, figure=fig, note=note)


def fusion_panel(report: AnalysisResults) -> Panel:
    """Runs of kernels that could be one kernel, with the estimated saving per step."""
    panel_id, title = "fusion", "Fusion opportunities"
    fusion = finding(report, "fusion")
    if fusion is None:
        return unavailable(panel_id, title, MISSING)
    opportunities = list(getattr(fusion, "opportunities", None) or [])
    if not opportunities:
        return Panel(id=panel_id, title=title, note="No fusion opportunity found in the analyzed steps.")
    rows = tuple(
        (
            ("GEMM epilogue: " if getattr(o, "kind", "chain") == "gemm_epilogue" else "")
            + " → ".join(str(k) for k in o.kernels),
            " → ".join(dict.fromkeys(str(op) for op in o.ops)),
            format_value(float(o.calls_per_step)),
            format_value(float(o.kernel_us_per_step)),
            format_value(float(o.est_saving_us)),
        )
        for o in opportunities[:MAX_FUSION_ROWS]
    )
    columns = ("kernels (stream order)", "ops", "runs/step", "kernel µs/step", "est. saving µs/step")
    saving = getattr(fusion, "est_saving_us_per_step", None)
    note = f"{len(opportunities)} opportunities; estimated saving {format_value(saving)} µs per step."
    epilogue = getattr(fusion, "gemm_epilogue_saving_us_per_step", 0.0)
    if epilogue:
        note += f" GEMM epilogues (overlapping those chains): {format_value(epilogue)} µs per step."
    if getattr(fusion, "shapes_recorded", True) is False:
        note += " Shapes were not recorded (record_shapes=False): savings are rough."
    return Panel(id=panel_id, title=title, table=Table(columns, rows), note=note)


def roofline_panel(report: AnalysisResults) -> Panel:
    """Achieved TFLOP/s against arithmetic intensity per kernel, under the device's roofs."""
    panel_id, title = "roofline", "Roofline: achieved vs peak"
    roofline = finding(report, "roofline")
    if roofline is None:
        return unavailable(panel_id, title, MISSING)
    rows = [
        r
        for r in getattr(roofline, "rows", None) or []
        if _positive(r.intensity_flop_per_byte) and _positive(r.achieved_tflops)
    ]
    if not rows:
        return unavailable(panel_id, title, "no kernel has a FLOP/byte model (shapes not recorded or unknown ops)")
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
    return Panel(id=panel_id, title=title, figure=fig, note=note)


def _add_roofs(fig: go.Figure, roofline: Any, rows: list[Any]) -> None:
    """One roof per dtype peak: min(peak, intensity × bandwidth), over the plotted intensity range."""
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
    parts = [
        f"<b>{chart_text(str(row.short_name))}</b>",
        f"op: {chart_text(str(row.op))}" if row.op else "",
        f"model: {chart_text(str(row.model))}",
        f"{format_value(float(row.achieved_tflops))} TFLOP/s, {format_value(float(row.achieved_tbps))} TB/s",
        f"{format_value(row.pct_of_peak)} % of the {row.limit} roof" if row.pct_of_peak is not None else "",
        f"{row.calls:,} calls, mean {format_value(float(row.mean_us))} µs",
    ]
    return "<br>".join(p for p in parts if p)


def compiled_panel(report: AnalysisResults) -> Panel:
    """torch.compile regions, graph breaks and recompiles."""
    panel_id, title = "compiled", "torch.compile"
    compiled = finding(report, "compiled")
    if compiled is None:
        return unavailable(panel_id, title, MISSING)
    regions = list(getattr(compiled, "regions", None) or [])
    note = str(getattr(compiled, "note", "") or "")
    if not regions:
        return Panel(id=panel_id, title=title, note=note or "No torch.compile region in the trace.")
    rows = tuple(
        (
            str(r.name),
            format_value(float(r.calls_per_step)),
            format_value(float(r.us_per_step)),
            format_value(float(r.overhead_us_per_step)),
        )
        for r in regions
    )
    columns = ("region", "calls/step", "µs/step", "wrapper overhead µs/step")
    breaks = getattr(compiled, "graph_breaks", None)
    head = f"Graph breaks: {format_value(breaks)}. " if breaks is not None else ""
    return Panel(id=panel_id, title=title, table=Table(columns, rows), note=head + note)


def _positive(value: Any) -> bool:
    return value is not None and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _generic(result: Any, panel_id: str, title: str) -> Panel:
    table = result_table(result)
    if table is None:
        return unavailable(panel_id, title, "the analysis found nothing to show")
    return Panel(id=panel_id, title=title, table=table)


# ---------------------------------------------------------------- what to do next, the critical path, streams, memory


def critical_path_panels(result: CriticalPath | None, report: AnalysisResults) -> AnalysisPanels:
    panel_id, title = "critical-path", "Critical path and what-if"
    if result is None or result.step is None:
        why = "the analysis did not run" if result is None else result.note
        return AnalysisPanels(findings=(unavailable(panel_id, title, why),))
    fig = go.Figure(
        go.Bar(
            x=[p.us for p in result.composition],
            y=[part_label(p.part) for p in result.composition],
            orientation="h",
            hovertemplate="%{y}: %{x:,.1f} µs<extra></extra>",
            marker_color="#1f77b4",
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=80 + 28 * len(result.composition),
        xaxis_title="µs on the critical path",
        yaxis={"autorange": "reversed"},
        margin={"t": 20, "l": 10},
    )
    odd = "".join(
        f" Step {s.number} is unrepresentative: {s.unrepresentative}." for s in result.steps if s.unrepresentative
    )
    note = (
        f"{result.steps_analyzed} steps, {us_text(result.step_us)} µs per step: {result.note}. "
        f"{result.limit_note}.{odd} "
        "The path follows what each launch, kernel and sync waited for; what-ifs re-time each step's dependency graph."
    )
    rows = tuple(
        (
            w.change,
            us_text(w.predicted_step_us),
            us_text(w.saved_us),
            f"{us_text(w.saved_us_min)}–{us_text(w.saved_us_max)}",
        )
        for w in result.what_if
    )
    table = Table(columns=("what if (mean per step)", "step µs", "saves µs", "min–max µs"), rows=rows)
    return AnalysisPanels(
        findings=(
            Panel(id=panel_id, title=title, figure=fig, note=note),
            Panel(id=f"{panel_id}-what-if", title="What if", table=table),
        )
    )


def comm_overlap_panels(result: CommOverlap | None, report: AnalysisResults) -> AnalysisPanels:
    panel_id, title = "comm-overlap", "Communication/computation overlap"
    if result is None or result.comm_kernels == 0:
        return AnalysisPanels(
            findings=(unavailable(panel_id, title, "no communication kernels" if result else "not run"),)
        )
    rows = tuple(
        (str(s.number), us_text(s.comm_us), us_text(s.overlapped_us), us_text(s.exposed_us), pct_text(s.overlap_pct))
        for s in result.steps
    )
    table = Table(columns=("step", "collectives µs", "overlapped µs", "exposed µs", "overlap"), rows=rows)
    note = f"{pct_text(result.overlap_pct)} of collective time overlapped by compute kernels ({result.note})."
    return AnalysisPanels(findings=(Panel(id=panel_id, title=title, table=table, note=note),))


def stream_idle_panels(result: StreamIdle | None, report: AnalysisResults) -> AnalysisPanels:
    panel_id, title = "stream-idle", "Idle time per GPU stream"
    if result is None or not result.streams:
        return AnalysisPanels(breakdowns=(unavailable(panel_id, title, result.note if result else "not run"),))
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
    return AnalysisPanels(breakdowns=(Panel(id=panel_id, title=title, figure=fig, note=note),))


LIMIT_SENTENCE = {
    "cpu": "CPU work limits the step (launches and dispatch): faster CPU work shortens it, faster kernels do not",
    "gpu": "GPU work limits the step: faster kernels shorten it, faster CPU work does not",
    "mixed": "both CPU and GPU work limit the step: neither alone shortens it much",
    "unknown": "neither faster CPU nor faster GPU work shortens the step (it waits on something else)",
}


def actions_panels(result: Actions | None, report: AnalysisResults) -> AnalysisPanels:
    panel_id, title = "actions", "What to do next"
    if result is None or result.summary.step_us is None:
        return AnalysisPanels(overview=(unavailable(panel_id, title, "not run" if result is None else result.note),))
    s = result.summary
    step_us = s.step_us or 0.0  # not None: checked above
    free = report.summary.profiler_free
    without = ""
    if s.profiler_free_step_us is not None and free is not None:
        words = free.source_words()
        without = f"; without the profiler {us_text(s.profiler_free_step_us)} µs ({words}, docs/profiler_overhead.md)"
    note = (
        f"Step {us_text(step_us)} µs profiled (mean span of {s.steps} steps){without}. "
        f"Limit: {LIMIT_SENTENCE.get(s.limit, s.limit)}. {result.note[:1].upper()}{result.note[1:]}."
    )
    rows = tuple(
        (
            a.action,
            ", ".join(a.targets),
            us_text(a.predicted_step_us),
            f"{us_text(a.low)}–{us_text(a.high)}" + "".join(f"; {n}" for n in range_notes(a, step_us)),
            us_text(a.saved_us),
            a.basis,
        )
        for a in result.actions
    )
    table = Table(columns=("action", "targets", "step µs", "range µs", "saves µs", "basis"), rows=rows)
    return AnalysisPanels(overview=(Panel(id=panel_id, title=title, table=table, note=note),))


def memory_panels(result: Memory | None, report: AnalysisResults) -> AnalysisPanels:
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
        f"per device. Figures: {result.note}; peak allocated {bytes_text(result.peak_allocated_bytes)}, peak "
        f"reserved {bytes_text(result.peak_reserved_bytes)} (medians over steps)."
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
    return AnalysisPanels(breakdowns=(timeline,), findings=(ops,))
