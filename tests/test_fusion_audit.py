"""Fusion groups on the held-out traces of the #14 audit (traces/h200/audit/), against figures recomputed from
their raw events: groups stop at the tensors convolutions write, in-place updates of 0-d buffers are not
dataflow, a `_foreach_` op moves its tensor lists, nll_loss gathers one value per row, and a forward output the
backward reads stays written."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests.conftest import recorded_trace
from tracelens.analyses import analyze
from tracelens.analyses.fusion import Fusion
from tracelens.loader.et import attach, load_execution_trace

CONV = "h200/audit/conv_train_fp32_cl.json.gz"


def raw_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle)["traceEvents"]
    return events


def first_step_ops(events: list[dict[str, Any]], names: set[str]) -> list[dict[str, Any]]:
    """The CPU ops named in `names` inside the first ProfilerStep, in start order."""
    steps = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    start, end = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in names and start <= e["ts"] <= end]
    return sorted(ops, key=lambda e: e["ts"])


def fusion_of(relative: str) -> Fusion:
    fusion = analyze(tracelens.load(recorded_trace(relative))).fusion
    assert fusion is not None
    return fusion


def test_conv_training_groups_stop_at_the_tensors_convolutions_write() -> None:
    """ResNet-ish training (channels_last fp32): from the raw events, every forward BatchNorm reads the output
    of the convolution launched just before it (only the 0-d `num_batches_tracked.add_(1)` between), so no
    group has a BatchNorm after another op: the old 12-kernel group `cudnn_batch_norm > clamp_min >
    cudnn_batch_norm > … > mean` ran through three convolutions. The blocks with a strided 1x1 shortcut give
    bn2 and the shortcut's BN → add → relu: 9 tensors of T moved now (each BN reads and writes one, the add
    reads two and writes one, relu one and one) and 3 fused (the two conv outputs, relu's output, which the
    next conv reads), T = 64x128x16x16 and 64x256x8x8 fp32, plus each BN's four C-vectors."""
    path = recorded_trace(CONV)
    ops = first_step_ops(raw_events(path), {"aten::cudnn_convolution", "aten::cudnn_batch_norm", "aten::add_"})
    ops = [e for e in ops if not (e["name"] == "aten::add_" and e["args"]["Input Dims"][0] == [])]
    batch_norms = [i for i, e in enumerate(ops) if e["name"] == "aten::cudnn_batch_norm"]
    assert len(batch_norms) == 11 and all(ops[i - 1]["name"] == "aten::cudnn_convolution" for i in batch_norms)
    fusion = fusion_of(CONV)
    chains = [o for o in fusion.opportunities if o.kind == "chain"]
    bn = "aten::cudnn_batch_norm"
    for o in chains:
        assert bn not in dropwhile_bn(o.ops), o.ops  # BNs only lead a group
    pair = next(o for o in chains if o.ops == [bn, bn, "aten::add", "aten::clamp_min"])
    t1, t2 = 64 * 128 * 16 * 16 * 4, 64 * 256 * 8 * 8 * 4
    params = (2 * 4 * 128 * 4 + 2 * 4 * 256 * 4) / 2
    assert pair.calls_per_step == 2
    assert pair.bytes_now == round(9 * (t1 + t2) / 2 + params)
    assert pair.bytes_fused == round(3 * (t1 + t2) / 2 + params)


def dropwhile_bn(ops: list[str]) -> list[str]:
    """`ops` without its leading BatchNorms."""
    at = 0
    while at < len(ops) and ops[at] == "aten::cudnn_batch_norm":
        at += 1
    return ops[at:]


