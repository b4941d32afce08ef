"""FLOP/byte models and shape decoding for single ops."""

from __future__ import annotations

import json

from tracelens.analyses.opmodels import decode_inductor_ops, model_op
from tracelens.analyses.shapes import OpShapes, broadcast_numel, decode_shapes


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
