"""The fusion linking rules beyond equal shapes, on tiny hand-built traces: views recorded as ops, tensor-list
copies (`aten::cat`), fills, reductions' outputs, the autograd engine's gradient accumulation, and outputs read by
non-candidate kernels. Each rule has a negative case: unrelated tensors of the same key must not link."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import GELU_KERNEL, MUL_KERNEL, load_events
from tracelens.analyses.fusion import FusionOpportunity, fusion_of
from tracelens.analyses.window import select_window
from tracelens.loader.et import attach, load_execution_trace

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


CONV_KERNEL = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32"
BN_KERNEL = "batchnorm_fwtr_nhwc_semiPersist"
RELU_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_kernel_cuda>"
FP32 = "float"


def _conv(ts: float, ext: int, stride: int, x: list[int]) -> list[dict[str, Any]]:
    """cudnn_convolution(x, w 4x4x3x3, padding 1, stride): a 1x4x8x8 output at stride 1, 1x4x4x4 at 2."""
    args = {
        "Input Dims": [x, [4, 4, 3, 3], [], [], [], []],
        "Input type": [FP32, FP32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        "Concrete Inputs": ["", "", "[1, 1]", f"[{stride}, {stride}]", "[1, 1]", "1"],
    }
    return call("aten::cudnn_convolution", ts, ext, CONV_KERNEL, args)


def _batch_norm(ts: float, ext: int, x: list[int]) -> list[dict[str, Any]]:
    args = shapes(x, [4], [4], [4], [4], dtype=FP32)
    return call("aten::cudnn_batch_norm", ts, ext, BN_KERNEL, args)


def _relu_conv_bn(stride: int) -> list[dict[str, Any]]:
    """relu(x 1x4x8x8 fp32) → conv(another tensor, 1x4x16x16) → BN(a 1x4x8x8 tensor): at stride 2 the conv
    writes 1x4x8x8, the tensor BN reads; at stride 1 it writes 1x4x16x16, and the 1x4x8x8 tensor BN reads can
    only be relu's (1,024 B each)."""
    relu = shapes([1, 4, 8, 8], [], dtype=FP32, concrete=["", "0"])
    relu["Input type"] = [FP32, "Scalar"]
    events = call("aten::clamp_min", 10, 1, RELU_KERNEL, relu)
    return events + _conv(20, 2, stride, [1, 4, 16, 16]) + _batch_norm(40, 3, [1, 4, 8, 8])


def test_a_convolution_writing_the_key_a_consumer_reads_is_its_producer(tmp_path: Path) -> None:
    """The nearest writer of the 1x4x8x8 tensor BN reads is the convolution (not a candidate): no relu → BN
    link, though relu's output has that key too."""
    assert chains(tmp_path, _relu_conv_bn(stride=2)) == []


def test_a_convolution_writing_another_shape_leaves_the_link(tmp_path: Path) -> None:
    """At stride 1 the conv writes 1x4x16x16: BN's input is relu's output. Now: relu 1,024 + 1,024, BN
    1,024 + 64 (params) + 1,024 = 4,160 B; fused: relu's input, BN's params and output = 2,112 B."""
    found = chains(tmp_path, _relu_conv_bn(stride=1))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [
        (["aten::clamp_min", "aten::cudnn_batch_norm"], 4160, 2112)
    ]


