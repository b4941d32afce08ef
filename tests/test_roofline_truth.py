"""Roofline figures against an independent reading of the raw events, and the no-figure-above-a-peak rule over
every corpus and recorded trace (issue #14, item 1)."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracelens
from tests import anchors
from tests.conftest import anchor, anchor_traces, recorded_trace
from tests.independent import view_bytes
from tracelens.analyses import analyze
from tracelens.analyses.roofline import kernel_models
from tracelens.analyses.window import select_window
from tracelens.model.events import Kind

RECORDED = anchors.recorded(Path(__file__).resolve().parent.parent / "traces")
ALL = anchor_traces() + RECORDED
DTYPE_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4}


def raw_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        document = json.load(handle)
    return document["traceEvents"] if isinstance(document, dict) else document


def tensor_bytes(dims: list[int], dtype: str) -> int:
    return math.prod(dims) * DTYPE_BYTES[dtype]


@pytest.mark.parametrize("path", ALL, ids=[p.name if "anchor" in str(p) else p.stem for p in ALL])
def test_no_modelled_figure_exceeds_a_peak(path: Path) -> None:
    """Every row either stays at or below 100 % of its peak, or has no % and says why the model does not fit."""
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    for row in roofline.rows:
        assert row.pct_of_peak is None or 0 <= row.pct_of_peak <= 100, (row.kernel[:60], row.pct_of_peak)
        if row.peak_tbps is not None and row.achieved_tbps > row.peak_tbps:
            assert row.pct_of_peak is None and row.model_note and "does not fit" in row.model_note
        if row.peak_tflops is not None and row.achieved_tflops > row.peak_tflops:
            assert row.pct_of_peak is None and row.model_note and "does not fit" in row.model_note


def test_inductor_out_buffer_gemms_count_the_output_once() -> None:
    """Inductor's `extern_kernels.mm(a, b, out=buf)` records three tensors; bytes = a + b + out, read from the raw
    `Input Dims` (4096x2048 @ 2048x16384 -> 4096x16384 bf16: 16.8 + 67.1 + 134.2 = 218.1 MB)."""
    path = recorded_trace("h200/compiled_mlp.json.gz")
    mm = next(e for e in raw_events(path) if e.get("name") == "aten::mm" and e["args"]["Input Dims"][1][1] == 16384)
    dims, types = mm["args"]["Input Dims"], mm["args"]["Input type"]
    expected = sum(tensor_bytes(d, t) for d, t in zip(dims, types, strict=True))  # each tensor once, out included
    rows = analyze(tracelens.load(path)).roofline.rows  # type: ignore[union-attr]
    gate_up = next(r for r in rows if r.op == "aten::mm" and "320x128" in r.kernel)
    assert gate_up.mb_per_call == pytest.approx(expected / 1e6, abs=1e-3)
    assert gate_up.pct_of_peak is not None and gate_up.pct_of_peak <= 100


def test_in_place_inductor_kernel_reads_and_writes_its_buffer() -> None:
    """`triton_poi_fused_gelu_mul_0(gate_buf, up_buf)` writes its result over gate_buf: 3 x 134.2 MB = 402.65 MB,
    the same bytes the eager gelu·mul fusion estimate keeps (read gate, read up, write the product)."""
    path = recorded_trace("h200/compiled_mlp.json.gz")
    op = next(
        e for e in raw_events(path) if e.get("name") == "triton_poi_fused_gelu_mul_0" and e.get("cat") == "cpu_op"
    )
    tensors = [(d, t) for d, t in zip(op["args"]["Input Dims"], op["args"]["Input type"], strict=True) if d]
    expected = sum(tensor_bytes(d, t) for d, t in tensors) + tensor_bytes(*tensors[0])
    row = next(r for r in analyze(tracelens.load(path)).roofline.rows if r.kernel == "triton_poi_fused_gelu_mul_0")  # type: ignore[union-attr]
    assert row.mb_per_call == pytest.approx(expected / 1e6, abs=1e-3) == pytest.approx(402.653, abs=1e-3)


def test_tf32_gemms_are_held_against_the_tf32_peak() -> None:
    """`cutlass_80_tensorop_s1688gemm` runs fp32 GEMMs on A100 tensor cores (TF32, 156 TFLOP/s): up to 94 TFLOP/s
    achieved here, 483 % of the fp32 CUDA-core peak the model used before."""
    rows = analyze(tracelens.load(anchor("hta/trace_diff/control/control.json.gz"))).roofline.rows  # type: ignore[union-attr]
    tensorop = [r for r in rows if "tensorop_s1688gemm" in r.kernel]
    assert tensorop and all(r.peak_tflops == 156.0 for r in tensorop if r.limit == "compute")
    assert max(r.achieved_tflops for r in tensorop) > 19.5  # above the fp32 peak: only TF32 explains it


@pytest.mark.slow
def test_convolution_backward_is_modelled_on_the_resnet_trace() -> None:
    """ResNet-50 training (torch 1.9 legacy trace): the cuDNN backward convolutions get 2 x 2·N·Cout·Ho·Wo·Cin·k²
    FLOPs from `aten::cudnn_convolution_backward`'s (input, grad_output, weight) dims."""
    path = anchor("other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz")
    steps = [e for e in raw_events(path) if str(e.get("name", "")).startswith("ProfilerStep#")]
    flops = 0.0  # every backward convolution inside a step (all 318 of them): data + weight gradient
    for event in raw_events(path):
        if event.get("name") == "aten::cudnn_convolution_backward" and any(
            s["ts"] <= event["ts"] <= s["ts"] + s["dur"] for s in steps
        ):
            _, grad_out, w = event["args"]["Input Dims"][:3]
            flops += 2 * 2 * math.prod(grad_out) * math.prod(w[1:])
    trace = tracelens.load(path)
    models = kernel_models(trace, select_window(trace))
    ev = trace.events
    backward = np.asarray(
        [
            models.labels[label].model == "conv" and ev.names[int(ev.name[op])] == "aten::cudnn_convolution_backward"
            for label, op in zip(models.label.tolist(), models.op_row.tolist(), strict=True)
        ],
        dtype=bool,
    )
    assert float(models.flops[backward].sum()) == pytest.approx(flops, rel=1e-9)
    results = analyze(trace)
    assert results.roofline is not None
    conv_ops = {r.op for r in results.roofline.rows if r.model == "conv"}
    assert conv_ops == {"aten::cudnn_convolution", "aten::cudnn_convolution_backward"}
    # 21.1 % before: convolutions, cuDNN dgrad/wgrad kernels (then "other") and batch-norm backward
    assert results.roofline.modelled_kernel_time_pct == 98.2


