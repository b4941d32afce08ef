"""Every real third-party trace goes through `tracelens check` without a traceback: exit 0 or 1; so do the
predictions `analyze --predict` writes for it, checked on the trace itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import anchor_traces
from tracelens.cli import main

CORPUS = anchor_traces()
GENERIC = """
[[hypothesis]]
name = "steps are analyzed"
metric = "steps"
op = ">="
value = 1

[[hypothesis]]
name = "some kernel runs"
kernel = "*"

[[hypothesis]]
name = "few aten::t"
cpu_op = "aten::t"
measure = "us_per_step"
op = "<"
value = 1000

[[hypothesis]]
name = "launches"
api_call = "*Launch*"
measure = "mean_us"
op = "<="
value = 100

[[hypothesis]]
name = "something fused"
fuses = ["add", "mul"]

[[hypothesis]]
name = "kernel names"
metric = "kernels.name"
op = "not-contains"
value = "no_such_kernel_*"
"""


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_corpus_trace_checks(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text(GENERIC, encoding="utf-8")
    assert main(["check", str(path), "--expect", str(hypotheses)]) in (0, 1)
    captured = capsys.readouterr()
    assert captured.out.rstrip().splitlines()[-1].endswith(" wrong")
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_corpus_traces_predictions_check_on_itself(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trace is its own after-trace: nothing is new and it launches as many kernels, so it took no action and
    no prediction is checked (a trace without one gets `hypothesis = []`, nothing to check)."""
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(path), "--summary", "--predict", str(predictions)]) == 0
    capsys.readouterr()
    assert main(["check", str(path), "--expect", str(predictions)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.rstrip().splitlines()
    assert "Traceback" not in captured.err
    if "[[hypothesis]]" in predictions.read_text(encoding="utf-8"):
        assert " took no action (" in " ".join(lines[1:4])  # after the file's name (it may wrap)
        assert lines[-1].startswith("0 held, 0 wrong, ") and lines[-1].endswith(" not applicable")
    else:
        assert lines == [f"Hypotheses: {predictions} (none: the file says hypothesis = [])", "0 held, 0 wrong"]