def _rope(read_by_gemm: bool) -> list[dict[str, Any]]:
    """q·cos, then rotate_half (neg, cat), ·sin and the add: add(sin_part, cos_part) — both 2x8 bf16, as are
    cat's output and the second mul's (cos and sin: 1x8). With `read_by_gemm`, a GEMM reads q·cos's output
    before the add."""
    listed = {
        "Input Dims": [[[2, 4], [2, 4]], []],
        "Input type": ["TensorList", "Scalar"],
        "Concrete Inputs": ["", "-1"],
    }
    events = call("aten::mul", 5, 1, MUL_KERNEL, shapes([2, 8], [1, 8]))
    if read_by_gemm:
        events += call("aten::mm", 8, 9, GEMM_KERNEL, shapes([2, 8], [8, 3]))
    events += call("aten::neg", 10, 2, NEG_KERNEL, shapes([2, 4]))
    events += call("aten::cat", 20, 3, cat_kernel(2), listed)
    events += call("aten::mul", 30, 4, MUL_KERNEL, shapes([2, 8], [1, 8]))
    return events + call("aten::add", 40, 5, ADD_KERNEL, shapes([2, 8], [2, 8]))


def test_of_two_outputs_of_the_key_the_unread_one_is_the_input(tmp_path: Path) -> None:
    """add's second 2x8 input: cat's output (2 kernels back) was read by the second mul, q·cos's (4 back) by
    nobody yet: it is q·cos's (cat's was the nearest, and took the slot). Now: mul 80, neg 32, cat 64, mul
    80, add 96 = 352 B; fused: q and cos (48), neg's input and x1 (32), sin (16), add's output (32) = 128 B."""
    found = chains(tmp_path, _rope(read_by_gemm=False))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [
        (["aten::mul", "aten::neg", "aten::cat", "aten::mul", "aten::add"], 352, 128)
    ]


def test_when_both_outputs_were_read_the_nearest_is_the_input(tmp_path: Path) -> None:
    """With a GEMM reading q·cos's output first, both candidates were read: the nearest (cat) takes the slot,
    as before the preference (a link that is then wrong by shape alone, but no worse than nearest)."""
    found = chains(tmp_path, _rope(read_by_gemm=True))
    assert [o.ops for o in found] == [["aten::neg", "aten::cat", "aten::mul", "aten::add"]]


def _index_select_backward(in_place: bool) -> list[dict[str, Any]]:
    """`evaluate_function: IndexSelectBackward0`: zeros (fill_ of 4x8 fp32), then index_add_(zeros, 0, index,
    grad) into them, then the engine's add_ of the result into the next node's buffer. Without `in_place`
    the second op is an out-of-place index_add (it reads the zeros but does not update them)."""
    node = "IndexSelectBackward0"
    events = [op(f"autograd::engine::evaluate_function: {node}", 10, 60, tid=2), op(node, 11, 40, tid=2)]
    fill = shapes([4, 8], [], dtype=FP32, concrete=["", "0"])
    fill["Input type"] = [FP32, "Scalar"]
    events += call("aten::fill_", 12, 1, FILL_KERNEL.replace("BFloat16", "float"), fill, tid=2)
    index_add = shapes([4, 8], [], [4], [4, 8], [], dtype=FP32, concrete=["", "0", "", "", "1"])
    index_add["Input type"] = [FP32, "Scalar", "long int", FP32, "Scalar"]
    name = "aten::index_add_" if in_place else "aten::index_add"
    events += call(name, 20, 2, "void at::native::indexFuncLargeIndex<float, long>", index_add, tid=2)
    add_kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
    return events + call("aten::add_", 60, 3, add_kernel, shapes([4, 8], [4, 8], dtype=FP32), tid=2)


def test_an_in_place_op_of_a_node_reads_the_zeros_the_node_made(tmp_path: Path) -> None:
    """index_add_ updates the node's zeros in place: it reads the fill's output (so fill → add_ is blocked)
    and writes the tensor add_ reads. Out of place, a sibling's output is never its input: the fill links to
    the engine's add_ (shape evidence only)."""
    assert chains(tmp_path / "in_place", _index_select_backward(in_place=True)) == []
    found = chains(tmp_path / "out_of_place", _index_select_backward(in_place=False))
    assert [o.ops for o in found] == [["aten::fill_", "aten::add_"]]


