"""FLOP and byte models of one op call from its shapes (see `shapes.py`). Pure functions, no trace access.

`model_op(op_name, shapes, kernel_category, kernel_name) -> OpModel | None`. A model is only returned when it
fits the kernel: GEMM models for GEMM kernels, attention models for attention kernels, convolution models for
convolution (or implicit-GEMM) kernels, elementwise/reduction/copy models for memory-bound kernels, and the
Inductor model for a `triton_*` kernel under its own wrapper op.
Estimates: every tensor is moved once — each input read once (the elements its view addresses, `Tensor.addressed`:
a stride-0 dimension once), each output written once, an `out=` buffer the profiler records among the inputs
(Inductor's extern `mm(a, b, out=buf)`) counted as the output only, and an in/out buffer (Inductor's `in_out_ptr`)
read and written. Outputs not recorded are sized from the inputs.
"""

from __future__ import annotations

import math
import re

import msgspec

from tracelens.analyses.shapes import DTYPES, OpShapes, Tensor, broadcast_numel


class OpModel(msgspec.Struct, frozen=True):
    model: str  # gemm | attention | elementwise | reduction | norm | copy | fill | inductor
    flops: float
    bytes: float
    dtype: str
    ops: str = ""  # for Inductor kernels: the aten ops decoded from the kernel name, joined by "+"
    out_bytes: float = 0.0  # bytes of the op's output (fusion: what a fuser would keep on chip)
    in_place: bool = False  # Inductor: the first argument is an in/out buffer (read and written)
    bytes_if_in_place: float = 0.0  # Inductor: bytes if it also wrote its first argument (0: no such reading)
    bytes_if_whole: float = 0.0  # Inductor: bytes if it read every argument whole (0: none was charged in part)


# GEMM ops: number of inputs before any `out=` buffer the profiler records as a further argument
GEMM_INPUTS = {"aten::mm": 2, "aten::addmm": 3, "aten::bmm": 2, "aten::baddbmm": 3, "aten::matmul": 2}
# convolution ops (forward): (input, weight) first; stride/padding/dilation positions in `Concrete Inputs`
CONV_FORWARD: dict[str, tuple[int, int, int]] = {  # name: (stride, padding, dilation) positions
    "aten::convolution": (3, 4, 5),
    "aten::_convolution": (3, 4, 5),
    "aten::conv1d": (3, 4, 5),
    "aten::conv2d": (3, 4, 5),
    "aten::conv3d": (3, 4, 5),
    "aten::cudnn_convolution": (3, 2, 4),  # (self, weight, padding, stride, dilation, ...): stride at 3
    "aten::miopen_convolution": (4, 3, 5),  # (self, weight, bias, padding, stride, dilation, ...)
}
# convolution backward ops: positions of (grad_output, input, weight); `output_mask` is the last argument.
# Their `_input`/`_weight` children (old cuDNN/MIOpen paths) get no model of their own: the parent's covers both.
CONV_BACKWARD: dict[str, tuple[int, int, int]] = {
    "aten::convolution_backward": (0, 1, 2),
    "aten::cudnn_convolution_backward": (1, 0, 2),
    "aten::miopen_convolution_backward": (1, 0, 2),
}
CONV_KERNEL_CATEGORIES = {"conv", "gemm"}  # cuDNN implicit-GEMM kernels may read as GEMMs
# fp32 GEMM kernels that run on tensor cores as TF32 (their FLOPs count against the TF32 peak)
TF32_KERNEL = re.compile(r"tf32|tfloat32|tensorop_s1688|tensorop_s16816|s1688gemm|s16816gemm", re.IGNORECASE)
GEMM_OPS = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::linear",
    "aten::matmul",
    "aten::_scaled_mm",
    "aten::_int_mm",  # int8 × int8 → int32
}
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
}
# tensor inputs of pointwise ops (before an `out=` buffer the profiler records as a further argument)
UNARY = {
    "neg", "exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "mish",
    "hardswish", "elu", "leaky_relu", "abs", "cos", "sin", "erf", "reciprocal", "sign", "floor", "ceil", "round",
    "square", "logical_not", "clamp", "clamp_min", "clamp_max",
}  # fmt: skip
BINARY = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "threshold_backward", "gelu_backward", "silu_backward",
    "sigmoid_backward", "tanh_backward", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "rsub",
}  # fmt: skip
TERNARY = {"where", "addcmul", "addcdiv", "lerp"}
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
    "cudnn_batch_norm_backward",
    "miopen_batch_norm",
    "miopen_batch_norm_backward",
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
}
# nll_loss(self [N, C, …], target [N, …], weight, reduction, ignore_index): one value of self (and of weight) per
# target element is gathered, not the whole input
GATHER_LOSSES = {"nll_loss", "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward", "nll_loss_nd"}
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
MEMORY_KERNEL_CATEGORIES = {"elementwise", "norm", "reduction", "copy", "other", "memset"}
_KNOWN_TOKENS = sorted(
    POINTWISE | NORMS | REDUCTIONS | COPIES | FILLS | {"mm", "addmm", "bmm", "convolution"}, key=len, reverse=True
)
INDUCTOR_NAME = re.compile(r"^triton_(?P<kind>[a-z]+)_fused_(?P<ops>.*?)(?:_\d+)?$")


