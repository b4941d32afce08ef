"""Kernel categories and readable short names, from kernel names (and the launch API for Triton)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

CATEGORIES = (
    "gemm",
    "attention",
    "conv",
    "norm",
    "elementwise",
    "reduction",
    "fused",
    "copy",
    "memset",
    "communication",
    "other",
)

# Patterns are lowercase and matched against the lowercased name without its parameter list (the types in
# `(...)` name namespaces such as `fbgemm_gpu::` that say nothing about the kernel); much faster than
# re.IGNORECASE. `gemm` never matches inside `fbgemm`; `norm` never matches `normal` (RNG kernels).
_NORM = (
    r"layer_?norm|ln_fwd|ln_bwd|rms_?norm|batch_?norm|bn_fw|bn_bw|group_?norm|instance_?norm|"
    r"rowwisemoments|gammabetabackward|computefusedparams|norm(?:alization)?_(?:fwd|bwd|forward|backward)"
)
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(
            r"nccl|rccl|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter|alltoall|"
            r"all_to_all|sendrecv|c10d|nvshmem|cross_device_reduce|deep_?ep|dpsk::ep::|"
            r"(?:intranode|internode(?:_ll)?)::(?:dispatch|combine|notify|cached_notify)|notify_dispatch|"
            r"notify_combine",
        ),
    ),
    ("copy", re.compile(r"converttensor|nchwtonhwc|nhwctonchw|nchw2nhwc|nhwc2nchw|nhwcaddpadding|::transpose\b")),
    ("other", re.compile(r"init_device_workspace|workspace_init|clear_workspace")),  # a library's workspace set-up
    ("norm", re.compile(_NORM)),
    (
        "attention",
        re.compile(
            r"flash|fmha|attention|attn|sdpa|sage_?(?:fwd|bwd|attn)|_fwd_kernel|_bwd_kernel|"
            r"cudnn::fusion::(?:compute_dot_do_o|convert_dq)",  # cuDNN SDPA backward's helper kernels
        ),
    ),
    (
        "conv",
        re.compile(
            r"conv(?!ert)|winograd|implicit_gemm|implicitgemm|scudnn|fft|dgrad|wgrad|fprop|cudnn::cnn::|miopen|"
            r"igemm_(?:fwd|bwd|wrw)|im2col|im2d2col|col2im|cask_cudnn::|_cudnn::reduction::kernel::reducesplitk",
        ),
    ),
    (
        "gemm",
        re.compile(
            r"(?<!fb)gemm|gemv|nvjet|cublas|xmma|wgmma|cutlass.*(?:tensorop|sm\d\d)|^cijk_|triton_tem_|"
            r"splitkreduce|matmul|_mm_|bmm_|magma|dot_kernel|hipblaslt|epilogue::impl",
        ),
    ),
    ("fused", re.compile(r"^(?:triton_|fused_|liger|_liger)|_kernel_fused")),
    (
        "elementwise",  # RNG (before `norm` of the reductions) and index-generating kernels (`arange`, before `index`)
        re.compile(r"distribution_|philox|curand|random_|normal_and_transform|uniform_and_transform|_with_index\b"),
    ),
    ("copy", re.compile(r"indexfunc|index_put|scatter_add|index_add")),  # scatters, even with a `ReduceAdd` functor
    (
        "reduction",
        re.compile(
            r"reduce|reduction|softmax|norm(?!al)|welford|argmax|argmin|sum_kernel|cumsum|scan|"
            r"topk|sort|embedding_backward|nll_loss|nllcriterion|cross_entropy|max_?pool|avg_?pool|adaptive_\w*pool",
        ),
    ),
    (
        "copy",
        re.compile(r"copy|transpose|cat_|catarray|gather|scatter|index|memcpy|permute|pad_|embedding\w*forward"),
    ),
    (
        "elementwise",
        re.compile(
            r"elementwise|unrolled|vectorized|pointwise|fill|foreach|activation|"
            r"gelu|silu|relu|swiglu|geglu|dropout|where|clamp|add|mul|div|exp|scale|scal_kernel|cast|subtensorop",
        ),
    ),
)

_LIBRARY_RULES = 7  # communication, layout copies, workspaces, norm, attention, conv, gemm: whatever the launch API
# Triton's launchers; `hipExtModuleLaunchKernel` is not one of them (MIOpen and hipBLASLt/Tensile kernels use it)
_TRITON_LAUNCHES = ("cuLaunchKernel", "cuLaunchKernelEx", "hipModuleLaunchKernel")
_PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# the kernels Inductor generates: `triton_<kind>_<fused name>_<n>` (`triton_poi_fused_gelu_mul_0`,
# `triton_red_fused_…`, `triton_tem_fused_mm_…`), the fused name empty where `config.triton.descriptive_names` is
# off (`triton_poi__3`); a hand-written Triton kernel (Liger's `_geglu_tanh_forward_kernel`) is named by its author
INDUCTOR_KERNEL = re.compile(r"^triton_[a-z]+_(?:fused_|_\d+$)")


def is_inductor_kernel(name: str) -> bool:
    """Whether `name` is a kernel Inductor (torch.compile) generated (`INDUCTOR_KERNEL`)."""
    return INDUCTOR_KERNEL.match(name) is not None


def inductor_calls_per_step(rows: Iterable[tuple[str, int]], steps: int) -> float | None:
    """Calls per step of the kernels Inductor generated, from kernel rows' (name, calls) over `steps` steps
    (rounded to 3 decimals); None without a step."""
    if steps <= 0:
        return None
    return round(sum(calls for name, calls in rows if is_inductor_kernel(name)) / steps, 3)


@lru_cache(maxsize=65536)
def categorize(name: str, launch_api: str = "") -> str:
    """Category of a kernel. Library kernels (cuBLAS, cuDNN, NCCL, flash, normalization) are named by what they
    do even when launched through the driver API; other plain-named kernels launched that way are Triton:
    `fused`. The reviewed table of every kernel of the corpus is tests/golden/kernel_categories.tsv."""
    if name.startswith(("Memcpy", "Memset")):
        return "copy" if name.startswith("Memcpy") else "memset"
    if name.startswith("triton_") and not name.startswith("triton_tem_"):
        return "fused"
    lowered = _without_parameters(name).lower()
    for category, pattern in _RULES[:_LIBRARY_RULES]:
        if pattern.search(lowered):
            return category
    if _is_triton(name, launch_api):
        return "fused"
    for category, pattern in _RULES[_LIBRARY_RULES:]:
        if pattern.search(lowered):
            return category
    return "other"


def _without_parameters(name: str) -> str:
    """`void f<T>(int, fbgemm_gpu::X)` → `void f<T>`: the name up to its top-level parameter list."""
    name = name.replace("(anonymous namespace)", "anonymous_namespace")
    depth = 0
    for position, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(depth - 1, 0)
        elif char == "(" and depth == 0 and position > 0 and not name[:position].endswith("operator"):
            return name[:position]
    return name


def _is_triton(name: str, launch_api: str) -> bool:
    if name.startswith("triton_") and not name.startswith("triton_tem_"):
        return True
    return launch_api in _TRITON_LAUNCHES and bool(_PLAIN_IDENTIFIER.match(name)) and "gemm" not in name.lower()


# The op a templated kernel runs, from the functor or kernel function in its template arguments. Each candidate
# starts only where an identifier starts (the lookbehind), so that a 200k-letter name stays linear: a CamelCase
# name ending in Functor / CUDAKernelImpl / KernelImpl / Kernel / Ops (`GeluBackwardCUDAKernelImpl`,
# `MaxNanFunctor`, `MeanOps`) or a snake_case one ending in _kernel_cuda / _kernel_impl / _kernel / _functor
# (`tanh_backward_kernel_cuda`, `sum_functor`)
_OP_HINT = re.compile(
    r"(?<![A-Za-z0-9_])(?:(?P<camel>[A-Z][A-Za-z0-9]*?)(?:CUDAKernelImpl|KernelImpl|Kernel|Functor|Ops)"
    r"|(?P<snake>[a-z][a-z0-9_]*?)_(?:kernel_cuda|kernel_impl|kernel|functor))\b"
)
_CAMEL_WORD = re.compile(r"[A-Z][a-z0-9]*")
_BASE_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# words that name where or how a kernel runs, not its op; a snake_case kernel function's are trimmed from
# either end with dtype words (`pow_tensor_scalar` → pow, `bfloat16tofloat32_copy` → copy, `random_from_to` →
# random; `nan_to_num`, `clamp_min`, `masked_scale` stay whole)
_SNAKE_TRIM = frozenset(
    ("kernel", "impl", "cuda", "tensor", "scalar", "direct", "nocast", "gpu", "vectorized", "out", "from", "to")
)
# and the words that name a functor's shape (`BinaryOpScalarFunctor`, `FusedAdamMathFunctor`, `MaxNanFunctor`):
# a CamelCase functor's words less all of these name its op
_GENERIC_WORDS = _SNAKE_TRIM | {
    "binary", "unary", "ternary", "pointwise", "op", "ops", "list", "math", "nan", "fused", "compare", "opmath",
    "reduce", "func", "load", "store", "aligned", "alpha",
}  # fmt: skip
_DTYPE_WORD = re.compile(r"(?:b?float\d*|half|double|u?int\d*|bool)(?:to(?:b?float\d*|half|double|u?int\d*))?")
# when no functor names the op: the standard library's (`BinaryOpScalarFunctor<…>, std::multiplies<float>`), a
# CUDAFunctor's suffix (`CUDAFunctorOnSelf_add`), an op class of at::native (`UnaryOpFunctor<…>, at::native::Sqrt`)
_STD_OPS = {"multiplies": "mul", "plus": "add", "minus": "sub", "divides": "div"}
_FALLBACK_HINT = re.compile(
    r"std::(multiplies|plus|minus|divides)\b|CUDAFunctor(?:OnSelf|OnOther)?_([a-z]+)|at::native::([A-Z][a-z]+)<"
)
_GENERIC_BASES = {"kernel", "kernel2", "device_kernel", "kernel_entry", "global_kernel"}


@lru_cache(maxsize=65536)
def short_name(name: str, max_len: int = 60) -> str:
    """`void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl...>(...)` →
    `vectorized_elementwise_kernel[gelu]`; plain names pass through (cut to `max_len`)."""
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    if text.startswith(("Memcpy", "Memset")):
        return text
    base = _base_identifier(text)
    if base.lower() in _GENERIC_BASES:
        inner = _base_identifier(text[text.find("<") + 1 :]) if "<" in text else ""
        base = inner or base
    at = text.find(base)
    hint = _hint(text[at + len(base) :] if at >= 0 else text)  # the arguments after the kernel's own name
    if not any(ch.isalnum() for ch in base):  # no identifier found (`::`, `kernel<>`): the name as given
        base, hint = (text or name).strip() or name, ""
    label = f"{base}[{hint}]" if hint and not _names(base, hint) else base
    return label if len(label) <= max_len else label[: max_len - 1] + "…"


def _base_identifier(text: str) -> str:
    depth, cut = 0, len(text)
    for position, char in enumerate(text):
        if char in "<(,>" and depth == 0:
            cut = position
            break
    head = text[:cut].strip()
    return head.rsplit("::", 1)[-1] if head else text


def _names(base: str, hint: str) -> bool:
    """Whether the kernel's own name already says the op (`relu_kernel`, `DeviceScanKernel` for `scan`)."""
    words = {w.lower() for w in _BASE_WORD.findall(base)}
    return all(word in words for word in hint.split("_"))


