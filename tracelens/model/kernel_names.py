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


# a lowercase word starts only where a run of lowercase letters starts (the lookbehind): every later start in
# the same run would meet the same continuation, and trying them all made a 200k-letter name quadratic
_OP_HINT = re.compile(
    r"(?:CUDAFunctor_|CUDAFunctorOnSelf_|CUDAFunctorOnOther_|binary_internal::)?([A-Z][a-z]+|(?<![a-z])[a-z]+)"
    r"(?:Functor|CUDAKernelImpl|_kernel_cuda|Kernel(?:Impl)?)\b"
)
_GENERIC_BASES = {"kernel", "kernel2", "device_kernel", "kernel_entry", "global_kernel"}
_SKIP_HINTS = {"Binary", "Unary", "Compare", "Opmath", "Reduce", "Func", "Load", "Store", "Aligned"}


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
    hint = _hint(text[len(base) :] if text.startswith(base) else text)
    label = f"{base}[{hint}]" if hint and hint.lower() not in base.lower() else base
    return label if len(label) <= max_len else label[: max_len - 1] + "…"


def _base_identifier(text: str) -> str:
    depth, cut = 0, len(text)
    for position, char in enumerate(text):
        if char in "<(,>" and depth == 0:
            cut = position
            break
    head = text[:cut].strip()
    return head.rsplit("::", 1)[-1] if head else text


def _hint(rest: str) -> str:
    for match in _OP_HINT.finditer(rest):
        word = match.group(1)
        if word not in _SKIP_HINTS:
            return word.lower()
    return ""