BufferKey = tuple[tuple[int, ...], str]  # (dims, dtype) of a tensor


def model_op(
    op_name: str,
    shapes: OpShapes | None,
    kernel_category: str,
    kernel_name: str,
    gemm_out_buffers: tuple[BufferKey, ...] = (),
    conv_output: tuple[int, ...] | None = None,
) -> OpModel | None:
    """`gemm_out_buffers`: (dims, dtype) of the `out=` buffers that extern GEMMs wrote just before this kernel
    (see `gemm_out_buffer`): evidence that an Inductor pointwise kernel works in place (`_in_place`).
    `conv_output`: dims of the tensor the op after a forward convolution reads, used as the convolution's output
    size when stride/padding are not recorded (and only when batch and channels agree)."""
    if op_name.startswith(FOREACH) and shapes is not None:
        return _foreach(op_name, shapes, kernel_name) if kernel_category in MEMORY_KERNEL_CATEGORIES else None
    if shapes is None or not shapes.tensors:
        return None
    if kernel_name.startswith("triton_") and op_name == kernel_name:
        return _inductor(kernel_name, shapes, gemm_out_buffers)
    if op_name in GEMM_OPS:
        return _gemm(op_name, shapes) if kernel_category == "gemm" else None
    if op_name in CONV_FORWARD or op_name in CONV_BACKWARD:
        return _conv(op_name, shapes, conv_output) if kernel_category in CONV_KERNEL_CATEGORIES else None
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
    inputs = float(sum(t.addressed_bytes for t in tensors))  # a view: the elements it addresses (`Tensor.addressed`)
    if name in POINTWISE:
        tensors = _pointwise_inputs(name, shapes)
        inputs = float(sum(t.addressed_bytes for t in tensors))
        out_numel = broadcast_numel(tensors)
        out = float(out_numel * first.itemsize)
        return OpModel("elementwise", float(out_numel), inputs + out, first.dtype, out_bytes=out)
    if name in NORMS:
        return OpModel("norm", 5.0 * first.numel, inputs + first.nbytes, first.dtype, out_bytes=float(first.nbytes))
    if name in GATHER_LOSSES:
        return _gather_loss(shapes)
    if name in REDUCTIONS:
        return OpModel("reduction", float(first.numel), inputs, first.dtype)
    if name in FILLS:
        return OpModel("fill", 0.0, float(first.addressed_bytes), first.dtype, out_bytes=float(first.nbytes))
    if name in COPIES:
        moved = inputs if name == "copy_" else inputs + first.nbytes
        return OpModel("copy", 0.0, moved, first.dtype, out_bytes=float(first.nbytes))
    return None


FOREACH = (
    "aten::_foreach_"  # ops over tensor lists (`_foreach_mul_(grads, coef)`), one multi_tensor_apply kernel or more
)
FOREACH_ELEMENT = re.compile(r"Functor<\s*(float|double|c10::BFloat16|c10::Half)\s*,")  # its first template argument


def _foreach(op_name: str, shapes: OpShapes, kernel_name: str) -> OpModel | None:
    """A `_foreach_` op: each tensor list argument read once and one list written (in place: the first; out of
    place: a new one like the first; `_foreach_copy_` reads only its source, `_foreach_zero_` only writes;
    `_foreach_norm` writes one value per tensor), plus its tensor arguments (a 0-d coefficient) read. The
    profiler records a list's dims but no dtype: the element type is the kernel functor's first template
    argument (`multi_tensor_apply_kernel<…, BinaryOpScalarTensorFunctor<float, 1, 1, 0>, …>`); None without it."""
    lists = [dims for dims in shapes.lists if dims is not None]
    element = FOREACH_ELEMENT.search(kernel_name)
    if not lists or element is None:
        return None
    itemsize, dtype = DTYPES[element.group(1)]
    name = op_name.removeprefix(FOREACH)
    numels = [sum(math.prod(d) for d in dims) for dims in lists]
    read = numels[1:] if name == "copy_" else [] if name == "zero_" else numels
    written = len(lists[0]) if name.startswith("norm") else numels[0]
    moved = float((sum(read) + written) * itemsize + sum(t.nbytes for t in shapes.tensors))
    model = "reduction" if name.startswith("norm") else "elementwise"
    return OpModel(model, float(numels[0]), moved, dtype, out_bytes=float(written * itemsize))


