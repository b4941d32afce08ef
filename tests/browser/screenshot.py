"""Screenshot of a report for the README: `python tests/browser/screenshot.py TRACE docs/report.png`.

Writes the report of TRACE to a temporary file, opens it in headless Chromium (same setup as the browser
tests) and saves a PNG of the page from the top down to the end of the breakdown charts.
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
from tracelens.load import load_trace
from tracelens.renderers.html import HtmlReportRenderer
from tracelens.report import build_report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1500, help="height of the captured area (px)")
    parser.add_argument("--full-page", action="store_true")
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
            args.png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.png), full_page=args.full_page)
            browser.close()
    print(f"Wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
