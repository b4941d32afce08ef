"""Roofline figures on tiny hand-built traces, checked against hand calculations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import H200, cpu_bound_events, load_events
from tracelens.analyses import analyze
from tracelens.analyses.devices import PeakOverride
from tracelens.analyses.roofline import analyze_roofline
from tracelens.analyses.window import select_window
from tracelens.renderers.jsonout import analyze_dict

M, K, N = 4096, 2048, 16384
MM = {"Input Dims": [[M, K], [K, N]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}


def gemm_events(dur_us: float = 358.186) -> list[dict[str, object]]:
    return [
        step(1, 0, 1000),
        op("aten::linear", 5, 30),
        op("aten::matmul", 6, 28),
        op("aten::mm", 7, 25, ext=1, **MM),
        launch("cudaLaunchKernelExC", 10, 5, correlation=1, ext=1),
        kernel("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT", 20, dur_us, correlation=1),
    ]


def test_gemm_pct_of_peak_matches_hand_calculation_on_h200(tmp_path: Path) -> None:
    trace = load_events(tmp_path, gemm_events(), deviceProperties=H200)
    row = analyze_roofline(trace, select_window(trace)).rows[0]
    flops = 2 * M * N * K  # 274.9 GFLOP
    achieved_tflops = flops / 358.186e-6 / 1e12  # 767.4 TFLOP/s
    assert row.op == "aten::mm" and row.model == "gemm" and row.dtype == "bf16"
    assert row.limit == "compute"  # 274.9 GFLOP over 218 MB = 1260 FLOP/B, above the 989.5/4.8 = 206 ridge
    assert row.achieved_tflops == pytest.approx(achieved_tflops, abs=1e-3)
    assert row.pct_of_peak == pytest.approx(100 * achieved_tflops / 989.5, abs=0.01)  # 77.56 %
    document = analyze_dict(analyze(trace))
    assert document["kernels"][0]["pct_of_peak"] == row.pct_of_peak


def test_unknown_gpu_gives_figures_without_pct_until_peaks_are_passed(tmp_path: Path) -> None:
    unknown = [{"id": 0, "name": "Mystery Accelerator 9000", "totalGlobalMem": 1}]
    trace = load_events(tmp_path, gemm_events(dur_us=1000.0), deviceProperties=unknown)
    row = analyze_roofline(trace, select_window(trace)).rows[0]
    assert row.achieved_tflops == pytest.approx(2 * M * N * K / 1e-3 / 1e12, abs=1e-3)
    assert row.pct_of_peak is None
    given = analyze_roofline(trace, select_window(trace), PeakOverride({"*": 500.0}, 2.0)).rows[0]
    assert given.pct_of_peak == pytest.approx(100 * 274.877906944 / 500, abs=0.01)


def test_elementwise_kernels_are_memory_bound_against_hbm(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events(), deviceProperties=H200)
    rows = {r.op: r for r in analyze_roofline(trace, select_window(trace)).rows}
    mul = rows["aten::mul"]
    assert (mul.model, mul.limit, mul.mb_per_call) == ("elementwise", "memory", 0.000768)
    assert mul.achieved_tbps == round(768 / 2e-6 / 1e12, 4)
    assert mul.pct_of_peak == round(100 * (768 / 2e-6 / 1e12) / 4.8, 2)


def test_inductor_kernel_uses_its_wrapper_shapes(tmp_path: Path) -> None:
    shapes = {"Input Dims": [[10, 10], [10, 10], [10, 10], []], "Input type": ["float", "float", "float", "Scalar"]}
    events = [
        step(1, 0, 100),
        op("triton_poi_fused_add_cos_sin_0", 5, 20, ext=1, **shapes),
        launch("cuLaunchKernel", 10, 5, correlation=1, ext=1, cat="cuda_driver"),
        kernel("triton_poi_fused_add_cos_sin_0", 20, 1.0, correlation=1),
    ]
    trace = load_events(tmp_path, events, deviceProperties=H200)
    row = analyze_roofline(trace, select_window(trace)).rows[0]
    assert (row.model, row.ops, row.dtype) == ("inductor", "add+cos+sin", "fp32")
    assert row.mb_per_call == 3 * 400 / 1e6  # three 10x10 fp32 tensors
    assert row.gflop_per_call == 3 * 100 / 1e9  # 100 elements x 3 ops


def test_cli_peak_options_and_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import write_trace
    from tracelens.cli import main

    unknown = [{"id": 0, "name": "Mystery Accelerator 9000", "totalGlobalMem": 1}]
    path = write_trace(tmp_path / "t.json", gemm_events(dur_us=1000.0), deviceProperties=unknown)
    monkeypatch.setenv("TRACELENS_PEAKS", '{"bf16": 1000, "hbm_tbps": 2}')
    assert main(["analyze", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"][0]["pct_of_peak"] == pytest.approx(27.49, abs=0.01)
    assert main(["analyze", str(path), "--format", "json", "--peak-tflops", "bf16=500"]) == 0  # the option wins
    assert json.loads(capsys.readouterr().out)["kernels"][0]["pct_of_peak"] == pytest.approx(54.98, abs=0.01)
    assert main(["analyze", str(path), "--peak-tflops", "bf16=lots"]) == 2
    assert "bad peak figures" in capsys.readouterr().err
