"""Fusion estimates against reality (issue #14 item 2, issue #18 item 1): the estimated saving of every recorded
eager workload against the drop in memory-bound kernel time torch.compile realized on its twin (computed from
raw events by the stdlib script tests/realized_fusion.py), links by tensor identity from an execution trace, and
the GEMM-epilogue opportunity of the GeGLU MLP."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

import tracelens
from tests import synthetic_et
from tests.conftest import TRACES, recorded_trace
from tests.realized_fusion import realized_drop_us_per_step, twins
from tracelens.analyses import analyze
from tracelens.cli import main

TWINS = twins(TRACES / "h200")
TOLERANCE = 0.30
# Outside the band, and why (asserted below from raw events): at 512 tokens the tensors (16.8 MB) live in the
# H200's L2 and Inductor's fused kernel moves its 50.3 MB at 2.66 TB/s where eager's mul moves the same bytes at
# 4.39 TB/s; the estimate (8.8 µs) assumes the fused kernel as fast as the eager kernels were (3.0 µs realized).
# The GeGLU-kernel session's twin (traces/h200/geglu_session/, 4,096 tokens, power-capped during the recording):
# Inductor's kernel moved its 402.7 MB at 2.8 TB/s (144.1 µs) where eager's mul moved the same three tensors at
# 4.9 TB/s (82.7 µs), so only 21.3 µs of the estimated 66.1 µs was realized.
SLOW_COMPILED_KERNEL = {"sweep_eager_mlp_t512.json.gz", "geglu_session/eager_mlp.json.gz"}
# The GPT-style training block (block_sizes/gpt_h2048): Inductor's backward of the block's first LayerNorm (its
# `…native_layer_norm_backward_view_5` kernel and `_view_6` reductions, 68.2 µs per step) replaces eager's
# weight-gradient kernel of that LayerNorm (GammaBetaBackward, 22.2 µs): 46 µs more, which the estimate (the
# fused kernels as fast as the eager ones) does not foresee. The estimate's two groups, add → LayerNorm and the
# LayerNorm backward → the engine's add (11.3 and 17.0 µs), realized 9.6 and 23.5 µs.
SLOW_LAYER_NORM_BACKWARD = {"gpt_h2048/train_eager_block.json.gz"}
# Savings under 2 µs per step (the MLP at 8 and 64 tokens): the realized figure of the same program moves by up to
# 0.35 µs between recordings (8 tokens: 1.18, 0.92, 0.83 µs in extra, sweep_repeats/r1, r2), so the check there
# is absolute: within 0.6 µs per step (measured: at most 0.58, r1 at 64 tokens, 1.85 estimated vs 1.27)
TINY_US, TINY_ABS_US = 2.0, 0.6


def kernel_us_per_step(path: Path, name_part: str) -> float:
    """Total duration of the kernels whose name contains `name_part`, per profiler step (raw events)."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    return sum(e["dur"] for e in events if e.get("cat") == "kernel" and name_part in e["name"]) / len(steps)


