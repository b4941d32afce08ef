"""Rich tables for people: `tracelens analyze` in the terminal."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tracelens.analyses import AnalysisResults
from tracelens.analyses.bound import Bound
from tracelens.analyses.registry import ANALYSES
from tracelens.analyses.roofline import Roofline
from tracelens.analyses.summary import StepFigures, Summary, TraceFacts, replayed_ops_note
from tracelens.errors import TracelensError
from tracelens.escapes import escape_controls
from tracelens.model.steps import per_step, step_label
from tracelens.renderers.analyses.bound import flip_sentence
from tracelens.renderers.formats import SUMMARY_SECTION
from tracelens.renderers.sections import renderer_of
from tracelens.renderers.tables import count as _count
from tracelens.renderers.tables import display_name, droppable, fit
from tracelens.renderers.textsafe import safe_text
from tracelens.settings import TERMINAL_MAX, env_count
from tracelens.units import bytes_text, change_text, us_text

MAX_KERNEL_ROWS = 25
MAX_OP_ROWS = 20


DEFAULT_WIDTH = 140  # output to a pipe or file without COLUMNS or --width: the same on every machine
MIN_WIDTH = 40


def console_width(color: bool, width: int | None = None) -> int:
    """The width text output is laid out for: `width` (--width) if given; on a terminal its width; else
    `COLUMNS` when set, else `DEFAULT_WIDTH`. Never below `MIN_WIDTH`."""
    if width is None:
        if color:
            width = shutil.get_terminal_size((DEFAULT_WIDTH, 40)).columns  # honours COLUMNS too
        else:
            width = env_count("COLUMNS", 1, TERMINAL_MAX) or DEFAULT_WIDTH
    return max(width, MIN_WIDTH)


class SafeConsole(Console):
    """A console whose strings (table cells, titles, printed lines) have control characters escaped
    (`escape_controls`): a kernel name cannot clear the screen or retitle the terminal. `Text` objects built
    from trace data escape their strings themselves (`safe_text`)."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(escape_controls(text, keep_newlines=True), **options)


def make_console(color: bool, width: int | None = None) -> Console:
    """A recording console `console_width(color, width)` wide (`SafeConsole`: control characters in names
    escaped). Print tables with `print_parts` (or `tables.fit`) so that they fit it."""
    return SafeConsole(
        file=io.StringIO(),
        force_terminal=color,
        no_color=not color,
        width=console_width(color, width),
        highlight=False,
        soft_wrap=False,
        markup=False,  # kernel names like `elementwise_kernel[mul]` are data, not rich markup
    )


def print_parts(console: Console, parts: Iterable[RenderableType | None]) -> None:
    """Print renderables (None skipped), every table fitted to the console's width (`tables.fit`)."""
    for part in parts:
        if part is not None:
            console.print(fit(part))


