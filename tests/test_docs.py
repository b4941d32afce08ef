"""The documentation stays true: the MkDocs site builds in strict mode (a broken link or anchor fails), every
relative link of the README resolves, the command-line help page is what the parser prints, every top-level key
of the JSON documents is described (those of the analyses by their registry entries, whose rows the docs build
puts into docs/json.md), the benchmark table is the measured one, the README keeps the two
commands that CI and a fresh machine run, and the pages for people open with a command and the lines it really
prints."""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracelens.analyses.ranks import RanksResults
from tracelens.analyses.registry import ANALYSES
from tracelens.cli import main
from tracelens.records import field_names

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
H200 = ROOT / "traces" / "h200"

INSTALL_AND_ANALYZE = (
    "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/tracelens analyze traces/h200/eager_mlp.json.gz"
)
INSTALL_AND_TEST = (
    'python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]" && .venv/bin/python -m pytest -q -n auto'
)

LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|\!\[[^\]]*\]\(([^)\s]+)\)")


def _links(markdown: str) -> list[str]:
    """Targets of inline links and images, outside fenced code blocks."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return [a or b for a, b in LINK.findall(prose)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", prose, flags=re.M)}


def test_mkdocs_builds_in_strict_mode(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (it is in the test extra)")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "timeline-big-trace.png").is_file()
    json_page = (tmp_path / "site" / "json" / "index.html").read_text(encoding="utf-8")
    for doc in (doc for entry in ANALYSES for doc in entry.doc):  # the hook put every registry row on the page
        assert "<tr>\n<td>" + ", ".join(f"<code>{k}</code>" for k in doc.names) + "</td>" in json_page, doc.keys


def test_mkdocs_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The build above can fail: a page with a link to a missing page is refused."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (it is in the test extra)")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](missing.md)\n", encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:")[0]
    config = config.replace("scripts/mkdocs_hooks.py", str(ROOT / "scripts" / "mkdocs_hooks.py"))  # beside us
    (tmp_path / "mkdocs.yml").write_text(config + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "missing.md" in done.stderr


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = [t for t in _links(text) if not re.match(r"[a-z]+:", t)]
    assert len(links) >= 15, links  # the first screen links into the docs
    for target in links:
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else README
        assert file.exists(), f"README links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(file.read_text(encoding="utf-8")), f"README links to a missing anchor {target}"


def test_readme_keeps_the_two_commands_and_stays_short() -> None:
    text = README.read_text(encoding="utf-8")
    assert INSTALL_AND_ANALYZE in text.splitlines()
    assert INSTALL_AND_TEST in text.splitlines()
    assert len(text.splitlines()) <= 130  # the reference lives in docs/


def test_every_docs_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        assert f": {page.name}" in config, f"{page.name} is missing from mkdocs.yml's nav"


def test_cli_help_page_is_up_to_date() -> None:
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    made_with = re.search(r"\(Python (\d+\.\d+),", page)
    assert made_with is not None
    if made_with.group(1) != f"{sys.version_info.major}.{sys.version_info.minor}":
        pytest.skip(f"docs/cli.md was made with Python {made_with.group(1)}; argparse's layout differs by version")
    done = subprocess.run(
        [sys.executable, "scripts/gen_cli_docs.py", "--check"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for command in ("analyze", "compare", "check", "report", "annotate", "cache prune"):
        assert f"## `tracelens {command}`" in page


def _documented_keys(schema: str) -> set[str]:
    """Keys named in the first column of the schema's table in docs/json.md; for `tracelens.analyze/1`, with
    those of the registry's rows, which the docs build adds to its table (scripts/mkdocs_hooks.py)."""
    text = (DOCS / "json.md").read_text(encoding="utf-8")
    section = text.split(f"## `{schema}`", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for row in re.findall(r"^\| ([^|]+) \|", section, flags=re.M):
        keys.update(re.findall(r"`([a-z_]+)`", row))
    return keys | (_registry_keys() if schema == "tracelens.analyze/1" else set())


def _registry_keys() -> set[str]:
    """The top-level keys the registry's entries describe (`Analysis.doc`)."""
    return {name for entry in ANALYSES for doc in entry.doc for name in doc.names}


def _json_of(arguments: list[str], capsys: pytest.CaptureFixture[str], status: int = 0) -> dict[str, object]:
    assert main([*arguments, "--format", "json"]) == status
    return json.loads(capsys.readouterr().out)


HYPOTHESES = """
[[hypothesis]]
name = "eager MLP launches five kernels per step"
trace = "eager_mlp"
metric = "per_step.kernels"
op = "=="
value = 5
"""


def test_json_page_describes_every_top_level_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eager, compiled = str(H200 / "eager_mlp.json.gz"), str(H200 / "compiled_mlp.json.gz")
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text(HYPOTHESES, encoding="utf-8")
    documents = {
        "tracelens.analyze/1": _json_of(["analyze", eager], capsys),
        "tracelens.compare/1": _json_of(["compare", eager, compiled], capsys),
        "tracelens.check/1": _json_of(["check", eager, compiled, "--expect", str(hypotheses)], capsys),
    }
    for schema, document in documents.items():
        assert document["schema"] == schema
        missing = set(document) - _documented_keys(schema)
        assert not missing, f"docs/json.md does not describe {sorted(missing)} of {schema}"
    stale = _registry_keys() - set(documents["tracelens.analyze/1"])  # every analysis ran on the eager MLP
    assert not stale, f"the registry describes keys the document does not have: {sorted(stale)}"
    ranks_keys = {"schema", "tool", *field_names(RanksResults)}
    missing = ranks_keys - _documented_keys("tracelens.ranks/1")
    assert not missing, f"docs/json.md does not describe {sorted(missing)} of tracelens.ranks/1"


def _hooks() -> Any:
    """scripts/mkdocs_hooks.py, the docs build's hooks, as a module."""
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_build_writes_the_registry_rows_into_the_analyze_table() -> None:
    """After the hand-written first row (`schema`, `tool`), one row per registry `KeyDoc`, in registry order;
    a page without the marker line fails the build rather than losing the rows."""
    hooks = _hooks()
    page = (DOCS / "json.md").read_text(encoding="utf-8")
    section = hooks.with_key_rows(page).split("## `tracelens.analyze/1`", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    docs = [doc for entry in ANALYSES for doc in entry.doc]
    assert rows[0].startswith("| `schema`, `tool` |") and len(rows) == 1 + len(docs) > 20
    for row, doc in zip(rows[1:], docs, strict=True):
        assert row.startswith("| " + ", ".join(f"`{k}`" for k in doc.names) + " | ") and doc.holds in row
    with pytest.raises(ValueError, match="must hold the line"):
        hooks.with_key_rows(page.replace(hooks.MARKER, ""))


def test_benchmark_table_is_the_measured_one() -> None:
    measured = [
        line
        for line in (ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8").splitlines()
        if line[:1] == "|"
    ]
    assert len(measured) > 10
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "\n".join(measured) in page, "docs/benchmarks.md's table differs from benchmarks/results.md"


@pytest.mark.parametrize("command", ["", "analyze", "compare", "check", "report", "annotate", "cache", "record"])
def test_every_help_text_fits_80_columns(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracelens", *([command] if command else []), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    wide = [line for line in done.stdout.splitlines() if len(line) > 80]
    assert not wide, wide


# ---------------------------------------------------------------- pages open with what a user does and sees

# Pages that open with a command and what it prints: after the title, at most one short paragraph, then a
# ```console block of `$ tracelens ...` (or `$ python ...`) lines, each followed by lines it prints (2-6 shown
# in all; `…` in a line stands for any text, a line of `…` alone for lines left out). The test runs each command
# (80 columns, no cache, from a folder where `traces/`, `notebooks/`, `examples/` and `tests/` are the repository's) and
# checks the shown lines appear in what it prints, in order. A page whose command cannot run here says why in
# `NOT_RUN`, with the file its shown lines must come from.
PAGES_FOR_PEOPLE = ("index.md", "commands.md", "cli.md", "report.md", "actions.md", "profiler_overhead.md")
PAGES_FOR_PEOPLE += ("benchmarks.md", "check.md", "record.md", "python.md", "json.md")
PAGES_FOR_PEOPLE += ("definitions.md", "roofline.md", "fusion.md", "critical_path.md", "cuda_graphs.md")
PAGES_FOR_PEOPLE += ("components.md", "shapes.md", "categories.md", "ranks.md", "loading.md", "caches.md")
PAGES_FOR_PEOPLE += ("promises.md", "checked.md", "study.md")
NOT_FOR_USERS = {  # pages that need not open with a command, and why
    "development.md": "for contributors: how CI runs the tests (its command is the test suite itself)",
    "changes.md": "history: what the reference pages said before",
}
PAGE_ENVIRONMENT = {"caches.md": {"TRACELENS_NO_CACHE": "0"}}  # its example shows the cache at work
NOT_RUN = {
    "benchmarks.md": ("the benchmark takes minutes (HTA's load of each trace)", "benchmarks/results.md"),
    "record.md": ("it needs torch and the GPU it ran on", "traces/h100/record2/record.log"),
}
SLOW_PAGES = {"report.md", "python.md"}  # the HTML report (imports plotly), a fresh interpreter with pandas: ~1.5-2 s


def opening(page: str) -> list[tuple[str, list[str]]]:
    """The page's opening example: (command line, the lines shown after it) for each `$ ` line of the first
    ```console block, which must come right after the title or one paragraph of at most two lines."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), f"{page}: no title"
    rest = lines[1:]
    while rest and (not rest[0].strip() or rest[0].startswith("<!--")):
        rest = rest[1:]
    if rest and not rest[0].startswith("```"):
        lead = []
        while rest and rest[0].strip():
            lead.append(rest.pop(0))
        assert len(lead) <= 2, f"{page}: more than two lines before the opening example: {lead}"
        while rest and not rest[0].strip():
            rest = rest[1:]
    assert rest and rest[0] == "```console", f"{page}: does not open with a ```console example"
    block = rest[1 : rest.index("```", 1)]
    commands: list[tuple[str, list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{page}: the example starts with output, not with `$ command`"
            commands[-1][1].append(line)
    shown = sum(len(out) for _, out in commands)
    assert 2 <= shown <= 6, f"{page}: the opening example shows {shown} lines (2-6)"
    return commands


def _printed(page: str, command: str, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], list[str]]:
    """What `command` prints (stdout lines, stderr lines), run as a shell would: words split, `*` expanded;
    `tracelens` in this process, `python` in a fresh one."""
    argv = [word for item in shlex.split(command) for word in (sorted(glob.glob(item)) if "*" in item else [item])]
    if argv[0] == "python":
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True, text=True, timeout=120)
        return done.stdout.splitlines(), done.stderr.splitlines()
    assert argv[0] == "tracelens", f"{page}: {command}"
    with contextlib.suppress(SystemExit):  # --help exits
        main(argv[1:])
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err.splitlines()


def _shown_line(line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in line.rstrip().split("…")) + r"\s*$")


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW_PAGES else p for p in PAGES_FOR_PEOPLE]
)
def test_a_page_opens_with_a_command_and_what_it_prints(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = opening(page)
    if page in NOT_RUN:
        written = (ROOT / NOT_RUN[page][1]).read_text(encoding="utf-8").splitlines()
        missing = [line for _, shown in commands for line in shown if line != "…" and line not in written]
        assert missing == [], f"{page}: its opening shows lines {NOT_RUN[page][1]} does not hold"
        return
    for folder in ("traces", "notebooks", "examples", "tests"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    monkeypatch.chdir(tmp_path)
    environment = {"COLUMNS": "80", "TRACELENS_NO_CACHE": "1", "TRACELENS_CACHE_DIR": str(tmp_path / "cache")}
    for name, value in (environment | PAGE_ENVIRONMENT.get(page, {})).items():
        monkeypatch.setenv(name, value)
    for command, shown in commands:
        streams = _printed(page, command, capsys)
        at = [0, 0]  # in stdout, in stderr: the shown lines keep the order of each stream
        for line in shown:
            if line.strip() == "…":
                continue
            pattern = _shown_line(line)
            found = [
                next((i for i in range(at[k], len(lines)) if pattern.match(lines[i])), None)
                for k, lines in enumerate(streams)
            ]
            hits = [(k, i) for k, i in enumerate(found) if i is not None]
            assert hits, f"{page}: `{command}` does not print {line!r} (after the lines before it)"
            stream, index = hits[0]
            at[stream] = index + 1


def test_every_page_is_for_people_or_says_why_not() -> None:
    pages = {page.name for page in DOCS.glob("*.md")}
    assert pages == set(PAGES_FOR_PEOPLE) | set(NOT_FOR_USERS), "add the page to PAGES_FOR_PEOPLE (or say why not)"


def test_the_opening_check_refuses_a_page_without_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    (tmp_path / "a.md").write_text("# A\n\nDefinitions first.\n\n| x | y |\n")
    with pytest.raises(AssertionError, match="does not open with"):
        opening("a.md")
    (tmp_path / "b.md").write_text("# B\n\n```console\n$ tracelens analyze x\none line\n```\n")
    with pytest.raises(AssertionError, match="shows 1 lines"):
        opening("b.md")
