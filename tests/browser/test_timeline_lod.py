"""The timeline never hides work: at the default zoom of a big trace the GPU lane is drawn as busy as the GPU
was, and zoomed in to 10 ms, single kernels hover with their names (headless Chromium; skips without it).

The busy fraction is computed independently from the raw events (tests/rawtrace.py): the union of kernel,
memcpy and memset intervals inside the visible range, over the range.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import rawtrace
from tests.browser.chromium import browser_page
from tests.browser.test_report_browser import open_report, write_report
from tests.conftest import anchor

XDIT = "amd_tracelens/inference/xdit_flux.1_aiter_sage/profile_trace_rank_0.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

# fraction of the plot width covered by the bars drawn on one lane (pixel intervals, union), and the x range; the
# page draws each bar as a filled rectangle: x = start, end, end, start, gap; y = bottom, bottom, top, top, gap
DRAWN = """([lane]) => {
  const gd = document.getElementById('chart-timeline'), xa = gd._fullLayout.xaxis, iv = [];
  gd.data.forEach(t => {
    if (!t.meta || t.meta.lod !== 'bars') return;
    if (t.fill !== 'toself') throw new Error('bars not drawn as filled rectangles');
    for (let k = 0; k + 4 < t.x.length; k += 5) {
      if ((+t.y[k] + +t.y[k + 2]) / 2 !== lane || t.x[k] === null) continue;
      const a = Math.max(0, xa.l2p(+t.x[k])), b = Math.min(xa._length, xa.l2p(+t.x[k + 1]));
      if (b > a) iv.push([a, b]);
    }
  });
  iv.sort((p, q) => p[0] - q[0]);
  let covered = 0, cur = null;
  for (const [a, b] of iv) {
    if (cur && a <= cur[1]) cur[1] = Math.max(cur[1], b);
    else { if (cur) covered += cur[1] - cur[0]; cur = [a, b]; }
  }
  if (cur) covered += cur[1] - cur[0];
  return [covered / xa._length, xa.range[0], xa.range[1]];
}"""
# each GPU stream's lane as drawn: its utilization strip runs across the lane's top (y = lane - 0.5 up); the figure's
# own lane numbers (meta.lane) differ where the page has folded CPU call depth above it
GPU_LANES = """() => document.getElementById('chart-timeline').data
  .filter(t => t.meta && t.meta.lod === 'util').map(t => +t.y[0] + 0.5)"""
# the single (not merged) GPU slice nearest the middle of the view: its centre in page pixels and its tooltip text
SINGLE_SLICE = """([lane]) => {
  const gd = document.getElementById('chart-timeline'), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const box = gd.getBoundingClientRect(), middle = (xa.range[0] + xa.range[1]) / 2;
  let best = null;
  gd.data.forEach(t => {
    if (!t.meta || t.meta.lod !== 'hover') return;
    t.x.forEach((x, k) => {
      if (+t.y[k] !== lane || String(t.text[k]).includes('merged')) return;
      if (best === null || Math.abs(x - middle) < Math.abs(best[0] - middle)) best = [x, String(t.text[k])];
    });
  });
  if (best === null) return null;
  return [box.left + xa._offset + xa.l2p(best[0]), box.top + ya._offset + ya.l2p(lane), best[1]];
}"""


def _busy_fraction(path: Path, low_us: float, high_us: float) -> float:
    intervals = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in rawtrace.events(path)
        if str(e.get("cat", "")).lower() in GPU_CATS
    ]
    merged = rawtrace.merge(intervals)
    # the report's time axis starts at the trace's earliest event
    origin = min(float(e["ts"]) for e in rawtrace.events(path))
    window = [[low_us + origin, high_us + origin]]
    return rawtrace.intersection(merged, window) / (high_us - low_us)


def _check_default_and_zoom(page: Any, path: Path) -> None:
    lanes = page.evaluate(GPU_LANES)
    assert lanes, "no GPU lane"
    busiest = max(lanes, key=lambda lane: page.evaluate(DRAWN, [lane])[0])
    drawn, low, high = page.evaluate(DRAWN, [busiest])
    busy = _busy_fraction(path, low, high)
    assert abs(drawn - busy) <= 0.10, (drawn, busy)
    middle = (low + high) / 2
    page.evaluate(
        "([a, b]) => Plotly.relayout('chart-timeline', {'xaxis.range': [a, b]})", [middle - 5_000, middle + 5_000]
    )
    page.wait_for_timeout(300)
    page.locator("#chart-timeline").scroll_into_view_if_needed()
    found = page.evaluate(SINGLE_SLICE, [busiest])
    assert found is not None, "no single slice drawn after zooming in"
    x, y, text = found
    page.mouse.move(x, y)
    page.wait_for_selector("#chart-timeline .hoverlayer .hovertext", timeout=5_000)
    tooltip = page.evaluate("document.querySelector('#chart-timeline .hoverlayer').textContent")
    name = text.split("<br>")[0].replace("<b>", "").replace("</b>", "")
    assert name[:40].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")[:20] in tooltip


@pytest.mark.slow
def test_xdit_default_view_shows_the_gpu_as_busy_as_it_was(tmp_path: Path) -> None:
    """xdit (MI300X, HIP graphs): the GPU was busy ~80 % of the window; before levels of detail the default view
    showed about 8 thin ticks."""
    path = anchor(XDIT)
    report = tmp_path / "xdit.html"
    write_report([path], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        _check_default_and_zoom(page, path)
    assert errors == [] and requests == []


@pytest.mark.slow
def test_recorded_trace_default_view_and_zoom(tmp_path: Path) -> None:
    path = Path("traces/h200/extra/train_eager_mlp.json.gz")
    report = tmp_path / "train.html"
    write_report([path], report)
    with browser_page() as page:
        errors, requests = open_report(page, report)
        drawn, low, high = page.evaluate(DRAWN, [page.evaluate(GPU_LANES)[0]])
        assert abs(drawn - _busy_fraction(path, low, high)) <= 0.10
    assert errors == [] and requests == []


@pytest.mark.slow
@pytest.mark.parametrize("lane_width_px", [700])
def test_narrow_window_still_shows_every_busy_stretch(tmp_path: Path, lane_width_px: int) -> None:
    """At a narrower window each pixel holds more work: bands merge more, still within 10 points."""
    path = anchor(XDIT)
    report = tmp_path / "xdit.html"
    write_report([path], report)
    with browser_page(width=lane_width_px) as page:
        open_report(page, report)
        lane = page.evaluate(GPU_LANES)[0]
        drawn, low, high = page.evaluate(DRAWN, [lane])
        assert abs(drawn - _busy_fraction(path, low, high)) <= 0.10
