"""The one set of number formatters (`tracelens.units`): units labelled or implied by the column, unknown as —."""

from __future__ import annotations

import math

from tracelens import units


def test_each_formatter_shows_its_unit_and_unknown_as_a_dash() -> None:
    assert units.us_text(1403.694) == "1,403.7" and units.us_text(0.04) == "0.0"
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
    from tracelens.renderers import compare_out, ranks, text, text_analyses
    from tracelens.report import compare, findings
    from tracelens.report import ranks as report_ranks

    assert text._us is text_analyses._us is compare._us is compare_out._optional_us is units.us_text
    assert ranks._ms is report_ranks._ms is units.ms_text and report_ranks._pct is units.pct_text
    for module in (text_analyses, findings):  # the sections and panels of memory, streams, the critical path
        assert module.bytes_text is units.bytes_text and module.pct_text is units.pct_text
        assert module.whole_text is units.whole_text
