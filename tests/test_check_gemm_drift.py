"""`check`'s `gemm_drift_us` (docs/check.md#weak-verdicts): on the study's MLP twins, the after-trace's GEMM
kernels' time per step less the before-trace's, read from the raw events by the standard library (kernels named
`nvjet…`, cuBLAS's GEMMs on the H200, launched in a ProfilerStep: tests/rawtrace.py), where both run the same
GEMM kernel names, the time moved 5-40 % and the after-trace is GPU-limited (both twins are: their `Limit:` line);
`null` on the before-trace itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import rawtrace
from tracelens.cli import main

ROOT = Path(__file__).resolve().parent.parent / "traces/h200"


def gemm_us_per_step(path: Path) -> tuple[float, frozenset[str]]:
    """(GEMM kernel µs per step, their names) over the trace's ProfilerSteps."""
    evs = rawtrace.events(path)
    found = [(e, step) for e, step in rawtrace.kernel_steps(evs) if step is not None and e["name"].startswith("nvjet")]
    steps = {step for _, step in found}
    return sum(float(e["dur"]) for e, _ in found) / len(steps), frozenset(e["name"] for e, _ in found)


@pytest.mark.parametrize("after", ["compiled_mlp", "liger_mlp", "eager_mlp"])
def test_the_gemm_drift_is_the_raw_gemm_time_difference(
    after: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(ROOT / "eager_mlp.json.gz"), "--predict", str(predictions)]) == 0
    capsys.readouterr()
    main(["check", str(ROOT / f"{after}.json.gz"), "--expect", str(predictions), "--format", "json"])
    verdicts = [v for v in json.loads(capsys.readouterr().out)["verdicts"] if v["status"] != "not_applicable"]
    main(["analyze", str(ROOT / f"{after}.json.gz"), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["critical_path"]["limit"] == "gpu"
    before_us, before_names = gemm_us_per_step(ROOT / "eager_mlp.json.gz")
    after_us, after_names = gemm_us_per_step(ROOT / f"{after}.json.gz")
    assert before_names == after_names
    change_pct = 100 * (after_us / before_us - 1)
    for verdict in verdicts:
        if 5 <= abs(change_pct) <= 40:
            assert verdict["gemm_drift_us"] == pytest.approx(after_us - before_us, abs=0.1)
        else:
            assert verdict["gemm_drift_us"] is None
    assert (after == "eager_mlp") == (not verdicts)  # the before-trace took no action: nothing checked
