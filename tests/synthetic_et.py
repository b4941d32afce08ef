"""A synthetic PyTorch execution trace for `traces/h200/eager_mlp.json.gz` (no GPU execution trace is in the
repository): the nodes `torch.profiler.ExecutionTraceObserver` writes for each op of the five profiled steps,
with the tensors of the eager GeGLU MLP `down(gelu(gate(x)) * up(x))` — schema "1.1.1-chakra.0.0.4", tensor
values `[tensor id, storage id, offset, numel, itemsize, device]`.

    python tests/synthetic_et.py            # rewrites tests/data/eager_mlp_synthetic_et.json.gz

`unrelated=True` makes the `mul` read a gelu-shaped tensor that gelu did not write (same shape and dtype,
another storage): shapes would link them, tensor identities do not.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

T, H, INTER = 4096, 2048, 16384  # tokens, hidden, intermediate (bf16: itemsize 2)
STEPS = (3, 4, 5, 6, 7)
BF16 = "Tensor(c10::BFloat16)"
OUT = Path(__file__).resolve().parent / "data" / "eager_mlp_synthetic_et.json.gz"


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.next_id = 1
        self.next_tensor = 1

    def node(self, name: str, parent: int, inputs: list[list[Any]], outputs: list[list[Any]]) -> int:
        node_id = self.next_id
        self.next_id += 1
        self.nodes.append(
            {
                "id": node_id,
                "name": name,
                "ctrl_deps": parent,
                "inputs": _part(inputs),
                "outputs": _part(outputs),
                "attrs": [{"name": "rf_id", "type": "uint64", "value": node_id}],
            }
        )
        return node_id

    def tensor(self, storage: int, dims: tuple[int, ...]) -> list[Any]:
        tensor_id = self.next_tensor
        self.next_tensor += 1
        numel = 1
        for d in dims:
            numel *= d
        return [tensor_id, storage, 0, numel, 2, "cuda:0", list(dims)]


def _part(tensors: list[list[Any]]) -> dict[str, Any]:
    return {"values": [t[:6] for t in tensors], "shapes": [t[6] for t in tensors], "types": [BF16] * len(tensors)}


def build(unrelated: bool = False) -> dict[str, Any]:
    b = _Builder()
    root = b.node("[pytorch|profiler|execution_trace|process]", 0, [], [])
    x, wg, wu, wd = b.tensor(1, (T, H)), b.tensor(2, (INTER, H)), b.tensor(3, (INTER, H)), b.tensor(4, (H, INTER))
    storage = 100
    for number in STEPS:
        step = b.node(f"ProfilerStep#{number}", root, [], [])
        gate, g, up, p, out = (b.tensor(storage + k, dims) for k, dims in enumerate([(T, INTER)] * 4 + [(T, H)]))
        storage += 10
        stray = b.tensor(storage + 5, (T, INTER))  # a gelu-shaped tensor gelu did not write
        _linear(b, step, x, wg, gate)
        b.node("aten::gelu", step, [gate], [g])
        _linear(b, step, x, wu, up)
        b.node("aten::mul", step, [stray if unrelated else g, up], [p])
        _linear(b, step, p, wd, out)
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "synthetic", "start_ts": 0, "nodes": b.nodes}


def _linear(b: _Builder, parent: int, x: list[Any], w: list[Any], out: list[Any]) -> None:
    wt = [w[0] + 100000, w[1], 0, w[3], 2, "cuda:0", [w[6][1], w[6][0]]]  # a view: the weight's storage
    linear = b.node("aten::linear", parent, [x, w], [out])
    t = b.node("aten::t", linear, [w], [wt])
    transpose = b.node("aten::transpose", t, [w], [wt])
    b.node("aten::as_strided", transpose, [w], [wt])
    matmul = b.node("aten::matmul", linear, [x, wt], [out])
    b.node("aten::mm", matmul, [x, wt], [out])


def write(path: Path, unrelated: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(build(unrelated)).encode(), mtime=0))
    return path


if __name__ == "__main__":
    print(write(OUT))
