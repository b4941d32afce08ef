"""Linking GPU activity → launch (correlation) → CPU op (External id, checked by time containment).

Rules (see the notes on the Kineto format):
1. GPU activity links to the runtime/driver call with the same `correlation`; a CUDA-graph launch owns every
   kernel that shares its correlation.
2. A launch links to the cpu_op whose `External id` equals its own, if that op encloses the launch in time on
   the same thread; otherwise (old traces where External id == correlation, bare `@triton.jit` launches
   with no External id) to the innermost enclosing cpu_op by time.
"""

from __future__ import annotations

import numpy as np

from tracelens import native
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, EventTable, Kind, kind_mask, kind_table
from tracelens.model.nesting import nearest_ancestor_of_kind
from tracelens.native import extension as _native

CONTAINMENT_TOLERANCE_NS = 1000  # integer-µs traces round ends

_IS_API = kind_table(API_KINDS, np.uint8)
_IS_GPU = kind_table(GPU_ACTIVITY_KINDS, np.uint8)


def link(events: EventTable, parent: I32) -> tuple[I32, I32, int, int]:
    """`link_launches` and `link_ops`: (launch, op, launches linked by External id, by containment). From the C
    extension (one pass each, hashing ids instead of sorting them), else (its twin) numpy."""
    if native.ENABLED:
        linked = _native.link(
            np.ascontiguousarray(events.kind, dtype=np.int8),
            np.ascontiguousarray(events.correlation, dtype=np.int64),
            np.ascontiguousarray(events.external_id, dtype=np.int64),
            np.ascontiguousarray(events.ts_ns, dtype=np.int64),
            np.ascontiguousarray(events.dur_ns, dtype=np.int64),
            np.ascontiguousarray(events.track, dtype=np.int32),
            np.ascontiguousarray(parent, dtype=np.int32),
            _IS_API,
            _IS_GPU,
            int(Kind.CPU_OP),
            CONTAINMENT_TOLERANCE_NS,
        )
        if linked is not None:
            launches, ops, by_id, by_time = linked
            return np.frombuffer(launches, np.int32), np.frombuffer(ops, np.int32), by_id, by_time
    launch = link_launches(events)
    return (launch, *link_ops(events, parent, launch))


def link_launches(events: EventTable) -> I32:
    """`launch[i]` for GPU activity i: the API call with the same correlation id, else -1."""
    n = len(events)
    launch = np.full(n, -1, dtype=np.int32)
    api = np.flatnonzero(kind_mask(events.kind, API_KINDS) & (events.correlation >= 0))
    gpu = np.flatnonzero(kind_mask(events.kind, GPU_ACTIVITY_KINDS) & (events.correlation >= 0))
    if api.size == 0 or gpu.size == 0:
        return launch
    keys, first = np.unique(events.correlation[api], return_index=True)
    found = np.searchsorted(keys, events.correlation[gpu])
    found = np.minimum(found, keys.size - 1)
    hit = keys[found] == events.correlation[gpu]
    launch[gpu[hit]] = api[first[found[hit]]]
    return launch


def link_ops(events: EventTable, parent: I32, launch: I32) -> tuple[I32, int, int]:
    """`op[i]` for API calls and GPU activity; also counts of links made by External id / by containment."""
    n = len(events)
    op = np.full(n, -1, dtype=np.int32)
    api = np.flatnonzero(kind_mask(events.kind, API_KINDS))
    by_time = nearest_ancestor_of_kind(parent, events.kind, Kind.CPU_OP, api)
    by_id = _op_by_external_id(events, api)
    chosen = np.where(by_id >= 0, by_id, by_time)
    op[api] = chosen
    gpu = np.flatnonzero(launch >= 0)
    op[gpu] = op[launch[gpu]]
    n_by_id = int(np.count_nonzero(by_id >= 0))
    n_by_time = int(np.count_nonzero((by_id < 0) & (by_time >= 0)))
    return op, n_by_id, n_by_time


def _op_by_external_id(events: EventTable, api: np.ndarray) -> np.ndarray:
    """The cpu_op sharing each API call's External id, kept only if it encloses the call on its thread."""
    result = np.full(api.size, -1, dtype=np.int64)
    ops = np.flatnonzero((events.kind == Kind.CPU_OP) & (events.external_id >= 0))
    with_id = np.flatnonzero(events.external_id[api] >= 0)
    if ops.size == 0 or with_id.size == 0:
        return result
    keys, first = np.unique(events.external_id[ops], return_index=True)
    calls = api[with_id]
    pos = np.minimum(np.searchsorted(keys, events.external_id[calls]), keys.size - 1)
    matched = keys[pos] == events.external_id[calls]
    candidate = ops[first[pos]]
    start, end = events.ts_ns, events.ts_ns + events.dur_ns
    encloses = (
        matched
        & (events.track[candidate] == events.track[calls])
        & (start[candidate] <= start[calls] + CONTAINMENT_TOLERANCE_NS)
        & (end[calls] <= end[candidate] + CONTAINMENT_TOLERANCE_NS)
    )
    result[with_id[encloses]] = candidate[encloses]
    return result
