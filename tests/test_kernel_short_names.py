"""Kernel short names (docs/categories.md#kernel-categories, "Short names") on every distinct kernel name of the
corpus and `traces/` (the reviewed table of tests/golden/kernel_categories.tsv): a templated kernel's name says
the op its functor runs. The expectations are read off the full names by hand-written substrings (which functor,
which std:: op), not by the implementation's rules."""

from __future__ import annotations

import re
import time

import pytest

from tests.test_categories import reviewed
from tracelens.model.kernel_names import short_name

# (substrings the full name holds, all of them) → the op its short name must give in brackets
EXPECTED = (
    (("GeluBackwardCUDAKernelImpl",), "gelu_backward"),
    (("GeluCUDAKernelImpl",), "gelu"),
    (("tanh_backward_kernel_cuda",), "tanh_backward"),
    (("sigmoid_backward_kernel_cuda",), "sigmoid_backward"),
    (("MaxNanFunctor",), "max"),
    (("FusedAdamMathFunctor",), "adam"),
    (("BinaryOpScalarFunctor<", "std::multiplies"), "mul"),
    (("BinaryOpScalarFunctor<", "std::plus"), "add"),
    (("UnaryOpFunctor<", "at::native::Sqrt<"), "sqrt"),
    (("LerpFunctor",), "lerp"),
    (("CUDAFunctorOnSelf_add",), "add"),
    (("CUDAFunctor_add",), "add"),
    (("sum_functor",), "sum"),
    (("MeanOps",), "mean"),
    (("binary_internal::MulFunctor",), "mul"),
    (("FillFunctor",), "fill"),
    (("nan_to_num_kernel_cuda",), "nan_to_num"),
    (("clamp_min_scalar_kernel_impl",), "clamp_min"),
    (("BinaryOpListAlphaFunctor", "std::plus"), "add"),
    (("masked_scale_kernel",), "masked_scale"),
    (("pow_tensor_scalar_kernel_impl",), "pow"),
    (("bfloat16tofloat32_copy_kernel_cuda",), "copy"),
)
TEMPLATED = ("vectorized_elementwise_kernel", "unrolled_elementwise_kernel", "elementwise_kernel<", "reduce_kernel<",
             "multi_tensor_apply_kernel<")  # fmt: skip
# the words of a functor's shape that once stood for its op: never a short name's op
SHAPE_WORDS = {"scalar", "nan", "math", "op", "list", "backward", "binary", "unary", "pointwise", "alpha"}


def names() -> list[str]:
    return sorted({name for _, _, name in reviewed()})


def test_a_templated_kernel_names_its_functors_op() -> None:
    checked = 0
    for name in names():
        if not any(t in name for t in TEMPLATED):
            continue
        wanted = [op for keys, op in EXPECTED if all(k in name for k in keys)]
        if not wanted:
            continue
        checked += 1
        assert short_name(name).endswith(f"[{wanted[0]}]"), (short_name(name), name[:200])
    assert checked >= 60  # the HF, training and study traces' elementwise, reduction and optimizer kernels


def test_no_short_name_gives_a_functors_shape_for_its_op() -> None:
    for name in names():
        hint = re.search(r"\[([a-z0-9_]+)\]$", short_name(name))
        assert hint is None or hint.group(1) not in SHAPE_WORDS, (short_name(name), name[:200])


def test_distinct_ops_of_one_template_get_distinct_names() -> None:
    """The HF traces ran 12 kernels all named `vectorized_elementwise_kernel`: now every one of its kernels whose
    name holds a functor or kernel function has an op in brackets."""
    for name in names():
        if "vectorized_elementwise_kernel<" in name and re.search(r"Functor|_kernel_cuda|KernelImpl", name):
            assert short_name(name).startswith("vectorized_elementwise_kernel["), name[:200]


@pytest.mark.parametrize("name", ["void ", "::", "a::", "void a::<b>(c)", "kernel<>", "<>", "void <x>"])
def test_a_malformed_name_keeps_its_text(name: str) -> None:
    """No blank cell: a name without an identifier is shown as given (auditor: `::` gave "")."""
    assert short_name(name).strip() and any(ch.isalnum() or ch in ":<>" for ch in short_name(name))


@pytest.mark.parametrize("letters", ["a", "A", "Ab", "a_"])
def test_a_long_name_stays_fast(letters: str) -> None:
    name = "vectorized_elementwise_kernel<" + letters * 100_000 + ">"
    start = time.perf_counter()
    short_name.__wrapped__(name)  # not the cache
    assert time.perf_counter() - start < 1.0
