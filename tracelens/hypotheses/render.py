"""Verdicts for people (a rich table) and programs (JSON schema `tracelens.check/1`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracelens import __version__
from tracelens.hypotheses.document import TraceDocument
from tracelens.hypotheses.evaluate import Verdict

if TYPE_CHECKING:  # rich is imported only to render text: JSON output does without it
    from rich.table import Table
    from rich.text import Text

CHECK_SCHEMA = "tracelens.check/1"


@dataclass(frozen=True)
class CheckResult:
    """What `tracelens check` reports: the hypotheses file, the traces and one verdict per check."""

    source: str
    traces: Sequence[TraceDocument]
    verdicts: Sequence[Verdict]

    @property
    def wrong(self) -> int:
        return sum(not v.held for v in self.verdicts)

    @property
    def held(self) -> int:
        return sum(v.held for v in self.verdicts)


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
    """A verdict table: hypothesis, trace, claim, measured value, HELD/WRONG, evidence."""

    def __init__(self, color: bool = False, width: int | None = None, evidence_lines: int = 3) -> None:
        self.color = color
        self.width = width or 160
        self.evidence_lines = evidence_lines

    def render(self, result: CheckResult) -> str:
        from rich.text import Text

        from tracelens.renderers.text import make_console, render_to_string

        console = make_console(self.color, self.width)
        console.print(self.table(result))
        held, wrong = result.held, result.wrong
        summary = Text(f"{held} held, {wrong} wrong", style="bold green" if not wrong else "bold red")
        console.print(summary)
        return render_to_string(console)

    def table(self, result: CheckResult) -> Table:
        from rich.table import Table
        from rich.text import Text

        several = len(result.traces) > 1
        table = Table(title=f"Hypotheses: {result.source}", title_justify="left", show_lines=True)
        table.add_column("#", justify="right")
        table.add_column("hypothesis", max_width=36)
        if several:
            table.add_column("trace")
        table.add_column("claim", max_width=40)
        table.add_column("measured", max_width=24)
        table.add_column("verdict")
        table.add_column("evidence", max_width=60)
        for verdict in result.verdicts:
            status = Text(verdict.status, style="bold green" if verdict.held else "bold red")
            evidence = list(verdict.evidence[: self.evidence_lines])
            if len(verdict.evidence) > self.evidence_lines:
                evidence.append(f"… {len(verdict.evidence) - self.evidence_lines} more (--format json)")
            cells: list[str | Text] = [
                str(verdict.hypothesis.index),
                verdict.hypothesis.name,
                *([verdict.trace] if several else []),
                verdict.hypothesis.statement(),
                format_value(verdict.measured),
                status,
                "\n".join(evidence),
            ]
            table.add_row(*cells)
        return table


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value[:6]) + (", …" if len(value) > 6 else "")
    return "null" if value is None else str(value)
