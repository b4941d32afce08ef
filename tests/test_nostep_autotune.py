"""Steps inferred without ProfilerStep, and Inductor's autotuning kept out of them, against an independent reading.

`tests/independent/nostep_autotune.py` recomputes, from the raw JSON with the standard library only, the
autotuning kernels and L2-flush fills (by the enclosing ranges of their launches) and the inferred steps
(outermost `Torch-Compiled Region` calls); docs/definitions.md states the definitions both follow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracelens
from tests import anchors
from tests.conftest import TRACES, anchor_traces, recorded_trace
from tests.independent.nostep_autotune import figures
from tracelens.analyses.autotune import autotune_of
from tracelens.analyses.pipeline import analyze
from tracelens.model.events import Kind

NOSTEP = "h200/truth3/nostep_autotune_mlp.json.gz"


@pytest.mark.slow
def test_autotuning_and_inferred_steps_on_the_no_step_sweep() -> None:
    path = recorded_trace(NOSTEP)
    want = figures(str(path))
    trace = tracelens.load(path)
    got = autotune_of(trace)
    assert got is not None
    got_counts = (got.kernels, got.l2_flush_fills, got.other_gpu_activities)
    assert got_counts == (want["kernels"], want["fills"], want["other"])
    assert got.gpu_us == pytest.approx(want["gpu_ns"] / 1000, abs=0.1)
    assert got.l2_flush_gpu_us == pytest.approx(want["fill_ns"] / 1000, abs=0.1)
    assert got.kernels >= 12_216 + 32_000  # the earlier look: 12,216 Placeholder launches, ~32,440 fills
    steps = trace.steps
    assert steps.source == "inferred" and len(steps) == len(want["steps"]) == 9  # 3 shapes x 3 calls
    assert _same_spans(trace, want["steps"])
    kernel = trace.events.kind == Kind.KERNEL
    per_step = [int(((trace.links.step == i) & kernel).sum()) for i in range(len(steps))]
    assert per_step == want["kernels_per_step"]  # autotuning kernels in no step
    results = analyze(trace)
    for row in results.summary.step_table:
        assert row.kernels == want["kernels_per_step"][row.number - 1]
    assert results.compiled is not None and results.compiled.autotune == got
    workload_kernels = sum(k.calls_per_step for k in results.summary.kernels) * results.summary.steps
    assert workload_kernels < 100  # the kernel table holds no benchmark launch (47,809 kernels in the trace)


def _same_spans(trace: tracelens.Trace, spans: list[tuple[int, int]]) -> bool:
    """The inferred steps have the independent spans (ns), in the trace's time origin."""
    offset = round(trace.origin_us * 1000)
    got = [(int(s) + offset, int(e) + offset) for s, e in zip(trace.steps.start_ns, trace.steps.end_ns, strict=True)]
    return all(abs(a - c) <= 1 and abs(b - d) <= 1 for (a, b), (c, d) in zip(got, spans, strict=True))


def _no_step_traces() -> list[Path]:
    found = []
    for path in [*anchor_traces(), *anchors.recorded(TRACES)]:
        if path.stat().st_size < 400_000 and "ProfilerStep#" not in _text(path):
            found.append(path)
    return found


def _text(path: Path) -> str:
    import gzip

    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()


@pytest.mark.parametrize("path", _no_step_traces(), ids=lambda p: p.name)
def test_small_no_step_traces_infer_the_independent_steps(path: Path) -> None:
    """Every small trace without ProfilerStep: the inferred steps are the independent ones, or there are none
    and the trace is one whole-trace window (no per-step claims)."""
    want = figures(str(path))
    trace = tracelens.load(path)
    if not want["steps"]:
        assert trace.steps.source == "whole_trace" and not trace.steps.per_step
        return
    assert trace.steps.source == "inferred" and len(trace.steps) == len(want["steps"])
    assert _same_spans(trace, want["steps"])


@pytest.mark.slow
def test_compare_makes_per_step_claims_only_over_steps() -> None:
    """compare on the no-step sweep: its per-step figures are over the inferred steps (one call, not the 89 s
    trace: "fastest step … 3,890,112 µs/step" before), its shape rows come from the independent steps with their
    compile time, and a trace with nothing repeated stays a whole-trace variant with no step time."""
    from tracelens.analyses.compare import _categories, _variant_fusions, compare_variants
    from tracelens.analyses.fused_credit import kernel_slots

    nostep = recorded_trace(NOSTEP)
    eager = recorded_trace("h200/sweep/eager_geglu.json.gz")
    want = figures(str(nostep))
    items = []
    for path in (eager, nostep):
        trace = tracelens.load(path)
        items.append((path.name, trace, analyze(trace)))
    comparison = compare_variants(items)
    variant = comparison.variants[1]
    assert variant.step_source == "inferred"
    longest_call_us = max(end - start for start, end in want["steps"]) / 1000
    assert variant.per_step.step_us is not None and variant.per_step.step_us < longest_call_us
    assert [row.steps for row in variant.shapes] == [[4, 5, 6], [7, 8, 9]]  # the 512-token calls have no GEMM op
    assert all(row.compile_ms > 1000 for row in variant.shapes)  # each shape's recompile, paid before its call
    # the sweep is another program than the eager GeGLU sweep (412.3 against 463.9 GEMM GFLOP a step): compare
    # credits it with nothing and says so (since 2026-12-07); the crediting itself, asked for all the same, counts
    # no autotuning benchmark launch per step
    assert not [row for row in comparison.fusions if row.variant == nostep.name]
    assert any("fused kernels are not credited" in v for v in comparison.verdicts)
    (_, base_trace, base_results), (_, trace, results) = items
    slots = kernel_slots(base_trace, _categories(base_results))
    rows, _ = _variant_fusions(nostep.name, trace, results, eager.name, base_results, slots)
    assert rows and all(row.instances_per_step <= 2 for row in rows)  # no benchmark launch counted per step
    assert all(row.kernel_us_per_step < 1000 for row in rows)  # was 2,141,121.5 µs/step of triton_mm benchmarks


def test_the_loop_frame_is_the_most_called() -> None:
    """Several compiled frames: the iterations are marked by the frame called most (the first called of those), not
    by a function compiled and called once before the loop (audit, 2026-12-07)."""
    from tracelens.model.steps import _loop_frame

    assert _loop_frame(np.array([5, 0, 1, 0, 1, 0, 1])) == 0
    assert _loop_frame(np.array([0, 1, 1, 1])) == 1
    assert _loop_frame(np.array([2, 1, 2, 1])) == 2
