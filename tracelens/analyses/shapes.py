"""Op shapes from `Input Dims` / `Input type` / `Concrete Inputs` / `Input Strides` (raw JSON bytes in the event
table).

Contract: `op_shapes(events, row) -> OpShapes | None`, decoded once per distinct byte string (cached), so
callers can map it over the few distinct signatures of a trace rather than over every event.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

import msgspec
import numpy as np

from tracelens.analyses.keygroups import first_seen_groups
from tracelens.model.events import I64, EventTable

# `Input type` strings (c10 type names as torch prints them) → element size in bytes and a short dtype label.
DTYPES: dict[str, tuple[int, str]] = {
    "float": (4, "fp32"),
    "double": (8, "fp64"),
    "c10::BFloat16": (2, "bf16"),
    "c10::Half": (2, "fp16"),
    "c10::Float8_e4m3fn": (1, "fp8"),
    "c10::Float8_e5m2": (1, "fp8"),
    "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"),
    "c10::Float8_e8m0fnu": (1, "fp8"),
    "signed char": (1, "int8"),
    "unsigned char": (1, "uint8"),
    "bool": (1, "bool"),
    "short int": (2, "int16"),
    "int": (4, "int32"),
    "long int": (8, "int64"),
    "long": (8, "int64"),
    "int64_t": (8, "int64"),
    "c10::complex<float>": (8, "complex64"),
    "c10::complex<double>": (16, "complex128"),
}


class Tensor(msgspec.Struct, frozen=True):
    dims: tuple[int, ...]
    dtype: str  # short label: bf16, fp32, ...
    itemsize: int
    strides: tuple[int, ...] | None = None  # recorded `Input Strides` (in elements); None: not recorded

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def addressed(self) -> int:
        """Distinct elements the view addresses (docs/roofline.md, "Bytes of a tensor argument"): the product of
        the sizes of its dimensions of non-zero stride (a stride-0 dimension, from `expand` or broadcasting, is
        one element), at most its span 1 + Σ (size − 1)·|stride| (a view overlapping itself); `numel` when no
        strides are recorded (a dense tensor) or they do not fit the dims."""
        strides = self.strides
        if strides is None or len(strides) != len(self.dims) or any(d < 0 for d in self.dims):
            return self.numel
        if 0 in self.dims:
            return 0
        used = [(d, abs(s)) for d, s in zip(self.dims, strides, strict=True) if d > 1 and s != 0]
        return min(math.prod(d for d, _ in used), 1 + sum((d - 1) * s for d, s in used))

    @property
    def addressed_bytes(self) -> int:
        return self.addressed * self.itemsize


class OpShapes(msgspec.Struct, frozen=True):
    """Positional arguments of one op call: tensor (or None) per position, and the concrete values."""

    args: tuple[Tensor | None, ...]
    concrete: tuple[str, ...]
    lists: tuple[tuple[tuple[int, ...], ...] | None, ...] = ()  # per argument: a `TensorList`'s dims (no dtype)

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.args if t is not None)

    def tensor(self, position: int) -> Tensor | None:
        return self.args[position] if position < len(self.args) else None

    def value(self, position: int) -> str:
        return self.concrete[position] if position < len(self.concrete) else ""

    def flag(self, position: int) -> bool:
        return self.value(position).strip().lower() in ("true", "1")


def op_shapes(events: EventTable, row: int) -> OpShapes | None:
    """Shapes of the op at `row`, or None when the trace has no `Input Dims` for it."""
    dims, types = events.input_dims[row], events.input_types[row]
    if dims is None or types is None:
        return None
    concrete, strides = events.concrete_inputs[row], events.input_strides[row]
    return decode_shapes(bytes(dims), bytes(types), bytes(concrete or b"[]"), strides_raw=bytes(strides or b"[]"))


def signature_codes(events: EventTable, rows: np.ndarray, dims_only: bool = False) -> tuple[I64, I64]:
    """Codes of the ops at `rows` (-1 = no op) by their raw shapes: equal `Input Dims`, `Input type`,
    `Concrete Inputs` and `Input Strides` bytes (with `dims_only`: equal `Input Dims`) give equal codes, numbered
    in order of first appearance; -1 where the op has no `Input Dims` (or, unless `dims_only`, no `Input type`):
    there `op_shapes` is None. Returns (code per row, position in `rows` of the first row of each code). Decode
    once per code, not per row."""
    rows = np.asarray(rows, dtype=np.int64)
    present = np.flatnonzero(rows >= 0)
    present = present[np.flatnonzero(events.input_dims[rows[present]])]  # raw JSON is never empty: None is false
    if dims_only:
        keys: list[object] = events.input_dims[rows[present]].tolist()
    else:
        present = present[np.flatnonzero(events.input_types[rows[present]])]
        picked = rows[present]
        keys = list(
            zip(
                events.input_dims[picked].tolist(),
                events.input_types[picked].tolist(),
                events.concrete_inputs[picked].tolist(),
                events.input_strides[picked].tolist(),
                strict=True,
            )
        )
    seen: dict[object, int] = {}
    found = [seen.setdefault(key, len(seen)) for key in keys]
    codes = np.full(rows.size, -1, dtype=np.int64)
    codes[present] = found
    first = np.unique(np.asarray(found, dtype=np.int64), return_index=True)[1]
    return codes, present[first].astype(np.int64)


def named_signatures(events: EventTable, rows: np.ndarray) -> tuple[I64, I64]:
    """`signature_codes`, told apart by op name as well: two ops called with the same arguments (`fill_(x, 0)`
    and `add(x, 0)`) read and write different tensors, so whatever is decoded per code depends on the name.
    Returns (code per row, -1 where the op has no shapes; position in `rows` of the first row of each code)."""
    rows = np.asarray(rows, dtype=np.int64)
    signature, _ = signature_codes(events, rows)
    has = np.flatnonzero(signature >= 0)
    codes = np.full(rows.size, -1, dtype=np.int64)
    if has.size == 0:
        return codes, np.zeros(0, dtype=np.int64)
    group, first = first_seen_groups(signature[has], events.name[rows[has]].astype(np.int64))
    codes[has] = group
    return codes, has[first]


@lru_cache(maxsize=32768)
def decode_shapes(
    dims_raw: bytes, types_raw: bytes, concrete_raw: bytes, dims_only: bool = False, strides_raw: bytes = b"[]"
) -> OpShapes | None:
    """Decode the raw args; with `dims_only`, every list of ints counts as a tensor (dtype unknown). A tensor's
    strides are kept where `Input Strides` has a list of ints of its rank at its position (undecodable strides
    are dropped, not an error: the tensor is then taken to be dense)."""
    if dims_only:
        try:
            dims = _loads(dims_raw)
        except ValueError:
            return None
        return OpShapes(tuple(_tensor(d, "float") for d in dims) if isinstance(dims, list) else (), ())
    try:
        dims, types, concrete = _loads(dims_raw), _loads(types_raw), _loads(concrete_raw)
    except ValueError:
        return None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    strides = _strides(strides_raw, len(dims))
    args = tuple(_tensor(d, t, s) for d, t, s in zip(dims, types, strides, strict=False))
    values = tuple(str(v) for v in concrete) if isinstance(concrete, list) else ()
    lists = tuple(_tensor_list(d, t) for d, t in zip(dims, types, strict=False))
    return OpShapes(args, values, lists if any(x is not None for x in lists) else ())


def _loads(raw: bytes) -> object:
    """`json.loads(raw)`, through msgspec's faster decoder when it takes the text (it takes a subset of what
    json takes, NaN and a UTF-8 BOM for instance not, and decodes that subset to the same values)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


