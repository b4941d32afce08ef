"""CPU dispatch layers (self time) and launch latency on a tiny hand-built step."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import cpu_bound_events, load_events
from tracelens.analyses.dispatch import LAYERS, classify_layers, dispatch_of
from tracelens.analyses.window import select_window


def test_layers_use_self_time_and_add_up_to_the_step(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    result = dispatch_of(trace, select_window(trace))
    layers = {layer.name: (layer.calls_per_step, layer.us_per_step) for layer in result.layers}
    # step 100 µs minus its children (t 3 + mul 10 + query 1 + gelu 10 + sync 10) = 66 µs of Python
    assert layers["python"] == (1, 66.0)
    assert layers["ops_launching"] == (2, 10.0)  # mul and gelu: 10 µs each minus their 5 µs launches
    assert layers["cpu_only_ops"] == (1, 3.0)  # aten::t launched nothing
    assert layers["launch"] == (2, 10.0)
    assert layers["query"] == (1, 1.0)
    assert layers["sync"] == (1, 10.0)
    assert result.cpu_us_per_step == 100.0
    assert result.dispatch_us_per_step == 24.0  # ops, launches and the query; not Python, not the sync wait


def test_api_calls_name_the_op_that_issued_them(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    result = dispatch_of(trace, select_window(trace))
    issued = {(a.name, a.issued_by): a.calls_per_step for a in result.api_calls}
    assert issued[("cudaLaunchKernel", "aten::mul")] == 1
    assert issued[("cudaLaunchKernel", "aten::gelu")] == 1
    assert issued[("cudaStreamIsCapturing", "(no op)")] == 1


def test_launch_latency_is_launch_start_to_gpu_start(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    latency = dispatch_of(trace, select_window(trace)).launch_latency
    assert latency[0].api == "all" and latency[0].launches == 2
    assert (latency[0].p50_us, latency[0].max_us) == (4.0, 4.0)  # 16-12 and 36-32


def test_layers_from_kind_name_and_what_ran_below(tmp_path: Path) -> None:
    """Ops are `ops_launching` when any launch is below them (however deep, however many), compile wrappers
    `compiled` even when they launch, an async copy into pageable memory `sync` (the CPU waits for it)."""
    events = [
        step(1, 0, 200),
        op("aten::linear", 10, 40),
        op("aten::addmm", 12, 30),
        launch("cudaLaunchKernel", 14, 5, correlation=1),
        launch("cudaLaunchKernel", 22, 5, correlation=2),
        kernel("gemm_a", 20, 2, correlation=1),
        kernel("gemm_b", 30, 2, correlation=2),
        op("aten::view", 60, 2),
        op("Torch-Compiled Region: 0/0", 70, 20),
        launch("cuLaunchKernel", 72, 5, correlation=3),
        kernel("triton_poi_fused_0", 80, 2, correlation=3),
        op("aten::item", 100, 30),
        launch("cudaMemcpyAsync", 102, 25, correlation=4),
        kernel("Memcpy DtoH (Device -> Pageable)", 110, 5, correlation=4, cat="gpu_memcpy"),
        launch("cudaGetDevice", 140, 1, correlation=5),
    ]
    trace = load_events(tmp_path, events)
    ev, layer = trace.events, classify_layers(trace)
    got = {(ev.names[ev.name[i]], float(ev.ts_ns[i]) / 1000): LAYERS[layer[i]] for i in range(len(ev)) if layer[i] >= 0}
    assert got == {
        ("ProfilerStep#1", 0): "python",
        ("aten::linear", 10): "ops_launching",
        ("aten::addmm", 12): "ops_launching",
        ("cudaLaunchKernel", 14): "launch",
        ("cudaLaunchKernel", 22): "launch",
        ("aten::view", 60): "cpu_only_ops",
        ("Torch-Compiled Region: 0/0", 70): "compiled",
        ("cuLaunchKernel", 72): "launch",
        ("aten::item", 100): "cpu_only_ops",  # its only call is the blocking copy, not a launch
        ("cudaMemcpyAsync", 102): "sync",
        ("cudaGetDevice", 140): "query",
    }