def test_batch_norm_counters_are_not_chained() -> None:
    """Each BatchNorm's `num_batches_tracked.add_(1)` is a 0-d int64 update of its own buffer (raw events: 11
    per step, all with Input Dims [[], []]); they were chained `add_ > add_ > add_`."""
    events = raw_events(recorded_trace(CONV))
    counters = [e for e in first_step_ops(events, {"aten::add_"}) if e["args"]["Input Dims"][:2] == [[], []]]
    assert len(counters) == 11 and {e["args"]["Input type"][0] for e in counters} == {"long int"}
    chains = [o for o in fusion_of(CONV).opportunities if o.kind == "chain"]
    assert not [o for o in chains if set(o.ops) == {"aten::add_"}]


GPT2 = "h200/audit/gpt2_train_eager.json.gz"


def test_a_foreach_op_moves_its_tensor_lists() -> None:
    """clip_grad_norm_'s `_foreach_mul_(grads, coef)`: from the raw events its TensorList holds 20,861,952
    fp32 elements, read and written (166,895,620 B with the 0-d coefficient; it was modelled at 4 B); its two
    kernels share one External id (one call: not producer and consumer); its roofline row moves those bytes
    in the kernels' time (~61 % of the H200's 4.8 TB/s). The group of the four 0-d kernels before it (add,
    reciprocal, mul, clamp: the clip coefficient) and the call saves at most those kernels' time."""
    events = raw_events(recorded_trace(GPT2))
    calls = [e for e in events if e.get("name") == "aten::_foreach_mul_" and e["args"]["Input type"][1] == "float"]
    elements = sum(math.prod(d) for d in calls[0]["args"]["Input Dims"][0])
    assert elements == 20_861_952
    kernels = [e for e in events if e.get("cat") == "kernel" and "BinaryOpScalarTensorFunctor" in e["name"]]
    assert len(kernels) == 2 * len(calls) == 8
    assert {e["args"]["External id"] for e in kernels} == {c["args"]["External id"] for c in calls}
    scalar_us = []
    cpu_ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    for call in calls:
        before = [e for e in cpu_ops if e["ts"] < call["ts"] and e["name"] in SCALAR_OPS]
        before = [e for e in before if e["args"]["Input Dims"][0] == []][-4:]
        assert [e["name"] for e in before] == ["aten::add", "aten::reciprocal", "aten::mul", "aten::clamp"]
        ids = {e["args"]["External id"] for e in before}
        scalar_us.append(
            sum(k["dur"] for k in events if k.get("cat") == "kernel" and k["args"].get("External id") in ids)
        )
    analysis = analyze(tracelens.load(recorded_trace(GPT2)))
    assert analysis.fusion is not None and analysis.roofline is not None
    row = next(o for o in analysis.fusion.opportunities if "aten::_foreach_mul_" in o.ops)
    assert row.est_saving_us <= sum(scalar_us) / len(scalar_us)  # 4.7 µs per step
    assert 0 < row.bytes_now - (2 * elements * 4 + 4) < 100  # the four 0-d kernels: a few scalars
    roofline = next(r for r in analysis.roofline.rows if "BinaryOpScalarTensorFunctor" in r.kernel)
    tbps = len(calls) * (2 * elements * 4 + 4) / (sum(k["dur"] for k in kernels) * 1e-6) / 1e12
    assert roofline.achieved_tbps == pytest.approx(tbps, rel=1e-3) and 55 < roofline.pct_of_peak < 65


SCALAR_OPS = {"aten::add", "aten::reciprocal", "aten::mul", "aten::clamp"}


