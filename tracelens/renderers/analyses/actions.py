"""What to do next, shown: the summary at the top of `tracelens analyze` (`actions_parts`) and the first panel
of the report (`actions_panels`, in the overview). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from tracelens.analyses.actions import (
    ATTENTION_NOTE,
    FEW_CELLS,
    MATH_ATTENTION_NOTE,
    Action,
    Actions,
    helpful,
    range_notes,
    twins_text,
)
from tracelens.analyses.bound import Bound
from tracelens.analyses.compiled import Compiled
from tracelens.analyses.critical_path import CriticalPath, queued_pct
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import droppable
from tracelens.units import pct_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


TOP_ACTIONS = 3
MEAN_AND_MEDIAN_APART = 0.05  # the profiler-free step is the median step's: named where the mean span is not it


def actions_parts(result: Actions, results: AnalysisResults) -> Parts:
    """The summary at the top of `analyze` (at most 15 lines at 80 columns): what the step costs, what limits
    it, the top actions with predicted step time and saving and one line of evidence each, where to read more."""
    head = Text()
    head.append("What to do next", style="bold")
    s = result.summary
    if s.step_us is None:
        head.append(f": — ({result.note})")
        step_us = results.summary.per_step.step_us  # the step still costs something: said where it is known
        if step_us is not None:
            head.append(f"\nStep: {us_text(step_us)} µs profiled (median of {results.summary.steps})")
        return [head]
    free = results.summary.profiler_free
    source = free.source_words() if free is not None else None
    ranged = free is not None and free.source == "estimated" and free.estimate_low_us is not None
    compiled = results.get(Compiled)
    warmup = " warm-up step" + ("s" if s.steps != 1 else "") if compiled is not None and compiled.warmup_only else ""
    whole = results.summary.facts.step_source == WHOLE_TRACE_SOURCE  # no step: the one window is the whole trace
    if whole:
        warm = "; it holds compilation or a capture: warm-up" if warmup else ""
        head.append(f" — the whole trace, {us_text(s.step_us)} µs profiled (no steps{warm})")
    else:
        head.append(f" — step {us_text(s.step_us)} µs profiled (mean span of {s.steps}{warmup})")
    median = free.profiled_step_us if free is not None else None
    apart = bool(median) and abs(s.step_us / (median or 1) - 1) > MEAN_AND_MEDIAN_APART
    lead = _lead_us(results)
    if s.profiler_free_step_us is not None:
        line = f"Without the profiler: {us_text(s.profiler_free_step_us)} µs ({source}" + (
            ")" if ranged else ", docs/profiler_overhead.md)"  # the range or the doc: 80 columns
        )
        if warmup and len(line) + len("Warm-up w") - 1 <= SUMMARY_COLUMNS:  # not a steady step's: say so
            line = "Warm-up w" + line[1:]
        head.append("\n" + line)
        if lead is None and apart:  # two step figures: which is which
            head.append(f"\n  (for the median step, {us_text(median)} µs profiled; the mean span differs)")
    elif free is not None and free.note:  # unknown, and why, in one line: never silent
        reason = free.note.split(":")[0]
        line = f"Without the profiler: — ({reason})"
        if len(line) > SUMMARY_COLUMNS:  # one line: the reason shortened at a word, whole in the per-step section
            line = textwrap.shorten(line, SUMMARY_COLUMNS - 1, placeholder=" …") + ")"
        head.append("\n" + line)
    if lead is not None:  # steps start before earlier work ends: where the spans start (and the median step)
        line = f"  (CPU starts {us_text(lead)} µs before prior GPU work ends; spans start at its end)"
        with_median = f"  (CPU starts {us_text(lead)} µs before prior GPU work ends; median step: {us_text(median)} µs)"
        head.append("\n" + (with_median if apart and len(with_median) <= SUMMARY_COLUMNS else line))
    path = results.get(CriticalPath)
    if path is not None and path.what_if:
        rows = {w.change: w.saved_us for w in path.what_if}
        cpu, gpu = rows.get("all CPU work 2× faster"), rows.get("all GPU work 2× faster")
        head.append(f"\nLimit: {s.limit} — CPU 2× faster saves {us_text(cpu)} µs, GPU 2× faster {us_text(gpu)} µs")
    else:
        head.append(f"\nLimit: {s.limit}")
    bound = results.get(Bound)
    if bound is not None and bound.verdict_without_profiler is not None and bound.bound == s.limit:
        head.append(
            f"\n  (without the profiler likely {bound.verdict_without_profiler}: the GPU busy "
            f"{bound.busy_pct_without_profiler:.0f} % of the step)"
        )
    if s.data_loading_us is not None and s.data_loading_us > 0:  # of the time from the CPU start, as it is read
        path = results.get(CriticalPath)
        lead_us = (path.queued_us or 0.0) if path is not None else 0.0
        since_cpu_start_us = s.step_us + lead_us
        share = f", {pct_text(100 * s.data_loading_us / since_cpu_start_us)}" if s.step_us else ""
        if share:  # of the step, or, where its CPU starts before earlier GPU work ends, of the time from that start
            share += " of the step (actions keep it)" if not lead_us else " from CPU start; actions keep it"
        head.append(f"\nDataLoader: next batch {us_text(s.data_loading_us)} µs/step{share or ' (actions keep it)'}")
    shortening = helpful(result.actions)  # one predicted to slow the step: the table only
    if not result.actions and result.note:  # none predicted, and why
        head.append(f"\nNo action predicted: {result.note}")
    elif not shortening:
        head.append("\nNo modelled action shortens the step" + (f" ({result.note})" if result.note else ""))
    bases = [a.basis for a in result.actions if a.action == "compile"]
    if any(ATTENTION_NOTE in b for b in bases):  # what the compile prediction assumes: said, even unshown
        head.append("\nNote: softmax(QKᵀ)V written out; compile assumes Inductor makes it one kernel")
    elif any(MATH_ATTENTION_NOTE in b for b in bases):  # what it leaves out
        head.append("\nNote: softmax(QKᵀ)V with a mask or more; compile may fuse it (not modelled)")
    used = str(head).count("\n") + 2  # the lines so far and the closing "More:" line
    reserved = len(result.actions) > min(TOP_ACTIONS, len(shortening))
    used += reserved  # and a line that says how many more there are
    shown = 0
    for rank, action in enumerate(shortening[:TOP_ACTIONS], 1):
        names = [t.removeprefix("aten::") for t in action.targets]  # for width; JSON and the tables keep it
        targets = " → ".join(names) if action.action == "fuse" else ", ".join(names)
        if len(targets) > 22:
            targets = targets[:21].rstrip(", →:0123456789") + "…"  # never a cut number before the ellipsis
        free_us = None if apart else s.profiler_free_step_us  # the median step's: a saving of the mean span's only
        window = "trace" if whole else "step"
        lines = _action_lines(rank, action, targets, s.step_us, free_us, window)  # where the two steps agree
        if used + len(lines) > SUMMARY_LINES:
            break
        used += len(lines)
        shown += 1
        head.append("\n" + lines[0])
        head.append("\n" + lines[1])
        for line in lines[2:]:
            head.append("\n" + line, style="dim")
    if shown < len(result.actions) and used + (not reserved) <= SUMMARY_LINES:
        head.append(f"\n({len(result.actions) - shown} more in “Every action”: --section actions)", style="dim")
    head.append("\nMore: --section bound, critical_path, fusion; models: docs/actions.md")
    # the table also where every action is shown above: its caption says which actions are left out, and why
    table = len(result.actions) > shown or (bool(result.actions) and "left out" in result.note)
    return [head, every_action_table(result, "the trace" if whole else "step") if table else None]


def every_action_table(result: Actions, window: str = "step") -> Table:
    """Every action of `result` (the summary shows the first few that shorten the step), ranked as there: the
    predicted step, its stated range, the saving (negative: predicted to lengthen the step) and the summary's
    notes on the range (`range_notes`: what limits the changed step where not the GPU; `may not help`); under
    it, `result.note` (the steps replayed, the actions left out and why). `window`: what the step time is of
    ("step", or "the trace" for a trace without steps)."""
    step_us = result.summary.step_us or 0.0
    table = Table(title=f"Every action ({window} {us_text(step_us)} µs now; docs/actions.md)", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("action")
    table.add_column("targets")
    table.add_column("predicted\nstep µs", justify="right")
    table.add_column("range µs", justify="right")
    table.add_column("saves\nµs", justify="right")
    table.add_column("notes")
    droppable(table, "notes", "range µs")
    for rank, action in enumerate(result.actions, 1):
        names = [t.removeprefix("aten::") for t in action.targets]
        table.add_row(
            str(rank),
            action.action,
            (" → " if action.action == "fuse" else ", ").join(names),
            us_text(action.predicted_step_us),
            f"{action.low:,.0f}–{action.high:,.0f}" + _few_cells(action),
            us_text(action.saved_us) + (" (slower)" if action.saved_us < 0 else ""),  # the notes may be dropped
            ", ".join(n for n in range_notes(action, step_us) if not n.startswith("from ")) or "—",
        )
    caption = result.note[:1].upper() + result.note[1:] + "." if result.note else ""
    if any(a.action == "fuse" and a.saved_us < 0 for a in result.actions):  # the fusion section says it saves
        caption += (
            " A fuse predicted slower: its one kernel is launched from Python as a Triton kernel (as Liger's are),"
            " which costs the CPU more than the launches it removes save; the fusion section's saving is GPU time"
            " alone (docs/actions.md#the-fused-kernels-launch)."
        )
    if caption:  # how they were replayed, and the actions left out with why (never silent)
        table.caption, table.caption_justify = caption.strip(), "left"
    return table


def _few_cells(action: Action) -> str:
    """` (1 twin)` after a range that rests on fewer than `FEW_CELLS` calibration cells (kept with the range: the
    notes column is the first to go at 80 columns)."""
    cells = action.range_cells
    return f" ({twins_text(cells)})" if cells is not None and cells < FEW_CELLS else ""


SUMMARY_COLUMNS = 80


SUMMARY_LINES = 15


def _action_lines(
    rank: int, action: Action, targets: str, step_us: float, free_us: float | None = None, window: str = "step"
) -> list[str]:
    """One action's lines, each at most 80 columns: the saving, and where the step's profiler-free time is known
    (`free_us`) the saving without the profiler (`predicted_profiler_free_step_us` against it: the profiler's cost
    removed by the action is no saving of the program's); the step before → predicted with the stated range of the
    predicted step and its notes (`range_notes`); the evidence, wrapped under it. `window`: what the step time is
    of ("step", or "trace" for a trace without steps)."""
    notes = range_notes(action, step_us)
    stated = f"(range {action.low:,.0f}–{action.high:,.0f}" + (f"; {', '.join(notes)})" if notes else ")")
    second = f"   {window} {us_text(step_us)} → {us_text(action.predicted_step_us)} µs {stated}"
    if len(second) > SUMMARY_COLUMNS:  # the step before is on the first line of the summary
        second = f"   predicted {us_text(action.predicted_step_us)} µs {stated}"
    if len(second) > SUMMARY_COLUMNS:
        second = f"   predicted {us_text(action.predicted_step_us)} µs ({action.low:,.0f}–{action.high:,.0f})"
    evidence = textwrap.wrap(action.basis, SUMMARY_COLUMNS - 3, break_on_hyphens=False) or [""]
    first = f"{rank}. {action.action} ({targets}): saves {us_text(action.saved_us)} µs"
    predicted_free, apart = action.predicted_profiler_free_step_us, []
    if free_us is not None and predicted_free is not None:
        saved_free = us_text(free_us - predicted_free)
        free = f" ({saved_free} profiler-free)"
        if len(first) + len(free) <= SUMMARY_COLUMNS:
            first += free
        else:  # a line of its own
            apart = [f"   without the profiler: saves {saved_free} µs ({us_text(free_us)} → {us_text(predicted_free)})"]
    return [
        first,
        second,
        *apart,
        *(f"   {line}" for line in evidence),
    ]


LIMIT_SENTENCE = {
    "cpu": "CPU work limits the step (launches and dispatch): faster CPU work shortens it more than faster kernels",
    "gpu": "GPU work limits the step: faster kernels shorten it more than faster CPU work",
    "mixed": "both CPU and GPU work limit the step: neither alone shortens it much",
    "unknown": "neither faster CPU nor faster GPU work shortens the step (it waits on something else)",
}


def _lead_us(results: AnalysisResults) -> float | None:
    """How long (µs, mean per step) before the end of earlier steps' GPU work each step's CPU starts, where it is
    to be said (`critical_path.queued_pct`: at least `QUEUED_NOTE_PCT` % of the time from a step's CPU start to its
    end); else None."""
    path = results.get(CriticalPath)
    return path.queued_us if path is not None and queued_pct(path) is not None else None


def actions_panels(result: Actions | None, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    panel_id, title = "actions", "What to do next"
    if result is None or result.summary.step_us is None:
        return page.AnalysisPanels(
            overview=(page.unavailable(panel_id, title, "not run" if result is None else result.note),)
        )
    s = result.summary
    step_us = s.step_us or 0.0  # not None: checked above
    free = results.summary.profiler_free
    without = ""
    if s.profiler_free_step_us is not None and free is not None:
        words = free.source_words()
        without = f"; without the profiler {us_text(s.profiler_free_step_us)} µs ({words}, docs/profiler_overhead.md)"
        median, lead = free.profiled_step_us, _lead_us(results)
        if lead is not None:  # as the text summary says it
            without += (
                f"; each step's CPU starts {us_text(lead)} µs before earlier GPU work ends: spans start at its end"
            )
            if median and abs(step_us / median - 1) > MEAN_AND_MEDIAN_APART:
                without += f"; the median step: {us_text(median)} µs profiled"
        elif median and abs(step_us / median - 1) > MEAN_AND_MEDIAN_APART:
            without += f", for the median step of {us_text(median)} µs profiled"
    spans = (
        f"The whole trace, {us_text(step_us)} µs profiled (no steps)"
        if results.summary.facts.step_source == WHOLE_TRACE_SOURCE
        else f"Step {us_text(step_us)} µs profiled (mean span of {s.steps} steps)"
    )
    note = (
        f"{spans}{without}. Limit: {LIMIT_SENTENCE.get(s.limit, s.limit)}. {result.note[:1].upper()}{result.note[1:]}."
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
    table = page.Table(columns=("action", "targets", "step µs", "range µs", "saves µs", "basis"), rows=rows)
    return page.AnalysisPanels(overview=(page.Panel(id=panel_id, title=title, table=table, note=note),))