def render_to_string(console: Console) -> str:
    """What was printed, each line without the spaces rich pads it with."""
    output = str(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(line.rstrip(" ") for line in output.split("\n"))


def facts_table(facts: TraceFacts) -> Table:
    table = Table(title="Trace", show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("file", facts.path)
    table.add_row("format", facts.format)
    table.add_row("GPU", ", ".join(facts.gpus) or "none recorded")
    versions = [
        f"CUDA runtime {facts.cuda_runtime}" if facts.cuda_runtime else "",
        f"driver {facts.cuda_driver}" if facts.cuda_driver else "",
        f"HIP {facts.hip_runtime}" if facts.hip_runtime else "",
        f"torch {facts.torch}" if facts.torch else "",
    ]
    table.add_row("versions", ", ".join(v for v in versions if v) or "not recorded")
    if facts.run:
        table.add_row("run", ", ".join(f"{k}={v}" for k, v in facts.run.items() if v is not None))
    if facts.rank is not None:
        table.add_row("rank", f"{facts.rank} of {facts.world_size}")
    table.add_row("events", f"{facts.events:,} ({_kind_counts(facts)})")
    table.add_row("span", f"{facts.span_us / 1000:,.3f} ms; {bytes_text(facts.uncompressed_bytes)} of JSON")
    steps = (
        f"{facts.steps_in_trace} ProfilerSteps"
        if facts.step_source == "ProfilerStep"
        else f"no ProfilerStep: {facts.steps_in_trace} steps inferred from {facts.steps_inferred_from}"
        if facts.step_source == "inferred"
        else "no ProfilerStep: one whole-trace window"
    )
    table.add_row("steps", steps)
    table.add_row(
        "linking",
        f"{facts.launches_linked_by_external_id:,} launches by External id, "
        f"{facts.launches_linked_by_containment:,} by time containment; "
        f"{facts.unattributed_gpu_activities:,} GPU activities without a launch",
    )
    return table


def _kind_counts(facts: TraceFacts) -> str:
    order = ["cpu_op", "kernel", "runtime", "driver", "memcpy", "memset", "python", "user_annotation"]
    return ", ".join(f"{facts.events_by_kind[k]:,} {k}" for k in order if facts.events_by_kind.get(k))


STEP_COLUMNS = (
    "kernels\n/step",
    "memcpy\n/step",
    "memset\n/step",
    "launches\n/step",
    "CPU ops\n/step",
    "CPU µs\n/step",
    "GPU busy\nµs/step",
    "kernel\nµs/step",
    "step µs",
    "backlog\nµs/step",
)
STEP_LEGEND = (
    "CPU µs: wall time of the ProfilerStep range on the CPU (without ProfilerSteps: of the whole trace); GPU "
    "busy µs: GPU activity inside the step's GPU window (overlaps counted once); kernel µs: sum of kernel "
    "durations; step µs: one step's period (GPU end to GPU end where the previous step's GPU work ran past this "
    "step's CPU start, else CPU start to next CPU start; not the Limit verdict); backlog µs: GPU work still "
    "queued at the step's CPU end; exposed (below): CPU dispatch time during which the GPU waited for it; —: "
    "cannot be computed."
)


def per_step_table(summary: Summary) -> Table:
    """One row per analyzed step (up to 12) and the median row, labelled in the "step" column."""
    whole_trace = not (summary.step_numbers and summary.step_numbers[0] >= 0)
    several = summary.steps > 1
    steps = ", ".join(str(n) for n in summary.step_numbers[:12]) + (", …" if summary.steps > 12 else "")
    window = "whole trace" if whole_trace else f"{summary.steps} complete step(s): {steps}"
    if summary.empty_reason:
        window = f"— {summary.empty_reason}"
    median = "; median = median over them" if several and not whole_trace and not summary.empty_reason else ""
    legend = STEP_LEGEND
    if summary.facts.step_source == "inferred" and not summary.facts.steps_are_calls:  # loop markers' periods
        legend = legend.replace(
            "of the ProfilerStep range on the CPU (without ProfilerSteps: of the whole trace)",
            f"from one call to the next (no ProfilerStep: steps inferred from {summary.facts.steps_inferred_from})",
        )
    elif summary.facts.step_source == "inferred":  # the steps are calls: say so where the legend names the range
        legend = legend.replace(
            "of the ProfilerStep range on the CPU (without ProfilerSteps: of the whole trace)",
            f"of the step's call (no ProfilerStep: steps inferred from {summary.facts.steps_inferred_from})",
        ).replace("CPU start to CPU start when the CPU is", "its GPU window when the CPU is")
    table = Table(title=f"Per step ({window}{median})", title_justify="left", caption=legend)
    table.add_column("step", justify="right")
    for column in STEP_COLUMNS:
        table.add_column(column, justify="right")
    droppable(
        table, "memcpy\n/step", "memset\n/step", "CPU ops\n/step", "backlog\nµs/step", "launches\n/step",
        "kernel\nµs/step",
    )  # fmt: skip
    rows = summary.step_table if 1 < len(summary.step_table) <= 12 else []
    for row in rows:
        table.add_row(step_label(row.number), *_figure_cells(row), style="dim")
    if rows:
        table.add_section()
    label = (
        "trace" if whole_trace or not summary.step_numbers else ("median" if several else str(summary.step_numbers[0]))
    )
    table.add_row(label, *_figure_cells(summary.per_step))
    return table


def _figure_cells(row: StepFigures) -> list[str]:
    return [
        _count(row.kernels),
        _count(row.memcpy),
        _count(row.memset),
        _count(row.launches),
        _count(row.cpu_ops),
        us_text(row.cpu_us),
        us_text(row.gpu_busy_us),
        us_text(row.gpu_kernel_us),
        us_text(row.step_us),
        us_text(row.queue_backlog_us),
    ]


def kernel_table(summary: Summary, pct_of_peak: dict[str, float | None] | None = None) -> Table:
    """`pct_of_peak` (kernel name → % of roofline, from the roofline analysis) adds a "% peak" column. Every
    figure is per step (totals over the analyzed steps divided by their number) or per call."""
    n_steps, unit = max(summary.steps, 1), per_step(summary.facts.step_source)
    window = f"per step = over the {n_steps} analyzed step(s) ÷ {n_steps}" if unit else "over the whole trace, no steps"
    table = Table(title=f"GPU kernels (top {MAX_KERNEL_ROWS} by time; {window})", title_justify="left")
    table.add_column("kernel")
    table.add_column("category")
    for column in (f"calls\n{unit}".strip(), f"µs{unit}", "mean\nµs/call"):
        table.add_column(column, justify="right")
    if pct_of_peak is not None:
        table.add_column("% peak", justify="right")
    table.add_column("launched by")
    droppable(table, "category", "mean\nµs/call", "launched by")
    for row in summary.kernels[:MAX_KERNEL_ROWS]:
        cells = [
            display_name(row.name),
            row.category,
            _count(row.calls_per_step),
            us_text(row.total_us / n_steps),
            f"{row.mean_us:,.2f}",
        ]
        if pct_of_peak is not None:
            pct = pct_of_peak.get(row.name)
            cells.append(f"{pct:,.1f}" if pct is not None else "—")
        table.add_row(*cells, row.op or "—")
    if len(summary.kernels) > MAX_KERNEL_ROWS:
        table.caption = f"{len(summary.kernels) - MAX_KERNEL_ROWS} more kernels in --format json"
    return table


def op_table(summary: Summary) -> Table:
    unit = per_step(summary.facts.step_source)
    window = "per step" if unit else "the whole trace, no steps"
    table = Table(title=f"Ops → kernels they launched ({window})", title_justify="left")
    table.add_column("op")
    table.add_column(f"calls\n{unit}".strip(), justify="right")
    table.add_column(f"kernels\n{unit}".strip(), justify="right")
    table.add_column(f"GPU\nµs{unit}", justify="right")
    table.add_column(f"kernels launched (×calls{unit})")
    for row in summary.ops[:MAX_OP_ROWS]:
        launched = ", ".join(f"{display_name(k.name)} ×{_count(k.calls_per_step)}" for k in row.kernels[:4])
        if len(row.kernels) > 4:
            launched += f", +{len(row.kernels) - 4} more"
        table.add_row(
            row.name,
            _count(row.calls_per_step),
            _count(row.kernels_per_step),
            us_text(row.gpu_us_per_step),
            launched,
        )
    table.caption = replayed_ops_note(summary.ops[:MAX_OP_ROWS]) or None
    return table


def summary_parts(summary: Summary, results: AnalysisResults) -> list[RenderableType | None]:
    """The head of `tracelens analyze`: trace facts, per-step figures, kernels (with the roofline's % of peak)
    and ops (the registry's text section of the summary)."""
    roofline = results.get(Roofline)
    peaks = {name: r.pct_of_peak for name, r in roofline.by_kernel().items()} if roofline else None
    return [
        facts_table(summary.facts),
        Text(""),
        per_step_table(summary),
        profiler_free_line(summary, results),
        kernel_table(summary, peaks) if summary.kernels else None,
        op_table(summary) if summary.ops else None,
    ]


def profiler_free_line(summary: Summary, results: AnalysisResults) -> Text | None:
    """The profiler-free step time beside the profiled one, with the inflation, and whether the bound verdict
    would read gpu without the profiler (docs/profiler_overhead.md); None when there is no step time."""
    free = summary.profiler_free
    if free is None or free.profiled_step_us is None:
        return None
    if free.source is None or free.step_us is None:
        return Text(f"Profiler-free step: — ({free.note or 'no step time'})")
    inflation = f": the profiler added {change_text(free.inflation_pct)} %" if free.inflation_pct is not None else ""
    line = (
        f"Profiler-free step: {us_text(free.step_us)} µs ({free.source}: {free.method}); profiled median step "
        f"{us_text(free.profiled_step_us)} µs{inflation}."
    )
    bound = results.get(Bound)
    if bound is not None and bound.verdict_without_profiler is not None:
        line += f" {flip_sentence(bound)}"
    if free.note:
        line += f" Note: {free.note}."
    return Text(line)


def check_sections(names: Iterable[str]) -> tuple[str, ...]:
    """`names` if each names a registered analysis with a text section, else a TracelensError listing them."""
    known = [entry.name for entry in ANALYSES if entry.text is not None]
    unknown = [name for name in names if name not in known and name != SUMMARY_SECTION]
    if unknown:
        raise TracelensError(f"unknown section {unknown[0]!r}: one of {', '.join(known)}")
    return tuple(dict.fromkeys(names))


def analysis_parts(results: AnalysisResults, sections: tuple[str, ...] | None = None) -> list[RenderableType]:
    """Every analysis' text section (the registry's `text` renderers), in `text_order`; only those named in
    `sections` when given, where `SUMMARY_SECTION` names the summary: the first part of the `actions` section
    (the ranked table of every action follows it there)."""
    parts: list[RenderableType | None] = []
    for entry, result in sorted(results.results(), key=lambda pair: pair[0].text_order):
        wanted = sections is None or entry.name in sections
        summary_only = not wanted and entry.name == "actions" and SUMMARY_SECTION in (sections or ())
        if not wanted and not summary_only:
            continue
        section = renderer_of(entry, "text")
        if section is not None:
            shown = section(result, results)
            parts += shown[:1] if summary_only else shown
    return [p for p in parts if p is not None]


class AnalyzeTextRenderer:
    """`tracelens analyze` for people: the registry's text sections, then the trace's warnings."""

    def __init__(self, color: bool = False, width: int | None = None, sections: tuple[str, ...] | None = None) -> None:
        self.color = color
        self.width = width
        self.sections = sections  # None: every section; else only these (`--section`, `--summary`)

    def render(self, result: AnalysisResults) -> str:
        console = make_console(self.color, self.width)
        print_parts(console, analysis_parts(result, self.sections))
        for warning in result.summary.warnings:
            console.print(safe_text(f"warning: {warning}", style="yellow"))
        return render_to_string(console)
