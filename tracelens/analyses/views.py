"""Views recorded as ops: the tensor a view op reads and the view it returns, by (dims, dtype) keys.

Contract: `view_ops(trace, window, code) -> Views` (`code` maps a (dims, dtype) key to an integer code, the
fusion analysis' `_Codes.code`); `Views.connects(track, src, dst, after_ns, before_ns)` says, per query, whether
a view op on thread `track` that started strictly between `after_ns` and `before_ns` read a tensor of key `src`
and returned one of key `dst`. Pure; vectorised over queries.

A view op is one of `VIEW_OPS`. `transpose`, `t`, `permute`, `slice`, `narrow`, `select`, `unsqueeze`,
`squeeze`, `expand`, `diagonal` … record an `aten::as_strided` child, and `view`, `_unsafe_view`, `reshape`
and `expand` record their own sizes, so these ops give every recorded view: the input is the op's first argument
(its `Input Dims` and `Input type`), the view has the dims of its `size` argument (`Concrete Inputs` position 1;
-1 in `view`/`reshape`: the size that keeps the element count; in `expand`: the input's size) and the input's
dtype. A trace without `Concrete Inputs` has no views.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec
import numpy as np

from tracelens.analyses.shapes import named_signatures, op_shapes
from tracelens.analyses.window import Window
from tracelens.model.events import I64, Kind
from tracelens.model.trace import Trace

VIEW_OPS = (
    "aten::as_strided",
    "aten::view",
    "aten::_unsafe_view",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::expand",
)
# ops that only return a view or an alias of their input (or nothing new): in an execution trace they "read" a
# tensor that the op reading the view reads
VIEW_LIKE = frozenset(
    {
        *VIEW_OPS,
        *(
            f"aten::{name}"
            for name in (
                "transpose", "t", "permute", "slice", "select", "narrow", "unsqueeze", "squeeze", "split",
                "split_with_sizes", "chunk", "unbind", "detach", "alias", "flatten", "unflatten", "view_as",
                "expand_as", "reshape_as", "contiguous", "to", "_to_copy", "lift_fresh",
            )
        ),
    }
)  # fmt: skip
Key = tuple[tuple[int, ...], str]


class Views(msgspec.Struct, frozen=True):
    """View ops sorted by (combined key, start): `combined` = rank of (track, src code, dst code) among `keys`
    × (n + 1) + rank of the start among `starts`."""

    keys: I64  # sorted distinct (track, src, dst) composites
    combined: I64  # sorted
    starts: I64  # sorted start times of the view ops, ns
    width: int  # codes are below this (composites are (track × width + src) × width + dst)
    sources: np.ndarray  # bool per code: some view op reads a tensor of it
    targets: np.ndarray  # bool per code: some view op returns a tensor of it

    def connects(self, track: I64, src: I64, dst: I64, after_ns: I64, before_ns: I64) -> np.ndarray:
        """Per query: a view op of key src → dst on `track` started in (after_ns, before_ns)."""
        found = np.zeros(track.size, dtype=bool)
        if self.keys.size == 0:
            return found
        usable = (src >= 0) & (dst >= 0) & (src < self.width) & (dst < self.width) & (track >= 0)
        usable[usable] = self.sources[src[usable]] & self.targets[dst[usable]]  # codes some view op has
        query = np.flatnonzero(usable)
        if query.size == 0:
            return found
        composite = (track[query] * self.width + src[query]) * self.width + dst[query]
        at = np.minimum(np.searchsorted(self.keys, composite), self.keys.size - 1)
        keyed = self.keys[at] == composite
        first = np.searchsorted(self.starts, after_ns[query], side="right")  # first view op after after_ns
        last = np.searchsorted(self.starts, before_ns[query], side="left") - 1  # last one before before_ns
        base = at * (self.starts.size + 1)
        index = np.minimum(np.searchsorted(self.combined, base + first), self.combined.size - 1)
        hit = (self.combined[index] >= base + first) & (self.combined[index] <= base + last) & (first <= last)
        found[query] = keyed & hit
        return found


def view_ops(trace: Trace, window: Window, code: Callable[[Key], int]) -> Views:
    """The window's view ops whose input and view are known (see the module docstring)."""
    ev = trace.events
    is_view = np.asarray([name in VIEW_OPS for name in ev.names], dtype=bool)
    rows = np.flatnonzero(window.in_window & (ev.kind == Kind.CPU_OP) & is_view[ev.name])
    signature, first = named_signatures(ev, rows)
    src = np.full(first.size, -1, dtype=np.int64)
    dst = np.full(first.size, -1, dtype=np.int64)
    for index, row in enumerate(rows[first].tolist()):
        keys = _view_keys(ev.names[int(ev.name[row])], trace, row)
        if keys is not None:
            src[index], dst[index] = code(keys[0]), code(keys[1])
    known = signature >= 0
    known[known] = src[signature[known]] >= 0
    rows, signature = rows[known], signature[known]
    width = max(int(dst.max(initial=-1)), int(src.max(initial=-1))) + 1
    track = ev.track[rows].astype(np.int64)
    composite = (track * width + src[signature]) * width + dst[signature]
    keys, rank = np.unique(composite, return_inverse=True)
    starts = np.sort(ev.ts_ns[rows])
    start_rank = np.searchsorted(starts, ev.ts_ns[rows])
    combined = np.sort(rank.astype(np.int64) * (starts.size + 1) + start_rank)
    sources, targets = np.zeros(width, dtype=bool), np.zeros(width, dtype=bool)
    sources[src[signature]], targets[dst[signature]] = True, True
    return Views(keys.astype(np.int64), combined, starts.astype(np.int64), width, sources, targets)


