"""What adding a concept costs, shown by adding toys: an output format is one module and one line of
`renderers/formats.py:FORMATS`; an analysis is one module and one line of `analyses/registry.py:ANALYSES` (with,
in the same file, its field of the written-out `AnalysisReport`, which tests/test_registry.py checks, and its
key in docs/json.md, which tests/test_docs.py requires: 3 files). Each toy is added here as its new module (a file
in `tmp_path`) and its one registry line (the registry tuple with the entry appended), and then works end to end
through `tracelens analyze`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tracelens.cli import main
from tracelens.renderers import formats

TRACE = TRACES / "h200" / "eager_mlp.json.gz"

TOY_FORMAT = '''
"""A toy output format: one line per step, `step,kernels`."""

from tracelens.renderers.formats import RendererTable


class KernelsCsv:
    def render(self, report):
        rows = [f"{step.number},{step.kernels:g}" for step in report.summary.step_table]
        return "step,kernels\\n" + "".join(row + "\\n" for row in rows)


RENDERERS: RendererTable = {"analyze": ("toy_format:KernelsCsv", ())}
'''


def test_an_output_format_is_one_module_and_one_registry_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "toy_format.py").write_text(TOY_FORMAT)  # the module
    monkeypatch.syspath_prepend(str(tmp_path))
    line = formats.OutputFormat("csv", "toy_format", ("analyze",), "kernels per step, comma-separated")
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, line))  # the registry line
    assert main(["analyze", str(TRACE), "--format", "csv", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert main(["analyze", str(TRACE), "--format", "json", "--no-cache"]) == 0
    steps = json.loads(capsys.readouterr().out)["step_table"]
    expected = "step,kernels\n" + "".join(f"{s['number']},{s['kernels']}\n" for s in steps)
    assert out == expected and len(steps) > 1
    assert main(["compare", str(TRACE), str(TRACE), "--format", "csv"]) == 2  # offered only where it renders
    assert "invalid choice: 'csv' (choose from 'text', 'json')" in capsys.readouterr().err


TOY_ANALYSIS = '''
"""A toy analysis: how many events the trace holds."""

import msgspec


class EventCount(msgspec.Struct, frozen=True):
    events: int


def analyze_event_count(ctx):
    return EventCount(len(ctx.trace.events))
'''

RUN_WITH_TOY = """
import sys
sys.path.insert(0, sys.argv[1])
import tracelens.analyses.registry as registry
from toy_analysis import EventCount, analyze_event_count
registry.ANALYSES = (*registry.ANALYSES, registry.Analysis("event_count", analyze_event_count, EventCount))
from tracelens.cli import main
raise SystemExit(main(["analyze", sys.argv[2], "--format", "json", "--no-cache"]))
"""


def test_an_analysis_is_one_module_and_one_registry_line(tmp_path: Path) -> None:
    (tmp_path / "toy_analysis.py").write_text(TOY_ANALYSIS)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RUN_WITH_TOY), str(tmp_path), str(TRACE)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    document = json.loads(done.stdout)
    assert list(document)[-1] == "event_count"  # the registry's order is the JSON's
    assert document["event_count"] == {"events": document["trace"]["events"]} and document["trace"]["events"] > 100


def test_every_format_renders_exactly_the_kinds_it_names() -> None:
    for entry in formats.FORMATS:
        table = entry.renderers()
        assert sorted(table) == sorted(entry.kinds), entry.name
        for kind in entry.kinds:
            renderer = formats.renderer_for(entry.name, kind, formats.RenderOptions(width=80, verbose=True))
            assert callable(renderer.render), (entry.name, kind)
