"""A program whose CPU runs ahead of its GPU (no sync in the loop): each step's span starts where earlier steps'
GPU work ends, so the queue does not lengthen it; `analyze`, `check`, `compare` and the report say how long before
that end each step's CPU starts, beside the step's period (docs/check.md#a-cpu-that-runs-ahead)."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests import rawtrace
from tests.independent.step_windows import step_figures

ROOT = Path(__file__).resolve().parent.parent
QUEUED = ROOT / "traces/h100/record/hf_llama_train_compiled.json.gz"  # no sync in the loop: its queue grows
SYNCED = ROOT / "traces/h200/compiled_mlp.json.gz"  # a sync each step: no queue


def _stdlib(path: Path) -> tuple[float, float, float]:
    """Stdlib: (mean span, mean time from a step's CPU start to its span's start, median period), µs."""
    bounds = list(rawtrace.step_spans(rawtrace.events(path)).values())
    span = statistics.fmean(end - origin for _, origin, end in bounds)
    ahead = statistics.fmean(origin - start for start, origin, _ in bounds)
    return span, ahead, statistics.median(f["step_us"] for f in step_figures(str(path)))


def _check(trace: Path, tmp_path: Path) -> str:
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text(
        '[[hypothesis]]\nname = "step"\nmetric = "critical_path.step_us"\nop = "<"\nvalue = 1.0\n', encoding="utf-8"
    )
    command = [sys.executable, "-m", "tracelens", "check", str(trace), "--expect", str(hypotheses), "--width", "400"]
    return subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout


def test_the_queue_does_not_lengthen_the_span(tmp_path: Path) -> None:
    """The queue grows over the five steps (stdlib backlog: 25.9 → 58.4 ms), yet the measured span is the
    stdlib mean span, within 1 % of the stdlib period; the evidence gives the CPU's lead and the period."""
    span, ahead, period = _stdlib(QUEUED)
    backlog = [f["backlog_us"] for f in step_figures(str(QUEUED))]
    assert backlog == sorted(backlog) and backlog[-1] > 2 * period
    assert abs(span / period - 1) < 0.01 and ahead > span
    out = _check(QUEUED, tmp_path)
    assert f"critical_path.step_us = {span:.1f}" in out
    assert f"each step's CPU starts {ahead:,.1f} µs before earlier steps' GPU work ends" in out
    assert f"the step's period is {period:,.1f} µs (per_step.step_us)" in out


def test_no_such_line_without_a_queue(tmp_path: Path) -> None:
    out = _check(SYNCED, tmp_path)
    assert "critical_path.step_us =" in out and "before earlier steps' GPU work ends" not in out


def _compare_checks(before: Path, after: Path) -> list[dict[str, object]]:
    import json

    command = [sys.executable, "-m", "tracelens", "compare", str(before), str(after), "--format", "json"]
    out = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=True).stdout
    checks: list[dict[str, object]] = json.loads(out)["predictions_checked"]
    return checks


def test_compare_says_it_too() -> None:
    """`compare`'s checked prediction carries the CPU's lead as a share of the time from a step's CPU start to its
    end and the period (JSON `queued_pct`, `period_us`) on the queued twin, none on a synced one."""
    (queued,) = _compare_checks(QUEUED.with_name("hf_llama_train_eager.json.gz"), QUEUED)
    span, ahead, period = _stdlib(QUEUED)
    assert float(str(queued["period_us"])) == pytest.approx(period, abs=0.1)
    assert float(str(queued["queued_pct"])) == pytest.approx(100 * ahead / (ahead + span), abs=0.01)
    assert float(str(queued["measured_step_us"])) == pytest.approx(span, abs=0.01)
    synced = _compare_checks(ROOT / "traces/h200/eager_mlp.json.gz", SYNCED)
    assert synced and all(c["queued_pct"] is None and c["period_us"] is None for c in synced)


def test_analyze_says_it_in_its_first_lines() -> None:
    """`analyze`'s summary says how far the CPU runs ahead (stdlib) under the profiler-free line; a synced trace
    does not."""
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    command = [sys.executable, "-m", "tracelens", "analyze", "--no-cache", "--summary"]
    out = subprocess.run([*command, str(QUEUED)], capture_output=True, text=True, env=env, check=True).stdout
    _, ahead, _ = _stdlib(QUEUED)
    third = out.splitlines()[2]
    assert third == f"  (CPU starts {ahead:,.1f} µs before prior GPU work ends; spans start at its end)"
    synced = subprocess.run([*command, str(SYNCED)], capture_output=True, text=True, env=env, check=True).stdout
    assert "before prior GPU work ends" not in synced and "(for the median step" not in synced


def test_the_report_overview_says_it_too() -> None:
    """The report's "What to do next" overview carries the same lead as `analyze`'s summary."""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.renderers.analyses.actions import actions_panels

    results = analyze(tracelens.load(QUEUED))
    assert results.actions is not None
    (overview,) = actions_panels(results.actions, results).overview
    _, ahead, _ = _stdlib(QUEUED)
    assert f"each step's CPU starts {ahead:,.1f} µs before earlier GPU work ends: spans start at its end" in str(
        overview
    )