def _gather_loss(shapes: OpShapes) -> OpModel | None:
    """nll_loss: the target read, one value of self (and of weight, when given) gathered per target element, the
    loss written (one value per element with reduction `none` (0), else one) with its total weight."""
    self_, target, weight = shapes.tensor(0), shapes.tensor(1), shapes.tensor(2)
    if self_ is None or target is None:
        return None
    rows = target.numel
    per_row = self_.itemsize + (weight.itemsize if weight is not None else 0)
    reduced = shapes.value(3).strip() != "0"
    written = (1 if reduced else rows) * self_.itemsize + self_.itemsize  # the loss and its total weight
    moved = float(target.nbytes + rows * per_row + written)
    return OpModel("reduction", float(rows), moved, self_.dtype, out_bytes=float(written))


def input_reads(op_name: str, shapes: OpShapes | None, inputs: tuple[Tensor, ...]) -> tuple[float, ...]:
    """Bytes each of `inputs` (from `memory_op_io`) is read for, as the roofline counts them: the elements its view
    addresses (`Tensor.addressed`: a stride-0 dimension once), but for the losses that gather one value per
    target element (`GATHER_LOSSES`: self and weight)."""
    target = shapes.tensor(1) if shapes is not None and base_name(op_name) in GATHER_LOSSES else None
    if shapes is None or target is None:
        return tuple(float(t.addressed_bytes) for t in inputs)
    rows = target.numel
    gathered = (shapes.tensor(0), shapes.tensor(2))
    return tuple(
        float(rows * t.itemsize) if any(t is g for g in gathered) else float(t.addressed_bytes) for t in inputs
    )


def memory_op_io(op_name: str, shapes: OpShapes | None) -> tuple[tuple[Tensor, ...], Tensor | None]:
    """(inputs, output) of a memory-bound op call, as its model counts them: inputs without a recorded `out=`
    buffer; the output sized like the model's (pointwise: the broadcast of the inputs in the first input's dtype;
    norms and same-dtype copies: the first input; fills: the filled tensor; `sum`/`mean`/`amax`/`amin`: the
    input reduced over the recorded dims, see `reduction_output`); None when its shape is not known from the
    recorded arguments (other reductions, dtype-changing copies)."""
    if shapes is None or not shapes.tensors or not op_name.startswith("aten::"):
        return (), None
    if op_name.startswith(FOREACH):  # the lists (no dtype) move as the model counts them; the tensors are read
        return shapes.tensors, None
    name, tensors = base_name(op_name), shapes.tensors
    first = tensors[0]
    if name in POINTWISE:
        inputs = _pointwise_inputs(name, shapes)
        return inputs, Tensor(_broadcast_dims(inputs), first.dtype, first.itemsize)
    if name in NORMS:
        return tensors, first
    if name in FILLS:
        return (), first
    if name == "copy_" and len(tensors) >= 2:
        return (tensors[1],), first
    if name in ("clone", "contiguous", "repeat", "roll", "flip", "tril", "triu"):
        return (first,), first
    if name in KEEPDIM_REDUCTIONS:
        return (first,), reduction_output(name, shapes)
    return tensors, None


# reductions called as (self, dim list, keepdim[, dtype]) or (self[, dtype]) (a full reduction)
KEEPDIM_REDUCTIONS = {"sum", "mean", "amax", "amin"}


