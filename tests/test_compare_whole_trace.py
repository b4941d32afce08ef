"""A variant without steps (one whole-trace window) shows its whole trace's length as its step µs, marked "w" and
said to be the whole trace, the value `analyze` gives ("the whole trace, … µs profiled"), and enters no per-step
comparison: no prediction is checked on it (before 2026-12-08 `compare` showed "—" there while `analyze` showed
the length). The length is recomputed here from the raw JSON (stdlib only): from the first host event's start
to the last host event's or GPU activity's end (docs/definitions.md: the step time of a trace's only window).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import anchor, recorded_trace
from tests.test_whole_trace_predictions import _without_steps
from tracelens.cli import main

NO_STEPS = "amd_tracelens/torch_compile_triton/trace.json.gz"
STEPPED = Path(__file__).resolve().parent.parent / "traces/h200/eager_mlp.json.gz"
HOST = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _whole_trace_us(path: Path) -> float:
    """The trace's length from its raw events; asserts it has no ProfilerStep."""
    with gzip.open(path, "rt") as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    assert not any(re.fullmatch(r"ProfilerStep#\d+", str(e.get("name", ""))) for e in events)
    host = [e for e in events if e.get("cat") in HOST]
    ends = [e["ts"] + e["dur"] for e in events if e.get("cat") in (*HOST, *GPU)]
    return float(max(ends) - min(e["ts"] for e in host))


def test_compare_shows_the_whole_trace_length_as_analyze_does(capsys: pytest.CaptureFixture[str]) -> None:
    path = anchor(NO_STEPS)
    length = f"{_whole_trace_us(path):,.1f}"
    assert main(["analyze", str(path), "--summary", "--no-cache", "--width", "100"]) == 0
    assert f"the whole trace, {length} µs profiled (no steps)" in capsys.readouterr().out
    assert main(["compare", str(STEPPED), str(path), "--width", "200", "--no-cache"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("│ trace (whole trace)"))
    assert row.split("│")[5].strip() == f"{length} w"  # step µs
    assert "step µs w: the whole trace's length" in " ".join(out.split())
    assert main(["compare", str(STEPPED), str(path), "--format", "json", "--no-cache"]) == 0
    variant = json.loads(capsys.readouterr().out)["variants"][1]
    assert variant["step_source"] == "whole_trace"
    assert f"{variant['per_step']['step_us']:,.1f}" == length


def test_no_prediction_is_checked_on_a_whole_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """The trace against itself: the same program, so only its having no steps keeps the predictions unchecked."""
    path = str(anchor(NO_STEPS))
    assert main(["compare", path, path, "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["predictions_checked"] == []
    (skip,) = document["predictions_skipped"]
    assert skip["reason"].startswith("no ProfilerStep in the prediction's trace and this trace: a whole trace's length")
    assert document["clock_drift"] == []
    assert not any("fastest step" in v for v in document["verdicts"])


def test_a_long_whole_trace_length_stays_whole_at_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    """A marked figure ("13,336,315.8", "12,940.0 w", "… e") is still a number: never cut across lines."""
    paths = [anchor(NO_STEPS), anchor("hta/triton_example/triton_example.json.gz")]
    assert main(["compare", *map(str, paths), "--format", "json", "--no-cache"]) == 0
    steps = [v["per_step"]["step_us"] for v in json.loads(capsys.readouterr().out)["variants"]]
    assert max(steps) > 1e6  # a length of seven digits before the point
    assert main(["compare", *map(str, paths), "--width", "80", "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert all(f"{us:,.1f}" in text for us in steps)


def test_a_variant_without_steps_is_no_other_program_and_gets_no_per_step_credit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The study's eager MLP without its ProfilerStep ranges is the same program as the compiled MLP (its GEMMs per
    call are the same): before, its five steps' GEMM work read as 5× another program's. Its kernels are not a
    step's: no fused kernel is credited per step against it, and no clock drift is read between it and another
    whole trace."""
    eager, liger = (_without_steps(name, tmp_path) for name in ("h200/eager_mlp.json.gz", "h200/liger_mlp.json.gz"))
    compiled = recorded_trace("h200/compiled_mlp.json.gz")
    assert main(["compare", str(eager), str(compiled), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    text = json.dumps(document)
    assert "another program" not in text and "not a variant" not in text
    assert document["fusions"] == [] and document["fusion_balance"] == []
    assert any("not credited" in s and "no ProfilerStep in eager_mlp" in s for s in document["verdicts"])
    assert main(["compare", str(eager), str(liger), "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["clock_drift"] == []
