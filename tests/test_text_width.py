"""Terminal output at 80 columns: no line wider than the width and no number cut off (a digit or a comma
right before "…", what rich's overflow="ellipsis" used to print as `1,613…`), on every corpus trace."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.table import Table

from tests.conftest import TRACES, anchor_traces
from tracelens.cli import main
from tracelens.renderers.tables import display_name, layout, name_lines

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


FUSED_STUDIES = {  # long Inductor names with backward rows; a long variant name (it used to cost the eager column)
    "train_block": [TRACES / "h200" / "block" / f"train_{v}_block.json.gz" for v in ("eager", "compiled", "liger")],
    "max_autotune": [TRACES / "h200" / f"{v}.json.gz" for v in ("eager_mlp", "compiled_mlp_max_autotune")],
}


@pytest.mark.parametrize("study", sorted(FUSED_STUDIES))
def test_the_fused_kernels_at_80_columns_keep_every_figure_and_each_name_on_one_line(
    study: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare`'s fused kernels at 80 columns: no line wider; each row's first line holds its kernel's name
    (whole, or its head and tail around "…": never wrapped) and its fused, eager and saved µs; at 250 columns
    every name is whole (and in JSON)."""
    paths = [str(p) for p in FUSED_STUDIES[study]]
    assert main(["compare", *paths, "--format", "json"]) == 0
    fusions = json.loads(capsys.readouterr().out)["fusions"]
    assert fusions and any(f["baseline_us_per_step"] is not None for f in fusions)
    for width in (80, 250):
        assert main(["compare", *paths, "--width", str(width)]) == 0
        out = capsys.readouterr().out
        assert problems(out, width) == []
        for fusion in fusions:
            name = display_name(fusion["kernel"]) + (" [backward]" if fusion["direction"] == "backward" else "")
            figures = _fused_figures(fusion)
            rows = [line for line in out.splitlines() if re.search(figures, line)]
            shown = [row.split("│")[1].strip() for row in rows]
            assert any(s == name if width == 250 else _head_and_tail_of(s, name) for s in shown), (name, shown)


def _fused_figures(fusion: dict[str, Any]) -> str:
    """The end of a fused row's first line: its fused, eager and saved µs per step ("—" where unplaced)."""
    fused, eager = fusion["kernel_us_per_step"], fusion["baseline_us_per_step"]
    cells = [f"{fused:,.1f}", "—", "—"] if eager is None else [f"{v:,.1f}" for v in (fused, eager, eager - fused)]
    return "".join(rf"│\s+{re.escape(cell)} " for cell in cells) + "│$"


def _head_and_tail_of(shown: str, name: str) -> bool:
    """`shown` is `name`, or a head and a tail of it (each at least 8 characters) around one "…"."""
    if shown == name:
        return True
    head, _, tail = shown.partition("…")
    return len(head) >= 8 and len(tail) >= 8 and name.startswith(head) and name.endswith(tail)


def test_a_name_line_is_shortened_in_the_middle_and_the_lines_below_wrap() -> None:
    """`tables.name_lines`: a cell's first line never wraps (shortened in the middle to the column's width);
    its other lines wrap on spaces."""
    table = Table()
    table.add_column("kernel")
    table.add_column("µs", justify="right")
    name_lines(table, "kernel")
    kernel = "triton_red_fused__to_copy__unsafe_view_add_mean_mul_pow_rsqrt_2"
    table.add_row(f"{kernel}\nreplaces aten::add, aten::copy_, aten::pow, aten::mean", "13.6")
    fitted = layout(table, 40)
    cell = fitted.columns[0]._cells[0]
    first, *rest = str(cell).splitlines()
    width = fitted.columns[0].width or 0
    assert cell_len(first) == width and _head_and_tail_of(first, kernel)
    assert len(rest) > 1 and all(cell_len(line) <= width for line in rest)
    assert " ".join(rest) == "replaces aten::add, aten::copy_, aten::pow, aten::mean"
