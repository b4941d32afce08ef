"""The study's five variants recorded on an H200 (traces/h200, torch 2.11, 4096×2048→16384 bf16).

Kernel counts and times below were read off the traces by the workload's own stdlib script
(workloads/summarize.py), independently of tracelens.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import recorded_trace
from tracelens.cli import main

VARIANTS = ("eager_linear", "compiled_linear", "eager_mlp", "compiled_mlp", "liger_mlp")


def analyze(variant: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["analyze", str(recorded_trace(f"h200/{variant}.json.gz")), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("variant", "kernels"), list(zip(VARIANTS, (1, 1, 5, 4, 4), strict=True)))
def test_kernels_per_step(variant: str, kernels: int, capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze(variant, capsys)
    assert doc["steps"] == 5
    assert doc["per_step"]["kernels"] == kernels  # type: ignore[index]
    assert doc["trace"]["run"]["variant"] == variant  # type: ignore[index]
    assert doc["trace"]["gpus"] == ["NVIDIA H200"]  # type: ignore[index]


@pytest.mark.parametrize("variant", ["eager_linear", "compiled_linear"])
def test_linear_is_one_cublas_gemm(variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = analyze(variant, capsys)
    gemms = [k for k in doc["kernels"] if k["category"] == "gemm"]  # type: ignore[attr-defined]
    assert len(gemms) == 1 and gemms[0]["calls_per_step"] == 1 and gemms[0]["name"].startswith("nvjet_sm90")
    with_bias = doc["trace"]["run"].get("bias", False)  # type: ignore[index]
    assert gemms[0]["op"] == ("aten::addmm" if with_bias else "aten::mm")


def test_compare_finds_gelu_and_mul_fused_by_inductor_and_liger(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(recorded_trace(f"h200/{v}.json.gz")) for v in VARIANTS]
    assert main(["compare", *paths, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in doc["variants"]] == list(VARIANTS)
    assert [v["per_step"]["kernels"] for v in doc["variants"]] == [1, 1, 5, 4, 4]
    assert [v["per_step"]["metadata_ops"] for v in doc["variants"]] == [1, 0, 3, 0, 6]
    fused = {f["variant"]: f for f in doc["fusions"]}
    assert fused["compiled_mlp"]["kernel"] == "triton_poi_fused_gelu_mul_0"
    assert fused["liger_mlp"]["kernel"] == "_geglu_tanh_forward_kernel"
    assert fused["liger_mlp"]["launched_by"] == "LigerGELUMulFunction"
    for fusion in fused.values():
        assert sorted(fusion["ops"]) == ["aten::gelu", "aten::mul"] and fusion["baseline_variant"] == "eager_mlp"
    assert fused["compiled_mlp"]["kernel_us_per_step"] == pytest.approx(93.8, abs=0.05)
    assert fused["liger_mlp"]["kernel_us_per_step"] == pytest.approx(144.7, abs=0.05)
