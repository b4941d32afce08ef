"""The HTML page and `tracelens report`: self-contained, deterministic, predictable output names, no overwrite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.report_helpers import tiny_trace
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.cli.report import default_output
from tracelens.loader import load_trace
from tracelens.renderers.html import HtmlReportRenderer, plotly_js
from tracelens.renderers.page import ReportDocument, build_report


def document_of(path: Path) -> ReportDocument:
    trace = load_trace(path)
    return build_report([(trace, analyze(trace))])


def render(path: Path) -> str:
    return HtmlReportRenderer().render(document_of(path))


def test_html_is_deterministic(tmp_path: Path) -> None:
    path = tiny_trace(tmp_path)
    assert render(path) == render(path)


def test_html_is_self_contained_with_fixed_chart_ids(tmp_path: Path) -> None:
    document = document_of(tiny_trace(tmp_path))
    page = HtmlReportRenderer().render(document)
    bundle = plotly_js(document)  # the cartesian bundle here (tests/test_plotly_bundle.py)
    assert page.count(bundle) == 1  # plotly.js inlined once
    page = page.replace(bundle, "")
    assert "<script src" not in page and "https://" not in page and "http://" not in page
    # one draw call per chart: at least the timeline, two breakdowns and the step times
    assert len(re.findall(r"Plotly\.newPlot\(", page)) == len(document.figures()) >= 4
    for div_id in ("chart-timeline", "chart-gpu-by-category", "chart-gpu-by-op", "chart-step-times"):
        assert f'id="{div_id}"' in page
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-", page[-200_000:])  # no uuid div ids


def test_default_output_names() -> None:
    assert default_output([Path("traces/h200/eager_mlp.json.gz")]) == Path("eager_mlp.tracelens.html")
    assert default_output([Path("a.json"), Path("b.json.gz")]) == Path("a-vs-b.tracelens.html")
    assert default_output([Path("a.json"), Path("b.json"), Path("c.json")]) == Path("a-vs-b-and-1-more.tracelens.html")


def test_cli_writes_to_the_current_directory_and_refuses_to_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in").mkdir()
    trace = tiny_trace(tmp_path / "in")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["report", str(trace)]) == 0
    written = work / "tiny.tracelens.html"
    assert written.is_file()
    assert capsys.readouterr().err.startswith("Wrote tiny.tracelens.html (")
    before = written.read_bytes()
    written.write_text("keep me")
    assert main(["report", str(trace)]) == 2
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert written.read_text() == "keep me"
    assert main(["report", str(trace), "--force"]) == 0
    assert written.read_bytes() == before


def test_cli_comparison_with_explicit_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tiny_trace(tmp_path, "a.json.gz"), tiny_trace(tmp_path, "b.json.gz")
    output = tmp_path / "out" / "cmp.html"
    output.parent.mkdir()
    assert main(["report", str(first), str(second), "-o", str(output)]) == 0
    page = output.read_text()
    assert 'id="chart-compare-gpu"' in page and 'id="chart-t1-timeline"' in page
    assert f"Wrote {output}" in capsys.readouterr().err


def test_cli_unknown_step_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tiny_trace(tmp_path)), "--step", "9", "-o", str(tmp_path / "x.html")]) == 2
    assert "no step 9" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_html_is_identical_across_processes(tmp_path: Path) -> None:
    """Different hash seeds (set/dict iteration order) must not change a byte."""
    import os
    import subprocess
    import sys

    trace = tiny_trace(tmp_path)
    pages = []
    for seed in ("1", "2"):
        output = tmp_path / f"seed{seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        command = [sys.executable, "-m", "tracelens", "report", str(trace), "-o", str(output)]
        subprocess.run(command, check=True, env=env, capture_output=True)
        pages.append(output.read_bytes())
    assert pages[0] == pages[1]
