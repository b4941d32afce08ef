"""FLOP/byte models and shape decoding for single ops."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import op, step
from tests.unit.tiny import BF16x1, BF16x2, load_events
from tracelens.analyses.opmodels import decode_inductor_ops, model_op, op_reads, op_writes
from tracelens.analyses.shapes import OpShapes, Tensor, broadcast_numel, decode_shapes, signature_codes


def shapes(dims: list[object], types: list[str], concrete: list[str] | None = None) -> OpShapes:
    decoded = decode_shapes(json.dumps(dims).encode(), json.dumps(types).encode(), json.dumps(concrete or []).encode())
    assert decoded is not None
    return decoded


def test_decode_inductor_kernel_names_into_aten_ops() -> None:
    assert decode_inductor_ops("triton_poi_fused_gelu_mul_0") == ["gelu", "mul"]
    assert decode_inductor_ops("triton_per_fused_add_native_batch_norm_backward_threshold_backward_9") == [
        "add",
        "native_batch_norm_backward",
        "threshold_backward",
    ]
    assert decode_inductor_ops("triton_red_fused__native_batch_norm_legit_functional_18") == [
        "_native_batch_norm_legit_functional"
    ]
    assert decode_inductor_ops("nvjet_sm90") == []


def test_gemm_models_count_2mnk() -> None:
    bf16 = "c10::BFloat16"
    addmm = model_op(
        "aten::addmm", shapes([[64], [32, 128], [128, 64], [], []], [bf16] * 3 + ["Scalar"] * 2), "gemm", ""
    )
    assert addmm is not None and addmm.flops == 2 * 32 * 128 * 64
    bmm = model_op("aten::bmm", shapes([[4, 32, 128], [4, 128, 64]], [bf16, bf16]), "gemm", "")
    assert bmm is not None and bmm.flops == 2 * 4 * 32 * 128 * 64
    linear = model_op("aten::linear", shapes([[2, 16, 128], [64, 128]], [bf16, bf16]), "gemm", "")
    assert linear is not None and linear.flops == 2 * 32 * 128 * 64
    assert linear.bytes == 2 * (2 * 16 * 128 + 64 * 128 + 32 * 64)
    # a GEMM op's model never applies to a non-GEMM kernel it launched (e.g. a bias copy)
    assert model_op("aten::addmm", shapes([[64], [32, 128], [128, 64]], [bf16] * 3), "copy", "") is None


def test_attention_flops_halve_when_causal() -> None:
    q = [2, 8, 256, 64]
    dims, types = [q, q, q, [], [], [], []], ["c10::Half"] * 3 + ["Scalar"] * 4
    full = model_op(
        "aten::_scaled_dot_product_flash_attention", shapes(dims, types, ["", "", "", "0.", "False"]), "attention", ""
    )
    causal = model_op(
        "aten::_scaled_dot_product_flash_attention", shapes(dims, types, ["", "", "", "0.", "True"]), "attention", ""
    )
    assert full is not None and causal is not None
    assert full.flops == 4 * 2 * 8 * 256 * 256 * 64
    assert causal.flops == full.flops / 2
    assert full.bytes == 4 * (2 * 8 * 256 * 64) * 2  # q, k, v, out in fp16


def test_elementwise_output_is_the_broadcast_of_the_inputs() -> None:
    mul = shapes([[1024], [16, 559, 1024]], ["c10::BFloat16", "c10::BFloat16"])
    assert broadcast_numel(mul.tensors) == 16 * 559 * 1024
    model = model_op("aten::mul", mul, "elementwise", "")
    assert model is not None and model.bytes == 2 * (1024 + 2 * 16 * 559 * 1024)


def test_signature_codes_group_ops_by_their_raw_shapes(tmp_path: Path) -> None:
    dims_only = {"Input Dims": [[8, 16], [8, 16]]}  # no Input type
    trace = load_events(
        tmp_path,
        [
            step(1, 0, 100),
            op("aten::mul", 10, 1, **BF16x2),
            op("aten::add", 20, 1, **BF16x2),
            op("aten::gelu", 30, 1, **BF16x1),
            op("aten::mul", 40, 1, **dims_only),
            op("aten::t", 50, 1),
        ],
    )
    ev = trace.events
    mul, add, gelu, mul_dims, t = (int(np.flatnonzero(ev.ts_ns == us * 1000)[0]) for us in (10, 20, 30, 40, 50))
    rows = np.array([mul, add, gelu, mul_dims, t, -1, mul], dtype=np.int64)
    codes, first = signature_codes(ev, rows)
    # equal bytes, equal code (whatever the op); no Input type, no shapes or no op: -1
    assert codes.tolist() == [0, 0, 1, -1, -1, -1, 0]
    assert first.tolist() == [0, 2]
    codes, first = signature_codes(ev, rows, dims_only=True)
    assert codes.tolist() == [0, 0, 1, 0, -1, -1, 0]  # only Input Dims count
    assert first.tolist() == [0, 2]


def test_shapes_decode_whatever_json_takes() -> None:
    # msgspec does the decoding, json what msgspec refuses (NaN, a UTF-8 byte-order mark, numbers beyond float)
    decoded = decode_shapes(b"[[2, 3], [true, 1], [4]]", b'["float", "float", "long int"]', b"[NaN, 1e999, 1]")
    assert decoded is not None and decoded.concrete == ("nan", "inf", "1")
    assert [t.dims if t else None for t in decoded.args] == [(2, 3), None, (4,)]  # a bool is not a size
    assert decode_shapes(b"\xef\xbb\xbf[[5]]", b'["c10::Half"]', b"[]") == OpShapes((Tensor((5,), "fp16", 2),), ())
    assert decode_shapes(b"[[1, 2],]", b'["float"]', b"[]") is None  # not JSON at all


def test_what_ops_without_a_memory_model_write() -> None:
    """`op_writes`: the tensor a convolution, a gather or an in-place update writes, from its arguments (the
    conv_train audit trace's calls); None where the arguments do not determine it."""
    f32 = "float"
    conv = shapes(
        [[64, 128, 16, 16], [256, 128, 3, 3], [], [], [], []],
        [f32, f32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"],
    )
    assert op_writes("aten::cudnn_convolution", conv) == Tensor((64, 256, 8, 8), "fp32", 4)
    unrecorded = shapes([[64, 128, 16, 16], [256, 128, 3, 3]], [f32, f32])
    assert op_writes("aten::cudnn_convolution", unrecorded) is None  # stride not recorded
    backward = shapes(
        [[64, 256, 8, 8], [64, 256, 8, 8], [256, 256, 1, 1], [], [], [], [], [], [], [], []],
        [f32, f32, f32, *["ScalarList"] * 4, "Scalar", "ScalarList", "Scalar", "ScalarList"],
        ["", "", "", "[0]", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"],
    )
    assert op_writes("aten::convolution_backward", backward) == Tensor((64, 256, 8, 8), "fp32", 4)  # grad_input
    select = shapes([[16, 256, 2048], [], [256]], [f32, "Scalar", "long int"], ["", "1", ""])
    assert op_writes("aten::index_select", select) == Tensor((16, 256, 2048), "fp32", 4)
    embedding = shapes([[32000, 1024], [16, 256]], [f32, "long int"])
    assert op_writes("aten::embedding", embedding) == Tensor((16, 256, 1024), "fp32", 4)
    index_add = shapes([[16, 256, 2048], [], [256], [16, 256, 2048], []], [f32, "Scalar", "long int", f32, "Scalar"])
    assert op_writes("aten::index_add_", index_add) == Tensor((16, 256, 2048), "fp32", 4)  # its first argument
    assert op_writes("aten::index_add", index_add) is None
    assert op_writes("aten::cudnn_convolution", None) is None
    # torch 2.11's index_select: gather(self, dim, index, sparse_grad, out): the out= buffer is written, not read
    gather = shapes(
        [[16, 256, 2048], [], [16, 256, 2048], [], [16, 256, 2048]], [f32, "Scalar", "long int", "Scalar", f32]
    )
    assert op_writes("aten::gather", gather) == Tensor((16, 256, 2048), "fp32", 4)
    assert [t.dtype for t in op_reads("aten::gather", gather)] == ["fp32", "int64"]  # self and index
    assert len(op_reads("aten::cudnn_convolution", conv)) == 2


def test_a_foreach_op_moves_its_tensor_lists_in_the_kernels_element_type() -> None:
    """`_foreach_mul_(grads, coef)` (clip_grad_norm_) over 2x3 and 4 fp32 elements (10): the list read and
    written (80 B) and the 0-d coefficient read (4 B); its element type is the kernel functor's, as the profiler
    records no dtype for a TensorList. Out of place (`_foreach_sqrt`) a new list is written; `_foreach_norm`
    writes one value per tensor."""
    kernel = "multi_tensor_apply_kernel<TensorListMetadata<1>, BinaryOpScalarTensorFunctor<float, 1, 1, 0>, …>"
    args = shapes([[[2, 3], [4]], []], ["TensorList", "float"], ["", ""])
    model = model_op("aten::_foreach_mul_", args, "elementwise", kernel)
    assert model is not None and (model.model, model.bytes, model.dtype) == ("elementwise", 84.0, "fp32")
    half = kernel.replace("<float,", "<c10::Half,")
    lists = shapes([[[2, 3], [4]]], ["TensorList"], [""])
    sqrt = model_op("aten::_foreach_sqrt", lists, "elementwise", half)
    assert sqrt is not None and (sqrt.bytes, sqrt.dtype) == (40.0, "fp16")
    norm = model_op("aten::_foreach_norm", lists, "elementwise", kernel)
    assert norm is not None and (norm.model, norm.bytes) == ("reduction", 48.0)
    assert model_op("aten::_foreach_mul_", args, "elementwise", "some_kernel") is None  # element type unknown