def _hint(rest: str) -> str:
    """The op a templated kernel's arguments name (`gelu_backward`, `max`, `adam`, `mul`), or ""."""
    for match in _OP_HINT.finditer(rest):
        camel, snake = match.group("camel"), match.group("snake")
        if snake:
            words = _trimmed(snake.split("_"))
            if words:
                return "_".join(words)
            continue
        all_words = [w.lower() for w in _CAMEL_WORD.findall(camel)]
        words = [w for w in all_words if len(w) > 1 and w not in _GENERIC_WORDS]
        if words:
            return "_".join(words)
        if all_words == ["compare"]:  # `CompareFunctor`: eq, ne, lt … chosen at run time
            return "compare"
    for match in _FALLBACK_HINT.finditer(rest):
        std, suffix, op_class = match.groups()
        word = _STD_OPS[std] if std else suffix or op_class.lower()
        if word not in _GENERIC_WORDS:
            return word
    return ""


def _trimmed(words: list[str]) -> list[str]:
    """A snake_case name's words less the `_SNAKE_TRIM` ones at either end (empty words dropped)."""
    words = [w for w in words if w]
    while words and (words[-1] in _SNAKE_TRIM or _DTYPE_WORD.fullmatch(words[-1])):
        words.pop()
    while words and (words[0] in _SNAKE_TRIM or _DTYPE_WORD.fullmatch(words[0])):
        words.pop(0)
    return words