def reduction_output(name: str, shapes: OpShapes) -> Tensor | None:
    """The output of `sum` / `mean` / `amax` / `amin` from its recorded arguments: the input with the reduced
    dims removed (kept as 1 with `keepdim`), in the input's dtype; a full reduction gives a 0-d tensor. None
    when the arguments are not recorded as expected or a `dtype=` argument changes the output dtype."""
    first = shapes.tensors[0]
    args = shapes.concrete
    if len(shapes.args) <= 2:  # (self) or sum(self, *, dtype)
        return Tensor((), first.dtype, first.itemsize) if len(args) < 2 or not args[1].strip() else None
    if len(args) < 3 or (len(args) > 3 and args[3].strip()) or (name in ("amax", "amin") and len(args) > 3):
        return None
    dims = _int_list(args[1])
    keepdim = args[2].strip()
    if dims is None or keepdim not in ("True", "False"):
        return None
    rank = len(first.dims)
    if any(not -rank <= d < rank for d in dims):
        return None
    reduced = {d % rank for d in dims}
    kept = tuple(
        1 if axis in reduced else size
        for axis, size in enumerate(first.dims)
        if keepdim == "True" or axis not in reduced
    )
    return Tensor(kept, first.dtype, first.itemsize)


def _broadcast_dims(tensors: tuple[Tensor, ...]) -> tuple[int, ...]:
    rank = max((len(t.dims) for t in tensors), default=0)
    out = [1] * rank
    for t in tensors:
        for axis, size in enumerate(t.dims, start=rank - len(t.dims)):
            out[axis] = max(out[axis], size) if size != 1 else out[axis]
    return tuple(out)


def gemm_inputs(op_name: str, shapes: OpShapes | None) -> tuple[Tensor, ...]:
    """The input tensors of a GEMM call (a recorded `out=` buffer left out)."""
    return _gemm_inputs(op_name, shapes) if shapes is not None and op_name in GEMM_OPS else ()


def gemm_output(op_name: str, shapes: OpShapes | None) -> Tensor | None:
    """The output tensor of a GEMM call: its `out=` buffer when recorded, else (batch…, M, N) in A's dtype."""
    if shapes is None or op_name not in GEMM_OPS:
        return None
    count = GEMM_INPUTS.get(op_name)
    if count is not None:
        extra = [t for t in shapes.args[count:] if t is not None]
        if extra:
            return extra[0]
    dims = _gemm_dims(op_name, shapes)
    if dims is None:
        return None
    batch, m, _, n, a = dims
    if op_name == "aten::linear":
        x = shapes.tensor(0)
        lead = x.dims[:-1] if x is not None else (m,)
        return Tensor((*lead, n), a.dtype, a.itemsize)
    if op_name in ("aten::bmm", "aten::baddbmm"):
        return Tensor((batch, m, n), a.dtype, a.itemsize)
    if op_name == "aten::matmul":
        x = shapes.tensor(0)
        lead = x.dims[:-1] if x is not None and len(x.dims) > 1 else ()
        return Tensor((*lead, n), a.dtype, a.itemsize)
    return Tensor((m, n), a.dtype, a.itemsize)


def peak_dtype(dtype: str, kernel_name: str) -> str:
    """The dtype whose peak bounds a kernel: an fp32 GEMM whose kernel runs on tensor cores (`…tf32…`,
    cuBLAS/CUTLASS `tensorop_s1688`/`s16816`) is bounded by the TF32 peak, not the CUDA-core fp32 one."""
    return "tf32" if dtype == "fp32" and TF32_KERNEL.search(kernel_name) else dtype


def _pointwise_inputs(name: str, shapes: OpShapes) -> tuple[Tensor, ...]:
    """The input tensors of a pointwise call: an `out=` buffer recorded after the inputs (`mul(a, b, out=c)` shows
    three tensors) is the output, counted once; ops of unknown arity keep every tensor."""
    arity = 1 if name in UNARY else 2 if name in BINARY else 3 if name in TERNARY else None
    if arity is None:
        return shapes.tensors
    inputs = tuple(t for t in shapes.args[:arity] if t is not None)
    return inputs or shapes.tensors


def _gemm(op_name: str, shapes: OpShapes) -> OpModel | None:
    dims = _gemm_dims(op_name, shapes)
    if dims is None:
        return None
    batch, m, k, n, a = dims
    # 8-bit inputs: fp8 GEMMs write bf16/fp16 (the common case), `_int_mm` writes int32
    out_itemsize = a.itemsize if a.itemsize > 1 else (4 if op_name == "aten::_int_mm" else 2)
    out_bytes = float(batch * m * n * out_itemsize)
    moved = float(sum(t.nbytes for t in _gemm_inputs(op_name, shapes))) + out_bytes
    return OpModel("gemm", 2.0 * batch * m * k * n, moved, a.dtype, out_bytes=out_bytes)


def gemm_out_buffer(op_name: str, shapes: OpShapes | None) -> BufferKey | None:
    """(dims, dtype) of the `out=` buffer a GEMM call recorded after its inputs, None when it has none."""
    count = GEMM_INPUTS.get(op_name)
    if count is None or shapes is None:
        return None
    extra = [t for t in shapes.args[count:] if t is not None]
    return (extra[0].dims, extra[0].dtype) if extra else None


