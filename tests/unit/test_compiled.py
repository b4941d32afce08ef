"""torch.compile regions, graph breaks, recompiles, compilation in the window and CUDA-graph replays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import load_events
from tracelens.analyses import analyze
from tracelens.analyses.compiled import compiled_of, steady_window
from tracelens.analyses.window import select_window


def compiled_step(number: int, t0: float, compile_inside: bool = False) -> list[dict[str, Any]]:
    events = [
        step(number, t0, 100),
        op("TorchDynamo Cache Lookup", t0 + 1, 2),
        op("Torch-Compiled Region: 0/0", t0 + 5, 40),
        op("CompiledFunction", t0 + 6, 30),
        op("Torch-Compiled Region: 1/0", t0 + 50, 20),  # a second frame: graph break
        op("Torch-Compiled Region: 0/1", t0 + 75, 10),  # frame 0 recompiled
    ]
    if compile_inside:
        events.append(op("compile_fx_inner (dynamo_timed)", t0 + 7, 20, cat="user_annotation"))
    return events


def test_regions_graph_breaks_recompiles_and_compile_steps_excluded(tmp_path: Path) -> None:
    events = compiled_step(1, 0, compile_inside=True) + compiled_step(2, 100) + compiled_step(3, 200)
    trace = load_events(tmp_path, [*events, op("tail", 300, 1)])
    result = compiled_of(trace, select_window(trace))
    assert result.frames == [0, 1] and result.graph_breaks == 1
    assert result.recompiles == ["Torch-Compiled Region: 0/1"]
    assert result.compile_in_window and result.compile_us == 20.0
    assert result.excluded_steps == [1]
    assert steady_window(trace, select_window(trace)).step_numbers == (2, 3)
    region = next(r for r in result.regions if r.name == "Torch-Compiled Region: 0/0")
    # over steps 2 and 3: region 40 µs inclusive; self time 40 - 30 (CompiledFunction) = 10, + CompiledFunction 30
    assert (region.calls_per_step, region.us_per_step, region.overhead_us_per_step) == (1.0, 40.0, 40.0)
    assert result.cache_lookup_us_per_step == 2.0
    assert "steps 1 excluded" in result.note
    results = analyze(trace)
    assert results.summary.step_numbers == [2, 3]


def test_cuda_graph_replay_kernels_belong_to_the_launch_and_region(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        op("Torch-Compiled Region: 0/0", 5, 50),
        launch("cudaGraphLaunch", 10, 5, correlation=7),
        kernel("triton_poi_fused_add_0", 20, 3, correlation=7),
        kernel("triton_poi_fused_mul_1", 23, 3, correlation=7),
        kernel("nvjet_sm90_tst", 26, 4, correlation=7),
    ]
    trace = load_events(tmp_path, events)
    replays = compiled_of(trace, select_window(trace)).graph_replays
    assert len(replays) == 1
    replay = replays[0]
    assert (replay.launch_api, replay.region, replay.replays_per_step) == (
        "cudaGraphLaunch",
        "Torch-Compiled Region: 0/0",
        1.0,
    )
    assert (replay.kernels_per_replay, replay.gpu_us_per_replay) == (3.0, 10.0)


def test_compile_time_is_taken_out_of_gpu_idle_when_no_step_is_free_of_it(tmp_path: Path) -> None:
    events = [
        op("aten::mm", 0, 5, ext=1),
        launch("cudaLaunchKernel", 1, 2, correlation=1, ext=1),
        kernel("gemm_kernel", 5, 5, correlation=1),  # GPU busy 5-10
        op("compile_fx_inner (dynamo_timed)", 20, 60, cat="user_annotation"),  # compiling 20-80
        op("aten::mul", 84, 6, ext=2),
        launch("cudaLaunchKernel", 85, 4, correlation=2, ext=2),
        kernel("vectorized_elementwise_kernel", 90, 2, correlation=2),  # gap 10-90
    ]
    trace = load_events(tmp_path, events)
    results = analyze(trace)
    assert results.compiled is not None and results.compiled.excluded_events == 1
    assert results.bound is not None
    assert results.bound.launch_wait_us_per_step == 25.0  # 0-5, and the 80 µs gap less the 60 µs of compilation
    assert results.bound.compile_idle_us_per_step == 60.0