def _relu_backward() -> list[dict[str, Any]]:
    """In the backward, three node calls: mul (4x8 bf16), mul of that and another 4x8 tensor, then
    threshold_backward(grad 4x8, the forward relu's 4x8 result)."""
    events: list[dict[str, Any]] = []
    for at, (node, name) in enumerate((("MulBackward0", "aten::mul"), ("MulBackward1", "aten::mul"))):
        ts = 5 + 25 * at
        events += [op(f"autograd::engine::evaluate_function: {node}", ts, 20, tid=2), op(node, ts + 1, 10, tid=2)]
        events += call(name, ts + 2, 1 + at, MUL_KERNEL, shapes([4, 8], [4, 8]), tid=2)
    node = "ReluBackward0"
    events += [op(f"autograd::engine::evaluate_function: {node}", 60, 20, tid=2), op(node, 61, 10, tid=2)]
    threshold = shapes([4, 8], [4, 8], [], concrete=["", "", "0"])
    threshold["Input type"] = [BF16, BF16, "Scalar"]
    return events + call("aten::threshold_backward", 62, 3, MUL_KERNEL, threshold, tid=2)


def test_a_tensor_the_forward_saved_is_not_a_backward_producers_output(tmp_path: Path) -> None:
    """threshold_backward's second argument is the relu's forward result: the second mul's output is its
    gradient (first slot), and the first mul's output (which has the result's key too) is not the result.
    Now 3 x 192 B; fused: the first mul's inputs (128), the second's other input (64), the saved result (64)
    and the gradient (64) = 320 B (the first mul's output was taken as the result: 256)."""
    found = chains(tmp_path, _relu_backward())
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [
        (["aten::mul", "aten::mul", "aten::threshold_backward"], 576, 320)
    ]


def _scalar_updates(in_place: bool) -> list[dict[str, Any]]:
    """Two 0-d int64 updates, `num_batches_tracked.add_(1)` of two BatchNorms (or, not in place, add(x, 1)
    then add(that, 1))."""
    name = "aten::add_" if in_place else "aten::add"
    args = {
        "Input Dims": [[], [], []],
        "Input type": ["long int", "long int", "Scalar"],
        "Concrete Inputs": ["", "", "1"],
    }
    kernel_name = "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctorOnSelf_add<long>>"
    return call(name, 10, 1, kernel_name, args) + call(name, 20, 2, kernel_name, args)


def test_in_place_updates_of_0d_buffers_are_not_dataflow(tmp_path: Path) -> None:
    """Every 0-d int64 tensor has one key: updated in place, two counters link nothing; a fresh 0-d result
    read by the next op does."""
    assert chains(tmp_path / "in_place", _scalar_updates(in_place=True)) == []
    assert [o.ops for o in chains(tmp_path / "fresh", _scalar_updates(in_place=False))] == [["aten::add", "aten::add"]]


def _two_kernel_call(consumer: bool) -> list[dict[str, Any]]:
    """One `mul` call (8x16 bf16) that launches two kernels (as a `_foreach_` op over a long list does),
    then, with `consumer`, gelu of its output."""
    events = [
        op("aten::mul", 10, 10, ext=1, **shapes([8, 16], [8, 16])),
        launch("cudaLaunchKernel", 11, 1, correlation=1, ext=1),
        kernel(MUL_KERNEL, 13, 2, correlation=1),
        launch("cudaLaunchKernel", 15, 1, correlation=2, ext=1),
        kernel(MUL_KERNEL, 17, 2, correlation=2),
    ]
    return events + (call("aten::gelu", 30, 3, GELU_KERNEL, shapes([8, 16])) if consumer else [])


def test_the_kernels_of_one_op_call_are_one_member(tmp_path: Path) -> None:
    """The two kernels of one call are not producer and consumer of each other (no chain on their own); with
    a consumer they join its group, the call's tensors counted once: now mul 768 (split over its kernels) +
    gelu 512; fused: mul's inputs (512) and gelu's output (256)."""
    assert chains(tmp_path / "alone", _two_kernel_call(consumer=False)) == []
    found = chains(tmp_path / "consumed", _two_kernel_call(consumer=True))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [
        (["aten::mul", "aten::mul", "aten::gelu"], 1280, 768)
    ]