@pytest.mark.slow
def test_log_softmax_to_nll_loss_keeps_the_result_the_backward_reads() -> None:
    """GPT-2 training's loss: copy_ (the bf16 logits to fp32), _log_softmax, nll_loss_forward. From the raw
    events: logits 4096 x 8192; nll_loss gathers one of the 8192 values per row (its kernel time, 17.6 µs, is
    the reduction's, not a 134 MB read); the backward's _log_softmax_backward_data reads a tensor of the
    result's shape as its `output` argument, and the execution trace shows it is the result's storage. So the
    group moves the logits in (bf16), the result out (fp32, for the backward), the target and the loss: 201.4
    of 469.8 MB (it claimed 604.0 → 67.1 MB), with or without --et."""
    path = recorded_trace(GPT2)
    events = raw_events(path)
    lsm = next(e for e in events if e.get("name") == "aten::_log_softmax")
    rows, vocab = lsm["args"]["Input Dims"][0]
    backward = next(e for e in events if e.get("name") == "aten::_log_softmax_backward_data")
    assert backward["args"]["Input Dims"][1] == [rows, vocab] and backward["args"]["Input type"][1] == "float"
    with gzip.open(path.with_name("gpt2_train_eager.et.gz"), "rt") as handle:
        nodes = json.load(handle)["nodes"]
    forward = next(n for n in nodes if n["name"] == "aten::_log_softmax")
    read = next(n for n in nodes if n["name"] == "aten::_log_softmax_backward_data" and n["id"] > forward["id"])
    assert read["inputs"]["values"][1][1] == forward["outputs"]["values"][0][1]  # the result's storage
    result = rows * vocab * 4
    loss = rows * 8 + rows * 4 + 4 + 4  # target, one gathered value per row, the loss and its total weight
    now = (result + result // 2) + 2 * result + loss  # copy_ (writes fp32, reads bf16), _log_softmax, nll
    fused = result // 2 + result + rows * 8 + 8  # the bf16 logits, the result, the target, the loss
    trace = tracelens.load(path)
    for et in (None, path.with_name("gpt2_train_eager.et.gz")):
        if et is not None:
            attach(trace, load_execution_trace(et))
        fusion = analyze(trace).fusion
        assert fusion is not None
        group = next(
            o for o in fusion.opportunities if o.ops == ["aten::copy_", "aten::_log_softmax", "aten::nll_loss_forward"]
        )
        assert (group.bytes_now, group.bytes_fused) == (now, fused)
        assert group.evidence == ("shapes" if et is None else "tensor ids")


OPMIX = "h200/audit/opmix_train.json.gz"


def test_layer_norm_does_not_link_across_the_index_select_that_writes_the_muls_input() -> None:
    """opmix: cat → LayerNorm → index_select (torch 2.11: `gather(h, 1, index, False, out)`) → mul(sel, 2).
    From the raw events, the gather reads LayerNorm's 16x256x2048 fp32 output and writes its `out=` buffer of
    that shape, which mul reads: LayerNorm's output is written (the gather reads it) and not linked to mul (the
    gather is the nearest writer of mul's input). cat → LayerNorm: now the two 16x256x1024 inputs (T) read and
    cat's T written, LayerNorm's T read and T written, plus its weight and bias; fused the inputs, LayerNorm's
    output and its parameters (the `out=` buffer is not a read of cat's output)."""
    events = raw_events(recorded_trace(OPMIX))
    ops = first_step_ops(events, {"aten::native_layer_norm", "aten::gather", "aten::mul"})
    at = next(i for i, e in enumerate(ops) if e["name"] == "aten::native_layer_norm")
    norm, gather, mul = ops[at : at + 3]
    tensor = norm["args"]["Input Dims"][0]
    assert (gather["name"], mul["name"]) == ("aten::gather", "aten::mul")
    assert gather["args"]["Input Dims"][0] == gather["args"]["Input Dims"][4] == mul["args"]["Input Dims"][0] == tensor
    t = math.prod(tensor) * 4
    params = 2 * tensor[-1] * 4
    chains = [o for o in fusion_of(OPMIX).opportunities if o.kind == "chain"]
    assert not [o for o in chains if "aten::native_layer_norm" in o.ops and "aten::mul" in o.ops]
    group = next(o for o in chains if "aten::native_layer_norm" in o.ops)
    assert group.ops == ["aten::cat", "aten::native_layer_norm"]
    assert (group.bytes_now, group.bytes_fused) == (4 * t + params, 2 * t + params)
