"""Helpers shared by the report / annotate tests: a tiny two-step trace and decoding of figure arrays."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import kernel, launch, op, step, write_trace

GEMM = "ampere_sgemm_128x64_nn"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::ReluFunctor<float>>(int)"


def tiny_events() -> list[dict[str, Any]]:
    """Two 100 µs steps; each: aten::mm (launches a 20 µs GEMM at +30) and aten::relu (a 10 µs kernel at +60)."""
    events: list[dict[str, Any]] = []
    for i, base in enumerate((0, 100)):
        events += [
            step(i + 1, base, 100),
            op("aten::mm", base + 10, 30, ext=10 * i + 1, **{"Input Dims": [[8, 512], [512, 512]]}),
            launch("cudaLaunchKernel", base + 15, 5, correlation=100 * i + 11, ext=10 * i + 1),
            op("aten::relu", base + 50, 20, ext=10 * i + 2, **{"Input Dims": [[8, 512]]}),
            launch("cudaLaunchKernel", base + 55, 5, correlation=100 * i + 12, ext=10 * i + 2),
            kernel(GEMM, base + 30, 20, correlation=100 * i + 11),
            kernel(RELU, base + 60, 10, correlation=100 * i + 12),
        ]
    return events


def tiny_trace(folder: Path, name: str = "tiny.json.gz", **top: Any) -> Path:
    return write_trace(folder / name, tiny_events(), **top)


def array(value: Any) -> np.ndarray:
    """A figure array from `fig.to_dict()`: plotly encodes numpy arrays as {"dtype", "bdata"} (base64)."""
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value)
