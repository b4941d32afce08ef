"""The documentation stays true: the MkDocs site builds in strict mode (a broken link or anchor fails), every
relative link of the README resolves, the command-line help page is what the parser prints, every top-level key
of the JSON documents is described, the benchmark table is the measured one, and the README keeps the two
commands that CI and a fresh machine run."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracelens.analyses.ranks import RanksReport
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


def test_mkdocs_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The build above can fail: a page with a link to a missing page is refused."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (it is in the test extra)")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](missing.md)\n", encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:")[0]
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
    """Keys named in the first column of the schema's table in docs/json.md."""
    text = (DOCS / "json.md").read_text(encoding="utf-8")
    section = text.split(f"## `{schema}`", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for row in re.findall(r"^\| ([^|]+) \|", section, flags=re.M):
        keys.update(re.findall(r"`([a-z_]+)`", row))
    return keys


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
    ranks_keys = {"schema", "tool", *field_names(RanksReport)}
    missing = ranks_keys - _documented_keys("tracelens.ranks/1")
    assert not missing, f"docs/json.md does not describe {sorted(missing)} of tracelens.ranks/1"


def test_benchmark_table_is_the_measured_one() -> None:
    measured = [
        line
        for line in (ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8").splitlines()
        if line[:1] == "|"
    ]
    assert len(measured) > 10
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "\n".join(measured) in page, "docs/benchmarks.md's table differs from benchmarks/results.md"


@pytest.mark.parametrize("command", ["", "analyze", "compare", "check", "report", "annotate", "cache"])
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
