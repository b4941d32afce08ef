"""PyTorch execution traces (`torch.profiler.ExecutionTraceObserver` JSON) taken with a Kineto trace: which
tensors each op read and wrote, by identity. Raw JSON stays here; the fusion analysis links ops by tensor.

Format (schema "1.0.x", also "1.1.x-chakra"): `{"schema", "nodes": [{"id", "name", "ctrl_deps",
"inputs": {"values", "shapes", "types"}, "outputs": {...}, "attrs": [{"name", "type", "value"}]}]}`; a tensor
value is `[tensor_id, storage_id, offset, numel, itemsize, device]` (older files: 5 items, no device) and its
type `Tensor(c10::BFloat16)`; lists of tensors are `GenericList[Tensor(...),...]` with a list value. Node ids
follow execution order; `ctrl_deps` is the enclosing node (record functions such as `ProfilerStep#3` too).

Contract: `load_execution_trace(path) -> ExecutionTrace` (raises `TracelensError` on unusable input);
`attach(trace, et)` pairs it with a loaded Kineto trace (ops matched by name and occurrence within each
`ProfilerStep#N` both contain; no timestamps are needed); `op_tensors(trace) -> OpTensors | None`.
A tensor's identity is (storage id, offset, numel): views of one storage region are the same data.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import msgspec
import numpy as np

from tracelens.errors import TracelensError
from tracelens.model.events import Kind
from tracelens.model.memo import TraceTable
from tracelens.model.trace import Trace

TensorRef = tuple[int, int, int, int]  # storage id, offset (elements), numel, itemsize


class EtOp(msgspec.Struct, frozen=True):
    name: str
    step: int  # N of the enclosing ProfilerStep#N node; outside one (the autograd engine's thread runs the
    # backward under no ProfilerStep): that of the last ProfilerStep node before it in execution order; -1 = none
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]


class ExecutionTrace(msgspec.Struct, frozen=True):
    path: str
    ops: tuple[EtOp, ...]  # nodes with a tensor input or output, in execution (node id) order


def load_execution_trace(path: str | Path) -> ExecutionTrace:
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        document = json.loads(raw)
    except (OSError, ValueError, EOFError) as exc:
        raise TracelensError(f"{path}: not a readable execution trace ({exc})") from None
    nodes = document.get("nodes") if isinstance(document, dict) else None
    if not isinstance(nodes, list):
        raise TracelensError(f"{path}: not an execution trace (no 'nodes' list; ExecutionTraceObserver JSON expected)")
    by_id = {node["id"]: node for node in nodes if isinstance(node, dict) and isinstance(node.get("id"), int)}
    ops = []
    current = -1  # the step of the last ProfilerStep node met in id (execution) order
    for node_id in sorted(by_id):
        node = by_id[node_id]
        step = _step(node, by_id)
        if str(node.get("name", "")).startswith("ProfilerStep#"):
            current = step
        inputs, outputs = _tensors(node.get("inputs")), _tensors(node.get("outputs"))
        if inputs or outputs:
            ops.append(EtOp(str(node.get("name", "")), step if step >= 0 else current, inputs, outputs))
    return ExecutionTrace(str(path), tuple(ops))


def _tensors(part: object) -> tuple[TensorRef, ...]:
    if not isinstance(part, dict):
        return ()
    values, types = part.get("values"), part.get("types")
    if not isinstance(values, list) or not isinstance(types, list):
        return ()
    found: list[TensorRef] = []
    for value, type_name in zip(values, types, strict=False):
        if not isinstance(type_name, str):
            continue
        if type_name.startswith("Tensor"):
            ref = _ref(value)
            if ref is not None:
                found.append(ref)
        elif type_name.startswith("GenericList") and isinstance(value, list):
            found.extend(ref for ref in map(_ref, value) if ref is not None)
    return tuple(found)


def _ref(value: object) -> TensorRef | None:
    if not isinstance(value, list) or len(value) < 5 or not all(isinstance(v, int) for v in value[:5]):
        return None
    _, storage, offset, numel, itemsize = value[:5]
    return (storage, offset, numel, itemsize) if numel > 0 else None


def _step(node: dict[str, object], by_id: dict[int, dict[str, object]]) -> int:
    seen = 0
    current: dict[str, object] | None = node
    while current is not None and seen < 10_000:
        name = str(current.get("name", ""))
        if name.startswith("ProfilerStep#"):
            digits = name.removeprefix("ProfilerStep#")
            return int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 18 else -1
        parent = current.get("ctrl_deps")
        current = by_id.get(parent) if isinstance(parent, int) and parent != current.get("id") else None
        seen += 1
    return -1


class OpTensors:
    """Tensors of the Kineto ops an execution trace identified: `get(op_row)`, `readers(ref)`."""

    def __init__(self, matched: dict[int, EtOp]) -> None:
        self._ops = matched
        readers: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        writers: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        for row, op in matched.items():
            for ref in op.inputs:
                readers[ref[:3]].append(row)
            for ref in op.outputs:
                writers[ref[:3]].append(row)
        self._readers = {key: sorted(rows) for key, rows in readers.items()}
        self._writers = {key: sorted(rows) for key, rows in writers.items()}

    def __len__(self) -> int:
        return len(self._ops)

    def get(self, row: int) -> tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]] | None:
        op = self._ops.get(row)
        return (op.inputs, op.outputs) if op is not None else None

    def readers(self, ref: TensorRef) -> list[int]:
        """Rows (in event order) of the matched ops that read this tensor."""
        return self._readers.get(ref[:3], [])

    def writers(self, ref: TensorRef) -> list[int]:
        """Rows (in event order) of the matched ops that return this storage region (a view of it, an in-place
        update, or a new tensor the allocator put in the same memory)."""
        return self._writers.get(ref[:3], [])


_ATTACHED: TraceTable[OpTensors] = TraceTable()


def attach(trace: Trace, et: ExecutionTrace) -> int:
    """Pair `et` with `trace` for the analyses of this process; returns how many ops were matched. Ops match by
    name and order of occurrence within each ProfilerStep#N present in both files."""
    matched = match_ops(trace, et)
    _ATTACHED.put(trace, OpTensors(matched))
    return len(matched)


def op_tensors(trace: Trace) -> OpTensors | None:
    return _ATTACHED.get(trace)


def match_ops(trace: Trace, et: ExecutionTrace) -> dict[int, EtOp]:
    ev, links = trace.events, trace.links
    rows = np.flatnonzero((ev.kind == Kind.CPU_OP) & (links.step >= 0))
    rows = rows[np.argsort(ev.ts_ns[rows], kind="stable")]
    numbers = trace.steps.number[links.step[rows]]
    kineto: dict[tuple[int, str], list[int]] = defaultdict(list)
    for row, number, name in zip(rows.tolist(), numbers.tolist(), ev.names_at(rows), strict=True):
        kineto[(int(number), name)].append(row)
    theirs: dict[tuple[int, str], list[EtOp]] = defaultdict(list)
    for op in et.ops:
        if op.step >= 0:
            theirs[(op.step, op.name)].append(op)
    matched: dict[int, EtOp] = {}
    for key, ops in theirs.items():
        for row, op in zip(kineto.get(key, []), ops, strict=False):
            matched[row] = op
    return matched