def _gemm_inputs(op_name: str, shapes: OpShapes) -> tuple[Tensor, ...]:
    """The input tensors of a GEMM call: an `out=` buffer recorded after the inputs (Inductor's
    `extern_kernels.mm(a, b, out=buf)` shows as `aten::mm` with three tensors) is the output, counted once."""
    count = GEMM_INPUTS.get(op_name)
    if count is None:
        return shapes.tensors
    return tuple(t for t in shapes.args[:count] if t is not None)


def _conv(op_name: str, shapes: OpShapes, conv_output: tuple[int, ...] | None = None) -> OpModel | None:
    """Direct convolution: FLOPs = 2 × N × C_out × (output spatial) × C_in/groups × (kernel spatial) for each
    computed gradient (forward: one pass; backward: data and/or weight gradient, each as many FLOPs as the
    forward); bytes = the tensors each pass reads and writes. Transposed convolutions are not modelled."""
    if op_name in CONV_FORWARD:
        return _conv_forward(op_name, shapes, conv_output)
    out_at, in_at, w_at = CONV_BACKWARD[op_name]
    grad_out, x, w = shapes.tensor(out_at), shapes.tensor(in_at), shapes.tensor(w_at)
    if grad_out is None or x is None or w is None or not len(grad_out.dims) == len(x.dims) == len(w.dims) >= 3:
        return None
    mask = _bool_list(shapes.concrete[-1]) if shapes.concrete else None
    input_grad, weight_grad = (mask[0], mask[1]) if mask is not None and len(mask) >= 2 else (True, True)
    passes = int(input_grad) + int(weight_grad)
    if passes == 0:
        return None
    flops = 2.0 * grad_out.numel * math.prod(w.dims[1:]) * passes
    # grad_input reads grad_output and weight, writes an input-sized tensor; grad_weight reads grad_output and
    # input, writes a weight-sized tensor
    moved = float(input_grad) * (grad_out.nbytes + w.nbytes + x.nbytes)
    moved += float(weight_grad) * (grad_out.nbytes + x.nbytes + w.nbytes)
    return OpModel("conv", flops, moved, grad_out.dtype, out_bytes=float(x.nbytes if input_grad else w.nbytes))


def _conv_forward(op_name: str, shapes: OpShapes, conv_output: tuple[int, ...] | None) -> OpModel | None:
    x, w = shapes.tensor(0), shapes.tensor(1)
    dims = conv_output_dims(op_name, shapes, conv_output)
    if x is None or w is None or dims is None:
        return None
    out_numel = math.prod(dims)
    flops = 2.0 * out_numel * math.prod(w.dims[1:])
    out_bytes = float(out_numel * x.itemsize)
    bias = shapes.tensor(2)
    moved = float(x.nbytes + w.nbytes + (bias.nbytes if bias is not None else 0)) + out_bytes
    return OpModel("conv", flops, moved, x.dtype, out_bytes=out_bytes)


def conv_output_dims(
    op_name: str, shapes: OpShapes, conv_output: tuple[int, ...] | None = None
) -> tuple[int, ...] | None:
    """(N, C_out, spatial…) of a forward convolution call from its recorded stride, padding and dilation (or,
    when those are not recorded, `conv_output` where its batch and channels agree); None when unknown or
    transposed. Channels-last tensors have the same logical dims."""
    x, w = shapes.tensor(0), shapes.tensor(1)
    if op_name not in CONV_FORWARD or x is None or w is None or len(x.dims) != len(w.dims) or len(x.dims) < 3:
        return None
    if op_name in ("aten::convolution", "aten::_convolution") and shapes.flag(6):
        return None  # transposed
    stride_at, pad_at, dil_at = CONV_FORWARD[op_name]
    spatial = len(x.dims) - 2
    stride = _int_list(shapes.value(stride_at))
    padding = _int_list(shapes.value(pad_at))
    dilation = _int_list(shapes.value(dil_at))
    if stride is None or padding is None or dilation is None:  # not recorded (no `Concrete Inputs`)
        if conv_output is None or len(conv_output) != len(x.dims) or conv_output[:2] != (x.dims[0], w.dims[0]):
            return None  # output size unknown
        out_spatial = list(conv_output[2:])
    else:
        stride, padding, dilation = (_expand(v, spatial) for v in (stride, padding, dilation))
        out_spatial = [
            (size + 2 * p - d * (k - 1) - 1) // s + 1
            for size, k, s, p, d in zip(x.dims[2:], w.dims[2:], stride, padding, dilation, strict=True)
        ]
    if min(out_spatial) <= 0:
        return None
    return (x.dims[0], w.dims[0], *out_spatial)


