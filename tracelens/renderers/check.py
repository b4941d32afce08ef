"""`tracelens check`'s verdicts for people (a rich table) and programs (JSON schema `tracelens.check/1`)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracelens import __version__
from tracelens.escapes import escape_controls
from tracelens.hypotheses.evaluate import CheckResult, Verdict
from tracelens.units import change_text, us_text
from tracelens.variants import ANOTHER_PROGRAM, CAPTURED_COMPILED, WARMUP_ONLY, WHOLE_TRACE

if TYPE_CHECKING:  # rich is imported only to render text: JSON output does without it
    from rich.table import Table

CHECK_SCHEMA = "tracelens.check/1"


JSON_STATUS = {"HELD": "held", "WRONG": "wrong", "UNKNOWN": "unknown", "N/A": "not_applicable"}


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    hypothesis = verdict.hypothesis
    return {
        "index": hypothesis.index,
        "name": hypothesis.name,
        "trace": verdict.trace,
        "status": JSON_STATUS[verdict.status],
        "held": verdict.held if verdict.applies and verdict.known else None,
        "statement": hypothesis.statement(),
        "measured": _plain(verdict.measured),
        "expected": _plain(verdict.expected),
        "error_pct": _plain(verdict.error_pct),
        "evidence": list(verdict.evidence),
        "note": hypothesis.note,
        "action": hypothesis.action,
        "before": None if hypothesis.before is None else hypothesis.before.as_before(),
        "taken_action": verdict.taken_action,
        "took": verdict.took,
        "reason": verdict.reason,
        "before_value": hypothesis.before_value,
        "no_change_holds": verdict.no_change_holds,
        "gemm_drift_us": verdict.gemm_drift_us,
    }


def check_dict(result: CheckResult) -> dict[str, Any]:
    """The `tracelens.check/1` document."""
    return {
        "schema": CHECK_SCHEMA,
        "tool": {"name": "tracelens", "version": __version__},
        "hypotheses": result.source,
        "traces": [{"label": d.label, "aliases": list(d.aliases), "path": d.path} for d in result.traces],
        "held": result.held,
        "weak": result.weak,
        "wrong": result.wrong,
        "unknown": result.unknown,
        "not_applicable": result.not_applicable,
        "verdicts": [verdict_dict(v) for v in result.verdicts],
    }


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class CheckJsonRenderer:
    def render(self, result: CheckResult) -> str:
        return json.dumps(check_dict(result), indent=2, ensure_ascii=False) + "\n"


class CheckTextRenderer:
    """What each trace took relative to the predictions' `before` (one line per trace, when hypotheses name an
    `action`), then one line per verdict, N/A ones last: HELD/WRONG, its number, the hypothesis (and trace), the
    measured value, the error of an `==` with a number as value, and the claim; N/A, the action it predicts. The
    evidence follows, indented, for WRONG verdicts, and for all of them with `verbose` (`check -v`). Last the
    counts: held, wrong, and not applicable where any is."""

    def __init__(
        self, color: bool = False, width: int | None = None, evidence_lines: int = 3, verbose: bool = False
    ) -> None:
        self.color = color
        self.width = width
        self.evidence_lines = evidence_lines
        self.verbose = verbose

    def render(self, result: CheckResult) -> str:
        from rich.text import Text

        from tracelens.renderers.text import make_console, render_to_string

        console = make_console(self.color, self.width)
        none = "" if result.verdicts else " (none: the file says hypothesis = [])"
        console.print(Text(f"Hypotheses: {result.source}{none}", style="bold"))
        for line in taken_lines(result.verdicts):
            console.print(Text(escape_controls(line)))
        console.print(self.table(result))
        held, wrong, na = result.held, result.wrong, result.not_applicable
        weak = f" ({result.weak} weak: no change would have held too)" if result.weak else ""
        unknown = f", {result.unknown} unknown (the trace gives no value)" if result.unknown else ""
        counts = f"{held} held{weak}, {wrong} wrong{unknown}" + (f", {na} not applicable" if na else "")
        console.print(Text(counts, style="bold red" if wrong else "bold yellow" if result.unknown else "bold green"))
        return render_to_string(console)

    def table(self, result: CheckResult) -> Table:
        """A borderless grid: the verdict and number, then the line (wrapped with a hanging indent)."""
        from rich.table import Table
        from rich.text import Text

        several = len(result.traces) > 1
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for verdict in sorted(result.verdicts, key=lambda v: not v.applies):  # stable: N/A last, else in order
            line = Text(escape_controls(verdict.hypothesis.name))  # names are data: control characters escaped
            if several:
                line.append(escape_controls(f" [{verdict.trace}]"), style="dim")
            if not verdict.applies:
                line.append(escape_controls(_not_applicable(verdict)), style="dim")
                grid.add_row(Text(verdict.status, style="bold yellow"), f"{verdict.hypothesis.index}.", line)
                continue
            if not verdict.known:
                line.append(
                    escape_controls(
                        f": not measured, the trace gives no value ({verdict.hypothesis.readable_statement()})"
                    )
                )
                grid.add_row(Text(verdict.status, style="bold yellow"), f"{verdict.hypothesis.index}.", line)
                continue
            shown = f"{us_text(verdict.measured)} µs" if _in_us(verdict) else format_value(verdict.measured)
            line.append(escape_controls(f": measured {shown}"), style="bold")
            if verdict.error_pct is not None and verdict.measured != verdict.hypothesis.value:  # not on exact hits
                line.append(f", error {change_text(verdict.error_pct)} %", style="bold")
            line.append(escape_controls(f" ({verdict.hypothesis.readable_statement()})"))
            if verdict.weak:
                line.append(escape_controls(_weak_words(verdict)), style="yellow")
            if verdict.gemm_drift_us is not None and _in_us(verdict):
                line.append(escape_controls(_drift_words(verdict, verdict.gemm_drift_us)), style="yellow")
            status = Text(verdict.status, style="bold green" if verdict.held else "bold red")
            grid.add_row(status, f"{verdict.hypothesis.index}.", line)
            if verdict.held and not self.verbose:
                continue
            evidence = list(verdict.evidence[: self.evidence_lines])
            if len(verdict.evidence) > self.evidence_lines:
                evidence.append(f"… {len(verdict.evidence) - self.evidence_lines} more (--format json)")
            for item in evidence:
                grid.add_row("", "", Text(escape_controls(f"  {item}"), style="dim"))
        return grid


def _in_us(verdict: Verdict) -> bool:
    """Whether the measured value is a number of µs: a metric whose path ends in `_us`, or a time measure."""
    subject = verdict.hypothesis.subject
    if subject is None or isinstance(verdict.measured, bool) or not isinstance(verdict.measured, int | float):
        return False
    name = subject.target if subject.kind == "metric" else subject.measure
    return "us" in re.split(r"[._]", name)  # `per_step.gpu_kernel_us`, `us_per_step`, `mean_us`


def _weak_words(verdict: Verdict) -> str:
    """What a weak HELD means, and the change predicted against the change measured (said when they differ in
    sign: the range held while the step moved the other way)."""
    before = verdict.hypothesis.before_value
    value = verdict.hypothesis.value
    assert before is not None
    unit = " µs" if _in_us(verdict) else ""
    words = f"; weak: the value before, {before:,.1f}{unit}, lies in the range too"
    if isinstance(value, int | float) and isinstance(verdict.measured, int | float):
        predicted, measured = float(value) - before, float(verdict.measured) - before
        opposite = predicted * measured < 0  # the range held, but the step moved the other way
        words += f" (change predicted {change_text(predicted)}{unit}, measured {change_text(measured)}{unit}"
        words += ": the other way)" if opposite else ")"
    return words


def _drift_words(verdict: Verdict, drift_us: float) -> str:
    """The GEMM kernels' clock drift (`Verdict.gemm_drift_us`) beside a time measured, and the change measured
    without it where the value before is known."""
    longer = "longer" if drift_us > 0 else "shorter"
    words = (
        f"; its GEMM kernels, the same as before, ran {us_text(abs(drift_us))} µs/step {longer}: the GPU's clock, "
        "not the action"
    )
    before = verdict.hypothesis.before_value
    if before is not None and isinstance(verdict.measured, int | float) and not isinstance(verdict.measured, bool):
        change = change_text(float(verdict.measured) - before - drift_us)
        words += f" (the step is GPU-limited: the change measured without it, {change} µs)"
    return words


_IS = {  # `took` that is no action, after the trace's name
    ANOTHER_PROGRAM: "is another program",
    WARMUP_ONLY: "is warm-up only",
    WHOLE_TRACE: "has no steps (a whole trace is not a step)",
    CAPTURED_COMPILED: "captured its compiled code",
}


def _not_applicable(verdict: Verdict) -> str:
    """Why a prediction does not apply, after its name: ": compiled_block is another program", ": liger_mlp took
    fuse" (": predicts compile; …" first where the name does not start with the action)."""
    action = verdict.hypothesis.action or ""
    predicts = "" if verdict.hypothesis.name.startswith(action) else f" predicts {action};"
    taken = _IS.get(verdict.took, f"took {verdict.took}")
    return f":{predicts} {verdict.trace} {taken}"


def taken_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """Per trace (and `before`), what it took: "compiled_mlp took compile (...): 1 checked, 3 not applicable",
    "... : every prediction checked", or "...: none checked"; none without `action`."""
    groups: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        if verdict.taken:
            groups.setdefault(verdict.taken, []).append(verdict)
    lines = []
    for taken, group in groups.items():
        na = sum(not v.applies for v in group)
        if na == 0:
            lines.append(f"{taken}: every prediction checked")
        elif na == len(group):
            lines.append(f"{taken}; none checked")
        else:
            lines.append(f"{taken}: {len(group) - na} checked, {na} not applicable")
    return lines


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list):  # each distinct value once, in order, with how often it occurs
        counts = Counter(format_value(v) for v in value)
        shown = [f"{text} ×{n}" if n > 1 else text for text, n in counts.items()]
        return ", ".join(shown[:6]) + (", …" if len(shown) > 6 else "")
    return "null" if value is None else str(value)
