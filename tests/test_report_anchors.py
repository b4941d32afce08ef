"""Every anchor trace goes through `report` and `annotate` without a traceback; the annotated trace keeps the
format rules and loads again; the report of the largest anchor stays small and fast.

One load and one analysis per trace: the library calls behind both commands are used directly (the CLI
itself is covered on tiny traces in test_report_html.py and test_annotate.py, and once here).
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from tests.conftest import anchor, anchor_name, anchor_traces
from tests.report_helpers import tiny_trace
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.loader import load_trace
from tracelens.loader.rewrite import rewrite_trace
from tracelens.renderers.html import HtmlReportRenderer
from tracelens.renderers.page import MAX_SLICES, build_report
from tracelens.renderers.perfetto import trace_additions

TRACES = anchor_traces()


@pytest.mark.parametrize("path", TRACES, ids=[anchor_name(p) for p in TRACES])
def test_anchor_goes_through_report_and_annotate(path: Path) -> None:
    trace = load_trace(path)
    results = analyze(trace)
    document = build_report([(trace, results)])
    page = HtmlReportRenderer().render(document)
    assert page.count("Plotly.newPlot(") == len(document.figures())
    timeline = document.panel("timeline").figure
    assert timeline is not None
    drawn = sum(len(t.text) for t in timeline.data if t.hoverinfo == "text" and not t.name.startswith("merged"))
    assert drawn <= MAX_SLICES
    additions = trace_additions(trace, results)
    events = msgspec.json.decode(rewrite_trace(trace, additions))
    events = events["traceEvents"] if isinstance(events, dict) else events
    new = [e for e in events if e.get("cat") == "tracelens"]
    assert len(new) == len(additions.slices)
    for event in new:
        assert {"ph", "ts", "pid", "tid", "dur"} <= set(event) and event["dur"] > 0
    annotated = sum(1 for e in events if isinstance(e.get("args"), dict) and "tracelens category" in e["args"])
    assert annotated == int(trace.gpu_mask().sum())


def test_large_anchor_report_is_small_and_fast(tmp_path: Path) -> None:
    path = anchor("hta/df_index_resolver/df_index_resolver.json.gz")  # 54 MB uncompressed, 123k events
    trace = load_trace(path)
    results = analyze(trace)
    started = time.perf_counter()
    page = HtmlReportRenderer().render(build_report([(trace, results)]))
    elapsed = time.perf_counter() - started
    assert len(page.encode()) < 10_000_000
    assert elapsed < 10.0  # about 1 s on a 2-core runner; a generous bound against pathologies only


def test_cli_on_an_anchor_and_a_tiny_trace_together(tmp_path: Path) -> None:
    anchor_path = anchor("hta/triton_example/triton_example.json.gz")
    output = tmp_path / "both.html"
    assert main(["report", str(anchor_path), str(tiny_trace(tmp_path)), "-o", str(output)]) == 0
    assert main(["annotate", str(anchor_path), "-o", str(tmp_path / "a.json.gz")]) == 0
    assert load_trace(tmp_path / "a.json.gz").n_events >= load_trace(anchor_path).n_events