# backward ops: the positions of their incoming gradient(s) among their arguments; every other tensor argument is
# one the forward saved (an input or a result of the forward op), which no op of the backward produces
_GRADIENT_FIRST = (
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "hardswish_backward",
    "elu_backward", "leaky_relu_backward", "native_dropout_backward", "_softmax_backward_data",
    "_log_softmax_backward_data", "native_layer_norm_backward", "native_group_norm_backward",
    "native_batch_norm_backward", "_fused_rms_norm_backward", "max_pool2d_with_indices_backward",
    "max_pool3d_with_indices_backward", "avg_pool2d_backward", "avg_pool3d_backward", "nll_loss_backward",
    "nll_loss2d_backward", "embedding_dense_backward", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_cudnn_attention_backward",
)  # fmt: skip
BACKWARD_GRADIENTS: dict[str, tuple[int, ...]] = {
    **{f"aten::{name}": (0,) for name in _GRADIENT_FIRST},
    "aten::cudnn_batch_norm_backward": (1,),  # (input, grad_output, weight, running stats, saved stats, eps, reserve)
    "aten::miopen_batch_norm_backward": (1,),
    **{name: (positions[0],) for name, positions in CONV_BACKWARD.items()},
}


# backward ops that read the forward op's result (autograd saved it), and where: softmax and log_softmax, whose
# results a fuser cannot recompute from the tensors the group reads without each row's max and sum
SAVED_RESULTS: dict[str, tuple[int, frozenset[str]]] = {
    "aten::_softmax_backward_data": (1, frozenset({"aten::_softmax", "aten::softmax"})),
    "aten::_log_softmax_backward_data": (1, frozenset({"aten::_log_softmax", "aten::log_softmax"})),
}
RESULT_SAVED = frozenset().union(*(ops for _, ops in SAVED_RESULTS.values()))


def saved_arguments(op_name: str, shapes: OpShapes) -> tuple[int, ...]:
    """Positions of the tensor arguments of a backward op (`BACKWARD_GRADIENTS`) that are tensors the forward
    saved, not gradients; () for other ops."""
    gradients = BACKWARD_GRADIENTS.get(op_name)
    if gradients is None:
        return ()
    return tuple(i for i, t in enumerate(shapes.args) if t is not None and i not in gradients)


# backward ops whose input gradient has the shape and dtype of one of their (forward) arguments: that position
GRAD_LIKE_INPUT = {
    "aten::nll_loss_backward": 1,
    "aten::nll_loss2d_backward": 1,
    "aten::max_pool2d_with_indices_backward": 1,
    "aten::max_pool3d_with_indices_backward": 1,
    "aten::avg_pool2d_backward": 1,
    "aten::avg_pool3d_backward": 1,
    "aten::adaptive_avg_pool2d_backward": 1,
    "aten::_adaptive_avg_pool2d_backward": 1,
}


# ops whose `out=` buffer the profiler records after their arguments (torch 2.11's index_select runs
# `gather(self, dim, index, sparse_grad, out)`): its position; the buffer is written, not read
OUT_ARGUMENT = {"aten::gather": 4, "aten::index_select": 3}


def op_reads(op_name: str, shapes: OpShapes | None) -> tuple[Tensor, ...]:
    """The tensors an op without a memory-bound model reads: its tensor arguments but a recorded `out=` buffer
    (`OUT_ARGUMENT`)."""
    if shapes is None:
        return ()
    out = OUT_ARGUMENT.get(op_name, -1)
    return tuple(t for i, t in enumerate(shapes.args) if t is not None and i != out)


