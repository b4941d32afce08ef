"""The one set of number formatters (`tracelens.units`): units labelled or implied by the column, unknown as —."""

from __future__ import annotations

import ast
import math
from pathlib import Path

from tracelens import units


def test_each_formatter_shows_its_unit_and_unknown_as_a_dash() -> None:
    assert units.us_text(1403.694) == "1,403.7" and units.us_text(0.04) == "0.0" and units.us_text(-0.04) == "0.0"
    assert units.change_text(20.46) == "+20.5" and units.change_text(-1129.74) == "-1,129.7"
    assert units.change_text(-0.04) == units.change_text(0.0) == "+0.0" and units.change_text(-0.4, 0) == "+0"
    assert units.ms_text(1_403_694.0) == "1,403.694" and units.ms_text(250.0) == "0.250"
    assert units.pct_text(12.345) == "12.3 %"
    assert units.whole_text(1203.6) == "1,204"
    assert units.bytes_text(1.5 * (1 << 30)) == "1.50 GiB" and units.bytes_text(3.25 * (1 << 20)) == "3.2 MiB"
    assert (
        units.bytes_text(2048) == "2.0 KiB" and units.bytes_text(12) == "12 B" and units.bytes_text(-2048) == "-2.0 KiB"
    )
    for formatter in (units.us_text, units.ms_text, units.pct_text, units.bytes_text, units.whole_text):
        assert formatter(None) == units.MISSING == "—" and formatter(math.nan) == "—"


def test_the_renderers_use_them_instead_of_copies() -> None:
    from tracelens.renderers import compare_out, ranks, text
    from tracelens.renderers.analyses import comm_overlap, critical_path, memory, stream_idle
    from tracelens.report import compare
    from tracelens.report import ranks as report_ranks

    for module in (text, compare, compare_out, critical_path, comm_overlap, stream_idle):
        assert module.us_text is units.us_text, module.__name__
    assert ranks.ms_text is report_ranks.ms_text is units.ms_text and report_ranks.pct_text is units.pct_text
    for module in (comm_overlap, stream_idle):  # the sections and panels of overlap, streams, memory
        assert module.pct_text is units.pct_text
    assert memory.bytes_text is units.bytes_text and memory.whole_text is units.whole_text


FORMATTERS = {"us_text", "ms_text", "pct_text", "bytes_text", "whole_text"}


def _aliases(path: Path) -> list[str]:
    """`name = us_text`-style rebindings of a formatter (a second name for one of them)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in FORMATTERS:
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_module_gives_a_formatter_a_second_name(tmp_path: Path) -> None:
    package = Path(units.__file__).parent
    assert [hit for path in sorted(package.rglob("*.py")) for hit in _aliases(path)] == []
    (tmp_path / "m.py").write_text("from tracelens.units import us_text\n_us = us_text\n")
    assert _aliases(tmp_path / "m.py") == ["m.py:2 _us = us_text"]
