"""The report in a real browser (headless Chromium): every chart renders, no console errors, no network
request, and hovering a kernel on the timeline shows its tooltip. Skips without Chromium / Playwright."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium import browser_page
from tests.conftest import TRACES, anchor
from tests.report_helpers import tiny_trace
from tracelens.analyses import analyze
from tracelens.loader import load_trace
from tracelens.renderers.html import HtmlReportRenderer
from tracelens.renderers.page import build_report

RENDERED = """() => {
  const charts = Array.from(document.querySelectorAll('.plotly-graph-div'));
  return charts.length > 0 && charts.every(c => c.querySelector('.main-svg') !== null);
}"""
CHART_IDS = (
    "() => Array.from(document.querySelectorAll('.plotly-graph-div')).map(c => [c.id, !!c.querySelector('.main-svg')])"
)
POINT = """([id, x, y]) => {
  const gd = document.getElementById(id);
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
}"""


def write_report(paths: list[Path], output: Path) -> int:
    inputs = []
    for path in paths:
        trace = load_trace(path)
        inputs.append((trace, analyze(trace)))
    document = build_report(inputs)
    output.write_text(HtmlReportRenderer().render(document), encoding="utf-8")
    return len(document.figures())


def open_report(page: Any, path: Path, ready: str = RENDERED) -> tuple[list[str], list[str]]:
    """Load `path`, blocking and recording every non-file request, until `ready` (a JS predicate) holds; by default
    every chart drawn, each scrolled to (`draw_every_chart`). Returns (console errors, requests)."""
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))

    def route(handler: Any) -> None:
        if handler.request.url.startswith("file://"):
            handler.continue_()
        else:
            requests.append(handler.request.url)
            handler.abort()

    page.route("**/*", route)
    page.goto(path.as_uri(), wait_until="load")
    if ready == RENDERED:
        draw_every_chart(page)
    page.wait_for_function(ready, timeout=60_000)
    return errors, requests


DRAWN = "(id) => !!document.getElementById(id).querySelector('.main-svg')"


def draw_every_chart(page: Any) -> dict[str, float]:
    """Scroll to each chart in turn (the page draws a chart below the first screen when it comes near the window)
    until it is drawn, then back to the top; returns the seconds each took to be drawn once scrolled to."""
    took = {}
    for chart in page.evaluate("() => Array.from(document.querySelectorAll('.plotly-graph-div'), c => c.id)"):
        started = time.monotonic()
        page.evaluate("(id) => document.getElementById(id).scrollIntoView({block: 'center'})", chart)
        page.wait_for_function(DRAWN, arg=chart, timeout=60_000)
        took[chart] = time.monotonic() - started
    page.evaluate("() => window.scrollTo(0, 0)")
    return took


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_tiny_report_renders_and_hovers(tmp_path: Path) -> None:
    report = tmp_path / "tiny.html"
    n_charts = write_report([tiny_trace(tmp_path)], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        charts = page.evaluate(CHART_IDS)
        assert len(charts) == n_charts >= 4
        assert all(rendered for _, rendered in charts), charts
        # the GEMM of step 1 runs 30..50 µs on the GPU lane (y = 3)
        x, y = page.evaluate(POINT, ["chart-timeline", 40.0, 3])
        page.mouse.move(x, y)
        page.wait_for_selector("#chart-timeline .hoverlayer .hovertext", timeout=5_000)
        tooltip = page.evaluate("document.querySelector('#chart-timeline .hoverlayer').textContent")
        assert "ampere_sgemm_128x64_nn" in tooltip and "launched by: aten::mm" in tooltip
    assert errors == []
    assert requests == []


@pytest.mark.slow
def test_the_cartesian_bundle_registers_every_type_it_is_chosen_for(tmp_path: Path) -> None:
    """The tiny report inlines the vendored cartesian bundle; in Chromium it registers each trace type that
    `CARTESIAN_TYPES` lists (the page with any other type gets the full bundle)."""
    from tracelens.renderers.html import CARTESIAN_TYPES

    report = tmp_path / "tiny.html"
    write_report([tiny_trace(tmp_path)], report)
    assert "plotly.js (cartesian - minified)" in report.read_text()
    with browser_page() as page:
        open_report(page, report)
        registered = set(page.evaluate("() => Object.keys(Plotly.PlotSchema.get().traces)"))
    assert registered >= CARTESIAN_TYPES, CARTESIAN_TYPES - registered


def recorded_or_anchor() -> Path:
    recorded = TRACES / "h200" / "eager_mlp.json.gz"
    return recorded if recorded.exists() else anchor("amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["single", "comparison"])
def test_real_trace_report_renders_every_chart(tmp_path: Path, kind: str) -> None:
    main = recorded_or_anchor()
    paths = [main] if kind == "single" else [main, anchor("hta/triton_example/triton_example.json.gz")]
    report = tmp_path / "report.html"
    n_charts = write_report(paths, report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        charts = page.evaluate(CHART_IDS)
        assert len(charts) == n_charts
        assert all(rendered for _, rendered in charts), charts
    assert errors == []
    assert requests == []


PAGE_HOVERS = """() => document.getElementById('chart-timeline')._tlOriginals.groups.map(g => g.text || [])"""


@pytest.mark.slow
def test_the_page_holds_every_hover_of_the_figure(tmp_path: Path) -> None:
    """The page stores hover texts as line tables, kernel names and scopes once each (renderers/html.py); its
    script rebuilds every hover: on the eager transformer block, the same texts, in order, as the figure's
    (`page_hovers` of each hover trace, in Python)."""
    from tracelens.report.timeline import page_hovers

    path = TRACES / "h200" / "block" / "eager_block.json.gz"
    trace = load_trace(path)
    figure = build_report([(trace, analyze(trace))]).panel("timeline").figure
    assert figure is not None
    expected = [
        page_hovers(t.text, t.meta.get("names"), t.customdata, t.meta.get("scopes"), t.meta.get("scope_index"))
        for t in figure.data
        if isinstance(t.meta, dict) and t.meta.get("lod") == "hover"
    ]
    report = tmp_path / "block.html"
    write_report([path], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        shown = page.evaluate(PAGE_HOVERS)
    assert errors == [] and requests == []
    assert sum(len(texts) for texts in expected) > 600
    assert shown == expected
