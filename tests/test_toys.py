"""What adding a concept costs, shown by adding toys:
- an output format is one module and one line of `renderers/formats.py:FORMATS` (2 files; the toy CSV format's
  module is put on the path and its line added to the registry tuple);
- an analysis is 3 files: its module (result and computation), its module of `renderers/analyses/` (text
  section and page panel) and `analyses/registry.py` (its line with its JSON key's description, and its field
  of the written-out `AnalysisResults`). The toy is added to a copy of the package: the copy's only new or
  changed files are those 3, and the toy then shows in `analyze` (JSON and text), in `report` and in the JSON
  page of the docs built from the copy's untouched docs/;
- a trace field (an integer or raw-JSON `args` key) is one line in `loader/schema.py:Args` and one column in
  `model/events.py:EventTable` (2 files; the C extension's field table is regenerated from them): two toy
  fields are added to a copy of the package, and their columns are compared with the raw events read by the
  standard library."""

from __future__ import annotations

import argparse
import filecmp
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
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
    def render(self, results):
        rows = [f"{step.number},{step.kernels:g}" for step in results.summary.step_table]
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


# ---------------------------------------------------------------- a copy of the checkout

REPO = Path(__file__).resolve().parents[1]
COPY_IGNORES = shutil.ignore_patterns("__pycache__", "*.so", "build")


def _copy_of_the_checkout(tmp_path: Path, *parts: str) -> Path:
    """A copy of these files and folders of the checkout (no build outputs); returns the copy's root."""
    root = tmp_path / "copy"
    for part in parts:
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, root / part, ignore=COPY_IGNORES)
        else:
            (root / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / part, root / part)
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
    """The copy's files that are new or differ from the checkout's, but the generated C field table."""
    changed = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        generated = "__pycache__" in relative.parts or relative.name == "_native_fields.h"
        if path.is_file() and not generated:
            ours = REPO / relative
            if not ours.is_file() or not filecmp.cmp(path, ours, shallow=False):
                changed.append(str(relative))
    return changed


# ---------------------------------------------------------------- an analysis

# A toy analysis as the three files a real one is: its module (result and computation), its module of
# renderers/analyses/ (text section and page panel; the page's modules imported where a panel is built, so that
# text output never imports them) and its entry in the registry (the import, the line with its key's description,
# its field of the written-out `AnalysisResults`).
TOY_ANALYSIS_FILES = {
    "tracelens/analyses/event_count.py": '''"""A toy analysis: how many events the trace holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext


class EventCount(msgspec.Struct, frozen=True):
    events: int


def analyze_event_count(ctx: AnalysisContext) -> EventCount:
    return EventCount(len(ctx.trace.events))
''',
    "tracelens/renderers/analyses/event_count.py": '''"""The toy shown: a line of text, a panel in "Findings"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tracelens.analyses.event_count import EventCount
from tracelens.renderers.analyses import Parts

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


def event_count_parts(result: EventCount, results: AnalysisResults) -> Parts:
    return [Text(f"Events in the trace: {result.events:,}")]


def event_count_panels(result: EventCount | None, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    note = "not run" if result is None else f"{result.events:,} events"
    return page.AnalysisPanels(findings=(page.Panel(id="event-count", title="Events", note=note),))
''',
}
TOY_ENTRY = """    Analysis(
        "event_count",
        analyze_event_count,
        EventCount,
        text=f"{SHOWN}.event_count:event_count_parts",
        panels=f"{SHOWN}.event_count:event_count_panels",
        text_order=99,
        doc=(KeyDoc("event_count", "how many events the trace holds: `events` (the toy of tests/test_toys.py)"),),
    ),
"""
TOY_REGISTRY_EDITS = (  # (text found once in analyses/registry.py, the same text with the toy's lines)
    (
        "import Dispatch, analyze_dispatch\n",
        "import Dispatch, analyze_dispatch\n"
        "from tracelens.analyses.event_count import EventCount, analyze_event_count\n",
    ),
    ("    ),\n)\n", "    ),\n" + TOY_ENTRY + ")\n"),
    (
        "    memory: Memory | None = None\n",
        "    memory: Memory | None = None\n    event_count: EventCount | None = None\n",
    ),
)

