"""A tiny hand-built CPU-bound step shared by the analysis unit tests (figures worked out in each test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tracelens
from tests.conftest import kernel, launch, op, step, write_trace

H200 = [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "numSms": 132}]
MUL_KERNEL = "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, MulFunctor>>"
GELU_KERNEL = "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl>"
BF16x2 = {"Input Dims": [[8, 16], [8, 16]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
BF16x1 = {"Input Dims": [[8, 16]], "Input type": ["c10::BFloat16"], "Concrete Inputs": ["", "tanh"]}


def cpu_bound_events() -> list[dict[str, Any]]:
    """Step 0-100 µs: aten::t (3 µs, launches nothing), aten::mul (10 µs, launch 12-17, kernel 16-18),
    a stream-capture query (21-22), aten::gelu (30-40, launch 32-37, kernel 36-38), a device sync (80-90)."""
    return [
        step(1, 0, 100),
        op("aten::t", 2, 3),
        op("aten::mul", 10, 10, ext=1, **BF16x2),
        launch("cudaLaunchKernel", 12, 5, correlation=1, ext=1),
        kernel(MUL_KERNEL, 16, 2, correlation=1),
        launch("cudaStreamIsCapturing", 21, 1, correlation=9),
        op("aten::gelu", 30, 10, ext=2, **BF16x1),
        launch("cudaLaunchKernel", 32, 5, correlation=2, ext=2),
        kernel(GELU_KERNEL, 36, 2, correlation=2),
        launch("cudaDeviceSynchronize", 80, 10, correlation=10),
    ]


def load_events(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> tracelens.Trace:
    return tracelens.load(write_trace(tmp_path / "t.json", events, **top))
