"""GPU activity (kernels, memcpy, memset) as numpy columns, with category and launching op; no pandas.

Contract: `gpu_activity(trace) -> GpuActivity`, memoised per trace; one entry per GPU activity event, in event
row order. Names are codes into `trace.events.names` (-1 = none); `keygroups.string_keys` turns codes into keys that
group and sort exactly as the strings do, so analyses group by integers and make strings only for output.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from tracelens.analyses.window import step_mask
from tracelens.model.events import GPU_ACTIVITY_KINDS, I8, I32, I64, Bool, EventTable, Kind, kind_mask
from tracelens.model.kernel_names import CATEGORIES, categorize
from tracelens.model.memo import per_trace
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.model.trace import Trace


@dataclass(frozen=True)
class GpuActivity:
    """Columns of equal length, one entry per GPU activity; arrays are read-only."""

    row: I64  # event row
    kind: I8
    name: I32  # code into events.names
    category: I8  # index into kernel_names.CATEGORIES
    ts_ns: I64
    dur_ns: I64
    device: I64
    stream: I64
    step: I32  # step index of the launch, -1 = none
    launch: I32  # row of the launching runtime/driver call, -1 = none
    launch_name: I32  # its name code, -1 = none
    op_row: I64  # launching op (Inductor/Triton wrappers skipped), -1 = none
    op_name: I32  # its name code, -1 = none

    def __len__(self) -> int:
        return int(self.row.shape[0])

    def subset(self, mask: Bool) -> GpuActivity:
        """The entries where `mask` is true, in the same order."""
        return GpuActivity(**{f.name: _frozen(getattr(self, f.name)[mask]) for f in fields(self)})

    def in_steps(self, step_indices: np.ndarray) -> GpuActivity:
        """Entries launched in one of the steps `step_indices` (indices into `trace.steps`)."""
        return self.subset(step_mask(self.step, step_indices))


@per_trace
def gpu_activity(trace: Trace) -> GpuActivity:
    """The GPU activity of `trace` (computed once per trace)."""
    ev = trace.events
    rows = np.flatnonzero(kind_mask(ev.kind, GPU_ACTIVITY_KINDS))
    launch = trace.links.launch[rows]
    op = _display_op(trace, rows)
    name = ev.name[rows]
    launch_name = _name_codes(ev, launch)
    columns: dict[str, np.ndarray] = {
        "row": rows.astype(np.int64),
        "kind": ev.kind[rows],
        "name": name,
        "category": _categories(ev, name, launch_name),
        "ts_ns": ev.ts_ns[rows],
        "dur_ns": ev.dur_ns[rows],
        "device": ev.device[rows],
        "stream": ev.stream[rows],
        "step": trace.links.step[rows],
        "launch": launch,
        "launch_name": launch_name,
        "op_row": op,
        "op_name": _name_codes(ev, op),
    }
    return GpuActivity(**{key: _frozen(value) for key, value in columns.items()})


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _name_codes(ev: EventTable, rows: np.ndarray) -> I32:
    """Name codes of the events at `rows` (-1 gives -1)."""
    return np.where(rows >= 0, ev.name[np.maximum(rows, 0)], -1).astype(np.int32)


def _categories(ev: EventTable, name: I32, launch_name: I32) -> I8:
    """`categorize(name, launch API)` computed once per distinct (name, launch API) pair."""
    if name.size == 0:
        return np.zeros(0, dtype=np.int8)
    pair = name.astype(np.int64) * (len(ev.names) + 1) + (launch_name.astype(np.int64) + 1)
    pairs, inverse = np.unique(pair, return_inverse=True)
    names, launches = np.divmod(pairs, len(ev.names) + 1)
    index = {category: code for code, category in enumerate(CATEGORIES)}
    codes = [
        index[categorize(ev.names[n], ev.names[a - 1] if a > 0 else "")]
        for n, a in zip(names.tolist(), launches.tolist(), strict=True)
    ]
    return np.asarray(codes, dtype=np.int8)[inverse.ravel()]


def _display_op(trace: Trace, gpu_rows: np.ndarray) -> I64:
    """The launching op, or its enclosing op when it is an Inductor/Triton wrapper named like a kernel."""
    ev = trace.events
    op = trace.links.op[gpu_rows].astype(np.int64)
    has = op >= 0
    wrapper = np.zeros(op.size, dtype=bool)
    wrapper[has] = ev.name[op[has]] == ev.name[gpu_rows[has]]
    triton = np.zeros(len(ev.names), dtype=bool)
    triton[_triton_name_codes(ev)] = True
    wrapper[has] |= triton[ev.name[op[has]]]
    if wrapper.any():
        op[wrapper] = nearest_ancestor_of_kind(trace.links.parent, ev.kind, Kind.CPU_OP, op[wrapper])
    return op


def _triton_name_codes(ev: EventTable) -> I32:
    return np.array([code for code, name in enumerate(ev.names) if name.startswith("triton_")], dtype=np.int32)
