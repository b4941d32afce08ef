"""FLOP and byte models of one op call from its shapes (see `shapes.py`). Pure functions, no trace access.

`model_op(op_name, shapes, kernel_category, kernel_name) -> OpModel | None`. A model is only returned when it
fits the kernel: GEMM models for GEMM kernels, attention models for attention kernels, elementwise/reduction/copy
models for memory-bound kernels, and the Inductor model for a `triton_*` kernel under its own wrapper op.
Estimates: each tensor argument is read (or written) once; outputs are sized from the inputs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tracelens.analyses.shapes import OpShapes, Tensor, broadcast_numel


@dataclass(frozen=True)
class OpModel:
    model: str  # gemm | attention | elementwise | reduction | norm | copy | fill | inductor
    flops: float
    bytes: float
    dtype: str
    ops: str = ""  # for Inductor kernels: the aten ops decoded from the kernel name, joined by "+"
    out_bytes: float = 0.0  # bytes of the op's output (fusion: what a fuser would keep on chip)


GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul", "aten::_scaled_mm"}
# op name → position of `is_causal` among its arguments, and whether it is a backward
ATTENTION_OPS: dict[str, tuple[int, int, bool]] = {  # name: (query position, is_causal position, backward)
    "aten::_scaled_dot_product_flash_attention": (0, 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, 4, False),
    "aten::scaled_dot_product_attention": (0, 5, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, True),
}
POINTWISE = {
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "exp",
    "exp2",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "pow",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "mish",
    "hardswish",
    "elu",
    "leaky_relu",
    "threshold",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "where",
    "masked_fill",
    "clamp",
    "clamp_min",
    "clamp_max",
    "abs",
    "cos",
    "sin",
    "erf",
    "reciprocal",
    "maximum",
    "minimum",
    "addcmul",
    "addcdiv",
    "lerp",
    "sign",
    "floor",
    "ceil",
    "round",
    "square",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_not",
    "bitwise_and",
    "native_dropout",
    "dropout",
    "native_dropout_backward",
    "rsub",
    "_foreach_add",
    "_foreach_mul",
}
NORMS = {
    "softmax",
    "_softmax",
    "log_softmax",
    "_log_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "layer_norm",
    "native_layer_norm",
    "native_layer_norm_backward",
    "rms_norm",
    "_fused_rms_norm",
    "group_norm",
    "native_group_norm",
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional",
    "native_batch_norm_backward",
    "cudnn_batch_norm",
}
REDUCTIONS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "var",
    "var_mean",
    "std",
    "norm",
    "linalg_vector_norm",
    "argmax",
    "argmin",
    "prod",
    "logsumexp",
    "cumsum",
    "nll_loss",
    "nll_loss_forward",
}
COPIES = {
    "copy_",
    "_to_copy",
    "to",
    "clone",
    "contiguous",
    "repeat",
    "roll",
    "flip",
    "tril",
    "triu",
}
FILLS = {"fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "fill"}
MEMORY_KERNEL_CATEGORIES = {"elementwise", "reduction", "copy", "other", "memset"}
_KNOWN_TOKENS = sorted(
    POINTWISE | NORMS | REDUCTIONS | COPIES | FILLS | {"mm", "addmm", "bmm", "convolution"}, key=len, reverse=True
)
INDUCTOR_NAME = re.compile(r"^triton_(?P<kind>[a-z]+)_fused_(?P<ops>.*?)(?:_\d+)?$")


def model_op(op_name: str, shapes: OpShapes | None, kernel_category: str, kernel_name: str) -> OpModel | None:
    if shapes is None or not shapes.tensors:
        return None
    if kernel_name.startswith("triton_") and op_name == kernel_name:
        return _inductor(kernel_name, shapes)
    if op_name in GEMM_OPS:
        return _gemm(op_name, shapes) if kernel_category == "gemm" else None
    if op_name in ATTENTION_OPS:
        return _attention(op_name, shapes) if kernel_category == "attention" else None
    if kernel_category not in MEMORY_KERNEL_CATEGORIES:
        return None
    return _memory_bound(op_name, shapes)


def base_name(op_name: str) -> str:
    """`aten::mul_` → `mul` (in-place suffix dropped), `aten::gelu` → `gelu`."""
    name = op_name.rsplit("::", 1)[-1]
    return name[:-1] if name.endswith("_") and name[:-1] not in ("fill", "zero", "copy") else name


def _memory_bound(op_name: str, shapes: OpShapes) -> OpModel | None:
    if not op_name.startswith("aten::"):
        return None
    name, tensors = base_name(op_name), shapes.tensors
    first = tensors[0]
    inputs = float(sum(t.nbytes for t in tensors))
    if name in POINTWISE:
        out_numel = broadcast_numel(tensors)
        out = float(out_numel * first.itemsize)
        return OpModel("elementwise", float(out_numel), inputs + out, first.dtype, out_bytes=out)
    if name in NORMS:
        return OpModel("norm", 5.0 * first.numel, inputs + first.nbytes, first.dtype, out_bytes=float(first.nbytes))
    if name in REDUCTIONS:
        return OpModel("reduction", float(first.numel), inputs, first.dtype)
    if name in FILLS:
        return OpModel("fill", 0.0, float(first.nbytes), first.dtype, out_bytes=float(first.nbytes))
    if name in COPIES:
        moved = inputs if name == "copy_" else inputs + first.nbytes
        return OpModel("copy", 0.0, moved, first.dtype, out_bytes=float(first.nbytes))
    return None


def _gemm(op_name: str, shapes: OpShapes) -> OpModel | None:
    dims = _gemm_dims(op_name, shapes)
    if dims is None:
        return None
    batch, m, k, n, a = dims
    out_bytes = float(batch * m * n * (2 if a.itemsize == 1 else a.itemsize))
    moved = float(sum(t.nbytes for t in shapes.tensors)) + out_bytes
    return OpModel("gemm", 2.0 * batch * m * k * n, moved, a.dtype, out_bytes=out_bytes)


def _gemm_dims(op_name: str, shapes: OpShapes) -> tuple[int, int, int, int, Tensor] | None:
    """(batch, M, K, N, A) of a GEMM-like op."""
    args = shapes.args
    if op_name in ("aten::mm", "aten::_scaled_mm"):
        a, b = shapes.tensor(0), shapes.tensor(1)
        if a is None or b is None or len(a.dims) != 2 or len(b.dims) != 2:
            return None
        return 1, a.dims[0], a.dims[1], b.dims[1], a
    if op_name == "aten::addmm":
        a, b = shapes.tensor(1), shapes.tensor(2)
        if a is None or b is None or len(a.dims) != 2 or len(b.dims) != 2:
            return None
        return 1, a.dims[0], a.dims[1], b.dims[1], a
    if op_name in ("aten::bmm", "aten::baddbmm"):
        offset = 0 if op_name == "aten::bmm" else 1
        a, b = shapes.tensor(offset), shapes.tensor(offset + 1)
        if a is None or b is None or len(a.dims) != 3 or len(b.dims) != 3:
            return None
        return a.dims[0], a.dims[1], a.dims[2], b.dims[2], a
    if op_name == "aten::linear":
        x, w = shapes.tensor(0), shapes.tensor(1)
        if x is None or w is None or len(w.dims) != 2 or not x.dims:
            return None
        return 1, math.prod(x.dims[:-1]), x.dims[-1], w.dims[0], x
    if op_name == "aten::matmul" and len(args) >= 2:
        a, b = shapes.tensor(0), shapes.tensor(1)
        if a is None or b is None or not a.dims or not b.dims:
            return None
        a_dims = (1, *a.dims) if len(a.dims) == 1 else a.dims
        b_dims = (*b.dims, 1) if len(b.dims) == 1 else b.dims
        batch_a, batch_b = math.prod(a_dims[:-2]), math.prod(b_dims[:-2])
        return max(batch_a, batch_b), a_dims[-2], a_dims[-1], b_dims[-1], a
    return None


def _attention(op_name: str, shapes: OpShapes) -> OpModel | None:
    q_at, causal_at, backward = ATTENTION_OPS[op_name]
    q, k, v = shapes.tensor(q_at), shapes.tensor(q_at + 1), shapes.tensor(q_at + 2)
    if q is None or k is None or v is None or len(q.dims) != 4 or len(k.dims) != 4 or len(v.dims) != 4:
        return None
    batch, heads, lq, d = q.dims
    lk, dv = k.dims[2], v.dims[3]
    flops = 2.0 * batch * heads * lq * lk * (d + dv)
    if shapes.flag(causal_at):
        flops /= 2
    out = batch * heads * lq * dv * q.itemsize
    moved = float(q.nbytes + k.nbytes + v.nbytes + out)
    if backward:
        flops, moved = flops * 2.5, moved * 2
    return OpModel("attention", flops, moved, q.dtype, out_bytes=float(out))


def decode_inductor_ops(kernel_name: str) -> list[str]:
    """`triton_poi_fused_gelu_mul_0` → ["gelu", "mul"]; longest known aten op names first, else single words."""
    match = INDUCTOR_NAME.match(kernel_name)
    if not match:
        return []
    text, ops = match.group("ops"), []
    while text:
        offset = 0
        token = _known_prefix(text)
        if token is None and text.startswith("_"):
            offset, token = 1, _known_prefix(text[1:])
        if token is not None:
            ops.append(token)
            text = text[offset + len(token) :]
            continue
        word, _, text = text.lstrip("_").partition("_")
        if word:
            ops.append(word)
    return ops


def _known_prefix(text: str) -> str | None:
    for token in _KNOWN_TOKENS:
        if text.startswith(token) and (len(text) == len(token) or text[len(token)] == "_"):
            return token
    return None


def _inductor(kernel_name: str, shapes: OpShapes) -> OpModel:
    ops = decode_inductor_ops(kernel_name)
    tensors = shapes.tensors
    largest = max(tensors, key=lambda t: t.numel)
    moved = float(sum(t.nbytes for t in tensors))
    flops = float(largest.numel * max(len(ops), 1))
    if kernel_name.startswith("triton_tem_") and {"mm", "addmm", "bmm"} & set(ops):
        flops = _template_gemm_flops(tensors) or flops
    return OpModel("inductor", flops, moved, largest.dtype, ops="+".join(ops))


def _template_gemm_flops(tensors: tuple[Tensor, ...]) -> float | None:
    mats = [t for t in tensors if len(t.dims) == 2]
    for a in mats:
        for b in mats:
            if a is not b and a.dims[1] == b.dims[0]:
                return 2.0 * a.dims[0] * a.dims[1] * b.dims[1]
    return None
