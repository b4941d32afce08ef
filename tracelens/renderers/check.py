"""`tracelens check`'s verdicts for people (a rich table) and programs (JSON schema `tracelens.check/1`)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from tracelens import __version__
from tracelens.hypotheses.evaluate import CheckResult, Verdict
from tracelens.renderers.textsafe import escape_controls

if TYPE_CHECKING:  # rich is imported only to render text: JSON output does without it
    from rich.table import Table

CHECK_SCHEMA = "tracelens.check/1"


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    hypothesis = verdict.hypothesis
    return {
        "index": hypothesis.index,
        "name": hypothesis.name,
        "trace": verdict.trace,
        "status": verdict.status.lower(),
        "held": verdict.held,
        "statement": hypothesis.statement(),
        "measured": _plain(verdict.measured),
        "expected": _plain(verdict.expected),
        "evidence": list(verdict.evidence),
        "note": hypothesis.note,
    }


def check_dict(result: CheckResult) -> dict[str, Any]:
    """The `tracelens.check/1` document."""
    return {
        "schema": CHECK_SCHEMA,
        "tool": {"name": "tracelens", "version": __version__},
        "hypotheses": result.source,
        "traces": [{"label": d.label, "aliases": list(d.aliases), "path": d.path} for d in result.traces],
        "held": result.held,
        "wrong": result.wrong,
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
    """One line per verdict: HELD/WRONG, its number, the hypothesis (and trace), the measured value and the
    claim. The evidence follows, indented, for WRONG verdicts, and for all of them with `verbose` (`check -v`)."""

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
        console.print(Text(f"Hypotheses: {result.source}", style="bold"))
        console.print(self.table(result))
        held, wrong = result.held, result.wrong
        summary = Text(f"{held} held, {wrong} wrong", style="bold green" if not wrong else "bold red")
        console.print(summary)
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
        for verdict in result.verdicts:
            line = Text(escape_controls(verdict.hypothesis.name))  # names are data: control characters escaped
            if several:
                line.append(escape_controls(f" [{verdict.trace}]"), style="dim")
            line.append(escape_controls(f": measured {format_value(verdict.measured)}"), style="bold")
            line.append(escape_controls(f" ({verdict.hypothesis.statement()})"))
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


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value[:6]) + (", …" if len(value) > 6 else "")
    return "null" if value is None else str(value)
