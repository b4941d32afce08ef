"""The fusion linking rules beyond equal shapes, on tiny hand-built traces: views recorded as ops, tensor-list
copies (`aten::cat`), fills, reductions' outputs, the autograd engine's gradient accumulation, and outputs read by
non-candidate kernels. Each rule has a negative case: unrelated tensors of the same key must not link."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import GELU_KERNEL, MUL_KERNEL, load_events
from tracelens.analyses.fusion import FusionOpportunity, fusion_of
from tracelens.analyses.window import select_window

NEG_KERNEL = "void at::native::vectorized_elementwise_kernel<8, at::native::neg_kernel_cuda<c10::BFloat16>>"
ADD_KERNEL = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16> >"
FILL_KERNEL = "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16> >"
MEAN_KERNEL = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >"
SUM_KERNEL = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, sum_functor> >"
GEMM_KERNEL = "nvjet_sm90_tst_128x8"
BF16 = "c10::BFloat16"


def cat_kernel(itemsize: int) -> str:
    return f"void at::native::CatArrayBatchedCopy<at::native::OpaqueType<{itemsize}u>, unsigned int, 2, 128, 1>"


def shapes(*dims: list[int], dtype: str = BF16, concrete: list[str] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"Input Dims": list(dims), "Input type": [dtype] * len(dims)}
    if concrete is not None:
        found["Concrete Inputs"] = concrete
    return found


def call(name: str, ts: float, ext: int, kernel_name: str, args: dict[str, Any], tid: int = 1) -> list[dict[str, Any]]:
    """An op that launches one 2 µs kernel."""
    return [
        op(name, ts, 4, ext=ext, tid=tid, **args),
        launch("cudaLaunchKernel", ts + 1, 2, correlation=ext, ext=ext, tid=tid),
        kernel(kernel_name, ts + 3, 2, correlation=ext),
    ]


def view(ts: float, source: list[int], size: list[int], stride: list[int], offset: int = 0) -> dict[str, Any]:
    """`aten::as_strided(source, size, stride, offset)`: a view op, no kernel."""
    args = {"Input Dims": [source, [], [], []], "Input type": [BF16, "ScalarList", "ScalarList", "Scalar"]}
    return op("aten::as_strided", ts, 1, **args, **{"Concrete Inputs": ["", str(size), str(stride), str(offset)]})


def chains(tmp_path: Path, events: list[dict[str, Any]]) -> list[FusionOpportunity]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    trace = load_events(tmp_path, [step(1, 0, 200), *events])
    return [o for o in fusion_of(trace, select_window(trace)).opportunities if o.kind == "chain"]


def test_a_view_of_the_producers_output_links_it_to_the_consumer(tmp_path: Path) -> None:
    """mul writes a 2x4x8 bf16 tensor (128 B); `x[..., 4:]` (as_strided: size 2x4x4, strides 32/8/1, offset 4)
    is read by neg. Now: mul 256 + 128, neg 64 + 64 = 512 B; fused: mul's inputs and neg's output, 320 B."""
    events = [
        *call("aten::mul", 10, 1, MUL_KERNEL, shapes([2, 4, 8], [2, 4, 8])),
        view(20, [2, 4, 8], [2, 4, 4], [32, 8, 1], 4),
    ]
    events += call("aten::neg", 30, 2, NEG_KERNEL, shapes([2, 4, 4]))
    found = chains(tmp_path, events)
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [(["aten::mul", "aten::neg"], 512, 320)]


def test_a_view_that_reaches_past_the_tensor_or_precedes_the_producer_links_nothing(tmp_path: Path) -> None:
    """Strides 96/24/1 address 172 elements of a 64-element tensor: a view of a larger storage (a slice of a
    fused projection's output), not of mul's output; and a view taken before mul ran cannot be of its output."""
    events = [
        *call("aten::mul", 10, 1, MUL_KERNEL, shapes([2, 4, 8], [2, 4, 8])),
        view(20, [2, 4, 8], [2, 4, 4], [96, 24, 1]),
    ]
    events += call("aten::neg", 30, 2, NEG_KERNEL, shapes([2, 4, 4]))
    assert chains(tmp_path / "wide", events) == []
    before = [
        view(5, [2, 4, 8], [2, 4, 4], [32, 8, 1], 4),
        *call("aten::mul", 10, 1, MUL_KERNEL, shapes([2, 4, 8], [2, 4, 8])),
    ]
    before += call("aten::neg", 30, 2, NEG_KERNEL, shapes([2, 4, 4]))
    assert chains(tmp_path / "before", before) == []


def _rotate_half(cat_itemsize: int) -> list[dict[str, Any]]:
    """neg(x2) → cat((-x2, x1), -1) → mul(cat, sin): rope's rotate_half on 2x4 halves of a 2x8 bf16 tensor."""
    listed = {
        "Input Dims": [[[2, 4], [2, 4]], []],
        "Input type": ["TensorList", "Scalar"],
        "Concrete Inputs": ["", "-1"],
    }
    events = call("aten::neg", 10, 1, NEG_KERNEL, shapes([2, 4]))
    events += call("aten::cat", 20, 2, cat_kernel(cat_itemsize), listed)
    return events + call("aten::mul", 30, 3, MUL_KERNEL, shapes([2, 8], [2, 8]))


def test_a_tensor_list_copy_links_with_the_dtype_of_its_kernels_element_size(tmp_path: Path) -> None:
    """The cat's tensor list has no recorded dtype; its kernel copies 2-byte elements and the trace's only 2-byte
    dtype is bf16. Now: neg 16 + 16, cat 32 + 32, mul 64 + 32 = 192 B; fused: x1 (16), neg's input (16), sin (32)
    and mul's output (32): 96 B."""
    found = chains(tmp_path, _rotate_half(2))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [(["aten::neg", "aten::cat", "aten::mul"], 192, 96)]


def test_a_tensor_list_copy_of_another_element_size_links_nothing(tmp_path: Path) -> None:
    """A cat kernel of 4-byte elements cannot be copying the bf16 tensors of the same shapes."""
    assert chains(tmp_path, _rotate_half(4)) == []


def _slice_backward(accumulate_inside_the_function: bool) -> list[dict[str, Any]]:
    """`evaluate_function: SliceBackward0` runs the node's function (zeros: a fill of a 4x8 bf16 buffer) and then
    the engine adds the returned gradient into the buffer of the next node (`add_`, outside the function)."""
    node = "SliceBackward0"
    events = [op(f"autograd::engine::evaluate_function: {node}", 10, 40, tid=2), op(node, 11, 25, tid=2)]
    events += call("aten::fill_", 12, 1, FILL_KERNEL, shapes([4, 8]), tid=2)
    add_at = 20 if accumulate_inside_the_function else 40
    return events + call("aten::add_", add_at, 2, ADD_KERNEL, shapes([4, 8], [4, 8]), tid=2)


def test_the_engines_accumulation_consumes_what_the_node_function_returned(tmp_path: Path) -> None:
    """fill writes 64 B; add_ reads the buffer and the fill's tensor (2 x 64) and writes 64: 256 B now; fused,
    the fill's tensor is never written: 128 B."""
    found = chains(tmp_path, _slice_backward(accumulate_inside_the_function=False))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [(["aten::fill_", "aten::add_"], 256, 128)]


def test_two_ops_of_one_node_function_still_do_not_feed_each_other(tmp_path: Path) -> None:
    """Inside the node's function, equal shapes are the node's separate outputs (the sibling rule)."""
    assert chains(tmp_path, _slice_backward(accumulate_inside_the_function=True)) == []


def _mean_then_add(dims: str) -> list[dict[str, Any]]:
    """mean(4x8 fp32, dims, keepdim=True) then add(4x1 fp32 tensor, eps)."""
    mean = shapes([4, 8], [], [], [], dtype="float", concrete=["", dims, "True", ""])
    mean["Input type"] = ["float", "ScalarList", "Scalar", ""]
    add = {"Input Dims": [[4, 1], []], "Input type": ["float", "Scalar"]}
    return call("aten::mean", 10, 1, MEAN_KERNEL, mean) + call("aten::add", 20, 2, ADD_KERNEL, add)


def test_a_reductions_output_is_the_input_reduced_over_its_recorded_dims(tmp_path: Path) -> None:
    """mean over dim -1 with keepdim: a 4x1 output, which add reads."""
    assert [o.ops for o in chains(tmp_path, _mean_then_add("[-1]"))] == [["aten::mean", "aten::add"]]


def test_a_reduction_over_other_dims_does_not_link_to_a_reader_of_another_shape(tmp_path: Path) -> None:
    """mean over dim 0 gives 1x8, not the 4x1 tensor add reads."""
    assert chains(tmp_path, _mean_then_add("[0]")) == []


def _gelu_then(consumer: list[dict[str, Any]], gemm: bool) -> list[dict[str, Any]]:
    events = call("aten::gelu", 10, 1, GELU_KERNEL, shapes([8, 16])) + consumer
    if gemm:  # reads an 8x16 bf16 tensor after the consumer
        events += call("aten::mm", 40, 9, GEMM_KERNEL, shapes([8, 16], [16, 24]))
    return events


def test_an_output_a_later_gemm_reads_is_still_written(tmp_path: Path) -> None:
    """gelu (8x16 bf16, 256 B in and out) → sum over dim 1 (reads 256 B; output 8 bf16 = 16 B): fused, gelu's
    output need not be written (272 B) unless the GEMM after the sum reads it (528 B)."""
    summed = shapes([8, 16], [], [], [], concrete=["", "[1]", "False", ""])
    summed["Input type"] = [BF16, "ScalarList", "Scalar", ""]
    consumer = call("aten::sum", 20, 2, SUM_KERNEL, summed)
    alone = chains(tmp_path / "alone", _gelu_then(consumer, gemm=False))
    read = chains(tmp_path / "read", _gelu_then(consumer, gemm=True))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in alone] == [(["aten::gelu", "aten::sum"], 768, 272)]
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in read] == [(["aten::gelu", "aten::sum"], 768, 528)]


