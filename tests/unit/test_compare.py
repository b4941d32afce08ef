"""`compare`: the study's table, and eager ops matched to the fused kernel that replaced them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kernel, launch, op, step, write_trace
from tracelens.cli import main

GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&)>()"
MUL = "void at::native::elementwise_kernel<128, 4, at::native::BinaryFunctor<float, at::native::MulFunctor<float>>>()"


def mlp_step(number: int, t0: float, compiled: bool) -> list[dict[str, Any]]:
    base = number * 10
    events = [step(number, t0, 900)]
    events += [op("aten::t", t0 + 1, 2, ext=base + 9)] if not compiled else []
    for i, name in enumerate(("gate", "up", "down")):
        ts = t0 + 10 + i * 100
        events += [
            op("aten::mm", ts, 20, ext=base + i),
            launch("cudaLaunchKernel", ts + 5, 5, base + i, ext=base + i),
            kernel(f"nvjet_gemm_{name}", t0 + 400 + i * 100, 50, correlation=base + i),
        ]
    if compiled:
        events += [
            op("triton_poi_fused_gelu_mul_0", t0 + 350, 20, ext=base + 5),
            launch("cuLaunchKernel", t0 + 355, 5, base + 5, ext=base + 5, cat="cuda_driver"),
            kernel("triton_poi_fused_gelu_mul_0", t0 + 460, 30, correlation=base + 5),
        ]
    else:
        events += [
            op("aten::gelu", t0 + 350, 20, ext=base + 5),
            launch("cudaLaunchKernel", t0 + 355, 5, base + 5, ext=base + 5),
            kernel(GELU, t0 + 460, 25, correlation=base + 5),
            op("aten::mul", t0 + 380, 10, ext=base + 6),
            launch("cudaLaunchKernel", t0 + 382, 5, base + 6, ext=base + 6),
            kernel(MUL, t0 + 490, 35, correlation=base + 6),
        ]
    return events


def variant(tmp_path: Path, name: str, compiled: bool) -> Path:
    events = mlp_step(1, 0, compiled) + mlp_step(2, 1000, compiled)
    return write_trace(tmp_path / f"{name}.json.gz", events, tracelens_run={"variant": name})


def test_compare_reports_kernels_per_step_and_the_fused_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eager, compiled = variant(tmp_path, "eager_mlp", False), variant(tmp_path, "compiled_mlp", True)
    assert main(["compare", str(eager), str(compiled), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "tracelens.compare/1"
    assert [(v["name"], v["per_step"]["kernels"]) for v in doc["variants"]] == [("eager_mlp", 5), ("compiled_mlp", 4)]
    assert [v["per_step"]["metadata_ops"] for v in doc["variants"]] == [1, 0]
    (fusion,) = doc["fusions"]
    assert fusion["variant"] == "compiled_mlp" and fusion["kernel"] == "triton_poi_fused_gelu_mul_0"
    assert sorted(fusion["ops"]) == ["aten::gelu", "aten::mul"]
    assert fusion["kernel_us_per_step"] == 30 and fusion["baseline_us_per_step"] == 60


def test_compare_text_shows_the_study_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eager, compiled = variant(tmp_path, "eager_mlp", False), variant(tmp_path, "compiled_mlp", True)
    assert main(["compare", str(eager), str(compiled), "--name", "E", "--name", "C"]) == 0
    out = capsys.readouterr().out
    assert "triton_poi_fused_gelu_mul_0" in out and "aten::gelu" in out and "(E)" in out


def test_text_output_keeps_bracketed_kernel_hints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `[mul]` would be swallowed as rich markup if cells were parsed as markup
    assert main(["analyze", str(variant(tmp_path, "eager_mlp", False))]) == 0
    out = capsys.readouterr().out
    assert "vectorized_elementwise_kernel[gelu]" in out and "elementwise_kernel[mul]" in out


def test_traces_without_profiler_steps_make_no_per_step_claims(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #27 item 6: two traces without ProfilerStep and nothing to infer steps from (the whole trace is one
    window) are not ranked by "fastest step" (the audit's "3,890,112 µs/step"); the sentences say why, the table
    shows the whole trace's length marked "w" as analyze gives it (tests/test_compare_whole_trace.py). (Wings236's
    traces, used here before, now have steps inferred from compiled calls.)"""
    from tests.conftest import anchor

    paths = [
        str(anchor("other/pytorch__kineto/after_fix_trace.json.gz")),
        str(anchor("amd_tracelens/torch_compile_triton/trace.json.gz")),
    ]
    assert main(["compare", *paths, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [v["step_source"] for v in doc["variants"]] == ["whole_trace", "whole_trace"]
    assert doc["verdicts"][0].startswith("trace is another program than after_fix_trace (recorded on AMD Instinct")
    assert doc["verdicts"][1].startswith("no ProfilerStep in after_fix_trace, trace")
    assert not any("fastest step" in v or "µs/step" in v for v in doc["verdicts"])
    assert main(["compare", *paths, "--width", "200"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("│ trace (whole trace)"))
    assert row.split("│")[5].strip() == "12,940.0 w"  # step µs: the whole trace's length, marked (no steps)
