"""The study's claims (notebooks/study_hypotheses.toml) against the committed H200 traces (traces/h200).

The expected verdicts and figures were checked by hand against `tracelens analyze` of each trace and the
independent stdlib findings in traces/README.md (kernels 1,1,5,4,4; Inductor gelu·mul 93.8 µs, Liger 144.7 µs;
no occupancy queries; aten::t only in eager; GPU busy 360 / 1403 / 1136 / 1185 µs per step).
The Linear traces carry a bias (`tracelens_run.bias`); their figures were recomputed from the raw JSON with
the stdlib alone (steps = ProfilerStep# user annotations; kernels via the correlation of the launches inside
each step; launching op = innermost cpu_op around the launch): the GEMM `nvjet_…_bias_TNT` is launched by
`aten::addmm` in both; eager GEMM µs/step 358.687, 359.616, 358.815, 360.319, 361.408 (median 359.616),
compiled 358.08, 357.984, 358.688, 358.527, 358.4 (median 358.4); eager busy with the memset, median 360.32;
`aten::t` 36.487, 11.567, 15.207, 15.104, 10.746 µs (mean 17.822); eager `aten::linear` 563.661 µs in 5 steps
(112.732/step), `Torch-Compiled Region: 0/0` 631.387 µs (126.277/step).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, recorded_trace
from tracelens.cli import main

VARIANTS = ("eager_linear", "compiled_linear", "eager_mlp", "compiled_mlp", "liger_mlp")
HYPOTHESES = REPO / "notebooks" / "study_hypotheses.toml"

# name → (status, measured)
EXPECTED: dict[str, tuple[str, object]] = {
    "eager Linear runs one kernel per step": ("held", 1),
    "compiled Linear runs one kernel per step": ("held", 1),
    "the Linear's kernel is a cuBLAS GEMM": ("held", 1.0),
    "the Linear's GEMM is aten::addmm (bias in the epilogue)": ("held", ["aten::addmm", "aten::addmm"]),
    "compile keeps the same GEMM time": ("held", 358.4),
    "compile removes aten::t": ("held", 0),
    "aten::t costs 3-5 us": ("wrong", 17.822),
    "compile only trims CPU work": ("wrong", 126.277),
    "eager MLP runs 5 kernels": ("held", 5),
    "eager MLP issues 3 occupancy queries": ("wrong", 0),
    "compiled MLP runs 4 kernels": ("held", 4),
    "Liger MLP runs 4 kernels": ("held", 4),
    "Inductor fuses gelu and mul": ("held", "triton_poi_fused_gelu_mul_0"),
    "Liger fuses gelu and mul": ("held", "_geglu_tanh_forward_kernel"),
    "Inductor's fused kernel takes 89.4 us": ("held", 93.791),
    "Liger's fused kernel takes 92.8 us": ("wrong", 144.747),
    "Liger's fused kernel is slower than Inductor's": ("held", 144.747),
    "Liger's fused kernel is at most 5% slower than Inductor's": ("wrong", 144.747),
    "Linear forward takes 0.19 ms": ("wrong", 360.32),
    "eager MLP forward takes 0.55 ms": ("wrong", 1403.41),
    "compiled MLP forward takes 0.51 ms": ("wrong", 1135.988),
    "Liger MLP forward takes 0.53 ms": ("wrong", 1185.456),
    "compiled MLP is faster than eager on the GPU": ("held", 1134.42),
    "Liger MLP is faster than eager on the GPU": ("held", 1183.888),
    "compiled MLP is faster than Liger on the GPU": ("held", 1134.42),
}


def test_study_hypotheses_on_the_committed_traces(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(recorded_trace(f"h200/{variant}.json.gz")) for variant in VARIANTS]
    assert main(["check", *paths, "--expect", str(HYPOTHESES), "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    got = {v["name"]: (v["status"], v["measured"]) for v in document["verdicts"]}
    assert got == EXPECTED
    assert (document["held"], document["wrong"]) == (16, 9)
    expected = {v["name"]: v["expected"] for v in document["verdicts"]}
    assert expected["Liger's fused kernel is slower than Inductor's"] == 93.791
    assert expected["Liger's fused kernel is at most 5% slower than Inductor's"] == pytest.approx(98.481, abs=1e-3)
    assert expected["compile only trims CPU work"] == 112.732
    assert expected["compile keeps the same GEMM time"] == 359.616


def test_study_hypotheses_text_output_prints_the_measured_values(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(recorded_trace(f"h200/{variant}.json.gz")) for variant in VARIANTS]
    assert main(["check", *paths, "--expect", str(HYPOTHESES)]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == "16 held, 9 wrong"
    row = next(line for line in out.splitlines() if " 16. " in line)
    assert "measured 144.7 µs" in row and row.startswith("WRONG")


def test_a_time_per_step_and_a_repeated_value_read_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    """`us_per_step` is a time (µs, one decimal; it read "measured 126.277"), and a list's repeated value is shown
        once with its count (eager_linear's two kernels both launched by aten::addmm: "aten::addmm ×2", not the name
        twice; new user, 2026-12-07): its GEMM kernel and a memset each step, launched inside aten::addmm (the
    counts from the raw events, stdlib)."""
    import gzip

    with gzip.open(recorded_trace("h200/eager_linear.json.gz"), "rt") as handle:
        events = json.load(handle)["traceEvents"]
    kernels = sum(e.get("cat") == "kernel" for e in events)
    memsets = sum(e.get("cat") == "gpu_memset" for e in events)
    paths = [str(recorded_trace(f"h200/{variant}.json.gz")) for variant in VARIANTS]
    assert main(["check", *paths, "--expect", str(HYPOTHESES), "--width", "200"]) == 1
    lines = capsys.readouterr().out.splitlines()
    trims = next(line for line in lines if " 8. compile only trims CPU work" in line)
    assert "measured 126.3 µs" in trims
    addmm = next(line for line in lines if " 4. the Linear's GEMM is aten::addmm" in line)
    assert "measured aten::addmm ×2 " in addmm
    assert kernels == memsets > 0  # one of each a step
