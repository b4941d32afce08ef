"""torch.compile inside the window, per compile id, against an independent reading of the raw events
(tests/independent/compiles.py: each Dynamo compile_inner / lazy backward compile and the region it precedes)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracelens
from tests.conftest import anchor, optional_corpus, recorded_trace
from tests.independent.compiles import compilations
from tracelens.analyses.pipeline import analyze
from tracelens.cli import main


def _expected(path: Path) -> dict[str | None, tuple[int | None, float]]:
    """Per compile id: the step of its first compilation and the summed ms of its compile spans."""
    expected: dict[str | None, tuple[int | None, float]] = {}
    for compile_id, step, ms in compilations(str(path)):
        first_step, total = expected.get(compile_id, (step, 0.0))
        expected[compile_id] = (first_step, total + ms)
    return expected


def test_static_shape_sweep_compiles_five_ids_inside_the_window(capsys: pytest.CaptureFixture[str]) -> None:
    """A torch.compile(dynamic=False) GeGLU MLP (H200) called with 512, 1024, 512, 2048, 4096, 8192 tokens,
    one profiled step each, 256 compiled before the window: five new shapes, five compiles (0/1..0/5); the
    repeat (step 3) reuses 0/1. Before: "10 compile spans" (each compile's Dynamo span and its first-call
    autotuning counted apart) and "recompiled: Torch-Compiled Region: 0/2" (only the region of a kept step)."""
    path = recorded_trace("h200/truth/sweep_static_compiled_mlp.json.gz")
    results = analyze(tracelens.load(path))
    compiled = results.compiled
    assert compiled is not None
    expected = _expected(path)
    assert [c.id for c in compiled.compiles] == list(expected) == ["0/1", "0/2", "0/3", "0/4", "0/5"]
    for entry in compiled.compiles:
        step, dynamo_ms = expected[entry.id]
        assert entry.step == step
        assert dynamo_ms - 0.001 <= entry.ms < dynamo_ms + 60  # + the first call's autotuning (27-38 ms measured)
    assert [c.step for c in compiled.compiles] == [1, 2, 4, 5, 6]
    assert len(compiled.recompiles) == 5
    assert compiled.steady_steps == [3] == results.summary.step_numbers
    assert "steady state from step(s) 3" in compiled.note
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [sorted(c) for c in document["compiled"]["compiles"]] == [["id", "ms", "step"]] * 5


@optional_corpus("other/Wings236__model_inference/trace_compile.json.gz")
def test_lazy_backward_compile_belongs_to_its_forward_id() -> None:
    """Wings236 ResNet-18 training: frame 0 compiled (forward 754 ms, then its backward 105 ms on the autograd
    thread at the first backward), then frame 1 after a graph break; no ProfilerStep, and each frame called once:
    no step (a call is not an iteration where several frames are called), so no compile belongs to one."""
    path = anchor("other/Wings236__model_inference/trace_compile.json.gz")
    compiled = analyze(tracelens.load(path)).compiled
    assert compiled is not None
    expected = _expected(path)
    assert [c.id for c in compiled.compiles] == list(expected) == ["0/0", "1/0"]
    assert [c.step for c in compiled.compiles] == [expected[c.id][0] for c in compiled.compiles] == [None, None]
    for entry in compiled.compiles:
        assert expected[entry.id][1] - 0.001 <= entry.ms < expected[entry.id][1] * 1.2  # ms rounded to the µs


def test_graph_replays_count_kernels_apart_from_memsets() -> None:
    """The audit's CUDA-graph inference: from the raw events, each `cudaGraphLaunch` replays 30 kernels and 7
    memsets; `kernels_per_replay` counts the kernels (it counted 37), `activities_per_replay` all of them."""
    path = recorded_trace("h200/audit/gpt2_infer_cudagraph.json.gz")
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    launches = {e["args"]["correlation"] for e in events if e.get("name") == "cudaGraphLaunch"}
    by_kind: dict[str, int] = {}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and e.get("args", {}).get("correlation") in launches:
            by_kind[e["cat"]] = by_kind.get(e["cat"], 0) + 1
    compiled = analyze(tracelens.load(path)).compiled
    assert compiled is not None and len(compiled.graph_replays) == 1
    replay = compiled.graph_replays[0]
    assert replay.kernels_per_replay == by_kind["kernel"] / len(launches) == 30
    assert replay.activities_per_replay == sum(by_kind.values()) / len(launches) == 37
