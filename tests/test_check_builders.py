"""Tiny hand-built traces shaped like the study's eager and compiled MLP, shared by the check tests,
and the figures `tracelens analyze` gives for them (checked by hand from the events below)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tracelens
from tests.conftest import kernel, launch, op, step, write_trace

GEMM = "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NTN"
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&,"
    " at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::binary_internal::MulFunctor<c10::BFloat16>, std::array<char*, 3ul>)"
)
FUSED = "triton_poi_fused_gelu_mul_0"
STEP_US = 1000.0


def eager_step(number: int, t0: float, corr: int) -> list[dict[str, Any]]:
    """addmm (GEMM 100 µs + aten::t 4 µs + one occupancy query), gelu (20 µs), mul (30 µs)."""
    ext = corr * 10
    return [
        step(number, t0, 500),
        op("aten::linear", t0 + 10, 60, ext=ext),
        op("aten::t", t0 + 12, 4, ext=ext + 1),
        op("aten::addmm", t0 + 20, 40, ext=ext + 2),
        launch("cudaOccupancyMaxActiveBlocksPerMultiprocessor", t0 + 22, 2, correlation=corr + 90, ext=ext + 2),
        launch("cudaLaunchKernel", t0 + 30, 5, correlation=corr, ext=ext + 2),
        kernel(GEMM, t0 + 40, 100, correlation=corr),
        op("aten::gelu", t0 + 80, 20, ext=ext + 3),
        launch("cudaLaunchKernel", t0 + 85, 5, correlation=corr + 1, ext=ext + 3),
        kernel(GELU, t0 + 150, 20, correlation=corr + 1),
        op("aten::mul", t0 + 110, 20, ext=ext + 4),
        launch("cudaLaunchKernel", t0 + 115, 5, correlation=corr + 2, ext=ext + 4),
        kernel(MUL, t0 + 180, 30, correlation=corr + 2),
    ]


def compiled_step(number: int, t0: float, corr: int, fused_us: float = 25.0) -> list[dict[str, Any]]:
    """CompiledFunction: aten::mm (GEMM 100 µs) and the Inductor kernel gelu·mul (`fused_us`)."""
    ext = corr * 10
    return [
        step(number, t0, 400),
        op("CompiledFunction", t0 + 10, 100, ext=ext),
        op("aten::mm", t0 + 20, 30, ext=ext + 1),
        launch("cudaLaunchKernel", t0 + 30, 5, correlation=corr, ext=ext + 1),
        kernel(GEMM, t0 + 40, 100, correlation=corr),
        op(FUSED, t0 + 60, 30, ext=ext + 2),
        launch("cuLaunchKernelEx", t0 + 70, 5, correlation=corr + 1, ext=ext + 2, cat="cuda_driver"),
        kernel(FUSED, t0 + 150, fused_us, correlation=corr + 1),
    ]


def write_eager(tmp_path: Path, name: str = "eager_mlp.json", variant: str | None = "eager_mlp") -> Path:
    events = eager_step(1, 0, 100) + eager_step(2, STEP_US, 200)
    return write_trace(tmp_path / name, events, **_run(variant))


def write_compiled(
    tmp_path: Path, name: str = "compiled_mlp.json", variant: str | None = "compiled_mlp", fused_us: float = 25.0
) -> Path:
    events = compiled_step(1, 0, 100, fused_us) + compiled_step(2, STEP_US, 200, fused_us)
    return write_trace(tmp_path / name, events, **_run(variant))


def _run(variant: str | None) -> dict[str, Any]:
    return {"tracelens_run": {"variant": variant, "tokens": 4096}} if variant else {}


def test_eager_builder_gives_three_kernels_per_step(tmp_path: Path) -> None:
    results = tracelens.analyze(tracelens.load(write_eager(tmp_path)))
    per_step = results.summary.per_step
    assert (per_step.kernels, per_step.gpu_kernel_us) == (3, 150.0)
    assert {k.short_name: k.op for k in results.summary.kernels} == {
        GEMM: "aten::addmm",
        "vectorized_elementwise_kernel[gelu]": "aten::gelu",
        "vectorized_elementwise_kernel[mul]": "aten::mul",
    }


def test_compiled_builder_gives_two_kernels_per_step(tmp_path: Path) -> None:
    results = tracelens.analyze(tracelens.load(write_compiled(tmp_path)))
    assert (results.summary.per_step.kernels, results.summary.per_step.gpu_kernel_us) == (2, 125.0)
    assert {k.name: k.op for k in results.summary.kernels} == {GEMM: "aten::mm", FUSED: "CompiledFunction"}
