"""How `tracelens` prints warnings on stderr (`errors.warn`, the one place; cli/common.py: print_warnings)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from tests.conftest import unwrapped
from tracelens.cli.common import print_warnings
from tracelens.errors import WARNING_PREFIX, warning_text

WARNING = "914 of 1,707 GPU activities have no launch in the trace " * 3


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_warning_stays_one_line_into_a_pipe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into a pipe or a log (no $COLUMNS, no terminal): one line per warning, so a script's grep finds the whole
    message; with $COLUMNS=80 the same warning wraps: lines of at most 80 columns, the first with the prefix, the
    others indented, the same words."""
    monkeypatch.delenv("COLUMNS", raising=False)
    print_warnings(Path("t.json.gz"), [WARNING])
    assert capsys.readouterr().err == f"{WARNING_PREFIX}t.json.gz: {WARNING}\n"
    monkeypatch.setenv("COLUMNS", "80")
    print_warnings(Path("t.json.gz"), [WARNING])
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 80
    assert lines[0].startswith("tracelens: warning: t.json.gz: 914 of")
    assert all(line.startswith("  ") and not line.startswith(WARNING_PREFIX) for line in lines[1:])
    assert unwrapped("\n".join(lines)) == f"{WARNING_PREFIX}t.json.gz: {WARNING}".strip()


def test_a_warning_wraps_to_the_terminal_or_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """$COLUMNS sets the width (a terminal's where it is unset); a short warning stays one line."""
    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setenv("COLUMNS", "120")
    print_warnings(Path("t.json.gz"), [WARNING, "short"])
    lines = sys.stderr.getvalue().splitlines()
    assert max(map(len, lines)) <= 120 and max(map(len, lines)) > 100
    assert lines[-1] == "tracelens: warning: t.json.gz: short"


def test_a_word_longer_than_the_line_is_never_broken() -> None:
    """A path wider than the width stays whole (to copy it), on the prefix's line where it comes first (the
    prefix is never a line alone)."""
    path = "/tmp/" + "x" * 90 + "/cache/traces/entry.trace"
    lines = warning_text(f"cache entry {path} is damaged", 80).splitlines()
    assert lines == ["tracelens: warning: cache entry", f"  {path}", "  is damaged"]
    assert warning_text(f"{path}: cut off", 80).splitlines() == [f"{WARNING_PREFIX}{path}:", "  cut off"]
    assert warning_text("a b", 10) == "tracelens: warning: a b"  # at least 40 columns: the prefix is never split


def test_compare_escapes_control_characters_in_a_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name with an escape sequence moves no cursor in compare's input warnings (as in analyze's)."""
    import shutil

    from tracelens.cli import main

    monkeypatch.delenv("COLUMNS", raising=False)
    named = tmp_path / "a\x1b[31mb.json.gz"
    shutil.copy(Path(__file__).resolve().parents[2] / "traces/h200/eager_mlp.json.gz", named)
    assert main(["compare", str(named), "--no-cache", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "a\\x1b[31mb.json.gz: one trace, nothing to compare" in err


def test_every_warning_escapes_control_characters(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`errors.warn` escapes them itself, so the cache's, the rank cap's and the recorder's warnings, which name
    paths, cannot move the cursor either (not each caller on its own)."""
    from tracelens.errors import warn

    monkeypatch.delenv("COLUMNS", raising=False)
    warn("cache entry /tmp/a\x1b]0;owned\x07b is damaged")
    assert capsys.readouterr().err == "tracelens: warning: cache entry /tmp/a\\x1b]0;owned\\x07b is damaged\n"