def op_writes(op_name: str, shapes: OpShapes | None) -> Tensor | None:
    """The tensor an op without a memory-bound model writes, where its recorded arguments determine it (None
    otherwise): a forward convolution's output (`conv_output_dims`); a convolution backward's input gradient
    (the input's shape; the weight's when only that is computed); attention: the output (forward: q's shape
    with v's last dim; backward: q's gradient); `index_select(self, dim, index)`, `embedding(weight, indices)`,
    `gather(self, dim, index)`; the input gradient of the backward ops in `GRAD_LIKE_INPUT`; and, for any op
    updating its first argument in place (`index_add_`, `scatter_add_` …: a name ending in `_`), that argument."""
    if shapes is None or not op_name.startswith("aten::"):
        return None
    first = shapes.tensor(0)
    if op_name in CONV_FORWARD:
        dims = conv_output_dims(op_name, shapes)
        return Tensor(dims, first.dtype, first.itemsize) if dims is not None and first is not None else None
    if op_name in CONV_BACKWARD:
        _, in_at, w_at = CONV_BACKWARD[op_name]
        mask = _bool_list(shapes.concrete[-1]) if shapes.concrete else None
        return shapes.tensor(w_at if mask is not None and not mask[0] else in_at)
    if op_name in ATTENTION_OPS:
        q_at, _, backward = ATTENTION_OPS[op_name]
        q, v = shapes.tensor(q_at), shapes.tensor(q_at + 2)
        if q is None or v is None or not q.dims or not v.dims:
            return None
        return q if backward else Tensor((*q.dims[:-1], v.dims[-1]), q.dtype, q.itemsize)
    if op_name in GRAD_LIKE_INPUT:
        return shapes.tensor(GRAD_LIKE_INPUT[op_name])
    if op_name in OUT_ARGUMENT and shapes.tensor(OUT_ARGUMENT[op_name]) is not None:
        return shapes.tensor(OUT_ARGUMENT[op_name])
    return _gathered(op_name, shapes) or (first if op_name.endswith("_") else None)


def _gathered(op_name: str, shapes: OpShapes) -> Tensor | None:
    """The output of `index_select`, `embedding` and `gather` from their arguments."""
    first = shapes.tensor(0)
    if first is None:
        return None
    if op_name == "aten::embedding":
        indices = shapes.tensor(1)
        return Tensor((*indices.dims, first.dims[-1]), first.dtype, first.itemsize) if indices and first.dims else None
    if op_name not in ("aten::index_select", "aten::gather"):
        return None
    index = shapes.tensor(2)
    axis = _int_list(shapes.value(1))
    if index is None or axis is None or len(axis) != 1 or not -len(first.dims) <= axis[0] < len(first.dims):
        return None
    if op_name == "aten::gather":
        return Tensor(index.dims, first.dtype, first.itemsize)
    dims = list(first.dims)
    dims[axis[0]] = index.numel
    return Tensor(tuple(dims), first.dtype, first.itemsize)


def _expand(values: list[int], count: int) -> list[int]:
    return values * count if len(values) == 1 else values[:count] + [values[-1]] * (count - len(values))


def _int_list(text: str) -> list[int] | None:
    """`"[1, 1]"` → [1, 1]; `"2"` → [2]; None when not a list of ints."""
    text = text.strip()
    if not text:
        return None
    try:
        values = [int(v) for v in text.strip("[]()").split(",") if v.strip()]
    except ValueError:
        return None
    return values or None


def _bool_list(text: str) -> list[bool] | None:
    parts = [p.strip().lower() for p in text.strip().strip("[]()").split(",") if p.strip()]
    if not parts or any(p not in ("true", "false", "1", "0") for p in parts):
        return None
    return [p in ("true", "1") for p in parts]


def _gemm_dims(op_name: str, shapes: OpShapes) -> tuple[int, int, int, int, Tensor] | None:
    """(batch, M, K, N, A) of a GEMM-like op."""
    args = shapes.args
    if op_name in ("aten::mm", "aten::_scaled_mm", "aten::_int_mm"):
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


def _inductor(kernel_name: str, shapes: OpShapes, gemm_out_buffers: tuple[BufferKey, ...]) -> OpModel:
    """Each tensor argument moved once; an in/out first argument (see `_in_place`) read and written."""
    ops = decode_inductor_ops(kernel_name)
    tensors = shapes.tensors
    largest = max(tensors, key=lambda t: t.numel)
    in_place = _in_place(kernel_name, shapes, gemm_out_buffers)
    sizes = _pointwise_reads(kernel_name, shapes)
    moved = float(sum(sizes)) + (sizes[0] if in_place else 0)
    whole = [t.addressed_bytes for t in tensors]
    moved_whole = (float(sum(whole)) + (whole[0] if in_place else 0)) if whole != sizes else 0.0
    flops = float(largest.numel * max(len(ops), 1))
    if kernel_name.startswith("triton_tem_") and {"mm", "addmm", "bmm"} & set(ops):
        flops = _template_gemm_flops(tensors) or flops
    maybe = not in_place and _may_write_first(kernel_name, shapes)
    upper = moved + sizes[0] if maybe else 0.0
    return OpModel(
        "inductor",
        flops,
        moved,
        largest.dtype,
        ops="+".join(ops),
        in_place=in_place,
        bytes_if_in_place=upper,
        bytes_if_whole=moved_whole,
    )


