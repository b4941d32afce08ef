"""A prediction is about a step's time: none is written from a trace without steps, and none is checked on one
(docs/actions.md#predictions-as-hypotheses). The no-step traces are the study's own with their `ProfilerStep#`
ranges taken out of the raw JSON (stdlib), so the program is the same and only the steps are missing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import tomllib

from tests.conftest import recorded_trace
from tracelens.cli import main


def _without_steps(name: str, folder: Path) -> Path:
    """`name` with its ProfilerStep ranges removed, written to `folder`; asserts it had some and has none."""
    with gzip.open(recorded_trace(name), "rt", encoding="utf-8") as handle:
        document = json.load(handle)
    events = document["traceEvents"]
    kept = [e for e in events if not str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(kept) < len(events)
    document["traceEvents"] = kept
    path = folder / (Path(name).name.removesuffix(".json.gz") + "_nostep.json.gz")
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(document, handle)
    return path


def _check(trace: Path, predictions: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    main(["check", str(trace), "--expect", str(predictions), "--format", "json", "--no-cache"])
    return json.loads(capsys.readouterr().out)


def test_no_prediction_is_written_from_a_trace_without_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _without_steps("h200/eager_mlp.json.gz", tmp_path)
    out = tmp_path / "p.toml"
    assert main(["analyze", str(trace), "--predict", str(out), "--format", "json", "--no-cache"]) == 0
    capsys.readouterr()
    assert tomllib.loads(out.read_text())["hypothesis"] == []
    assert "# no prediction: no ProfilerStep" in out.read_text()


def test_no_prediction_is_checked_on_a_trace_without_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The eager MLP's predictions: checked on Liger's MLP (it fused: one held or wrong), none on the same trace
    without its steps, each saying why."""
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(recorded_trace("h200/eager_mlp.json.gz")), "--predict", str(predictions)]) == 0
    capsys.readouterr()
    stepped = _check(recorded_trace("h200/liger_mlp.json.gz"), predictions, capsys)
    assert any(v["status"] in ("held", "wrong") for v in stepped["verdicts"])
    whole = _check(_without_steps("h200/liger_mlp.json.gz", tmp_path), predictions, capsys)
    assert whole["verdicts"] and all(v["status"] == "not_applicable" for v in whole["verdicts"])
    assert all("no ProfilerStep in this trace" in v["reason"] and v["took"] == "whole trace" for v in whole["verdicts"])