SOFTMAX_KERNEL = "void at::native::cunn_SoftMaxForwardReg<float, float, float>"
NLL_KERNEL = "void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
SOFTMAX_BACKWARD_KERNEL = "void at::native::cunn_SoftMaxBackwardSmem<4, float, float, float>"


def _loss(backward: bool, saved_dims: list[int] | None = None) -> list[dict[str, Any]]:
    """log_softmax(x 4x8 fp32) → nll_loss(that, target 4 int64, mean); with `backward`, the backward's
    _log_softmax_backward_data(grad, the forward result, recorded with `saved_dims`)."""
    lsm = shapes([4, 8], [], [], dtype=FP32, concrete=["", "1", "False"])
    lsm["Input type"] = [FP32, "Scalar", "Scalar"]
    nll = {
        "Input Dims": [[4, 8], [4], [], [], []],
        "Input type": [FP32, "long int", "", "Scalar", "Scalar"],
        "Concrete Inputs": ["", "", "", "1", "-100"],
    }
    events = call("aten::_log_softmax", 10, 1, SOFTMAX_KERNEL, lsm) + call(
        "aten::nll_loss_forward", 20, 2, NLL_KERNEL, nll
    )
    if backward:
        node = "LogSoftmaxBackward0"
        events += [op(f"autograd::engine::evaluate_function: {node}", 60, 30, tid=2), op(node, 61, 20, tid=2)]
        grad = shapes([4, 8], saved_dims or [4, 8], [], [], dtype=FP32, concrete=["", "", "1", "6"])
        grad["Input type"] = [FP32, FP32, "Scalar", "Scalar"]
        events += call("aten::_log_softmax_backward_data", 62, 3, SOFTMAX_BACKWARD_KERNEL, grad, tid=2)
    return events


def test_nll_loss_gathers_one_value_per_row(tmp_path: Path) -> None:
    """nll_loss reads the target (32 B) and one fp32 of its 4x8 input per row (16 B), and writes the loss and
    its total weight (8 B): 56 B, not the whole input. log_softmax → nll: now 256 + 56; fused (inference: the
    result is consumed in the group): x, the target and the loss = 168 B."""
    found = chains(tmp_path, _loss(backward=False))
    assert [(o.ops, o.bytes_now, o.bytes_fused) for o in found] == [
        (["aten::_log_softmax", "aten::nll_loss_forward"], 312, 168)
    ]


def test_a_softmax_result_the_backward_reads_stays_written(tmp_path: Path) -> None:
    """In training the backward's _log_softmax_backward_data reads the forward result (its second argument,
    4x8 fp32): a fuser of the forward group still writes it (+128 B). A backward reading a result of another
    shape is no evidence."""
    saved = chains(tmp_path / "saved", _loss(backward=True))
    assert [(o.ops, o.bytes_fused) for o in saved] == [(["aten::_log_softmax", "aten::nll_loss_forward"], 296)]
    other = chains(tmp_path / "other", _loss(backward=True, saved_dims=[8, 8]))
    assert [(o.ops, o.bytes_fused) for o in other if o.ops[0] == "aten::_log_softmax"] == [
        (["aten::_log_softmax", "aten::nll_loss_forward"], 168)
    ]


