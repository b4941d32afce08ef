"""Empty is not zero: a figure that cannot be computed is null in JSON and "—" in text, with the reason, and no
sentence claims what the trace does not show."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import anchor, op, step, write_trace
from tracelens.cli import main


def _analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object], str]:
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(path), "--no-cache"]) == 0
    return document, capsys.readouterr().out


def test_truncated_trace_without_a_complete_step_prints_no_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The HTA control trace cut at 80 %: all six steps lost events (tests/test_truncation.py)."""
    data = gzip.decompress(anchor("hta/trace_diff/control/control.json.gz").read_bytes())
    path = tmp_path / "control.json"
    path.write_bytes(data[: int(len(data) * 0.8)])
    document, text = _analyze(path, capsys)
    assert document["steps"] == 0
    assert set(document["per_step"].values()) == {None}  # type: ignore[union-attr]
    assert "none complete" in str(document["per_step_note"])
    assert document["bound"] == "unknown"
    assert document["bound_breakdown"]["reason"] == "no analyzed step"  # type: ignore[index]
    assert document["bound_breakdown"]["gpu_busy_us_per_step"] is None  # type: ignore[index]
    assert document["dispatch"]["dispatch_us_per_step"] is None  # type: ignore[index]
    assert "none complete (the trace is cut off)" in text
    assert "no GPU activity" not in text  # the trace has GPU activity; no step could be analyzed
    assert "none found" not in text  # no fusion search ran on an analyzed step
    assert "— (no analyzed step)" in text


def test_trace_without_gpu_work_says_nothing_about_hiding_dispatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "cpu.json", [step(1, 0, 100), op("aten::add", 10, 20), step(2, 100, 100)])
    document, text = _analyze(path, capsys)
    assert document["bound"] == "unknown"
    assert document["bound_breakdown"]["exposed_dispatch_us_per_step"] is None  # type: ignore[index]
    assert document["per_step"]["gpu_busy_us"] is None  # type: ignore[index]
    assert "hidden behind GPU work" not in text
    assert "no GPU activity in the trace" in text
