"""The columnar event table: one row per complete (`ph: "X"`) event, numpy columns, no per-event objects.

Times are integer nanoseconds relative to the trace's earliest event (`Trace.origin_us` maps them back).
Missing integer fields are -1.
"""

from __future__ import annotations

import enum

import msgspec
import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
Obj = npt.NDArray[np.object_]
Bool = npt.NDArray[np.bool_]


class Kind(enum.IntEnum):
    """What an event is, normalised over Kineto versions (legacy `Operator`/`Runtime`/`Kernel` included)."""

    OTHER = 0
    CPU_OP = 1
    USER_ANNOTATION = 2
    PYTHON = 3
    RUNTIME = 4  # cuda_runtime / hip runtime API call
    DRIVER = 5  # cuda_driver API call (cuLaunchKernel...)
    KERNEL = 6
    MEMCPY = 7
    MEMSET = 8
    GPU_ANNOTATION = 9
    OVERHEAD = 10
    CUDA_SYNC = 11  # GPU-side sync records (newest kineto)


CPU_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER)
GPU_ACTIVITY_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
API_KINDS = (Kind.RUNTIME, Kind.DRIVER)

# `cat` strings (lower-cased) → Kind. Unknown categories map to OTHER and are otherwise ignored.
CATEGORY_KINDS: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "python_function": Kind.PYTHON,
    "python": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "driver": Kind.DRIVER,
    "hip_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "overhead": Kind.OVERHEAD,
    "cuda_sync": Kind.CUDA_SYNC,
}


def kind_table(kinds: tuple[int, ...] | list[int], dtype: npt.DTypeLike = bool) -> np.ndarray:
    """A look-up table by kind: 1 (True) for `kinds`, 0 for the others (uint8 for the C extension)."""
    table = np.zeros(max(Kind) + 1, dtype=dtype)
    table[[int(k) for k in kinds]] = 1
    return table


def kind_mask(kind: npt.NDArray[np.int8], kinds: tuple[int, ...] | list[int]) -> Bool:
    """`np.isin(kind, kinds)` for `EventTable.kind` columns (values of `Kind`): one or two comparisons where
    `kinds` are consecutive values (CPU_KINDS, GPU_ACTIVITY_KINDS, API_KINDS, a single kind), else a table
    look-up."""
    codes = sorted({int(k) for k in kinds})
    if not codes or codes[-1] - codes[0] != len(codes) - 1:
        return np.take(kind_table(codes), kind)
    if len(codes) == 1:
        return np.asarray(kind == codes[0])
    return (kind >= codes[0]) & (kind <= codes[-1])


FEW_CODES = 8  # up to this many codes, `codes_mask` compares; beyond, it looks the values up in a table


def codes_mask(values: npt.NDArray[np.integer], codes: npt.ArrayLike) -> Bool:
    """`np.isin(values, codes)` for integer columns (name codes, step indices, categories; negatives allowed): one
    comparison per code for a few codes, else a table over the codes' range (np.isin's own table costs more
    passes), else np.isin itself when that range is very wide."""
    wanted = sorted({int(code) for code in np.asarray(codes).ravel().tolist()})
    if len(wanted) <= FEW_CODES:
        mask = np.zeros(np.shape(values), dtype=bool)
        for code in wanted:
            mask |= values == code
        return mask
    low, high = wanted[0], wanted[-1]
    if high - low > 4 * np.size(values) + 65536:
        return np.isin(values, wanted)
    table = np.zeros(high - low + 1, dtype=bool)
    table[np.asarray(wanted, dtype=np.int64) - low] = True
    inside = (values >= low) & (values <= high)
    mask = np.zeros(np.shape(values), dtype=bool)
    mask[inside] = table[values[inside].astype(np.int64) - low]
    return mask


class EventTable(msgspec.Struct, frozen=True):
    """Columns of equal length `n`; `name` and `track` are codes into `names` / `Trace.tracks`. Each integer
    column from `correlation` to `bytes` is the `args` field of its name in `loader.schema.Args` (-1 if absent;
    `external_id` also reads the legacy `external id`, `device` and `stream` are kept on GPU rows only): adding an
    integer argument is its `Args` line and its column here."""

    kind: I8
    name: I32
    track: I32
    ts_ns: I64
    dur_ns: I64
    correlation: I64
    external_id: I64
    sequence_number: I64
    device: I64
    stream: I64
    bytes: I64
    grid_blocks: I64  # product of grid dims (kernels), -1 if absent
    block_threads: I64  # product of block dims (kernels), -1 if absent
    input_dims: Obj  # raw JSON bytes of args["Input Dims"] or None
    input_types: Obj  # raw JSON bytes of args["Input type"] or None
    concrete_inputs: Obj  # raw JSON bytes of args["Concrete Inputs"] or None
    input_strides: Obj  # raw JSON bytes of args["Input Strides"] or None (torch ≥ 2.x with record_shapes)
    names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    @property
    def end_ns(self) -> I64:
        return self.ts_ns + self.dur_ns

    def name_of(self, index: int) -> str:
        return self.names[int(self.name[index])]

    def names_at(self, indices: npt.NDArray[np.integer]) -> list[str]:
        """Names of the events at `indices` (-1 gives "")."""
        lookup = np.asarray((*self.names, ""), dtype=object)
        codes = np.where(indices >= 0, self.name[np.maximum(indices, 0)], len(self.names))
        return list(lookup[codes])
