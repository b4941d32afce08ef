"""Screenshot of a report for the README: `python tests/browser/screenshot.py TRACE docs/report.png`.

Writes the report of TRACE to a temporary file, opens it in headless Chromium (same setup as the browser
tests) and saves a PNG of `--height` pixels from the `--start` element (default: the timeline) down.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.browser.chromium import ARGS, chromium_path
from tracelens.analyses import analyze
from tracelens.loader import load_trace
from tracelens.renderers.html import HtmlReportRenderer
from tracelens.renderers.page import build_report

PAGE_TOP = "(selector) => document.querySelector(selector).getBoundingClientRect().top + window.scrollY"
HOVER_GPU_LANE = """() => {
  const gd = document.getElementById('chart-timeline');
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  const lane = ya.tickvals[ya.tickvals.length - 1], middle = (xa.range[0] + xa.range[1]) / 2;
  let best = middle;
  for (const trace of gd._fullData) {
    if (trace.hoverinfo !== 'text' || Number(trace.y[0]) !== lane) continue;
    for (const x of Array.from(trace.x)) {
      if (best === middle || Math.abs(x - middle) < Math.abs(best - middle)) best = x;
    }
  }
  return [box.left + xa._offset + xa.l2p(best), box.top + ya._offset + ya.l2p(lane)];
}"""

ZOOM_TO_STEP = """(label) => {
  const gd = document.getElementById('chart-timeline');
  const buttons = gd.layout.updatemenus[0].buttons, index = buttons.findIndex(b => b.label === label);
  return Plotly.relayout(gd, Object.assign({"updatemenus[0].active": index}, buttons[index].args[0]));
}"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1500, help="height of the captured area (px)")
    parser.add_argument("--full-page", action="store_true")
    parser.add_argument("--hover", action="store_true", help="hover the GPU lane in the middle of the view")
    parser.add_argument("--start", default="#timeline-section", help="CSS selector of the element at the top")
    parser.add_argument("--step", type=int, help="zoom the timeline as its menu's 'step N' does")
    args = parser.parse_args()
    trace = load_trace(args.trace)
    page_html = HtmlReportRenderer().render(build_report([(trace, analyze(trace))]))
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.html"
        report.write_text(page_html, encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_path(), args=ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": args.height}, device_scale_factor=1)
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_selector("#chart-timeline .main-svg")
            page.wait_for_timeout(500)
            if args.step is not None:
                page.evaluate(ZOOM_TO_STEP, f"step {args.step}")
                page.wait_for_timeout(500)
            if args.hover:
                page.locator(args.start).scroll_into_view_if_needed()
                x, y = page.evaluate(HOVER_GPU_LANE)
                page.mouse.move(x, y)
                page.wait_for_selector("#chart-timeline .hoverlayer .hovertext")
            args.png.parent.mkdir(parents=True, exist_ok=True)
            if args.full_page:
                page.screenshot(path=str(args.png), full_page=True)
            else:
                top = page.evaluate(PAGE_TOP, args.start)
                clip = {"x": 0, "y": top, "width": args.width, "height": args.height}
                page.screenshot(path=str(args.png), full_page=True, clip=clip)
            browser.close()
    print(f"Wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
