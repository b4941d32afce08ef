"""`check` on a step span that waits behind earlier steps' GPU work: the evidence says so and gives the step's
period, which the queue does not lengthen (docs/check.md#a-span-behind-a-queue)."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

from tests.independent.step_windows import step_figures

ROOT = Path(__file__).resolve().parent.parent
QUEUED = ROOT / "traces/h100/record/hf_llama_train_compiled.json.gz"  # no sync in the loop: its queue grows
SYNCED = ROOT / "traces/h200/compiled_mlp.json.gz"  # a sync each step: no queue


def _check(trace: Path, tmp_path: Path) -> str:
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text(
        '[[hypothesis]]\nname = "step"\nmetric = "critical_path.step_us"\nop = "<"\nvalue = 1.0\n', encoding="utf-8"
    )
    command = [sys.executable, "-m", "tracelens", "check", str(trace), "--expect", str(hypotheses), "--width", "400"]
    return subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout


def test_the_queued_span_says_so_with_the_period(tmp_path: Path) -> None:
    """The period in the evidence is the stdlib step period (GPU end to GPU end on these GPU-limited steps), about
    half the mean span the check measured; the growing backlog is in the raw events too."""
    out = _check(QUEUED, tmp_path)
    figures = step_figures(str(QUEUED))
    period = statistics.median(f["step_us"] for f in figures)
    assert f"the step's period is {period:,.1f} µs (per_step.step_us)" in out
    assert "% of the path waits behind earlier steps' GPU work" in out
    backlog = [f["backlog_us"] for f in figures]
    assert backlog == sorted(backlog) and backlog[-1] > 2 * period  # 25.9 → 58.4 ms over the five steps


def test_no_such_line_without_a_queue(tmp_path: Path) -> None:
    out = _check(SYNCED, tmp_path)
    assert "critical_path.step_us =" in out and "waits behind earlier steps" not in out


def _compare_checks(before: Path, after: Path) -> list[dict[str, object]]:
    import json

    command = [sys.executable, "-m", "tracelens", "compare", str(before), str(after), "--format", "json"]
    out = subprocess.run(command, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=True).stdout
    checks: list[dict[str, object]] = json.loads(out)["predictions_checked"]
    return checks


def test_compare_says_it_too() -> None:
    """`compare`'s checked prediction carries the queued share and the period (JSON `queued_pct`, `period_us`) on
    the queued twin, none on a synced one."""
    (queued,) = _compare_checks(QUEUED.with_name("hf_llama_train_eager.json.gz"), QUEUED)
    period = statistics.median(f["step_us"] for f in step_figures(str(QUEUED)))
    assert queued["period_us"] == round(period, 3) or abs(float(str(queued["period_us"])) - period) < 0.1
    assert float(str(queued["queued_pct"])) >= 25.0
    synced = _compare_checks(ROOT / "traces/h200/eager_mlp.json.gz", SYNCED)
    assert synced and all(c["queued_pct"] is None and c["period_us"] is None for c in synced)


def test_analyze_says_it_in_its_first_lines() -> None:
    """`analyze`'s summary names the queued share and the median step (the stdlib period) under the profiler-free
    line, in place of "the mean span differs"; a synced trace keeps its lines."""
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    command = [sys.executable, "-m", "tracelens", "analyze", "--no-cache", "--summary"]
    out = subprocess.run([*command, str(QUEUED)], capture_output=True, text=True, env=env, check=True).stdout
    period = statistics.median(f["step_us"] for f in step_figures(str(QUEUED)))
    third = out.splitlines()[2]
    assert (
        third.startswith("  (")
        and f"% of the span waits behind earlier steps; the median step: {period:,.1f} µs)" in third
    )
    synced = subprocess.run([*command, str(SYNCED)], capture_output=True, text=True, env=env, check=True).stdout
    assert "waits behind earlier steps" not in synced


def test_the_report_overview_says_it_too() -> None:
    """The report's "What to do next" overview carries the same share and median step as `analyze`'s summary."""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.renderers.analyses.actions import actions_panels

    results = analyze(tracelens.load(QUEUED))
    assert results.actions is not None
    (overview,) = actions_panels(results.actions, results).overview
    period = statistics.median(f["step_us"] for f in step_figures(str(QUEUED)))
    assert f"for the median step of {period:,.1f} µs (58 % of the span waits behind earlier steps)" in str(overview)