def test_forward_convolutions_of_resnet50_add_up_to_its_published_macs() -> None:
    """The 2021 trace records no stride/padding, so each forward convolution's output size is read from the
    feature map the next op (the batch norm) reads. Independent figure: ResNet-50 does 4.09 GMACs per 224x224
    image (torchvision's model card; 2.05 M of them in the final Linear), here batch 32 (`Input Dims`)."""
    path = anchor("other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz")
    stem = next(e for e in raw_events(path) if e.get("name") == "aten::cudnn_convolution")
    batch = stem["args"]["Input Dims"][0][0]
    trace = tracelens.load(path)
    window = select_window(trace)
    models = kernel_models(trace, window)
    ev = trace.events
    forward = np.asarray(
        [
            models.labels[label].model == "conv" and ev.names[int(ev.name[op])] == "aten::cudnn_convolution"
            for label, op in zip(models.label.tolist(), models.op_row.tolist(), strict=True)
        ],
        dtype=bool,
    )
    macs_per_image = float(models.flops[forward].sum()) / window.n_steps / 2 / batch
    assert batch == 32 and macs_per_image == pytest.approx(4.09e9 - 2.048e6, rel=2e-3)


def test_int8_gemm_is_modelled_against_the_int8_peak() -> None:
    """`torch._int_mm` (int8 × int8 → int32) of the audit's op mix: 2·M·K·N FLOPs from the raw `Input Dims`, over
    the kernel's mean duration, against the H200's dense int8 peak (1,979 TOPS): a legacy WMMA kernel at ~6 %."""
    path = recorded_trace("h200/audit/opmix_train.json.gz")
    events = raw_events(path)
    op = next(e for e in events if e.get("name") == "aten::_int_mm")
    (m, k), (_, n) = op["args"]["Input Dims"][:2]
    durations = [e["dur"] for e in events if e.get("cat") == "kernel" and "i161616gemm_s8" in e["name"]]
    tflops = 2 * m * k * n / (sum(durations) / len(durations) * 1e-6) / 1e12
    row = next(r for r in analyze(tracelens.load(path)).roofline.rows if r.op == "aten::_int_mm")  # type: ignore[union-attr]
    assert (row.dtype, row.peak_dtype, row.peak_tflops) == ("int8", "int8", 1979.0)
    assert row.achieved_tflops == pytest.approx(tflops, rel=1e-3)
    assert row.pct_of_peak == pytest.approx(100 * tflops / 1979.0, abs=0.01)
    assert 6.0 < row.pct_of_peak < 7.0


