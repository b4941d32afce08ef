"""CPU dispatch layers (self time) and launch latency on a tiny hand-built step."""

from __future__ import annotations

from pathlib import Path

from tests.unit.tiny import cpu_bound_events, load_events
from tracelens.analyses.dispatch import analyze_dispatch
from tracelens.analyses.window import select_window


def test_layers_use_self_time_and_add_up_to_the_step(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    result = analyze_dispatch(trace, select_window(trace))
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
    result = analyze_dispatch(trace, select_window(trace))
    issued = {(a.name, a.issued_by): a.calls_per_step for a in result.api_calls}
    assert issued[("cudaLaunchKernel", "aten::mul")] == 1
    assert issued[("cudaLaunchKernel", "aten::gelu")] == 1
    assert issued[("cudaStreamIsCapturing", "(no op)")] == 1


def test_launch_latency_is_launch_start_to_gpu_start(tmp_path: Path) -> None:
    trace = load_events(tmp_path, cpu_bound_events())
    latency = analyze_dispatch(trace, select_window(trace)).launch_latency
    assert latency[0].api == "all" and latency[0].launches == 2
    assert (latency[0].p50_us, latency[0].max_us) == (4.0, 4.0)  # 16-12 and 36-32