def test_a_gemms_read_goes_to_the_nearest_producer_of_its_key(tmp_path: Path) -> None:
    """gelu → mul, then a GEMM reading an 8x16 bf16 tensor: mul's output (nearest), not gelu's, which stays
    internal: the same bytes as without the GEMM."""
    consumer = call("aten::mul", 20, 2, MUL_KERNEL, shapes([8, 16], [8, 16]))
    alone = chains(tmp_path / "alone", _gelu_then(consumer, gemm=False))
    read = chains(tmp_path / "read", _gelu_then(consumer, gemm=True))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in read] == [(o.ops, o.bytes_now, o.bytes_fused) for o in alone]
    assert (alone[0].bytes_now, alone[0].bytes_fused) == (1280, 768)


def _relu_then(second: str, kernel_name: str) -> list[dict[str, Any]]:
    """clamp_min(x, 0) then `second(y, 0)`: both recorded with the same arguments (an 8x16 bf16 tensor, the
    scalar 0)."""
    scalar = {"Input Dims": [[8, 16], []], "Input type": [BF16, "Scalar"], "Concrete Inputs": ["", "0"]}
    relu_kernel = "void at::native::vectorized_elementwise_kernel<8, at::native::clamp_min_kernel_cuda>"
    return call("aten::clamp_min", 10, 1, relu_kernel, scalar) + call(second, 20, 2, kernel_name, scalar)


def test_ops_recorded_with_the_same_arguments_are_decoded_by_their_own_name(tmp_path: Path) -> None:
    """`fill_(y, 0)` reads nothing, though its arguments are those of `clamp_min(x, 0)`, which reads x (they
    were decoded once per argument signature, under the first op's name: the fill read the relu's output)."""
    assert chains(tmp_path / "fill", _relu_then("aten::fill_", FILL_KERNEL)) == []
    linked = chains(tmp_path / "mul", _relu_then("aten::mul", MUL_KERNEL))  # mul(relu, 0) does read it: 256 + 256 B
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in linked] == [(["aten::clamp_min", "aten::mul"], 1024, 512)]