def test_tf32_cutlass_convolution_kernels_are_held_against_the_tf32_peak() -> None:
    """cuDNN's CUTLASS wgrad kernel in the fp32 channels-last ResNet spells its element type `tfloat32_t` in its
    mangled name: it runs on tensor cores, so the TF32 peak (494.5 TFLOP/s on the H200) bounds it, not fp32's 67."""
    path = recorded_trace("h200/audit/conv_train_fp32_cl.json.gz")
    rows = analyze(tracelens.load(path)).roofline.rows  # type: ignore[union-attr]
    cutlass = [r for r in rows if "tfloat32" in r.kernel]
    assert cutlass and all((r.dtype, r.peak_dtype, r.peak_tflops) == ("fp32", "tf32", 494.5) for r in cutlass)
    assert all(r.pct_of_peak is not None and r.pct_of_peak < 100 for r in cutlass)


@pytest.mark.parametrize("path", ALL, ids=[p.name if "anchor" in str(p) else p.stem for p in ALL])
def test_kernel_time_without_a_model_says_why(path: Path) -> None:
    """Modelled and unmodelled kernel time add up to all of it: nothing outside the table is silent."""
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    if not roofline.rows and not roofline.unmodelled:
        return  # no kernels in the window
    total = roofline.modelled_kernel_time_pct + sum(u.pct_of_kernel_time for u in roofline.unmodelled)
    assert total == pytest.approx(100.0, abs=0.1 * (len(roofline.unmodelled) + 1))
    assert all(u.reason and u.pct_of_kernel_time > 0 for u in roofline.unmodelled)


def test_graph_replayed_kernels_are_unmodelled_for_lack_of_shapes() -> None:
    """The CUDA-graph replay trace: kernels launched by `cudaGraphLaunch` inherit no recorded shapes; counted from
    the raw events, the share of kernel time whose launching op recorded no `Input Dims` is what the roofline says."""
    path = recorded_trace("h200/audit/gpt2_infer_cudagraph.json.gz")
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    no_shapes = next(u for u in roofline.unmodelled if "no shapes" in u.reason)
    assert no_shapes.pct_of_kernel_time > 95


def _inductor_args(path: Path, kernel: str) -> tuple[list[list[int]], list[str], list[str]]:
    op = next(e for e in raw_events(path) if e.get("cat") == "cpu_op" and e["name"] == kernel)
    return op["args"]["Input Dims"], op["args"]["Input type"], op["args"]["Concrete Inputs"]


