"""Odd-but-usable values the attack of issue 19 found (item 4/6): analyzed as far as they go, with a warning,
never a traceback. Expected figures come from the raw events written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import kernel, launch, op, run_cli, step, unwrapped, write_trace
from tracelens.loader import load_trace


def _one_step() -> list[dict[str, object]]:
    return [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, 5, correlation=70),
    ]


def test_a_lone_surrogate_escape_in_a_name_is_replaced_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps({"traceEvents": _one_step()}).replace('"gemm"', '"ge\\ud800mm"'))
    trace = load_trace(path)
    assert "ge\ufffdmm" in trace.events.names and len(trace.events) == 4
    assert any("1 name holds invalid Unicode" in w for w in trace.warnings)
    for command in ("analyze", "report"):
        out_file = tmp_path / f"out.{command}"
        _, err = run_cli(capsys, command, str(path), "-o", str(out_file))
        assert "ge\ufffdmm" in out_file.read_text(encoding="utf-8") and "Traceback" not in err
    annotated = tmp_path / "annotated.json"
    run_cli(capsys, "annotate", str(path), "-o", str(annotated))
    assert '"ge\\ud800mm"' in annotated.read_text()  # the file's own escape is written back unchanged


def test_lone_surrogates_in_args_and_metadata_are_replaced_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shapes' `Input type` strings and top-level metadata are encoded again downstream (cache, JSON): no
    lone surrogate may reach them."""
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    events = _one_step()
    events[1]["args"] = {**events[1]["args"], "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}  # type: ignore[dict-item]
    document = {"deviceProperties": [{"id": 0, "name": "H200", "numSms": 132}], "traceEvents": events}
    text = json.dumps(document).replace('"float"', '"fl\\ud800oat"', 1).replace('"H200"', '"H\\udc00"')
    path = tmp_path / "odd.json"
    path.write_text(text)
    trace = load_trace(path)
    row = trace.events.names.index("aten::mm")
    types = trace.events.input_types[trace.events.name == row][0]
    assert json.loads(bytes(types)) == ["fl\ufffdoat", "float"]
    assert trace.meta.devices[0].name == "H\ufffd" and trace.meta.raw["deviceProperties"][0]["name"] == "H\ufffd"
    for command in ("analyze", "report", "annotate"):
        run_cli(capsys, command, str(path), "-o", str(tmp_path / f"out.{command}"))


def test_a_step_number_beyond_int64_is_not_a_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [*_one_step(), step(99999999999999999999, 60, 30)]
    path = write_trace(tmp_path / "steps.json", events)
    trace = load_trace(path)
    assert trace.steps.number.tolist() == [1] and trace.steps.complete.tolist() == [True]
    assert any("ProfilerStep#99999999999999999999" in w and "not taken for steps" in w for w in trace.warnings)
    out, _ = run_cli(capsys, "analyze", str(path), "--no-cache", "--format", "json")
    assert json.loads(out)["step_numbers"] == [1]
    alone = write_trace(tmp_path / "alone.json", [op("aten::mm", 0, 5), step(2**64, 1, 3)])
    assert load_trace(alone).steps.source == "whole_trace"  # the only "step" was none: one window


def test_a_rank_beyond_int64_is_unknown_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank.json", _one_step(), distributedInfo={"rank": 2**70, "world_size": 4})
    trace = load_trace(path)
    assert trace.meta.rank is None and trace.meta.world_size == 4
    assert "distributedInfo.rank 1180591620717411303424 is not a usable number; the rank is unknown" in trace.warnings
    out, _ = run_cli(capsys, "analyze", str(path), "--no-cache", "--format", "json")
    assert json.loads(out)["trace"]["rank"] is None


def test_a_truncated_trace_without_steps_has_no_complete_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19 item 6: cut off, and no ProfilerStep: what followed the cut is unknown, so the one window is
    not complete and no per-step figure is reported from it (before: 339 kernels "per step" of 9,628)."""
    events: list[dict[str, object]] = []
    for i in range(50):
        t = i * 100.0
        events += [
            op("aten::mm", t + 1, 20, ext=10 + i),
            launch("cudaLaunchKernel", t + 2, 3, correlation=100 + i, ext=10 + i),
            kernel("gemm", t + 30, 5, correlation=100 + i),
        ]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    whole = tmp_path / "whole.json"
    whole.write_text(text)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    assert load_trace(whole).steps.complete.tolist() == [True]
    trace = load_trace(cut)
    assert trace.truncation.truncated and trace.steps.source == "whole_trace"
    assert trace.steps.complete.tolist() == [False]
    assert any("one incomplete window" in w for w in trace.warnings)
    out, err = run_cli(capsys, "analyze", str(cut), "--no-cache", "--format", "json")
    document = json.loads(out)
    assert document["steps"] == 0 and document["step_numbers"] == [] and document["kernels"] == []
    assert "one incomplete window, so per-step figures are empty" in unwrapped(err)