RUN_WITH_TOY = """
import sys, typing
from tracelens.analyses.event_count import EventCount
from tracelens.analyses.registry import AnalysisResults
from tracelens.cli import main
assert typing.get_type_hints(AnalysisResults)["event_count"] == EventCount | None  # the registry's written-out field
trace, page = sys.argv[1], sys.argv[2]
for argv in (["--format", "json"], ["--format", "text"]):
    status = main(["analyze", trace, *argv, "--no-cache"])
    print("\\n--- end of output", status, flush=True)
print(sorted(m for m in ("plotly", "tracelens.report") if m in sys.modules), flush=True)  # none for text
raise SystemExit(main(["report", trace, "--no-cache", "-o", page]))
"""


def _checkout_with_the_toy_analysis(tmp_path: Path) -> Path:
    """A copy of the package and of what builds the docs, with the toy analysis' two modules and its registry
    entry added; returns the copy's root."""
    root = _copy_of_the_checkout(tmp_path, "tracelens", "docs", "mkdocs.yml", "scripts/mkdocs_hooks.py")
    for relative, text in TOY_ANALYSIS_FILES.items():
        (root / relative).write_text(text)
    registry = root / "tracelens" / "analyses" / "registry.py"
    source = registry.read_text()
    for old, new in TOY_REGISTRY_EDITS:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    registry.write_text(source)
    return root


@pytest.fixture(scope="module")
def toy_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The copy with the toy analysis (read only by the tests)."""
    return _checkout_with_the_toy_analysis(tmp_path_factory.mktemp("toy_analysis"))


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_an_analysis_is_three_files(toy_checkout: Path, tmp_path: Path) -> None:
    """With only its two modules and its registry entry, the toy runs in `analyze`, its result the last key of the
    JSON, its text section the last one printed (text_order 99), and its panel one of the report's findings."""
    assert _hand_edited(toy_checkout) == sorted([*TOY_ANALYSIS_FILES, "tracelens/analyses/registry.py"])
    page = tmp_path / "page.html"
    out = _run_in(toy_checkout, RUN_WITH_TOY, str(TRACE), str(page), native=False)
    json_out, text_out, rest = out.split("\n--- end of output 0\n")
    document = json.loads(json_out)
    assert list(document)[-1] == "event_count"  # the registry's order is the JSON's
    events = document["trace"]["events"]
    assert document["event_count"] == {"events": events} and events > 100
    assert text_out.rstrip("\n").split("\n")[-1] == f"Events in the trace: {events:,}"  # printed last
    assert rest == "[]\n"  # text output imported neither plotly nor the page's modules
    findings = page.read_text().split('id="findings"', 1)[-1]
    assert 'id="panel-event-count"' in findings and f"{events:,} events" in findings


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (test extra)")
def test_the_toy_analysis_key_is_described_in_the_built_docs(toy_checkout: Path, tmp_path: Path) -> None:
    """The docs built from the copy (whose docs/ the toy did not touch) describe the toy's JSON key, in the row
    its registry entry's `doc` gives."""
    site = tmp_path / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    env = {**os.environ, "PYTHONPATH": str(toy_checkout)}
    subprocess.run(build, cwd=toy_checkout, env=env, capture_output=True, check=True, timeout=120)
    row = "<td><code>event_count</code></td>\n<td>how many events the trace holds: <code>events</code>"
    assert row in (site / "json" / "index.html").read_text()


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
    root = _copy_of_the_checkout(tmp_path, "tracelens", "setup.py")
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
    assert _hand_edited(root) == sorted(f"tracelens/{relative}" for relative in TOY_FIELD_EDITS)
    header = (root / "tracelens" / "_native_fields.h").read_text().splitlines()
    before = (REPO / "tracelens" / "_native_fields.h").read_text().splitlines()
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
