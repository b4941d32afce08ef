"""What adding a concept costs, shown by adding toys: an output format is one module and one line of
`renderers/formats.py:FORMATS`; an analysis is one module and one line of `analyses/registry.py:ANALYSES` (with,
in the same file, its field of the written-out `AnalysisResults`, which tests/test_registry.py checks, and its
key in docs/json.md, which tests/test_docs.py requires: 3 files), and its text section and page panel one function
each, named by that line. Each toy is added here as its new module (a file in `tmp_path`) and its one registry
line (the registry tuple with the entry appended), and then works end to end through `tracelens analyze` (and
`tracelens report`). A trace field (an integer or raw-JSON `args` key) is one line in
`loader/schema.py:Args` and one column in `model/events.py:EventTable` (2 files; the C extension's field table is
regenerated from them): two toy fields are added to a copy of the package as those lines of text, and their
columns are compared with the raw events read by the standard library."""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

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

# Its text section and page panel: for a real analysis, two functions of its module of renderers/analyses/;
# here a module of their own.
TOY_OUTPUTS = '''
"""The toy analysis' text section and page panel."""

from rich.text import Text

from tracelens.report.document import AnalysisPanels, Panel


def event_count_parts(result, report):
    return [Text(f"Events in the trace: {result.events:,}")]


def event_count_panels(result, report):
    return AnalysisPanels(findings=(Panel(id="event-count", title="Events", note=f"{result.events:,} events"),))
'''

RUN_WITH_TOY = """
import sys
sys.path.insert(0, sys.argv[1])
import tracelens.analyses.registry as registry
from toy_analysis import EventCount, analyze_event_count
outputs = {"text": "toy_outputs:event_count_parts", "panels": "toy_outputs:event_count_panels", "text_order": 99}
registry.ANALYSES = (*registry.ANALYSES, registry.Analysis("event_count", analyze_event_count, EventCount, **outputs))
from tracelens.cli import main
trace, page = sys.argv[2], sys.argv[3]
for argv in (["--format", "json"], ["--format", "text"]):
    status = main(["analyze", trace, *argv, "--no-cache"])
    print("\\n--- end of output", status, flush=True)
raise SystemExit(main(["report", trace, "--no-cache", "-o", page]))
"""


def test_an_analysis_is_one_module_and_one_registry_line(tmp_path: Path) -> None:
    """The toy's registry line makes it run in `analyze`, its result the last key of the JSON, its text section
    the last one printed (text_order 99) and its panel one of the report's findings."""
    (tmp_path / "toy_analysis.py").write_text(TOY_ANALYSIS)
    (tmp_path / "toy_outputs.py").write_text(TOY_OUTPUTS)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "80"}
    page = tmp_path / "page.html"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RUN_WITH_TOY), str(tmp_path), str(TRACE), str(page)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    json_out, text_out, rest = done.stdout.split("\n--- end of output 0\n")
    document = json.loads(json_out)
    assert list(document)[-1] == "event_count"  # the registry's order is the JSON's
    events = document["trace"]["events"]
    assert document["event_count"] == {"events": events} and events > 100
    assert text_out.rstrip("\n").split("\n")[-1] == f"Events in the trace: {events:,}"  # printed last
    findings = page.read_text().split('id="findings"', 1)[-1]
    assert 'id="panel-event-count"' in findings and f"{events:,} events" in findings
    assert rest == ""


def _format_choices(parser: argparse.ArgumentParser, path: str = "tracelens") -> dict[str, tuple[str, ...]]:
    """Every `--format` option of the command line, by command path, with its choices."""
    found = {}
    for action in parser._actions:
        if "--format" in action.option_strings:
            found[path] = tuple(action.choices or ())
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _format_choices(sub, f"{path} {name}")
    return found


def test_every_format_option_offers_the_registry_formats() -> None:
    """No command hard-wires its formats: each `--format` offers the registry's formats of its kind of result."""
    from tracelens.cli import build_parser

    kinds = {"analyze": "analyze", "compare": "compare", "check": "check", "cache info": "cache", "annotate": None}
    choices = _format_choices(build_parser())
    assert sorted(choices) == sorted(f"tracelens {command}" for command in kinds)
    for command, kind in kinds.items():
        if kind is not None:  # annotate's --format is the kind of trace it writes (json, perfetto), not a renderer
            assert choices[f"tracelens {command}"] == formats.format_names(kind), command


def test_every_format_renders_exactly_the_kinds_it_names() -> None:
    for entry in formats.FORMATS:
        table = entry.renderers()
        assert sorted(table) == sorted(entry.kinds), entry.name
        for kind in entry.kinds:
            renderer = formats.renderer_for(entry.name, kind, formats.RenderOptions(width=80, verbose=True))
            assert callable(renderer.render), (entry.name, kind)


# ---------------------------------------------------------------- a trace field

# Two arguments of the H200 traces that tracelens does not read: every kernel's `registers per thread` (an
# integer) and every CPU op's `Ev Idx` (kept as raw JSON). Each is one line in each of two files: the
# whole change, as text (a line starting with the first string gets the second after it).
TOY_FIELD_EDITS = {
    "loader/schema.py": [
        (
            "    bytes: int | str | None = -1",
            '    registers_per_thread: int | str | None = msgspec.field(default=-1, name="registers per thread")',
        ),
        (
            "    input_strides: msgspec.Raw",
            '    ev_idx: msgspec.Raw = msgspec.field(default=NO_RAW, name="Ev Idx")',
        ),
    ],
    "model/events.py": [
        ("    bytes: I64", "    registers_per_thread: I64"),
        ("    input_strides: Obj", "    ev_idx: Obj"),
    ],
}

