"""Independent bytes of memory-bound op calls from the raw trace JSON (stdlib only, never imports tracelens), by
the definition in docs/roofline.md ("Bytes of a tensor argument"): a tensor argument moves the elements its view
addresses — from its `Input Dims` and `Input Strides`, a dimension of stride 0 (expand, broadcast) once — each
input read once and the output written once.

`addressed(dims, strides)` counts distinct offsets by walking the dimensions from the smallest stride up: while
each next stride reaches past everything addressed so far, the count multiplies; a dimension that overlaps what
is already addressed adds at most the offsets up to its reach.
`call_bytes(name, dims, strides, types)` gives the bytes of one call of the pointwise and copy ops the tests
check (None for others).
"""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

ITEMSIZE = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "int": 4, "bool": 1}
BINARY = {"aten::add", "aten::sub", "aten::mul", "aten::div"}
UNARY = {"aten::neg", "aten::exp", "aten::silu", "aten::rsqrt"}
COPY_OUT = {"aten::copy_"}  # copy_(dst, src): the source read, the destination written, nothing else


def addressed(dims: list[int], strides: list[int] | None) -> int:
    """Distinct elements a view of `dims` with `strides` (elements) addresses; dense when `strides` is None."""
    if strides is None or len(strides) != len(dims):
        return math.prod(dims)
    if any(size == 0 for size in dims):
        return 0
    count, reach = 1, 1  # distinct offsets so far, and one past the largest of them
    for stride, size in sorted((abs(s), d) for d, s in zip(dims, strides, strict=True) if d > 1 and s != 0):
        if stride >= reach:
            count *= size
        else:  # overlaps: at most every offset up to the new reach
            count = min(count * size, (size - 1) * stride + reach)
        reach += (size - 1) * stride
    return count


def _tensors(args: dict[str, Any]) -> list[tuple[list[int], list[int] | None, int] | None]:
    """(dims, strides, itemsize) per argument position, None where it is no tensor of a known dtype."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    strides = args.get("Input Strides") or []
    out: list[tuple[list[int], list[int] | None, int] | None] = []
    for i, (d, t) in enumerate(zip(dims, types, strict=False)):
        if t in ITEMSIZE and isinstance(d, list):
            s = strides[i] if i < len(strides) and isinstance(strides[i], list) else None
            out.append((d, s, ITEMSIZE[t]))
        else:
            out.append(None)
    return out


def call_bytes(name: str, args: dict[str, Any]) -> int | None:
    """Bytes one call of `name` moves: its tensor inputs as addressed, the output (the broadcast of the inputs,
    in the first input's dtype) written; `copy_`: source and destination as addressed."""
    tensors = _tensors(args)
    if name in COPY_OUT:
        if len(tensors) < 2 or tensors[0] is None or tensors[1] is None:
            return None
        return sum(addressed(d, s) * size for d, s, size in tensors[:2])  # type: ignore[misc]
    arity = 2 if name in BINARY else 1 if name in UNARY else 0
    inputs = [t for t in tensors[:arity] if t is not None]
    if not inputs or tensors[0] is None:
        return None
    rank = max(len(d) for d, _, _ in inputs)
    out = [1] * rank
    for d, _, _ in inputs:
        for axis, size in enumerate(d, start=rank - len(d)):
            out[axis] = max(out[axis], size)
    return sum(addressed(d, s) * size for d, s, size in inputs) + math.prod(out) * tensors[0][2]


def has_stride_zero(args: dict[str, Any]) -> bool:
    """Whether a tensor argument has a dimension of size > 1 and stride 0 (its dense count is too large)."""
    return any(
        t is not None and t[1] is not None and any(d > 1 and s == 0 for d, s in zip(t[0], t[1], strict=False))
        for t in _tensors(args)
    )


def signature(name: str, args: dict[str, Any]) -> str:
    keys = ("Input Dims", "Input Strides", "Input type", "Concrete Inputs")
    return json.dumps([name, *(args.get(k) for k in keys)])


def expected_by_signature(path: str, names: set[str]) -> dict[str, tuple[int, int, bool]]:
    """signature → (bytes by the definition, bytes counting every element, whether a stride-0 view is among the
    arguments) of every cpu_op call of `names` in the trace."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        document = json.load(f)
    events = document["traceEvents"] if isinstance(document, dict) else document
    found: dict[str, tuple[int, int, bool]] = {}
    for event in events:
        name = event.get("name")
        if event.get("cat") != "cpu_op" or name not in names:
            continue
        args = event.get("args") or {}
        moved = call_bytes(name, args)
        if moved is None:
            continue
        dense_args = dict(args, **{"Input Strides": None})
        dense = call_bytes(name, dense_args)
        found[signature(name, args)] = (moved, dense if dense is not None else moved, has_stride_zero(args))
    return found
