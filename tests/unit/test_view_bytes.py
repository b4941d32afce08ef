"""`Tensor.addressed` (docs/roofline.md, "Bytes of a tensor argument") against a brute-force count of the distinct
offsets a view addresses, and against the independent walk in tests/independent/view_bytes.py; odd `Input Strides`
leave a tensor dense."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from tests.independent import view_bytes
from tracelens.analyses.shapes import Tensor, decode_shapes


def _distinct_offsets(dims: tuple[int, ...], strides: tuple[int, ...]) -> int:
    indexes = itertools.product(*map(range, dims))
    return len({sum(i * s for i, s in zip(index, strides, strict=True)) for index in indexes})


VIEWS = [
    ((4, 6), (6, 1)),  # contiguous
    ((4, 3), (6, 1)),  # a slice of the columns of a [4, 6] buffer
    ((4, 3), (1, 4)),  # transposed
    ((2, 5, 3), (15, 0, 1)),  # expand
    ((3, 4), (0, 0)),  # a scalar broadcast
    ((5, 3), (1, 1)),  # unfold(0, 3, 1): overlapping windows, dense span
    ((1, 7), (99, 2)),  # every other element, a size-1 dimension with any stride
    ((0, 3), (3, 1)),  # empty
    ((), ()),  # 0-d
]


@pytest.mark.parametrize(("dims", "strides"), VIEWS)
def test_addressed_counts_distinct_offsets(dims: tuple[int, ...], strides: tuple[int, ...]) -> None:
    tensor = Tensor(dims, "fp32", 4, strides)
    assert tensor.addressed == _distinct_offsets(dims, strides) == view_bytes.addressed(list(dims), list(strides))
    assert tensor.addressed_bytes == 4 * tensor.addressed


def test_addressed_is_exact_without_self_overlap_and_a_bound_with_it() -> None:
    """On random views (sizes 1-4, strides 0-12 over 1-3 dims): exact whenever the view does not overlap itself
    (distinct offsets = product of the non-zero-stride sizes), never below the true count otherwise."""
    rng = random.Random(27)
    for _ in range(400):
        rank = rng.randint(1, 3)
        dims = tuple(rng.randint(1, 4) for _ in range(rank))
        strides = tuple(rng.randint(0, 12) for _ in range(rank))
        tensor, truth = Tensor(dims, "bf16", 2, strides), _distinct_offsets(dims, strides)
        product = math.prod(d for d, s in zip(dims, strides, strict=True) if s)
        assert tensor.addressed >= truth
        if truth == product:
            assert tensor.addressed == truth, (dims, strides)


def test_views_decode_from_input_strides_and_odd_strides_leave_a_tensor_dense() -> None:
    shapes = decode_shapes(
        b"[[2, 2048, 2048], [], [4, 3], [4, 3]]",
        b'["float", "Scalar", "float", "float"]',
        b'["", "2048", "", ""]',
        strides_raw=b'[[2048, 1, 0], [], ["x", 1], [1]]',
    )
    assert shapes is not None
    expanded, odd, short = shapes.tensors
    assert expanded.strides == (2048, 1, 0) and expanded.addressed == 4096 and expanded.numel == 8388608
    assert odd.strides is None and short.strides is None and odd.addressed == short.addressed == 12
    for raw in (b"", b"{", b"null", b'"[]"', b"[1, 2]"):
        decoded = decode_shapes(b"[[4, 3]]", b'["float"]', b"[]", strides_raw=raw)
        assert decoded is not None and decoded.tensors[0].addressed == 12
