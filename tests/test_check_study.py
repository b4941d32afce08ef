"""The study's claims (notebooks/study_hypotheses.toml) against the committed H200 traces (traces/h200).

The expected verdicts and figures were checked by hand against `tracelens analyze` of each trace and the
independent stdlib findings in traces/README.md (kernels 1,1,5,4,4; Inductor gelu·mul 93.8 µs, Liger 144.7 µs;
no occupancy queries; aten::t only in eager; GPU busy 360 / 1403 / 1136 / 1185 µs per step).
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
    "the Linear's GEMM is aten::addmm (bias in the epilogue)": ("wrong", ["aten::mm", "aten::mm"]),
    "compile keeps the same GEMM time": ("held", 358.333),
    "compile removes aten::t": ("held", 0),
    "aten::t costs 3-5 us": ("wrong", 18.439),
    "compile only trims CPU work": ("wrong", 222.112),
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
    "Linear forward takes 0.19 ms": ("wrong", 359.868),
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
    assert (document["held"], document["wrong"]) == (15, 10)
    expected = {v["name"]: v["expected"] for v in document["verdicts"]}
    assert expected["Liger's fused kernel is slower than Inductor's"] == 93.791
    assert expected["Liger's fused kernel is at most 5% slower than Inductor's"] == pytest.approx(98.481, abs=1e-3)
    assert expected["compile only trims CPU work"] == 113.988


def test_study_hypotheses_text_output_prints_the_measured_values(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(recorded_trace(f"h200/{variant}.json.gz")) for variant in VARIANTS]
    assert main(["check", *paths, "--expect", str(HYPOTHESES)]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == "15 held, 10 wrong"
    row = next(line for line in out.splitlines() if "│ 16 │" in line)
    assert "144.747" in row and "WRONG" in row