def _strides(raw: bytes, count: int) -> list[object]:
    """The `Input Strides` entry of each of `count` arguments (None where absent or undecodable)."""
    try:
        decoded = _loads(raw)
    except ValueError:
        decoded = None
    listed = decoded if isinstance(decoded, list) else []
    return [*listed[:count], *[None] * (count - len(listed))]


def _tensor(dims: object, type_name: object, strides: object = None) -> Tensor | None:
    if type(type_name) is not str or type_name not in DTYPES or type(dims) is not list:
        return None
    if not all(type(d) is int for d in dims):  # decoded JSON: exactly int (bool is not)
        return None
    itemsize, label = DTYPES[type_name]
    kept = None
    if type(strides) is list and len(strides) == len(dims) and all(type(s) is int for s in strides):
        kept = tuple(strides)
    return Tensor(tuple(dims), label, itemsize, kept)


def _tensor_list(dims: object, type_name: object) -> tuple[tuple[int, ...], ...] | None:
    """The dims of a `TensorList` argument (the profiler records no dtype for it), None for anything else."""
    if type_name != "TensorList" or type(dims) is not list:
        return None
    if not all(type(d) is list and all(type(v) is int for v in d) for d in dims):
        return None
    return tuple(tuple(d) for d in dims)


def broadcast_numel(tensors: tuple[Tensor, ...]) -> int:
    """Element count of the broadcast of `tensors` (the output of an elementwise op); 0 if none."""
    if not tensors:
        return 0
    rank = max(len(t.dims) for t in tensors)
    out = [1] * rank
    for t in tensors:
        for axis, size in enumerate(t.dims, start=rank - len(t.dims)):
            out[axis] = max(out[axis], size) if size != 1 else out[axis]
    return math.prod(out)
