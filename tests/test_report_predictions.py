"""The report's comparison shows the predictions `compare` checks: the same rows as `compare --format json`'s
`predictions_checked`, and the traces that check none, with why (docs/actions.md#in-compare)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.report.compare import comparison_section

GRAPHS = Path(__file__).resolve().parent.parent / "traces" / "h200" / "graphs"
NAMES = ("mlp_eager", "mlp_ro_replay", "block_graph")


def test_the_report_shows_the_predictions_compare_checks(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [GRAPHS / f"{name}.json.gz" for name in NAMES]
    assert main(["compare", *map(str, paths), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    (checked,) = document["predictions_checked"]
    (skipped,) = document["predictions_skipped"]
    section = comparison_section(
        [(name, tracelens.load(p), analyze(tracelens.load(p))) for name, p in zip(NAMES, paths, strict=True)]
    )
    (panel,) = [p for p in section.panels if p.id == "compare-predictions"]
    assert panel.table is not None
    (row,) = panel.table.rows
    assert row[:4] == ("mlp_ro_replay", "compile_reduce_overhead (the step)", "weak", f"{checked['error_pct']:+.1f} %")
    assert row[4] == f"{checked['predicted_step_us']:,.1f}" and row[5] == f"{checked['measured_step_us']:,.1f}"
    assert f"{skipped['after']}: {skipped['reason']}" in panel.note
    assert "weak: held, but the step before" in panel.note
