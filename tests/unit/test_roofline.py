"""Roofline figures on tiny hand-built traces, checked against hand calculations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import H200, MUL_KERNEL, BF16x2, cpu_bound_events, load_events
from tracelens.analyses import analyze
from tracelens.analyses.devices import PeakOverride
from tracelens.analyses.roofline import kernel_models, roofline_of
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
    row = roofline_of(trace, select_window(trace)).rows[0]
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
    row = roofline_of(trace, select_window(trace)).rows[0]
    assert row.achieved_tflops == pytest.approx(2 * M * N * K / 1e-3 / 1e12, abs=1e-3)
    assert row.pct_of_peak is None
    given = roofline_of(trace, select_window(trace), PeakOverride({"*": 500.0}, 2.0)).rows[0]
    assert given.pct_of_peak == pytest.approx(100 * 274.877906944 / 500, abs=0.01)


def test_elementwise_kernels_are_memory_bound_against_hbm(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events(), deviceProperties=H200)
    rows = {r.op: r for r in roofline_of(trace, select_window(trace)).rows}
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
    row = roofline_of(trace, select_window(trace)).rows[0]
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


def test_an_op_call_shares_its_model_among_its_kernels_by_time_and_copies_count_twice(tmp_path: Path) -> None:
    other_mul = "void at::native::unrolled_elementwise_kernel<MulFunctor>"
    dtod = "Memcpy DtoD (Device -> Device)"
    events = [
        step(1, 0, 100),
        op("aten::mul", 10, 10, ext=1, **BF16x2),
        launch("cudaLaunchKernel", 11, 2, correlation=1, ext=1),
        launch("cudaLaunchKernel", 14, 2, correlation=2, ext=1),
        kernel(MUL_KERNEL, 20, 3, correlation=1),
        kernel(other_mul, 24, 1, correlation=2),
        op("aten::copy_", 30, 10, ext=2),
        launch("cudaMemcpyAsync", 31, 2, correlation=3, ext=2),
        launch("cudaMemcpyAsync", 34, 2, correlation=4, ext=2),
        kernel(dtod, 40, 2, correlation=3, cat="gpu_memcpy", bytes=1000),
        kernel("Memcpy HtoD (Pageable -> Device)", 43, 2, correlation=4, cat="gpu_memcpy", bytes=1000),
    ]
    trace = load_events(tmp_path, events, deviceProperties=H200)
    models = kernel_models(trace, select_window(trace))
    names = [trace.events.name_of(int(r)) for r in models.row]
    assert names == [MUL_KERNEL, other_mul, dtod]  # the host-to-device copy is left out
    # aten::mul on two bf16 [8, 16]: 128 FLOP, 768 bytes (two inputs and the output), split 3 µs : 1 µs
    assert models.flops.tolist() == [96.0, 32.0, 0.0]
    assert models.bytes.tolist() == [576.0, 192.0, 2000.0]  # a copy reads and writes its bytes
    assert models.out_bytes.tolist() == [256.0, 256.0, 1000.0]
    assert [models.labels[i].model for i in models.label] == ["elementwise", "elementwise", "copy"]
    rows = roofline_of(trace, select_window(trace)).rows
    assert [(r.kernel, r.op, r.calls) for r in rows] == [
        (MUL_KERNEL, "aten::mul", 1),
        (dtod, "aten::copy_", 1),
        (other_mul, "aten::mul", 1),
    ]  # largest time first
    assert rows[1].mb_per_call == 0.002 and rows[1].achieved_tbps == 0.001 and rows[1].limit == "memory"


def test_a_kernel_launched_by_several_ops_names_the_most_common_then_the_alphabetically_first(
    tmp_path: Path,
) -> None:
    fp32 = {"Input Dims": [[8, 16], [8, 16]], "Input type": ["float", "float"]}
    calls = [("aten::mul", BF16x2), ("aten::add", fp32), ("aten::mul", fp32), ("aten::add", BF16x2)]
    events: list[dict[str, object]] = [step(1, 0, 1000)]
    for i, (name, shapes) in enumerate(calls, start=1):
        events += [
            op(name, 100 * i, 10, ext=i, **shapes),
            launch("cudaLaunchKernel", 100 * i + 1, 2, correlation=i, ext=i),
            kernel(MUL_KERNEL, 100 * i + 5, 1, correlation=i),
        ]
    trace = load_events(tmp_path, events, deviceProperties=H200)
    (row,) = roofline_of(trace, select_window(trace)).rows
    # two calls each: the ties go to "aten::add" (though aten::mul came first) and to "bf16" (before "fp32")
    assert (row.calls, row.op, row.dtype) == (4, "aten::add", "bf16")
    assert row.mb_per_call == round((2 * 768 + 2 * 1536) / 4 / 1e6, 6)
