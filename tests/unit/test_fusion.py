"""Fusion opportunities on tiny hand-built traces."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import GELU_KERNEL, MUL_KERNEL, BF16x1, BF16x2, cpu_bound_events, load_events
from tracelens.analyses.fusion import fusion_of
from tracelens.analyses.window import select_window


def test_mul_then_gelu_on_the_same_elements_is_one_opportunity(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    result = fusion_of(trace, select_window(trace))
    assert len(result.opportunities) == 1
    found = result.opportunities[0]
    assert found.ops == ["aten::mul", "aten::gelu"]
    assert found.calls_per_step == 1
    # mul reads 2x256 B and writes 256 B; gelu reads 256 B and writes 256 B: 1280 B now.
    # Fused, mul's 256 B output is neither written nor read again: 1280 - 512 = 768 B.
    assert (found.bytes_now, found.bytes_fused) == (1280, 768)
    assert found.est_saving_us == round(4.0 * 512 / 1280, 3)  # 4 µs of kernels at their achieved bandwidth


def test_a_gemm_between_them_that_does_not_touch_the_tensor_is_skipped(tmp_path: Path) -> None:
    mm_shapes = {"Input Dims": [[8, 4], [4, 24]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    events = [
        step(1, 0, 100),
        op("aten::gelu", 10, 5, ext=1, **BF16x1),
        launch("cudaLaunchKernel", 11, 2, correlation=1, ext=1),
        kernel(GELU_KERNEL, 13, 2, correlation=1),
        op("aten::mm", 20, 5, ext=2, **mm_shapes),  # tensors of 32, 96 (and output 192) elements, not 128
        launch("cudaLaunchKernel", 21, 2, correlation=2, ext=2),
        kernel("nvjet_sm90_tst_128x8", 23, 2, correlation=2),
        op("aten::mul", 30, 5, ext=3, **BF16x2),
        launch("cudaLaunchKernel", 31, 2, correlation=3, ext=3),
        kernel(MUL_KERNEL, 33, 2, correlation=3),
    ]
    trace = load_events(tmp_path, events)
    found = fusion_of(trace, select_window(trace)).opportunities
    assert [o.ops for o in found] == [["aten::gelu", "aten::mul"]]


def test_a_gemm_on_the_same_elements_breaks_the_run_and_fused_kernels_never_join(tmp_path: Path) -> None:
    same = {"Input Dims": [[8, 16], [16, 16]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    events = [
        step(1, 0, 100),
        op("aten::gelu", 10, 5, ext=1, **BF16x1),
        launch("cudaLaunchKernel", 11, 2, correlation=1, ext=1),
        kernel(GELU_KERNEL, 13, 2, correlation=1),
        op("aten::mm", 20, 5, ext=2, **same),  # reads the 8x16 tensor: cannot move
        launch("cudaLaunchKernel", 21, 2, correlation=2, ext=2),
        kernel("nvjet_sm90_tst_128x8", 23, 2, correlation=2),
        op("aten::mul", 30, 5, ext=3, **BF16x2),
        launch("cudaLaunchKernel", 31, 2, correlation=3, ext=3),
        kernel(MUL_KERNEL, 33, 2, correlation=3),
        op("triton_poi_fused_gelu_mul_0", 40, 5, ext=4, **BF16x2),
        launch("cuLaunchKernel", 41, 2, correlation=4, ext=4, cat="cuda_driver"),
        kernel("triton_poi_fused_gelu_mul_0", 43, 2, correlation=4),
    ]
    trace = load_events(tmp_path, events)
    assert fusion_of(trace, select_window(trace)).opportunities == []


def test_without_shapes_there_is_nothing_to_report(tmp_path: Path) -> None:
    events = [e for e in cpu_bound_events()]
    for event in events:
        event.get("args", {}).pop("Input Dims", None)
    trace = load_events(tmp_path, events)
    result = fusion_of(trace, select_window(trace))
    assert (result.shapes_recorded, result.opportunities) == (False, [])