def _loss_et(path: Path, saved: bool) -> Path:
    """The execution trace of `_loss(backward=True)`: x (storage 1) → result (2) → nll; the backward (on the
    engine's thread, under no ProfilerStep node) reads the result when `saved`, else another tensor (3)."""
    f32 = "Tensor(float)"

    def ref(storage: int, numel: int, itemsize: int = 4) -> list[Any]:
        return [storage, storage, 0, numel, itemsize, "cuda:0"]

    def node(node_id: int, name: str, parent: int, inputs: list[list[Any]], outputs: list[list[Any]]) -> dict[str, Any]:
        types = [f32] * len(inputs)
        return {
            "id": node_id,
            "name": name,
            "ctrl_deps": parent,
            "inputs": {"values": inputs, "shapes": [[]] * len(inputs), "types": types},
            "outputs": {"values": outputs, "shapes": [[]] * len(outputs), "types": [f32] * len(outputs)},
        }

    read = ref(2, 32) if saved else ref(3, 32)
    nodes = [
        {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {}, "outputs": {}},
        {"id": 2, "name": "ProfilerStep#1", "ctrl_deps": 1, "inputs": {}, "outputs": {}},
        node(3, "aten::_log_softmax", 2, [ref(1, 32)], [ref(2, 32)]),
        node(4, "aten::nll_loss_forward", 2, [ref(2, 32), ref(5, 4, 8)], [ref(6, 1)]),
        {"id": 5, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "inputs": {}, "outputs": {}},
        node(6, "aten::_log_softmax_backward_data", 5, [ref(7, 32), read], [ref(8, 32)]),
    ]
    path.write_text(json.dumps({"schema": "1.0.1", "nodes": nodes}))
    return path


def test_with_an_execution_trace_a_reader_outside_the_group_keeps_the_output_written(tmp_path: Path) -> None:
    """The execution trace shows the backward's op reading the forward result (storage 2): it is written, as
    the shape rule has it (296 B); when the backward reads another tensor, it is not (168 B)."""
    figures = []
    for saved in (True, False):
        folder = tmp_path / str(saved)
        folder.mkdir()
        trace = load_events(folder, [step(1, 0, 200), *_loss(backward=True)])
        attach(trace, load_execution_trace(_loss_et(folder / "et.json", saved)))
        found = [o for o in fusion_of(trace, select_window(trace)).opportunities if o.kind == "chain"]
        figures.append([(o.ops, o.bytes_fused, o.evidence) for o in found if o.ops[0] == "aten::_log_softmax"])
    pair = ["aten::_log_softmax", "aten::nll_loss_forward"]
    assert figures == [[(pair, 296, "tensor ids")], [(pair, 168, "tensor ids")]]


def test_no_link_by_shapes_across_a_host_sync(tmp_path: Path) -> None:
    """Issue #27 item 7: mul → neg on one 2x4x8 tensor is a chain; with `.item()` (and its blocking copy) or a
    `cudaStreamSynchronize` between the two launches, torch.compile would break the graph there, and equal
    shapes alone are no evidence across it: no chain."""
    producer = call("aten::mul", 10, 1, MUL_KERNEL, shapes([2, 4, 8], [2, 4, 8]))
    consumer = call("aten::neg", 40, 2, NEG_KERNEL, shapes([2, 4, 8]))
    assert [o.ops for o in chains(tmp_path / "plain", [*producer, *consumer])] == [["aten::mul", "aten::neg"]]
    item = [
        op("aten::item", 20, 10, **shapes([])),
        op("aten::_local_scalar_dense", 21, 8, **shapes([])),
        launch("cudaMemcpyAsync", 22, 2, correlation=90),
        launch("cudaStreamSynchronize", 25, 3, correlation=91),
    ]
    assert chains(tmp_path / "item", [*producer, *item, *consumer]) == []
    sync = [launch("cudaStreamSynchronize", 25, 3, correlation=91)]
    assert chains(tmp_path / "sync", [*producer, *sync, *consumer]) == []
    # a sync on another thread separates nothing on this one
    other = [launch("cudaStreamSynchronize", 25, 3, correlation=91, tid=2)]
    assert [o.ops for o in chains(tmp_path / "other", [*producer, *other, *consumer])] == [["aten::mul", "aten::neg"]]
