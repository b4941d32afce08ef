"""The report as data: sections of panels (a Plotly figure, a table or a note), built before any HTML."""

from __future__ import annotations

import html

import msgspec
import plotly.graph_objects as go


def chart_text(text: str) -> str:
    """A string from the trace (a kernel, op, thread or variant name) made inert for a Plotly label.

    Plotly draws axis ticks, legend names and hover text as a subset of HTML (`<a href>`, `<b>`, `<br>`, ...)
    and fills `%{...}` into hover templates: `<`, `>` and `&` become entities (Plotly shows them as the
    characters) and `%` becomes `&#37;`, so a name like `<a href=...>` is shown, never made a live link. Every
    label built from trace content in `tracelens.report` goes through here; HTML tables are escaped by the
    HTML renderer instead."""
    return html.escape(text, quote=False).replace("%", "&#37;")


class Table(msgspec.Struct, frozen=True):
    """A small table of already formatted cells."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class Panel(msgspec.Struct, frozen=True):
    """One box of the page. `id` is stable and becomes the HTML element id; exactly one of
    `figure` / `table` is set, or neither when the panel only says why it is empty (`note`). `folded`: when set,
    the panel shows this one line and its body opens on a click (reference facts that should not push the
    answer off the first screen)."""

    id: str
    title: str
    figure: go.Figure | None = None
    table: Table | None = None
    note: str = ""
    folded: str = ""
    links: tuple[FindingLink, ...] = ()  # under a timeline: buttons that zoom it to each finding


class FindingLink(msgspec.Struct, frozen=True):
    """A button that zooms the timeline (`chart-<panel id>`) to `x0_us`..`x1_us` (the timeline's µs), and how to
    find the same place in the `.pftrace` of `annotate --format perfetto`."""

    label: str
    x0_us: float
    x1_us: float
    perfetto: str


class Section(msgspec.Struct, frozen=True):
    id: str
    title: str
    panels: tuple[Panel, ...]
    notes: tuple[str, ...] = ()


class AnalysisPanels(msgspec.Struct, frozen=True):
    """One analysis' panels (its registry entry's `panels` renderer): charts in "Where the time goes", after the
    summary's and before the kernel table, and findings in "Findings"."""

    breakdowns: tuple[Panel, ...] = ()
    findings: tuple[Panel, ...] = ()
    overview: tuple[Panel, ...] = ()  # on the first screen, after the trace facts and per-step figures


class ReportDocument(msgspec.Struct, frozen=True):
    """Everything the HTML page shows, in page order."""

    title: str
    subtitle: str
    sections: tuple[Section, ...]
    warnings: tuple[str, ...] = msgspec.field(default_factory=tuple)

    def figures(self) -> list[tuple[str, go.Figure]]:
        """(panel id, figure) of every chart, in page order."""
        return [(p.id, p.figure) for s in self.sections for p in s.panels if p.figure is not None]

    def panel(self, panel_id: str) -> Panel:
        for section in self.sections:
            for candidate in section.panels:
                if candidate.id == panel_id:
                    return candidate
        raise KeyError(panel_id)


def unavailable(panel_id: str, title: str, why: str) -> Panel:
    """A panel that says its data is not available, and why."""
    return Panel(id=panel_id, title=title, note=f"not available: {why}")
