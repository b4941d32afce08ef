"""How `tracelens` prints warnings on stderr (cli/common.py: print_warnings)."""

from __future__ import annotations

import pytest


def test_warnings_wrap_on_a_terminal_and_stay_one_line_in_a_pipe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr warnings: one line each into a pipe or a log (grep finds them whole); wrapped to the terminal's
    width on a terminal, continuation lines indented."""
    import io
    import sys
    from pathlib import Path

    from tracelens.cli.common import print_warnings

    warning = "914 of 1,707 GPU activities have no launch in the trace " * 3
    print_warnings(Path("t.json.gz"), [warning])
    piped = capsys.readouterr().err
    assert piped.count("\n") == 1 and piped.startswith("tracelens: warning: t.json.gz: 914 of")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "80")
    print_warnings(Path("t.json.gz"), [warning])
    lines = terminal.getvalue().splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 80 and all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == piped.strip()