def _view_keys(name: str, trace: Trace, row: int) -> tuple[Key, Key] | None:
    """(input key, view key) of the view op at `row`, None when not recorded."""
    shapes = op_shapes(trace.events, row)
    if shapes is None or not shapes.args or shapes.args[0] is None or len(shapes.concrete) < 2:
        return None
    source = shapes.args[0]
    size = _size_list(shapes.concrete[1])
    if size is None:
        return None
    if name == "aten::expand":
        offset = len(size) - len(source.dims)
        if offset < 0:
            return None
        size = [source.dims[axis - offset] if s == -1 and axis >= offset else s for axis, s in enumerate(size)]
    elif size.count(-1) == 1 and name != "aten::as_strided":
        known = math.prod(s for s in size if s != -1)
        if known <= 0 or source.numel % known:
            return None
        size = [source.numel // known if s == -1 else s for s in size]
    if any(s < 0 for s in size) or (
        name not in ("aten::expand", "aten::as_strided") and math.prod(size) != source.numel
    ):
        return None
    if name == "aten::as_strided" and not _within(size, shapes.concrete, source.numel):
        return None
    return (source.dims, source.dtype), (tuple(size), source.dtype)


def _within(size: list[int], concrete: tuple[str, ...], numel: int) -> bool:
    """Whether an `as_strided(input, size, stride, offset)` view addresses only the input's own `numel`
    elements (from offset 0). A tensor an op wrote into fresh memory holds exactly its own elements, so a view
    of it is within them; a view that reaches further is a view of a larger storage (a slice of a slice of a
    fused projection's output, say), not of a tensor of the input's key that an op produced."""
    stride = _size_list(concrete[2]) if len(concrete) > 2 else None
    if stride is None or len(stride) != len(size):
        return False
    offset_text = concrete[3].strip() if len(concrete) > 3 else ""
    offset = int(offset_text) if offset_text.lstrip("-").isdigit() else 0
    if 0 in size:
        return True
    last = offset + sum((s - 1) * abs(step) for s, step in zip(size, stride, strict=True))
    return offset >= 0 and last < numel


def _size_list(text: str) -> list[int] | None:
    """`"[2, 16, 2048, 64]"` → the ints; None when the value is not a list of ints."""
    text = text.strip()
    if not text.startswith("["):
        return None
    try:
        values = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if not isinstance(values, list) or not all(type(v) is int for v in values):
        return None
    return values