def test_inductor_bytes_follow_views_and_slices() -> None:
    """Issue #27 item 5, from the raw `Input Dims` of the compiled block's kernels and what each kernel does:
    `mul_silu_3(gate_view, up, xnumel)` writes silu(gate)·up in place through the `[2, 2048, 5632]` view of the
    gate GEMM's `[4096, 5632]` output: it reads gate and up and writes gate (3 × 46.1 MB, was 92.3 MB without
    the write); the RoPE kernel reads q and k (two slices of xnumel elements) of the packed `[4096, 6144]` qkv
    buffer, not the whole buffer, plus cos and sin, and writes two outputs (68.2 MB, was 84.9 MB)."""
    path = Path("traces/h200/block/compiled_block.json.gz")
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    rows = roofline.by_kernel()
    dims, types, concrete = _inductor_args(path, "triton_poi_fused__unsafe_view_mul_silu_3")
    gate, up = (math.prod(d) * DTYPE_BYTES[t] for d, t in zip(dims[:2], types[:2], strict=True))
    assert math.prod(dims[0]) == math.prod(dims[1]) == int(concrete[-1])  # a view of the GEMM output
    assert rows["triton_poi_fused__unsafe_view_mul_silu_3"].mb_per_call * 1e6 == pytest.approx(gate + up + gate)
    rope = next(k for k in rows if k.startswith("triton_poi_fused__scaled_dot_product_cudnn_attention"))
    dims, types, concrete = _inductor_args(path, rope)
    xnumel, item = int(concrete[-1]), DTYPE_BYTES[types[0]]
    qkv, cos, sin, q_out, k_out = dims[:5]
    assert math.prod(q_out) == math.prod(k_out) == xnumel and math.prod(qkv) == 3 * xnumel
    expected = (2 * xnumel + math.prod(cos) + math.prod(sin) + 2 * xnumel) * item
    assert rows[rope].mb_per_call * 1e6 == pytest.approx(expected)
    assert rows[rope].pct_of_peak is not None and rows[rope].pct_of_peak < 90  # was 97.1 % with the whole buffer
    # which part of qkv the kernel indexes the trace does not say: the row says so, and what reading it whole gives
    whole = (math.prod(qkv) + math.prod(cos) + math.prod(sin) + 2 * xnumel) * item
    note = rows[rope].model_note
    assert note is not None and note.startswith("part of a buffer")
    found = re.search(r"read whole, ([\d.,]+) MB/call, [\d.,]+ TB/s, ([\d.]+) % of peak", note)
    assert found is not None, note
    assert float(found.group(1).replace(",", "")) == pytest.approx(whole / 1e6, abs=0.05)
    assert float(found.group(2)) == pytest.approx(rows[rope].pct_of_peak * whole / expected, abs=0.1)


def test_ambiguous_second_write_above_the_peak_is_no_figure() -> None:
    """Issue #27 item 5: in training, `mul_silu_3(gate, up, out)` may also write gate in place (gate is a GEMM
    `out=` buffer of xnumel elements; the trace has no argument names). From the raw events: with one write it
    moves gate + up + out; with both, the kernel's mean duration would need more than the H200's 4.8 TB/s, so
    the row has no % of peak and says why."""
    path = Path("traces/h200/block/train_compiled_block.json.gz")
    name = "triton_poi_fused__unsafe_view_mul_silu_3"
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    row = roofline.by_kernel()[name]
    dims, types, concrete = _inductor_args(path, name)
    sizes = [math.prod(d) * DTYPE_BYTES[t] for d, t in zip(dims[:3], types[:3], strict=True)]
    assert all(math.prod(d) == int(concrete[-1]) for d in dims[:3])
    durations = [e["dur"] for e in raw_events(path) if e.get("cat") == "kernel" and e["name"] == name]
    mean_s = sum(durations) / len(durations) / 1e6
    assert row.mb_per_call * 1e6 == pytest.approx(sum(sizes))
    assert (sum(sizes) + sizes[0]) / mean_s / 1e12 > 4.8 > sum(sizes) / mean_s / 1e12
    assert row.pct_of_peak is None and row.model_note is not None and row.model_note.startswith("ambiguous bytes")


VIEW_TRACES = (  # traces whose memory-bound ops read stride-0 views (mean/sum backward's expanded gradient, …)
    "h200/block/train_eager_block.json.gz",
    "h200/audit/conv_train_fp32_cl.json.gz",
    "h200/record/hf_llama_generate.json.gz",
)


