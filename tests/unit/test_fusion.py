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
    found = fusion_of(trace, select_window(trace)).opportunities
    assert [o for o in found if o.kind == "chain"] == []
    # the mm's output feeds the mul: an epilogue opportunity; the Inductor kernel stands alone
    assert [(o.kind, o.ops, o.gemm_kernels) for o in found] == [
        ("gemm_epilogue", ["aten::mul"], ["nvjet_sm90_tst_128x8"])
    ]


def test_without_shapes_there_is_nothing_to_report(tmp_path: Path) -> None:
    events = [e for e in cpu_bound_events()]
    for event in events:
        event.get("args", {}).pop("Input Dims", None)
    trace = load_events(tmp_path, events)
    result = fusion_of(trace, select_window(trace))
    assert (result.shapes_recorded, result.opportunities) == (False, [])


ADD_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
F32x2 = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}


def _node(name: str, ts: float, dur: float) -> dict[str, object]:
    return op(f"autograd::engine::evaluate_function: {name}", ts, dur, tid=2)


def _call(name: str, ts: float, ext: int, kernel_name: str, shapes: dict[str, object]) -> list[dict[str, object]]:
    return [
        op(name, ts, 4, ext=ext, tid=2, **shapes),
        launch("cudaLaunchKernel", ts + 1, 2, correlation=ext, ext=ext, tid=2),
        kernel(kernel_name, ts + 3, 2, correlation=ext),
    ]


def test_per_parameter_accumulate_grad_adds_are_never_a_chain(tmp_path: Path) -> None:
    """Four AccumulateGrad nodes each add a 64x64 gradient into their own parameter's .grad: equal shapes, no
    dataflow between them."""
    events: list[dict[str, object]] = [step(1, 0, 200)]
    for i in range(4):
        events += [
            _node("torch::autograd::AccumulateGrad", 10 + 20 * i, 10),
            *_call("aten::add_", 11 + 20 * i, i + 1, ADD_KERNEL, F32x2),
        ]
    trace = load_events(tmp_path, events)
    assert fusion_of(trace, select_window(trace)).opportunities == []


def test_the_two_products_of_one_backward_node_share_its_gradient_but_do_not_feed_each_other(tmp_path: Path) -> None:
    """MulBackward0 computes grad·b and grad·a (two 64x64 fp32 muls, 3 x 16 KiB each), GeluBackward0 then
    reads one of them. Fused: grad read once (shared input), one product not written and read back, the other
    product and gelu's gradient written: reads grad, b, a, x (4 x 16 KiB) + writes 2 x 16 KiB = 6 x 16 KiB
    against 9 x 16 KiB now. Without the sibling rules the products would count as producer and consumer."""
    kib16 = 64 * 64 * 4
    events: list[dict[str, object]] = [
        step(1, 0, 200),
        _node("MulBackward0", 10, 30),
        *_call("aten::mul", 11, 1, MUL_KERNEL, F32x2),
        *_call("aten::mul", 21, 2, MUL_KERNEL, F32x2),
        _node("GeluBackward0", 50, 10),
        *_call("aten::gelu_backward", 51, 3, GELU_KERNEL, F32x2),
    ]
    trace = load_events(tmp_path, events)
    found = fusion_of(trace, select_window(trace)).opportunities
    chains = [o for o in found if o.kind == "chain"]
    assert [o.ops for o in chains] == [["aten::mul", "aten::mul", "aten::gelu_backward"]]
    assert (chains[0].bytes_now, chains[0].bytes_fused) == (9 * kib16, 6 * kib16)
    assert chains[0].est_saving_us == round(6.0 * 3 / 9, 3)  # 6 µs of kernels, a third of their bytes saved