def _may_write_first(kernel_name: str, shapes: OpShapes) -> bool:
    """Whether a `triton_poi_` kernel not judged in place (`_in_place`) might still write its first argument:
    Inductor passes an in/out buffer first (`in_out_ptr0`), and the trace records no argument names, so any
    first argument of `xnumel` elements (the size of what the kernel writes) may be one, besides the kernel's
    other outputs: GPT-2 training's `_to_copy_15(bf16 [2304, 768], fp32 [2304, 768])`, a GEMM `out=` buffer
    before its output (`mul_silu_3(gate, up, out)`), a lone argument (a fill, or an update in place)."""
    if not kernel_name.startswith("triton_poi_") or not shapes.tensors:
        return False
    return _xnumel(shapes) == shapes.tensors[0].numel


def _xnumel(shapes: OpShapes) -> int | None:
    """A pointwise Triton kernel's element count: the product of its integer arguments after the last tensor
    (`xnumel`, or `ynumel, xnumel` of a 2-D tiled kernel), None when there is none."""
    last = max((i for i, t in enumerate(shapes.args) if t is not None), default=-1)
    numels = [int(v) for v in shapes.concrete[last + 1 :] if v.strip().lstrip("-").isdigit()]
    return math.prod(numels) if numels and all(n > 0 for n in numels) else None


def _pointwise_reads(kernel_name: str, shapes: OpShapes) -> list[int]:
    """Bytes each tensor argument moves. A `triton_poi_` kernel touches at most one element of an argument per
    element of each of its outputs (the trailing arguments of `xnumel` elements, `_xnumel`, at least one): an argument
    larger than that (a packed qkv buffer the kernel reads q and k from) is charged only that many elements, not
    the whole buffer. Other kernels: every argument whole."""
    tensors = shapes.tensors
    xnumel = _xnumel(shapes) if kernel_name.startswith("triton_poi_") else None
    if xnumel is None:
        return [t.addressed_bytes for t in tensors]
    outputs = 0
    for t in reversed(tensors):
        if t.numel != xnumel:
            break
        outputs += 1
    most = max(outputs, 1) * xnumel
    return [min(t.addressed, most) * t.itemsize for t in tensors]


def _in_place(kernel_name: str, shapes: OpShapes, gemm_out_buffers: tuple[BufferKey, ...]) -> bool:
    """Whether a pointwise Inductor kernel computes in place. Inductor passes in/out buffers first (`in_out_ptr0`,
    then `in_ptr*`, then `out_ptr*`) and writes the output over an intermediate input of the output's size when it
    can; the trace records no argument names, so the evidence taken is: a `triton_poi_` kernel whose tensor
    arguments all have its element count (`xnumel`, its last integer argument) and are each one of the
    intermediate buffers extern GEMMs wrote through `out=` just before it (one GEMM output per argument): no
    argument is left to be a fresh output, so the first one is read and written. Buffers are compared by element
    count and dtype: Inductor passes a GEMM's `[4096, 5632]` output as the `[2, 2048, 5632]` view it writes
    through (compiled SwiGLU inference). Compiled GeGLU inference:
    `triton_poi_fused_gelu_mul_0(gate_buf, up_buf)` after `mm(x, Wg, out=gate_buf)`, `mm(x, Wu, out=up_buf)`; in
    training the same kernel has a third argument (gate is kept for backward) and is not in place."""
    if not kernel_name.startswith("triton_poi_") or not gemm_out_buffers:
        return False
    numels = [int(v) for v in shapes.concrete if v.strip().lstrip("-").isdigit()]
    tensors = shapes.tensors
    if not numels or not tensors or any(t.numel != numels[-1] for t in tensors):
        return False
    available = [(math.prod(dims), dtype) for dims, dtype in gemm_out_buffers]  # a reshaped view is the buffer
    for t in tensors:
        if (t.numel, t.dtype) not in available:
            return False
        available.remove((t.numel, t.dtype))
    return True


def _template_gemm_flops(tensors: tuple[Tensor, ...]) -> float | None:
    mats = [t for t in tensors if len(t.dims) == 2]
    for a in mats:
        for b in mats:
            if a is not b and a.dims[1] == b.dims[0]:
                return 2.0 * a.dims[0] * a.dims[1] * b.dims[1]
    return None
