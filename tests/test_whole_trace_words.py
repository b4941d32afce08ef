"""A trace without steps makes no per-step claim in the summary (issue #27: "else no per-step claims"): the window
is the whole trace, so the actions' figures are the trace's, said as such ("trace 12,940.0 → 12,412.6 µs",
"527.4 µs of pointwise kernels", "replayed as one window"), never "/step", "step …", "1 of 1 analyzed steps"
or "per step" (2026-12-07, new user). That the traces have no
ProfilerStep is read from their raw events."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import anchor
from tracelens.cli import main

NO_STEPS = ("amd_tracelens/torch_compile_triton/trace.json.gz", "other/pytorch__kineto/after_fix_trace.json.gz")


@pytest.mark.parametrize("name", NO_STEPS)
def test_a_trace_without_steps_gets_no_per_step_claim_in_the_summary(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = anchor(name)
    with gzip.open(path, "rt") as handle:
        names = [str(e.get("name", "")) for e in json.load(handle)["traceEvents"]]
    assert not any(re.fullmatch(r"ProfilerStep#\d+", n) for n in names)
    assert main(["analyze", str(path), "--summary", "--no-cache", "--width", "80"]) == 0
    summary = capsys.readouterr().out
    assert "the whole trace" in summary and "/step" not in summary
    assert not re.search(r"^\s+step [\d,]", summary, re.MULTILINE)
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    actions = document["actions"]["actions"]
    assert actions and not any("/step" in a["basis"] for a in actions)
    path_notes = (
        document["critical_path"]["note"],
        document["critical_path"]["limit_note"],
        document["actions"]["note"],
    )
    assert not any(re.search(r"\b1 (of 1 analyzed )?steps?\b|per step", note) for note in path_notes), path_notes


def test_a_trace_with_steps_keeps_its_per_step_words(capsys: pytest.CaptureFixture[str]) -> None:
    """The study's eager MLP (ProfilerSteps): the same lines say "step … → …" and "/step"."""
    path = Path(__file__).resolve().parent.parent / "traces/h200/eager_mlp.json.gz"
    assert main(["analyze", str(path), "--summary", "--no-cache", "--width", "80"]) == 0
    summary = capsys.readouterr().out
    assert re.search(r"^\s+step [\d,.]+ → ", summary, re.MULTILINE) and "/step" in summary


def _table_head(text: str, title: str) -> str:
    """The title line starting with `title` and the header rows under it (up to the row separator)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("┡"))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("name", NO_STEPS)
def test_the_kernel_and_op_tables_of_a_trace_without_steps_say_whole_trace(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Their titles and column heads name the whole trace, not "per step"/"/step" (a stepped trace keeps them)."""
    assert main(["analyze", str(anchor(name)), "--no-cache", "--width", "120"]) == 0
    text = capsys.readouterr().out
    for title in ("GPU kernels", "Ops → kernels"):
        head = _table_head(text, title)
        assert "whole trace, no steps" in head and "/step" not in head and "per step" not in head
    stepped = Path(__file__).resolve().parent.parent / "traces/h200/eager_mlp.json.gz"
    assert main(["analyze", str(stepped), "--no-cache", "--width", "120"]) == 0
    text = capsys.readouterr().out
    assert all("/step" in _table_head(text, title) for title in ("GPU kernels", "Ops → kernels"))
