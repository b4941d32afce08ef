"""Which plotly.js the report inlines (renderers/html.py): the vendored cartesian partial bundle, of the plotly
package's own plotly.js version, on a page whose figures are all of the types it registers; the full bundle of the
plotly package on any other page. (tests/browser/test_report_browser.py checks in Chromium that the bundle registers
every type `CARTESIAN_TYPES` lists.)"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from tests.report_helpers import tiny_trace
from tracelens.analyses import analyze
from tracelens.loader import load_trace
from tracelens.renderers.html import CARTESIAN_BUNDLE, HtmlReportRenderer
from tracelens.renderers.page import build_report
from tracelens.report.document import Panel, ReportDocument, Section


def test_vendored_bundle_is_the_plotly_packages_version() -> None:
    head = CARTESIAN_BUNDLE.read_text(encoding="utf-8")[:200]
    assert f"plotly.js (cartesian - minified) v{get_plotlyjs_version()}" in head, head  # scripts/vendor_plotly.py
    assert (CARTESIAN_BUNDLE.parent / "plotly.js-LICENSE").read_text().startswith("MIT License")


def test_a_report_of_bars_scatters_and_heatmaps_inlines_the_cartesian_bundle(tmp_path: Path) -> None:
    trace = load_trace(tiny_trace(tmp_path))
    page = HtmlReportRenderer().render(build_report([(trace, analyze(trace))]))
    assert "plotly.js (cartesian - minified) v" in page
    assert get_plotlyjs()[:300] not in page
    assert len(page) < 2_000_000  # the full bundle alone is 4.8 MB


def _document(figure: go.Figure) -> ReportDocument:
    panel = Panel(id="one", title="one", figure=figure)
    return ReportDocument(title="t", subtitle="s", sections=(Section(id="s", title="s", panels=(panel,)),))


def test_a_webgl_figure_gets_the_full_bundle() -> None:
    page = HtmlReportRenderer().render(_document(go.Figure(go.Scattergl(x=[1, 2], y=[3, 4]))))
    assert "plotly.js (cartesian - minified)" not in page
    assert get_plotlyjs()[:300] in page
    assert "plotly.js (cartesian - minified)" in HtmlReportRenderer().render(_document(go.Figure(go.Bar(y=[1]))))
