"""Terminal output at 80 columns: no line wider than the width and no number cut off (a digit or a comma
right before "…", what rich's overflow="ellipsis" used to print as `1,613…`), on every corpus trace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.conftest import TRACES, anchor_traces
from tracelens.cli import main

CUT_NUMBER = re.compile(r"[\d,]…")
RECORDED = sorted((TRACES / "h200").glob("*.json.gz"))
CORPUS = anchor_traces()


def problems(text: str, width: int) -> list[str]:
    """Lines wider than `width` or with a cut-off number."""
    return [line for line in text.splitlines() if cell_len(line) > width or CUT_NUMBER.search(line)]


@pytest.mark.parametrize("path", CORPUS + RECORDED, ids=[p.name for p in CORPUS + RECORDED])
def test_analyze_at_80_columns_cuts_no_number(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Per step" in out
    assert problems(out, 80) == []


def test_compare_and_check_at_80_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    paths = [str(p) for p in RECORDED]
    assert main(["compare", *paths]) == 0
    out = capsys.readouterr().out
    assert "Variants" in out and problems(out, 80) == []
    main(["check", *paths, "--expect", str(TRACES.parent / "notebooks" / "study_hypotheses.toml")])
    out = capsys.readouterr().out
    assert "held," in out and problems(out, 80) == []


def test_width_option_beats_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    path = str(TRACES / "h200" / "eager_mlp.json.gz")
    assert main(["analyze", path, "--width", "60"]) == 0
    out = capsys.readouterr().out
    assert max(cell_len(line) for line in out.splitlines()) == 60
    assert main(["analyze", path]) == 0  # COLUMNS when piped (was always 140)
    wide = capsys.readouterr().out
    assert 140 < max(cell_len(line) for line in wide.splitlines()) <= 200
    assert main(["analyze", path, "--width", "20"]) == 2
    assert "at least 40 columns" in capsys.readouterr().err
