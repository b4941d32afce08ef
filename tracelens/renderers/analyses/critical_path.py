"""The critical path shown: its section of `tracelens analyze` (`critical_path_parts`: the span per step, the
path's composition and the what-ifs) and its panels of the report (`critical_path_panels`: the composition
and the what-ifs, in "Findings"). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from tracelens.analyses.critical_path import CriticalPath, part_label
from tracelens.model.steps import steps_words
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.renderers.analyses import Parts
from tracelens.units import count_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


def critical_path_parts(result: CriticalPath, results: AnalysisResults) -> Parts:
    if result.step is None:
        return [Text(f"Critical path: — ({result.note})")]
    n = result.steps_analyzed
    head = Text()
    head.append("Critical path", style="bold")
    if results.summary.facts.step_source == WHOLE_TRACE_SOURCE:  # one window, no steps: no per-step words
        head.append(
            f" of the whole trace (no steps): span {us_text(result.step_us)} µs from its first CPU or GPU event "
            f"to its last ({result.note})"
        )
    else:
        head.append(
            f" over {n} step{'s' if n != 1 else ''}: span {us_text(result.step_us)} µs per step "
            f"(min {us_text(result.step_us_min)}, "
            f"max {us_text(result.step_us_max)}) from each step's CPU start, or the end of earlier steps' GPU work "
            f"on its streams where that is later, to its last CPU or GPU end ({result.note})"
        )
    if result.queued_us is not None and result.queued_us >= 0.05:  # at the shown precision
        head.append(
            f"\nEach step's CPU started {us_text(result.queued_us)} µs (mean) before earlier steps' GPU work ended: "
            "that time is in the earlier steps' spans, not in its own."
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
        parts.add_row(part_label(part.part), us_text(part.us), f"{part.pct:.1f}")
    what_if = Table(show_edge=False)
    what_if.add_column(f"what if (mean of {count_text(n, 'step')})")
    what_if.add_column("step µs", justify="right")
    what_if.add_column("saves µs", justify="right")
    what_if.add_column("min–max µs", justify="right")
    for row in result.what_if:
        what_if.add_row(
            row.change,
            us_text(row.predicted_step_us),
            us_text(row.saved_us),
            f"{us_text(row.saved_us_min)}–{us_text(row.saved_us_max)}",
        )
    return [head, parts, what_if]


def critical_path_panels(result: CriticalPath | None, results: AnalysisResults) -> page.AnalysisPanels:
    import plotly.graph_objects as go

    from tracelens.report import document as page

    panel_id, title = "critical-path", "Critical path and what-if"
    if result is None or result.step is None:
        why = "the analysis did not run" if result is None else result.note
        return page.AnalysisPanels(findings=(page.unavailable(panel_id, title, why),))
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
        f"{steps_words(result.steps_analyzed, results.summary.facts.step_source)}, {us_text(result.step_us)} µs per "
        f"step: {result.note}. "
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
    table = page.Table(columns=("what if (mean per step)", "step µs", "saves µs", "min–max µs"), rows=rows)
    return page.AnalysisPanels(
        findings=(
            page.Panel(id=panel_id, title=title, figure=fig, note=note),
            page.Panel(id=f"{panel_id}-what-if", title="What if", table=table),
        )
    )
