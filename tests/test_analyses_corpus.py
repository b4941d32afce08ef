"""The analyses on real traces: the issue's done-when checks on our H200 recordings, invariants on every anchor
trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tracelens
from tests.conftest import anchor_traces, recorded_trace
from tracelens.analyses import analyze
from tracelens.cli import main

CORPUS = anchor_traces()


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_anchor_trace_gets_every_analysis_in_both_formats(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["bound"] in ("cpu", "gpu", "mixed", "unknown")
    for key in ("dispatch", "bound_breakdown", "fusion_opportunities", "roofline", "compiled"):
        assert key in document
    layers = sum(layer["us_per_step"] for layer in document["dispatch"]["layers"])
    assert layers == pytest.approx(document["dispatch"]["cpu_us_per_step"], abs=0.01)  # self times add up
    for row in document["roofline"]["rows"]:
        assert row["pct_of_peak"] is None or row["pct_of_peak"] >= 0
    assert main(["analyze", str(path)]) == 0
    assert "Bound:" in capsys.readouterr().out


@pytest.mark.parametrize("variant", ["eager", "compiled", "liger"])
def test_eight_token_mlp_is_cpu_bound_with_exposed_dispatch(variant: str) -> None:
    report = analyze(tracelens.load(recorded_trace(f"h200/extra/sweep_{variant}_mlp_t8.json.gz")))
    assert report.bound is not None and report.bound.bound == "cpu"
    # measured: eager 112.7, compiled 232.1, liger 373.2 µs of launch waits per step vs ~60 µs GPU busy
    assert report.bound.exposed_dispatch_us_per_step > report.bound.gpu_busy_us_per_step


@pytest.mark.parametrize("variant", ["eager", "compiled", "liger"])
def test_16384_token_mlp_is_gpu_bound_with_dispatch_hidden(variant: str) -> None:
    report = analyze(tracelens.load(recorded_trace(f"h200/extra/sweep_{variant}_mlp_t16384.json.gz")))
    assert report.bound is not None and report.bound.bound == "gpu"
    # only the step boundary (sync, then Python) is exposed: under 10 % of the dispatch time
    assert report.bound.exposed_dispatch_pct is not None and report.bound.exposed_dispatch_pct < 10


def test_eager_geglu_mlp_reports_gelu_and_mul_fusion() -> None:
    report = analyze(tracelens.load(recorded_trace("h200/eager_mlp.json.gz")))
    found = [o for o in report.fusion_opportunities if {"aten::gelu", "aten::mul"} <= set(o.ops)]
    assert len(found) == 1
    assert found[0].calls_per_step == 1
    # 4096x16384 bf16: gelu reads+writes 128 MiB... 2x134 MB, mul 3x134 MB; fused drops gelu's output twice
    assert (found[0].bytes_now, found[0].bytes_fused) == (5 * 134_217_728, 3 * 134_217_728)
    assert found[0].est_saving_us > 0


@pytest.mark.parametrize("name", ["compiled_mlp", "liger_mlp", "extra/train_compiled_mlp", "extra/train_liger_mlp"])
def test_fused_mlps_report_no_gelu_mul_fusion(name: str) -> None:
    report = analyze(tracelens.load(recorded_trace(f"h200/{name}.json.gz")))
    assert not [o for o in report.fusion_opportunities if "aten::gelu" in o.ops]


def test_linear_gemm_pct_of_peak_on_h200_matches_hand_calculation(capsys: pytest.CaptureFixture[str]) -> None:
    path = recorded_trace("h200/eager_linear.json.gz")
    assert main(["analyze", str(path), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    run = document["trace"]["run"]
    m, k, n = run["tokens"], run["hidden"], run["intermediate"]  # 4096 x 2048 -> 16384, bf16
    gemm = next(row for row in document["kernels"] if row["category"] == "gemm")
    seconds_per_call = gemm["total_us"] / gemm["calls"] / 1e6
    tflops = 2 * m * n * k / seconds_per_call / 1e12  # 274.9 GFLOP in ~359 µs = ~765 TFLOP/s
    assert gemm["pct_of_peak"] == pytest.approx(100 * tflops / 989.5, abs=0.02)  # H200 dense bf16: 989.5
    assert 70 < gemm["pct_of_peak"] < 85