def kernel_us(path: Path, name_part: str) -> float:
    """Mean duration of the kernels whose name contains `name_part` (raw events)."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    durations = [e["dur"] for e in events if e.get("cat") == "kernel" and name_part in e["name"]]
    return sum(durations) / len(durations)


@pytest.mark.parametrize(("eager", "compiled"), TWINS, ids=[e.name for e, _ in TWINS])
def test_estimated_saving_matches_what_inductor_realized(eager: Path, compiled: Path) -> None:
    estimate = analyze(tracelens.load(eager)).fusion.est_saving_us_per_step  # type: ignore[union-attr]
    realized = realized_drop_us_per_step(eager, compiled)
    shared = ("h200", "extra", "block", "r1", "r2")  # sweep_repeats/r1, r2: the same workloads as extra
    key = eager.name if eager.parent.name in shared else f"{eager.parent.name}/{eager.name}"
    if key in SLOW_COMPILED_KERNEL:
        assert estimate > (1 + TOLERANCE) * realized  # documented exception: the compiled kernel is the slow part
        with gzip.open(eager, "rt") as handle:
            tokens = json.load(handle)["tracelens_run"]["tokens"]
        tensor_mb = tokens * 16384 * 2 / 1e6
        fused_tbps = 3 * tensor_mb / kernel_us(compiled, "triton_poi_fused_gelu_mul") / 1e6
        eager_mul_tbps = 3 * tensor_mb / kernel_us(eager, "MulFunctor") / 1e6
        assert fused_tbps < 0.7 * eager_mul_tbps  # 2.66 vs 4.39 TB/s for the same three tensors
        return
    if key in SLOW_LAYER_NORM_BACKWARD:
        assert estimate > (1 + TOLERANCE) * realized  # documented exception: a compiled kernel is the slow part
        compiled_us = kernel_us_per_step(compiled, "native_layer_norm_backward_view_")
        eager_us = kernel_us_per_step(eager, "GammaBetaBackward") / 2  # two LayerNorms, one such kernel each
        assert compiled_us > 2.5 * eager_us  # 68.2 vs 22.2 µs
        return
    if realized < TINY_US:
        assert abs(estimate - realized) <= TINY_ABS_US, (estimate, realized)
        return
    assert abs(estimate - realized) <= TOLERANCE * realized + 1e-9, (estimate, realized)


def test_every_twin_of_the_recorded_traces_is_checked() -> None:
    # Linear, MLP (4096, i8192, 5 token counts), training, attention, the block (inference, training), the GeGLU
    # kernel session's eager/compiled pair, the training pair recorded with memory events, and the block_sizes
    # twins recorded to check the model on other blocks (Llama block at hidden 4096 and 1536, GPT-style block; each
    # inference and training), and the CUDA-graph session's eager/compiled MLP (256 tokens) and Llama block
    # (batch 1 x 256), recorded after the model was set (traces/h200/graphs), and the Truth III session's sync-chain
    # pair (an MLP with a host sync between its halves: fusion must not link across it; traces/h200/truth3), and
    # the sweep recorded twice more (traces/h200/sweep_repeats/r1, r2: 5 token counts each, held out), and the
    # longer recordings of the profiler-free session (sweep_long/r1, r2: 4 token counts each; block_long/r1, r2:
    # inference and training each; attn_long/r1, r2: one pair each)
    assert len(TWINS) == 48


def test_the_training_blocks_rope_and_qkv_gradient_copies_are_chained() -> None:
    """What Inductor fused in the eager training block's rotary embedding (traces/h200/block, raw events): in the
    forward, q·cos, rotate_half's `neg` and `cat`, ·sin and the add (whose second input is q·cos's output, not
    cat's: cat's was read by the mul, q·cos's by nobody yet); in the backward, the zeros of `slice_backward`
    (`fill_`), the engine's gradient accumulation (`add_`) and the `cat` that stacks the q, k, v gradients
    (UnbindBackward0, read through transposed views), which Inductor writes from one kernel. The forward
    groups of q and k are one: q's rotated output and k have one key, and k·cos is taken to read it (a shape
    coincidence, docs/fusion.md)."""
    path = recorded_trace("h200/block/train_eager_block.json.gz")
    fusion = analyze(tracelens.load(path)).fusion
    assert fusion is not None
    with_cat = [o.ops for o in fusion.opportunities if o.kind == "chain" and "aten::cat" in o.ops]
    rope = ["aten::mul", "aten::neg", "aten::cat", "aten::mul", "aten::add"]
    assert rope + rope in with_cat
    assert ["aten::fill_", "aten::add_", "aten::mul", "aten::add_", "aten::cat"] in with_cat
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    cats = sorted(e["dur"] for e in events if e.get("cat") == "kernel" and "CatArrayBatchedCopy" in e["name"])
    chained = sum(o.kernel_us_per_step for o in fusion.opportunities if o.kind == "chain" and "aten::cat" in o.ops)
    assert len(cats) == 9 and chained > sum(cats) / 3  # every cat of a step (2 forward, 1 backward) is in a chain


def test_execution_trace_links_by_tensor_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the synthetic execution trace of the eager MLP, gelu → mul is linked because mul reads the tensor
    gelu wrote; when mul reads another tensor of the same shape and dtype, nothing is linked."""
    trace = recorded_trace("h200/eager_mlp.json.gz")
    linked = synthetic_et.write(tmp_path / "et.json.gz")
    assert main(["analyze", str(trace), "--et", str(linked), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    chains = [o for o in document["fusion_opportunities"] if o["kind"] == "chain"]
    assert [(o["ops"], o["evidence"]) for o in chains] == [(["aten::gelu", "aten::mul"], "tensor ids")]
    tensor = 4096 * 16384 * 2
    assert (chains[0]["bytes_now"], chains[0]["bytes_fused"]) == (5 * tensor, 3 * tensor)
    unrelated = synthetic_et.write(tmp_path / "unrelated.json.gz", unrelated=True)
    assert main(["analyze", str(trace), "--et", str(unrelated), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["fusion"]["evidence"] == "tensor ids"
    assert [o for o in document["fusion_opportunities"] if o["kind"] == "chain"] == []


def test_committed_synthetic_execution_trace_is_what_the_generator_writes(tmp_path: Path) -> None:
    fresh = synthetic_et.write(tmp_path / "et.json.gz")
    assert gzip.decompress(fresh.read_bytes()) == gzip.decompress(synthetic_et.OUT.read_bytes())


def test_unusable_execution_trace_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": 3}')
    trace = recorded_trace("h200/eager_mlp.json.gz")
    assert main(["analyze", str(trace), "--et", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("tracelens: error:") == 1 and "Traceback" not in err


@pytest.mark.parametrize("variant", ["eager_mlp", "compiled_mlp"])
def test_gemm_epilogue_opportunity_of_the_geglu_mlp(variant: str) -> None:
    """The gelu·mul consumer of the gate/up GEMMs could live in their epilogue: gate and up would no longer be
    written and read back (4 x 134.2 MB; eager also drops gelu's intermediate: 6 x), and the consumer kernels'
    time is saved (from raw events: compiled 93.8 µs, eager 89.8 + 90.4 µs)."""
    path = recorded_trace(f"h200/{variant}.json.gz")
    fusion = analyze(tracelens.load(path)).fusion
    assert fusion is not None
    found = [o for o in fusion.opportunities if o.kind == "gemm_epilogue"]
    assert len(found) == 1 and len(found[0].gemm_kernels) == 2  # the gate and up GEMMs
    tensor = 4096 * 16384 * 2
    no_longer_moved = found[0].bytes_now - found[0].bytes_fused
    if variant == "compiled_mlp":
        assert found[0].ops == ["triton_poi_fused_gelu_mul_0"] and no_longer_moved == 4 * tensor
        consumer_us = kernel_us(path, "triton_poi_fused_gelu_mul_0")
    else:
        assert found[0].ops == ["aten::gelu", "aten::mul"] and no_longer_moved == 6 * tensor
        consumer_us = kernel_us(path, "GeluCUDAKernelImpl") + kernel_us(path, "MulFunctor")
    assert found[0].est_saving_us == pytest.approx(consumer_us, abs=0.01)
    assert math.isclose(fusion.gemm_epilogue_saving_us_per_step, found[0].est_saving_us, abs_tol=1e-3)


def test_training_backward_group_counts_the_shared_gradient_once() -> None:
    """Eager training MLP, backward: MulBackward0's two products (grad·up and grad·gelu) and GeluBackward0. The
    products are siblings (never producer and consumer); they share the incoming gradient; grad·up feeds
    gelu_backward. From the raw `Input Dims` of the backward muls (S = 4096 x 16384 bf16): now 3 kernels x 3 S;
    fused reads grad, up, gelu, gate (4 S) and writes the up gradient and the gate gradient (2 S)."""
    path = recorded_trace("h200/extra/train_eager_mlp.json.gz")
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    mul = next(e for e in events if e.get("name") == "aten::mul" and e.get("cat") == "cpu_op")
    s = math.prod(mul["args"]["Input Dims"][0]) * 2
    fusion = analyze(tracelens.load(path)).fusion
    assert fusion is not None
    backward = [o for o in fusion.opportunities if o.kind == "chain" and "aten::gelu_backward" in o.ops]
    assert [o.ops for o in backward] == [["aten::mul", "aten::mul", "aten::gelu_backward"]]
    assert (backward[0].bytes_now, backward[0].bytes_fused) == (9 * s, 6 * s)
