"""One self-contained HTML page for a `ReportDocument`: plotly.js inlined (works offline, loads nothing from
the network), fixed element ids and a fixed order, so the same report gives byte-identical HTML."""

from __future__ import annotations

import html
import json

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from tracelens import __version__
from tracelens.report.document import Panel, ReportDocument, Section, Table

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": True}
DEFAULT_HEIGHT_PX = 450

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #f6f7f9; }
header { background: #1f2937; color: #f9fafb; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 4px 0 0; font-size: 13px; color: #cbd5e1; }
nav { padding: 8px 24px; background: #e5e7eb; font-size: 13px; position: sticky; top: 0; z-index: 10; }
nav a { margin-right: 14px; color: #1f2937; }
main { padding: 8px 24px 40px; }
section h2 { font-size: 17px; margin: 22px 0 8px; border-bottom: 1px solid #d1d5db; padding-bottom: 4px; }
.panels { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.panel { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: 10px 12px; flex: 1 1 520px;
  min-width: 0; box-sizing: border-box; overflow-x: auto; }
.panel.wide { flex-basis: 100%; }
.panel h3 { font-size: 14px; margin: 0 0 6px; }
.note { font-size: 12px; color: #555; margin: 0 0 6px; }
.unavailable { color: #888; font-style: italic; }
.warnings { background: #fff7ed; border: 1px solid #fed7aa; padding: 6px 12px; margin: 10px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
footer { font-size: 12px; color: #777; padding: 0 24px 24px; }
"""


class HtmlReportRenderer:
    """Renders a `ReportDocument` to one HTML page with plotly.js inlined."""

    def render(self, result: ReportDocument) -> str:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{_esc(result.title)}</title>",
            f"<style>{STYLE}</style>",
            '<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: "local"};</script>',
            f'<script type="text/javascript">{get_plotlyjs()}</script>',
            "</head>",
            "<body>",
            f"<header><h1>{_esc(result.title)}</h1><p>{_esc(result.subtitle)}</p></header>",
            _nav(result.sections),
            "<main>",
        ]
        if result.warnings:
            items = "".join(f"<li>{_esc(w)}</li>" for w in result.warnings)
            parts.append(f'<div class="warnings"><b>Warnings</b><ul>{items}</ul></div>')
        parts += [_section(section) for section in result.sections]
        parts += [
            "</main>",
            _plot_script(result),
            f"<footer>Written by tracelens {_esc(__version__)}. Self-contained: works offline.</footer>",
            "</body>",
            "</html>",
            "",
        ]
        return "\n".join(parts)


def _nav(sections: tuple[Section, ...]) -> str:
    links = "".join(f'<a href="#{_esc(s.id)}">{_esc(s.title)}</a>' for s in sections)
    return f"<nav>{links}</nav>"


def _section(section: Section) -> str:
    notes = "".join(f'<p class="note">{_esc(n)}</p>' for n in section.notes)
    panels = "\n".join(_panel(p) for p in section.panels)
    return (
        f'<section id="{_esc(section.id)}"><h2>{_esc(section.title)}</h2>{notes}'
        f'<div class="panels">\n{panels}\n</div></section>'
    )


def _panel(panel: Panel) -> str:
    wide = (panel.figure is not None and "timeline" in panel.id) or (
        panel.table is not None and len(panel.table.columns) >= 6
    )
    head = f'<div class="panel{" wide" if wide else ""}" id="panel-{_esc(panel.id)}"><h3>{_esc(panel.title)}</h3>'
    note_class = "note unavailable" if panel.figure is None and panel.table is None else "note"
    note = f'<p class="{note_class}">{_esc(panel.note)}</p>' if panel.note else ""
    body = ""
    if panel.figure is not None:
        body = chart_div(panel.figure, f"chart-{panel.id}")
    elif panel.table is not None:
        body = _table(panel.table)
    return f"{head}{note}{body}</div>"


def chart_div(figure: go.Figure, div_id: str) -> str:
    """The empty element a chart is drawn into (by the script at the end of the page)."""
    height = figure.layout.height or DEFAULT_HEIGHT_PX
    return f'<div id="{_esc(div_id)}" class="plotly-graph-div" style="height:{int(height)}px; width:100%;"></div>'


def _plot_script(document: ReportDocument) -> str:
    """One script after every panel exists (so each chart gets its final width) that draws the charts in
    page order."""
    config = json.dumps(PLOTLY_CONFIG, sort_keys=True)
    body = "\n".join(_draw(panel_id, figure, config) for panel_id, figure in document.figures())
    return f'<script type="text/javascript">\n{body}\n</script>'


def _draw(panel_id: str, figure: go.Figure, config: str) -> str:
    figure_json = _figure_json(figure)
    return (
        f'(function () {{ var f = {figure_json}; Plotly.newPlot("chart-{panel_id}", f.data, f.layout, {config}); }})();'
    )


def _figure_json(figure: go.Figure) -> str:
    """The figure as JSON safe inside a script element (plotly escapes `<`, `>` and `/`)."""
    return str(pio.to_json(figure, validate=False))


def _table(table: Table) -> str:
    numeric = [all(_looks_numeric(row[i]) for row in table.rows) and table.rows for i in range(len(table.columns))]
    head = "".join(
        f'<th class="num">{_esc(c)}</th>' if numeric[i] else f"<th>{_esc(c)}</th>" for i, c in enumerate(table.columns)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{_esc(v)}</td>' if numeric[i] else f"<td>{_esc(v)}</td>" for i, v in enumerate(row))
        + "</tr>"
        for row in table.rows
    )
    header = f"<thead><tr>{head}</tr></thead>" if any(table.columns) else ""
    return f"<table>{header}<tbody>{body}</tbody></table>"


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace(".", "", 1).lstrip("-")
    return stripped.isdigit()


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