READ_TOY_COLUMNS = """
import json, sys
import tracelens
from tracelens import native
events = tracelens.load(sys.argv[1]).events
strides = [None if raw is None else json.loads(raw) for raw in events.ev_idx]
print(json.dumps({"native": native.ENABLED and native.extension is not None, "correlation": events.correlation.tolist(),
                  "registers_per_thread": events.registers_per_thread.tolist(),
                  "external_id": events.external_id.tolist(), "ev_idx": strides}))
"""


def _raw_fields(path: Path) -> tuple[dict[int, int], Counter[tuple[int, str]], int]:
    """Independently of tracelens, from the complete events: `registers per thread` by correlation id, the
    (External id, `Ev Idx`) pairs, and how many complete events there are."""
    with gzip.open(path, "rt") as file:
        events = [e for e in json.load(file)["traceEvents"] if e.get("ph") == "X"]
    registers = {
        e["args"]["correlation"]: e["args"]["registers per thread"]
        for e in events
        if "registers per thread" in e.get("args", {})
    }
    strides = Counter(
        (e["args"]["External id"], json.dumps(e["args"]["Ev Idx"])) for e in events if "Ev Idx" in e.get("args", {})
    )
    return registers, strides, len(events)


def _package_with_toy_fields(tmp_path: Path) -> Path:
    """A copy of the package (and setup.py) with the toy fields' lines added and its C field table regenerated;
    returns the copy's root."""
    root = tmp_path / "copy"
    source = Path(__file__).resolve().parents[1]
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build")
    shutil.copytree(source / "tracelens", root / "tracelens", ignore=ignore)
    shutil.copy(source / "setup.py", root / "setup.py")
    for relative, edits in TOY_FIELD_EDITS.items():
        path = root / "tracelens" / relative
        lines = path.read_text().splitlines()
        for prefix, line in edits:
            at = [i for i, old in enumerate(lines) if old.startswith(prefix)]
            assert len(at) == 1, (relative, prefix)
            lines.insert(at[0] + 1, line)
        path.write_text("\n".join(lines) + "\n")
    header = _run_in(root, "from tracelens.loader.fields import native_header as h; print(h(), end='')", native=False)
    (root / "tracelens" / "_native_fields.h").write_text(header)  # what scripts/gen_native_fields.py writes
    return root


def _run_in(root: Path, code: str, *args: str, native: bool) -> str:
    """The output of `python -c code args` run in the copy (on its path first), with or without the C extension."""
    env = {key: value for key, value in os.environ.items() if key != "TRACELENS_NO_NATIVE"}
    env |= {"PYTHONPATH": str(root)} | ({} if native else {"TRACELENS_NO_NATIVE": "1"})
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=root, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


def _hand_edited(root: Path) -> list[str]:
    """The package's files that differ between the checkout and the copy, but the generated C field table."""
    source = Path(__file__).resolve().parents[1] / "tracelens"
    changed = []
    for path in sorted((root / "tracelens").rglob("*")):
        relative = path.relative_to(root / "tracelens")
        generated = "__pycache__" in relative.parts or relative.name == "_native_fields.h"
        if path.is_file() and not generated and not filecmp.cmp(path, source / relative, shallow=False):
            changed.append(str(relative))
    return changed


def _assert_columns_are_the_raw_fields(columns: dict[str, list[Any]]) -> None:
    registers, strides, n_complete = _raw_fields(TRACE)
    values = columns["registers_per_thread"]
    read = {c: v for c, v in zip(columns["correlation"], values, strict=True) if v != -1}
    assert read == registers and len(registers) > 10  # every kernel's value, on the row of its correlation id
    assert sum(v != -1 for v in values) == len(registers) and len(values) == n_complete  # -1 on every other row
    pairs = [
        (e, json.dumps(v)) for e, v in zip(columns["external_id"], columns["ev_idx"], strict=True) if v is not None
    ]
    assert Counter(pairs) == strides and len(strides) > 10  # each op's Ev Idx, on its row; None elsewhere
    assert sum(v is not None for v in columns["ev_idx"]) == sum(strides.values())


def test_a_trace_field_is_one_line_in_the_schema_and_one_column(tmp_path: Path) -> None:
    root = _package_with_toy_fields(tmp_path)
    assert _hand_edited(root) == sorted(TOY_FIELD_EDITS)
    header = (root / "tracelens" / "_native_fields.h").read_text().splitlines()
    before = (Path(__file__).resolve().parents[1] / "tracelens" / "_native_fields.h").read_text().splitlines()
    changed = [(old, new) for old, new in zip(before, header, strict=True) if old != new]
    assert [new for _, new in changed] == [
        "#define N_INT_FIELDS 8",
        changed[1][0].replace('"bytes"}', '"bytes", "registers_per_thread"}'),
        "#define N_RAW_FIELDS 5",
        changed[3][0].replace('"input_strides"}', '"input_strides", "ev_idx"}'),
    ]
    columns = json.loads(_run_in(root, READ_TOY_COLUMNS, str(TRACE), native=False))
    assert columns.pop("native") is False
    _assert_columns_are_the_raw_fields(columns)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_a_trace_field_reaches_the_rebuilt_c_extension(tmp_path: Path) -> None:
    root = _package_with_toy_fields(tmp_path)
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    subprocess.run(build, cwd=root, capture_output=True, check=True, timeout=300)
    columns = json.loads(_run_in(root, READ_TOY_COLUMNS, str(TRACE), native=True))
    assert columns.pop("native") is True  # the columns came through the C extension's slot reads
    _assert_columns_are_the_raw_fields(columns)
