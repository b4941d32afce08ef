"""A trace whose every analyzed step is warm-up (it captures a CUDA graph or compiles) checks no prediction:
`compiled.warmup_only` against the raw events (each ProfilerStep overlapped by a capture call or a compile-phase
span), and `check` and `compare` saying N/A / not checked for the capture-only traces while the trace whose
later steps replay the graph is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import rawtrace
from tracelens.cli import main

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ROOT / "traces" / "h200" / "graphs"
CAPTURE_CALLS = ("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate")
COMPILE_NAMES = ("compile_fx_inner", "_compile.compile_inner", "OutputGraph.call_user_compiler")


def _is_warmup(event: dict[str, object]) -> bool:
    name = str(event.get("name", ""))
    return name.startswith(CAPTURE_CALLS) or name.endswith("(dynamo_timed)") or name in COMPILE_NAMES


def _every_step_is_warmup(path: Path) -> bool:
    events = rawtrace.events(path)
    steps = rawtrace.steps([e for e in events if e.get("cat") == "user_annotation"])
    spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events if _is_warmup(e)]
    return bool(steps) and all(any(s <= end and e >= start for s, e in spans) for _, start, end in steps)


@pytest.mark.parametrize("path", sorted(GRAPHS.glob("*.json.gz")), ids=lambda p: p.name)
def test_warmup_only_is_every_step_overlapping_a_capture_or_a_compile(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["compiled"]["warmup_only"] is _every_step_is_warmup(path)


def test_a_capture_trace_checks_no_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(GRAPHS / "mlp_eager.json.gz"), "--predict", str(predictions)]) == 0
    capsys.readouterr()
    capture, replays = GRAPHS / "mlp_graph_capture.json.gz", GRAPHS / "mlp_graph.json.gz"
    assert _every_step_is_warmup(capture) and not _every_step_is_warmup(replays)
    assert main(["check", str(capture), "--expect", str(predictions), "--format", "json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)["verdicts"]
    assert verdicts and {v["status"] for v in verdicts} == {"not_applicable"}
    assert {v["took"] for v in verdicts} == {"warm-up only"}
    args = ["compare", str(GRAPHS / "mlp_eager.json.gz"), str(capture), str(replays), "--format", "json"]
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert [s["after"] for s in document["predictions_skipped"]] == ["mlp_graph_capture"]
    assert "warm-up" in document["predictions_skipped"][0]["reason"]
    assert {c["after"] for c in document["predictions_checked"]} == {"mlp_graph"}


@pytest.mark.parametrize("name", ["mlp_graph_capture", "block_graph_capture"])
def test_no_action_is_predicted_from_warmup_steps(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`analyze` of a capture-only trace: no action (they would be predictions about a capture step), the reason
    in JSON, in the summary and in the predictions file."""
    path = GRAPHS / f"{name}.json.gz"
    assert _every_step_is_warmup(path)
    assert main(["analyze", str(path), "--format", "json"]) == 0
    actions = json.loads(capsys.readouterr().out)["actions"]
    assert actions["actions"] == [] and "warm-up" in actions["note"]
    assert main(["analyze", str(path), "--summary"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "warm-up step)" in text and "No action predicted: every analyzed step is warm-up" in text
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(path), "--predict", str(predictions)]) == 0
    assert "# no prediction: every analyzed step is warm-up" in predictions.read_text()


@pytest.mark.parametrize("name", ["mlp_graph_capture", "block_graph_capture", "mlp_eager"])
def test_the_profiler_free_line_says_warm_up(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The summary's profiler-free line of a trace whose every step is warm-up (raw events) says it is of the
    warm-up ("Warm-up without the profiler: …"), within 80 columns; a steady trace's does not."""
    path = GRAPHS / f"{name}.json.gz"
    assert main(["analyze", str(path), "--summary", "--no-cache", "--width", "80"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("Warm-up without the profiler: ") == _every_step_is_warmup(path), line
    assert len(line) <= 80
