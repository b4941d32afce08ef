"""Reliability III (#32 item 3): physically impossible values are flagged with a warning and left out of the
figures they would falsify, never counted silently. A family of traces built from the bundled eager MLP, each
check against what the raw file itself says (the standard library reads it)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unwrapped

TRACE = Path(__file__).resolve().parent.parent / "traces" / "h200" / "eager_mlp.json.gz"


def _document() -> dict[str, Any]:
    with gzip.open(TRACE, "rt") as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def _analyze(path: Path) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-m", "tracelens", "analyze", str(path), "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout), unwrapped(result.stderr)  # each warning on one line


GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _gpu_us(events: list[dict[str, Any]]) -> float:
    return sum(e["dur"] for e in events if e.get("cat") in GPU and e.get("dur", 0) >= 0)


@pytest.mark.parametrize("share", [1.0, 0.5, 0.2])
def test_negative_kernel_durations_are_left_out_with_a_warning(tmp_path: Path, share: float) -> None:
    document = _document()
    kernels = [e for e in document["traceEvents"] if e.get("cat") == "kernel"]
    for event in kernels[: int(len(kernels) * share)]:
        event["dur"] = -abs(event["dur"]) - 1.0
    path = tmp_path / "negative.json"
    path.write_text(json.dumps(document))
    report, stderr = _analyze(path)
    negative = sum(1 for e in document["traceEvents"] if isinstance(e.get("dur"), int | float) and e["dur"] < 0)
    assert f"{negative:,} events with a negative duration were left out" in stderr
    # what is left: the kernels with a real duration, and nothing of the impossible ones (never 0 µs each)
    activities = sum(1 for e in document["traceEvents"] if e.get("cat") in GPU)
    assert sum(k["calls"] for k in report["kernels"]) == activities - negative
    total_us = sum(k["total_us"] for k in report["kernels"])
    assert total_us == pytest.approx(_gpu_us(document["traceEvents"]), rel=1e-6, abs=0.01)


@pytest.mark.parametrize("duration", [0.0, -5.0])
def test_profiler_steps_of_no_or_negative_length_are_no_steps(tmp_path: Path, duration: float) -> None:
    document = _document()
    for event in document["traceEvents"]:
        if str(event.get("name", "")).startswith("ProfilerStep#"):
            event["dur"] = duration
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(document))
    report, stderr = _analyze(path)
    assert "tracelens: warning:" in stderr
    assert ("zero length" in stderr) if duration == 0 else ("negative duration" in stderr)
    # no step of 0 kernels claimed: the window that is left holds every kernel of the trace
    kernels = sum(1 for e in document["traceEvents"] if e.get("cat") == "kernel")  # memcpy/memset counted apart
    assert report["step_table"] and all(row["kernels"] > 0 for row in report["step_table"])
    assert sum(row["kernels"] for row in report["step_table"]) == kernels
