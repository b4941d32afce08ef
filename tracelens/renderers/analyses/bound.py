"""The bound verdict shown: its section of `tracelens analyze` (`bound_parts`: the verdict with its figures, the
GPU window by bucket one row per step) and its panels of the report (`bound_panels`: GPU busy and idle by
cause per step, in "Where the time goes"; the verdict and its figures, in "Findings"). The contract:
`tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from tracelens.analyses.bound import Bound
from tracelens.model.steps import is_whole_trace
from tracelens.renderers.analyses import Parts
from tracelens.renderers.analyses.actions import LIMIT_SENTENCE
from tracelens.units import pct_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


VERDICT = {
    "cpu": "CPU-bound: the GPU waits for launches at least as long as it works",
    "gpu": "GPU-bound: the GPU is busy nearly all of each step and rarely waits for launches",
    "mixed": "mixed: neither side dominates (the GPU works most of the step but also waits)",
    "unknown": "unknown: no GPU activity in the window",
}


def verdict_sentence(bound: Bound) -> str:
    """What the verdict means, by what decided it: the what-ifs (faster CPU or GPU work, `LIMIT_SENTENCE`) or the
    idle thresholds (`VERDICT`), so that the sentence never states what the figures beside it contradict."""
    if bound.verdict_basis == "what-if" and bound.bound in LIMIT_SENTENCE:
        return LIMIT_SENTENCE[bound.bound]
    return VERDICT.get(bound.bound, bound.bound)


def bound_parts(bound: Bound, results: AnalysisResults) -> Parts:
    return [bound_text(bound), bound_steps_table(bound)]


def flip_sentence(bound: Bound) -> str:
    """The verdict without the profiler, where it differs (`Bound.verdict_without_profiler`): one sentence."""
    return (
        f"Without the profiler the GPU would be busy {bound.busy_pct_without_profiler:.0f} % of the step: the "
        f"verdict ({bound.bound}) would likely read {bound.verdict_without_profiler}."
    )


def bound_text(bound: Bound) -> Text:
    text = Text()
    text.append(f"Bound: {bound.bound}", style="bold")
    if bound.bound == "unknown" and bound.reason:
        text.append(f" — cannot be judged: {bound.reason}\n")
    else:
        text.append(f" — {verdict_sentence(bound)}\n")
    if bound.bound == "unknown" or bound.exposed_dispatch_us_per_step is None:
        reason = bound.reason or "no GPU activity in the window"
        text.append(
            f"Exposed dispatch: — ({reason}: nothing to wait or hide behind); CPU dispatch per step "
            f"{us_text(bound.dispatch_us_per_step)} µs.\n"
        )
        return text
    if bound.verdict_basis == "what-if":
        text.append("(by the critical path's what-ifs over the same steps: CPU vs GPU work 2× faster)\n", style="dim")
    if bound.verdict_note:
        text.append(f"Note: {bound.verdict_note}.\n")
    if bound.verdict_without_profiler is not None:
        text.append(f"{flip_sentence(bound)} (docs/profiler_overhead.md)\n")
    text.append(f"(idle thresholds: {bound.thresholds})\n", style="dim")
    pct = f" ({bound.exposed_dispatch_pct:.0f} %)" if bound.exposed_dispatch_pct is not None else ""
    of_gpu = (
        f", {bound.exposed_dispatch_pct_of_gpu:.1f} % of the GPU window"
        if bound.exposed_dispatch_pct_of_gpu is not None
        else ""
    )
    text.append(
        f"Exposed dispatch: {us_text(bound.exposed_dispatch_us_per_step)} µs of "
        f"{us_text(bound.dispatch_us_per_step)} µs "
        f"CPU dispatch self time per step{pct} ran while the GPU waited for a launch{of_gpu}.\n"
    )
    text.append(
        (
            "GPU over the whole trace (no steps)"
            if is_whole_trace([s.number for s in bound.steps])
            else f"GPU per step (mean of {len(bound.steps)})"
        )
        + f": window {us_text(bound.gpu_window_us_per_step)} µs = busy "
        f"{us_text(bound.gpu_busy_us_per_step)} µs "
        f"+ idle waiting for launches {us_text(bound.launch_wait_us_per_step)} µs, on syncs/host copies "
        f"{us_text(bound.sync_wait_us_per_step)} µs, with work already queued "
        f"{us_text(bound.queued_idle_us_per_step)} µs, other {us_text(bound.other_idle_us_per_step)} µs"
        + (
            f", during compilation {us_text(bound.compile_idle_us_per_step)} µs"
            if bound.compile_idle_us_per_step
            else ""
        )
    )
    return text


def bound_steps_table(bound: Bound) -> Table | None:
    if not 1 < len(bound.steps) <= 12:
        return None
    table = Table(title="GPU window by bucket, one row per step (µs in the step)", title_justify="left")
    for column in (
        "step",
        "window µs",
        "busy µs",
        "launch wait µs",
        "sync wait µs",
        "idle, queued µs",
        "other µs",
        "bound",
    ):
        table.add_column(column, justify="right" if column != "bound" else "left")
    for s in bound.steps:
        table.add_row(
            str(s.number),
            us_text(s.gpu_window_us),
            us_text(s.gpu_busy_us),
            us_text(s.launch_wait_us),
            us_text(s.sync_wait_us),
            us_text(s.queued_idle_us),
            us_text(s.other_idle_us + s.compile_idle_us),
            s.bound,
        )
    return table


IDLE_CAUSES = (
    ("gpu_busy_us", "GPU busy", "#2ca02c"),
    ("launch_wait_us", "idle: waiting for launches (exposed CPU dispatch)", "#d62728"),
    ("sync_wait_us", "idle: waiting for a CPU sync", "#ff7f0e"),
    ("queued_idle_us", "idle: work already queued (cross-stream waits, device scheduling)", "#bcbd22"),
    ("other_idle_us", "idle: other (no launch recorded, nothing queued after)", "#9e9e9e"),
    ("compile_idle_us", "idle: during torch.compile compilation", "#8c564b"),
)


def bound_panels(bound: Any, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    return page.AnalysisPanels(breakdowns=(idle_panel(results),), findings=(bound_panel(results),))


def bound_panel(results: AnalysisResults) -> page.Panel:
    """The verdict (CPU-, GPU-bound or mixed) and the figures behind it, per step."""
    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding, format_value, generic_panel

    panel_id, title = "bound", "What bounds a step"
    bound = finding(results, "bound")
    if bound is None:
        return page.unavailable(panel_id, title, MISSING)
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
        ("exposed dispatch, % of the GPU window", "exposed_dispatch_pct_of_gpu"),
        ("idle gaps per step", "gaps_per_step"),
    )
    rows = tuple(
        (label, pct_text(getattr(bound, name)) if "%" in label else format_value(getattr(bound, name, None)))
        for label, name in fields
        if hasattr(bound, name)
    )
    if not rows:
        return generic_panel(bound, panel_id, title)
    verdict = str(getattr(bound, "bound", ""))
    note = {
        "cpu": "CPU-bound: the GPU waits for kernel launches longer than it computes.",
        "gpu": "GPU-bound: the GPU is busy most of each step.",
        "mixed": "Mixed: neither launch waits nor GPU work clearly dominate.",
    }.get(verdict, "")
    if isinstance(bound, Bound) and bound.verdict_basis == "what-if" and verdict in LIMIT_SENTENCE:
        sentence = verdict_sentence(bound)
        note = f"{sentence[:1].upper()}{sentence[1:]}."
    if isinstance(bound, Bound) and bound.verdict_without_profiler is not None:
        note += f" {flip_sentence(bound)}"
    if isinstance(bound, Bound) and len(bound.steps) > 1:  # means, beside the per-step table's medians: say which
        note += f" µs/step: means over the {len(bound.steps)} analyzed steps (the per-step table: medians)."
    return page.Panel(id=panel_id, title=title, table=page.Table(("", ""), rows), note=note)


def idle_panel(results: AnalysisResults) -> page.Panel:
    """Stacked bars per step: GPU busy, then idle time split by cause."""
    import plotly.graph_objects as go

    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding

    panel_id, title = "gpu-idle", "GPU busy and idle by cause, per step"
    bound = finding(results, "bound")
    steps = list(getattr(bound, "steps", None) or []) if bound is not None else []
    if bound is None:
        return page.unavailable(panel_id, title, MISSING)
    if not steps:
        return page.unavailable(panel_id, title, "no analyzed step has GPU activity")
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
    return page.Panel(id=panel_id, title=title, figure=fig)
