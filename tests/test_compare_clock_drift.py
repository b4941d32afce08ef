"""`compare` says where the same GEMM kernels took another time in the later variant (compare.clock_drift): checked
against a standard-library reading of the raw events, the kernels named alike in both traces, launched as often
per steady step (tests/independent/warmup_steps.py), their summed time per step."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.conftest import recorded_trace
from tests.independent.warmup_steps import steady_steps
from tracelens.analyses import analyze
from tracelens.analyses.compare import compare_variants


def gemm_per_step(path: Path) -> dict[str, tuple[float, float]]:
    """Per GEMM kernel name (cuBLAS' nvjet/gemm kernels): (calls per steady step, µs per steady step)."""
    events = rawtrace.events(path)
    keep = set(steady_steps(str(path)))
    calls: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    for kernel, step in rawtrace.kernel_steps(events):
        name = str(kernel["name"])
        if step in keep and ("nvjet" in name or "gemm" in name.lower()):
            calls[name] += 1
            total[name] += float(kernel.get("dur", 0))
    return {name: (calls[name] / len(keep), total[name] / len(keep)) for name in calls}


def test_the_compiled_mlps_gemms_ran_faster_than_the_eager_ones() -> None:
    """eager_mlp → compiled_mlp (one H200 run): Inductor calls the same two cuBLAS kernels as often, and they took
    14.8 % less time: 181 µs/step of the compiled step's 129.7 µs drop is not the compilation's."""
    eager, compiled = (recorded_trace(f"h200/{n}.json.gz") for n in ("eager_mlp", "compiled_mlp"))
    comparison = compare_variants([(p.name, tracelens.load(p), analyze(tracelens.load(p))) for p in (eager, compiled)])
    (drift,) = comparison.clock_drift
    first, second = gemm_per_step(eager), gemm_per_step(compiled)
    same = [n for n in first if n in second and abs(first[n][0] - second[n][0]) <= 0.01 * first[n][0]]
    before, after = sum(first[n][1] for n in same), sum(second[n][1] for n in same)
    assert drift.kernels == len(same) == 2
    assert drift.baseline_us_per_step == pytest.approx(before, abs=0.05)
    assert drift.variant_us_per_step == pytest.approx(after, abs=0.05)
    assert drift.change_pct == pytest.approx(100 * (after / before - 1), abs=0.05) and drift.change_pct < -5
    assert any("not the variant's change" in v for v in comparison.verdicts)


def test_no_drift_where_the_gemms_match() -> None:
    """The eager MLP against itself: nothing to say."""
    eager = recorded_trace("h200/eager_mlp.json.gz")
    items = [(name, tracelens.load(eager), analyze(tracelens.load(eager))) for name in ("a", "b")]
    assert compare_variants(items).clock_drift == []


def test_other_work_under_the_same_names_is_no_drift(tmp_path: Path) -> None:
    """The H100 Llama training step at 4 × 1,024 tokens against 1 × 128: the same cuBLAS kernel names, as many
    calls, 89.6 % less time: other shapes, not a clock (beyond `DRIFT_MAX_PCT`), so no drift is said; the JSON
    document carries the field (`[]` here, the eager/compiled MLP's row there)."""
    import json
    import subprocess
    import sys

    pair = [recorded_trace(f"h100/record/{n}.json.gz") for n in ("hf_llama_train_eager", "hf_llama_train_b1s128_eager")]
    comparison = compare_variants([(p.name, tracelens.load(p), analyze(tracelens.load(p))) for p in pair])
    assert comparison.clock_drift == []
    mlp = [str(recorded_trace(f"h200/{n}.json.gz")) for n in ("eager_mlp", "compiled_mlp")]
    out = subprocess.run([sys.executable, "-m", "tracelens", "compare", *mlp, "--format", "json", "--no-cache"],
                         capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    (row,) = json.loads(out.stdout)["clock_drift"]
    assert row["variant"] == "compiled_mlp" and row["change_pct"] == -14.8