@pytest.mark.parametrize("relative", VIEW_TRACES)
def test_memory_bound_bytes_follow_strides(relative: str) -> None:
    """Issue #27 item 5: every modelled call of the pointwise and copy ops of tests/independent/view_bytes.py
    moves the bytes that script computes from the raw `Input Dims` / `Input Strides` / `Input type` (a stride-0
    dimension read once), and on each of these traces some call reads a stride-0 view (`div` of mean's expanded
    gradient: 16 kB read, not 33.6 MB), so counting every element would fail the test."""
    path = recorded_trace(relative)
    names = view_bytes.BINARY | view_bytes.UNARY | view_bytes.COPY_OUT
    expected = view_bytes.expected_by_signature(str(path), names)
    trace = tracelens.load(path)
    models = kernel_models(trace, select_window(trace))
    ev = trace.events
    per_call: dict[int, float] = {}
    for row, op, moved in zip(models.row.tolist(), models.op_row.tolist(), models.bytes.tolist(), strict=True):
        if op >= 0 and ev.kind[row] == Kind.KERNEL and ev.names[int(ev.name[op])] in names:
            per_call[op] = per_call.get(op, 0.0) + moved  # the call's bytes, split among its kernels by time
    strided = 0
    for op, moved in per_call.items():
        raw = {
            key: json.loads(column[op]) if column[op] is not None else None
            for key, column in (
                ("Input Dims", ev.input_dims),
                ("Input Strides", ev.input_strides),
                ("Input type", ev.input_types),
                ("Concrete Inputs", ev.concrete_inputs),
            )
        }
        want, dense, stride_zero = expected[view_bytes.signature(ev.names[int(ev.name[op])], raw)]
        assert moved == pytest.approx(want, rel=1e-9), (ev.names[int(ev.name[op])], raw)
        strided += stride_zero and want < dense
    assert per_call and strided > 0


def test_a_first_argument_that_may_be_written_too_is_no_figure_when_that_exceeds_the_peak() -> None:
    """Issue #27 item 5 (c): GPT-2 training's `triton_poi_fused__to_copy_15(bf16 [2304, 768], fp32 [2304, 768],
    xnumel)`: Inductor passes an in/out buffer first and the trace names no arguments, so the bf16 tensor of
    xnumel elements may be written as well as the fp32 one. From the raw events: with one write 78 % of the
    H200's 4.8 TB/s, with both above it, so the row has no % of peak and its note gives both readings."""
    path = recorded_trace("h200/audit/gpt2_train_compiled_stack.json.gz")
    name = "triton_poi_fused__to_copy_15"
    dims, types, concrete = _inductor_args(path, name)
    first, second = (math.prod(d) * DTYPE_BYTES[t] for d, t in zip(dims[:2], types[:2], strict=True))
    assert math.prod(dims[0]) == math.prod(dims[1]) == int(concrete[-1])
    durations = [e["dur"] for e in raw_events(path) if e.get("cat") == "kernel" and e["name"] == name]
    mean_s = sum(durations) / len(durations) / 1e6
    one, both = (first + second) / mean_s / 1e12, (2 * first + second) / mean_s / 1e12
    assert one < 4.8 < both
    roofline = analyze(tracelens.load(path)).roofline
    assert roofline is not None
    row = roofline.by_kernel()[name]
    assert row.mb_per_call * 1e6 == pytest.approx(first + second, rel=1e-5)  # 6 significant digits
    assert row.pct_of_peak is None and row.model_note is not None
    readings = r"ambiguous bytes: ([\d.]+) % of peak if it writes only its outputs; .*in place, ([\d.]+) TB/s"
    found = re.match(readings, row.model_note)
    assert found is not None, row.model_note
    assert float(found.group(1)) == pytest.approx(100 * one / 4.8, abs=1.5)  # the analysed steps' mean vs all calls
    assert float(found.group(2)) == pytest.approx(both, rel=0.02) and float(found.group(2)) > 4.8
