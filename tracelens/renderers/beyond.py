"""Text sections and report panels of the analyses beyond HTA's: the critical path with what-if,
communication/computation overlap and idle time per stream. The registry names these functions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tracelens.analyses.actions import Actions, PredictionCheck
from tracelens.analyses.comm_overlap import CommOverlap
from tracelens.analyses.critical_path import CriticalPath
from tracelens.analyses.stream_idle import StreamIdle
from tracelens.renderers.tables import droppable
from tracelens.units import pct_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisReport
    from tracelens.report.document import AnalysisPanels

Parts = list[RenderableType | None]
MAX_STREAMS = 8
PART_LABELS = {
    "cpu_dispatch": "CPU dispatch",
    "launch_latency": "launch latency",
    "sync": "sync return",
    "gpu_gap": "GPU gap on a stream",
    "other_wait": "unexplained wait",
    "queued": "queued behind earlier steps",
}


def _part(name: str) -> str:
    return f"GPU {name[4:]}" if name.startswith("gpu:") else PART_LABELS.get(name, name)


_us = us_text


_pct = pct_text


# ---------------------------------------------------------------- text


def critical_path_parts(result: CriticalPath, report: AnalysisReport) -> Parts:
    if result.step is None:
        return [Text(f"Critical path: — ({result.note})")]
    n = result.steps_analyzed
    head = Text()
    head.append("Critical path", style="bold")
    head.append(
        f" over {n} step{'s' if n != 1 else ''}: span {_us(result.step_us)} µs per step "
        f"(min {_us(result.step_us_min)}, "
        f"max {_us(result.step_us_max)}) from each step's CPU start to its last CPU or GPU end ({result.note})"
    )
    if result.limit_note:
        head.append(f"\nLimit: {result.limit_note}.")
    odd = [s for s in result.steps if s.unrepresentative]
    for s in odd:
        head.append(f"\nStep {s.number} is unrepresentative: {s.unrepresentative}.")
    parts = Table(title=None, show_edge=False)
    parts.add_column("on the path")
    parts.add_column("µs per step", justify="right")
    parts.add_column("% of path", justify="right")
    for part in result.composition:
        parts.add_row(_part(part.part), _us(part.us), f"{part.pct:.1f}")
    what_if = Table(show_edge=False)
    what_if.add_column(f"what if (mean of {n} steps)")
    what_if.add_column("step µs", justify="right")
    what_if.add_column("saves µs", justify="right")
    what_if.add_column("min–max µs", justify="right")
    for row in result.what_if:
        what_if.add_row(
            row.change,
            _us(row.predicted_step_us),
            _us(row.saved_us),
            f"{_us(row.saved_us_min)}–{_us(row.saved_us_max)}",
        )
    return [head, parts, what_if]


def comm_overlap_parts(result: CommOverlap, report: AnalysisReport) -> Parts:
    if result.comm_kernels == 0:
        return [Text(f"Communication/computation overlap: — ({result.note})")]
    text = Text()
    text.append("Communication", style="bold")
    text.append(
        f": {_us(result.comm_us_per_step)} µs of collectives per step, {_pct(result.overlap_pct)} overlapped by "
        f"compute; exposed {_us(result.exposed_us_per_step)} µs per step ({result.note})"
    )
    return [text]


def stream_idle_parts(result: StreamIdle, report: AnalysisReport) -> Parts:
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
    droppable(table, "other µs/step", "kernel wait µs/step")
    for row in result.streams[:MAX_STREAMS]:
        table.add_row(
            f"GPU {row.device} stream {row.stream}",
            _us(row.busy_us_per_step),
            _us(row.idle_us_per_step),
            _us(row.host_wait_us_per_step),
            _us(row.kernel_wait_us_per_step),
            _us(row.other_us_per_step),
            _pct(row.busy_pct),
        )
    return [table]


# ---------------------------------------------------------------- report panels


def critical_path_panels(result: CriticalPath | None, report: AnalysisReport) -> AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report.document import AnalysisPanels, Panel, unavailable
    from tracelens.report.document import Table as PageTable

    panel_id, title = "critical-path", "Critical path and what-if"
    if result is None or result.step is None:
        why = "the analysis did not run" if result is None else result.note
        return AnalysisPanels(findings=(unavailable(panel_id, title, why),))
    fig = go.Figure(
        go.Bar(
            x=[p.us for p in result.composition],
            y=[_part(p.part) for p in result.composition],
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
        f"{result.steps_analyzed} steps, {_us(result.step_us)} µs per step: {result.note}. {result.limit_note}.{odd} "
        "The path follows what each launch, kernel and sync waited for; what-ifs re-time each step's dependency graph."
    )
    rows = tuple(
        (w.change, _us(w.predicted_step_us), _us(w.saved_us), f"{_us(w.saved_us_min)}–{_us(w.saved_us_max)}")
        for w in result.what_if
    )
    table = PageTable(columns=("what if (mean per step)", "step µs", "saves µs", "min–max µs"), rows=rows)
    return AnalysisPanels(
        findings=(
            Panel(id=panel_id, title=title, figure=fig, note=note),
            Panel(id=f"{panel_id}-what-if", title="What if", table=table),
        )
    )


def comm_overlap_panels(result: CommOverlap | None, report: AnalysisReport) -> AnalysisPanels:
    from tracelens.report.document import AnalysisPanels, Panel, unavailable
    from tracelens.report.document import Table as PageTable

    panel_id, title = "comm-overlap", "Communication/computation overlap"
    if result is None or result.comm_kernels == 0:
        return AnalysisPanels(
            findings=(unavailable(panel_id, title, "no communication kernels" if result else "not run"),)
        )
    rows = tuple(
        (str(s.number), _us(s.comm_us), _us(s.overlapped_us), _us(s.exposed_us), _pct(s.overlap_pct))
        for s in result.steps
    )
    table = PageTable(columns=("step", "collectives µs", "overlapped µs", "exposed µs", "overlap"), rows=rows)
    note = f"{_pct(result.overlap_pct)} of collective time overlapped by compute kernels ({result.note})."
    return AnalysisPanels(findings=(Panel(id=panel_id, title=title, table=table, note=note),))


def stream_idle_panels(result: StreamIdle | None, report: AnalysisReport) -> AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report.document import AnalysisPanels, Panel, unavailable

    panel_id, title = "stream-idle", "Idle time per GPU stream"
    if result is None or not result.streams:
        return AnalysisPanels(breakdowns=(unavailable(panel_id, title, result.note if result else "not run"),))
    labels = [f"GPU {r.device} stream {r.stream}" for r in result.streams[:MAX_STREAMS]]
    fig = go.Figure()
    for key, name, color in (
        ("busy_us_per_step", "busy", "#2ca02c"),
        ("host_wait_us_per_step", "idle: host wait", "#d62728"),
        ("kernel_wait_us_per_step", "idle: kernel wait", "#ff7f0e"),
        ("other_us_per_step", "idle: other", "#9e9e9e"),
    ):
        values: list[Any] = [getattr(r, key) for r in result.streams[:MAX_STREAMS]]
        fig.add_trace(go.Bar(x=labels, y=values, name=name, marker_color=color))
    fig.update_layout(template="plotly_white", barmode="stack", height=360, yaxis_title="µs per step", margin={"t": 30})
    note = (
        "HTA's split: host wait = the launch came after the stream ran dry; kernel wait = gaps under "
        f"{result.kernel_wait_threshold_us:g} µs between queued work; other = queued work that waited on "
        "something else."
    )
    return AnalysisPanels(breakdowns=(Panel(id=panel_id, title=title, figure=fig, note=note),))


# ---------------------------------------------------------------- what to do next (actions)

LIMIT_SENTENCE = {
    "cpu": "CPU work limits the step (launches and dispatch): faster CPU work shortens it, faster kernels do not",
    "gpu": "GPU work limits the step: faster kernels shorten it, faster CPU work does not",
    "mixed": "both CPU and GPU work limit the step: neither alone shortens it much",
    "unknown": "neither faster CPU nor faster GPU work shortens the step (it waits on something else)",
}
TOP_ACTIONS = 3


def actions_parts(result: Actions, report: AnalysisReport) -> Parts:
    """The summary at the top of `analyze` (at most 15 lines at 80 columns): what the step costs, what limits
    it, the top actions with predicted step time and saving and one line of evidence each, where to read more."""
    head = Text()
    head.append("What to do next", style="bold")
    s = result.summary
    if s.step_us is None:
        head.append(f": — ({result.note})")
        return [head]
    source = report.summary.profiler_free.source if report.summary.profiler_free is not None else None
    head.append(f" — step {_us(s.step_us)} µs profiled (mean span of {s.steps})")
    if s.profiler_free_step_us is not None:
        head.append(f"\nWithout the profiler: {_us(s.profiler_free_step_us)} µs ({source}, docs/profiler_overhead.md)")
    path = report.get(CriticalPath)
    if path is not None and path.what_if:
        rows = {w.change: w.saved_us for w in path.what_if}
        cpu, gpu = rows.get("all CPU work 2× faster"), rows.get("all GPU work 2× faster")
        head.append(f"\nLimit: {s.limit} — all CPU work 2× faster saves {_us(cpu)} µs, all GPU 2× {_us(gpu)} µs")
    else:
        head.append(f"\nLimit: {s.limit}")
    helpful = [a for a in result.actions if a.saved_us > 0]  # an action predicted to slow the step: JSON only
    if not helpful:
        head.append("\nNo modelled action shortens the step" + (f" ({result.note})" if result.note else ""))
    for rank, action in enumerate(helpful[:TOP_ACTIONS], 1):
        targets = " → ".join(action.targets) if action.action == "fuse" else ", ".join(action.targets)
        if len(targets) > 22:
            targets = targets[:21].rstrip(", →:0123456789") + "…"  # never a cut number before the ellipsis
        head.append(
            f"\n{rank}. {action.action} ({targets}): {_us(action.predicted_step_us)} µs "
            f"({action.low:,.0f}–{action.high:,.0f}), saves {_us(action.saved_us)}"
        )
        head.append(f"\n   {action.basis}", style="dim")
    head.append("\nMore: --section bound, critical_path, fusion; models: docs/actions.md")
    return [head]


def actions_panels(result: Actions | None, report: AnalysisReport) -> AnalysisPanels:
    from tracelens.report.document import AnalysisPanels, Panel, unavailable
    from tracelens.report.document import Table as PageTable

    panel_id, title = "actions", "What to do next"
    if result is None or result.summary.step_us is None:
        return AnalysisPanels(overview=(unavailable(panel_id, title, "not run" if result is None else result.note),))
    s = result.summary
    free = report.summary.profiler_free
    without = ""
    if s.profiler_free_step_us is not None and free is not None:
        without = f"; without the profiler {_us(s.profiler_free_step_us)} µs ({free.source}, docs/profiler_overhead.md)"
    note = (
        f"Step {_us(s.step_us)} µs profiled (mean span of {s.steps} steps){without}. "
        f"Limit: {LIMIT_SENTENCE.get(s.limit, s.limit)}. {result.note[:1].upper()}{result.note[1:]}."
    )
    rows = tuple(
        (
            a.action,
            ", ".join(a.targets),
            _us(a.predicted_step_us),
            f"{_us(a.low)}–{_us(a.high)}",
            _us(a.saved_us),
            a.basis,
        )
        for a in result.actions
    )
    table = PageTable(columns=("action", "targets", "step µs", "range µs", "saves µs", "basis"), rows=rows)
    return AnalysisPanels(overview=(Panel(id=panel_id, title=title, table=table, note=note),))


def prediction_checks_table(checks: list[PredictionCheck]) -> Table | None:
    """`compare`'s table of the before-trace's predictions against the variants that took the action."""
    if not checks:
        return None
    table = Table(title="Predictions checked (the first trace's actions, docs/actions.md)", title_justify="left")
    for column in ("after", "action", "predicted µs", "range µs", "measured µs", "error", "held"):
        table.add_column(column, justify="left" if column in ("after", "action", "held") else "right")
    for c in checks:
        table.add_row(
            c.after,
            c.action,
            _us(c.predicted_step_us),
            f"{c.low:,.0f}–{c.high:,.0f}",
            _us(c.measured_step_us),
            f"{c.error_pct:+.1f} %",
            "yes" if c.held else "no",
        )
    return table
