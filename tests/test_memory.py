"""The `memory` analysis and the memory/counter tables, against an independent stdlib computation
(`tests/memory_reference.py`) on the corpus traces recorded with profile_memory=True."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from tests import memory_reference as ref
from tests.conftest import anchor, op, step, write_trace
from tracelens.analyses.memory import Memory, memory_of
from tracelens.analyses.window import select_window
from tracelens.loader import load_trace
from tracelens.model.trace import Trace
from tracelens.records import shallow_dict

DF = "hta/df_index_resolver/df_index_resolver.json.gz"  # CUDA, torch.compile, 5 steps, Addr and totals
QWEN_MI300 = "amd_tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"  # ROCm (Device Type 6)
QWEN_H100 = "amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
OLD_KINETO = "other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz"  # 2021: Bytes only


@functools.cache
def _analyzed(relative: str) -> tuple[Trace, Memory]:
    trace = load_trace(anchor(relative), workers=1)
    return trace, memory_of(trace, select_window(trace))


@pytest.mark.parametrize("relative", [DF, QWEN_MI300, QWEN_H100, OLD_KINETO])
def test_memory_table_holds_every_memory_event(relative: str) -> None:
    trace, _ = _analyzed(relative)
    raw = ref.memory_events(ref.raw_events(anchor(relative)))
    assert len(trace.memory) == len(raw)
    assert int(trace.memory.bytes.sum()) == sum(e["args"]["Bytes"] for e in raw)
    assert sorted(trace.memory.device_type.tolist()) == sorted(e["args"]["Device Type"] for e in raw)
    assert np.all(np.diff(trace.memory.ts_ns) >= 0)
    # the streamed (forked) decode gives the same table as one process
    forked = load_trace(anchor(relative), workers=3)
    for name in ("ts_ns", "bytes", "total_allocated", "addr", "track", "op"):
        assert np.array_equal(getattr(forked.memory, name), getattr(trace.memory, name)), name


@pytest.mark.parametrize("relative", [DF, QWEN_MI300, QWEN_H100])
def test_per_step_figures_match_the_reference(relative: str) -> None:
    _, result = _analyzed(relative)
    _assert_matches_reference(result, anchor(relative))


def _assert_matches_reference(result: Memory, path: Path) -> None:
    """Every per-step figure and the top allocating ops of `result` equal tests/memory_reference.py's reading."""
    events = ref.raw_events(path)
    mem = ref.memory_events(events)
    bounds = ref.step_bounds(events)
    gpu = [d for d in {ref.device_of(e) for e in mem} if d[0] != 0]
    assert len(gpu) == 1
    assert result.device == f"GPU {gpu[0][1]}"
    assert result.steps
    for row in result.steps:
        expected = ref.per_step(mem, gpu[0], *bounds[row.step])
        assert row.peak_allocated_bytes == expected["peak_allocated"]
        assert row.peak_reserved_bytes == expected["peak_reserved"]
        assert row.allocations == expected["allocations"]
        assert row.allocated_bytes == expected["allocated_bytes"]
        assert row.frees == expected["frees"]
        assert row.outliving_allocations == expected["outliving"]
        assert row.outliving_bytes == expected["outliving_bytes"]
    windows = [bounds[row.step] for row in result.steps]
    by_op = ref.op_bytes(events, mem, gpu[0], windows)
    top = sorted(by_op.items(), key=lambda item: (-item[1], item[0]))[: len(result.by_op)]
    assert [(r.op, round(r.bytes_per_step * len(windows))) for r in result.by_op] == top


def test_df_index_resolver_figures() -> None:
    """The figures checked above, written out (GPU 1, steps 2-6 of the HTA test trace)."""
    _, result = _analyzed(DF)
    assert result.device == "GPU 1"
    assert [s.step for s in result.steps] == [2, 3, 4, 5, 6]
    assert result.peak_allocated_bytes == 6_629_508_096
    assert result.peak_reserved_bytes == 12_782_141_440
    assert result.allocations_per_step == 2677
    assert result.allocated_bytes_per_step == 10_493_824_000
    assert result.outliving_allocations_per_step == 0
    assert result.by_op[0].op == "autograd::engine::evaluate_function: CompiledFunctionBackward"


def test_old_traces_without_totals_or_addresses_say_unknown() -> None:
    _, result = _analyzed(OLD_KINETO)
    assert result.peak_allocated_bytes is None and result.peak_reserved_bytes is None
    assert result.outliving_allocations_per_step is None
    assert "no Total Allocated" in result.note and "no Addr" in result.note
    events = ref.raw_events(anchor(OLD_KINETO))
    mem = ref.memory_events(events)
    bounds = ref.step_bounds(events)
    gpu = next(d for d in {ref.device_of(e) for e in mem} if d[0] != 0)
    for row in result.steps:
        expected = ref.per_step(mem, gpu, *bounds[row.step])
        assert (row.allocations, row.allocated_bytes) == (expected["allocations"], expected["allocated_bytes"])
    assert all(not r.op.startswith("ProfilerStep#") for r in result.by_op)


def test_no_memory_events_is_null_with_a_reason() -> None:
    trace = load_trace(anchor("hta/trace_diff/control/control.json.gz"), workers=1)
    result = memory_of(trace, select_window(trace))
    assert result.peak_allocated_bytes is None and result.device is None
    assert "profile_memory=True" in result.note
    assert len(trace.memory) == 0 and len(trace.counters) == 0


def _memory_event(ts: float, addr: int, size: int, total: int, tid: int = 1) -> dict[str, object]:
    args = {"Addr": addr, "Bytes": size, "Total Allocated": total, "Total Reserved": 1 << 20}
    args |= {"Device Id": 0, "Device Type": 1}
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "args": args,
    }


def test_synthetic_steps_ops_and_outliving(tmp_path: Path) -> None:
    """Step 1: a 100 B allocation in aten::linear freed in step 2, a 50 B one freed in step 1; the level carried
    into step 2 (150 B... then 100 B) is its peak until a 300 B allocation."""
    events = [
        step(1, 0, 100),
        step(2, 100, 100),
        op("aten::linear", 10, 30),
        op("aten::empty", 12, 2),
        op("aten::relu", 150, 10),
        _memory_event(13, 0xA0, 100, 100),
        _memory_event(20, 0xB0, 50, 150),
        _memory_event(30, 0xB0, -50, 100),
        _memory_event(120, 0xA0, -100, 0),
        _memory_event(155, 0xC0, 300, 300),
        _memory_event(156, 0xC0, -300, 0),
        {"ph": "C", "name": "queue", "pid": 100, "ts": 5, "args": {"length": 3, "note": "x"}},
    ]
    trace = load_trace(write_trace(tmp_path / "t.json", events), workers=1)
    assert trace.events.names_at(trace.memory.op.astype(np.int64)) == [
        "aten::empty",
        "aten::linear",
        "aten::linear",
        "",
        "aten::relu",
        "aten::relu",
    ]
    result = memory_of(trace, select_window(trace))
    first, second = result.steps
    assert (first.peak_allocated_bytes, second.peak_allocated_bytes) == (150, 300)
    assert (first.outliving_allocations, first.outliving_bytes) == (1, 100)
    assert (second.outliving_allocations, second.outliving_bytes) == (0, 0)
    assert [(r.op, r.bytes_per_step) for r in result.by_op] == [("aten::relu", 150.0), ("aten::linear", 75.0)]
    assert [(r.op, r.bytes_per_step) for r in result.by_inner_op][1] == ("aten::empty", 50.0)
    counters = trace.counters
    assert (counters.names, counters.series_names, counters.value.tolist()) == (("queue",), ("length",), [3.0])


def test_tables_round_trip_through_the_model_serialization(tmp_path: Path) -> None:
    trace, _ = _analyzed(DF)
    events = [step(1, 0, 100), op("aten::mm", 1, 5)]
    events += [{"ph": "C", "name": "bw", "pid": 1, "ts": t, "args": {"GB/s": t * 1.5}} for t in (1, 2)]
    with_counters = load_trace(write_trace(tmp_path / "c.json", events), workers=1)
    for source in (trace, with_counters):
        back = Trace.from_plain(*source.to_plain())
        for table in ("memory", "counters"):
            original, copy = getattr(source, table), getattr(back, table)
            assert len(original) and len(copy) == len(original) if table == "memory" and source is trace else True
            for name, value in shallow_dict(original).items():
                other = getattr(copy, name)
                assert np.array_equal(value, other) if isinstance(value, np.ndarray) else value == other, name
    assert len(with_counters.counters) == 2 and len(trace.memory) == 28010


def test_counter_lanes_below_the_gpu_lanes(tmp_path: Path) -> None:
    """No corpus trace has `ph: "C"` events: a synthetic one with two series of one counter and a kernel."""
    from tests.conftest import kernel, launch
    from tracelens.analyses.summary import gpu_activity_frame
    from tracelens.report.timeline import timeline_panel

    samples = [(0, 1.0, 10.0), (40, 3.0, 30.0), (80, 2.0, 20.0)]
    events = [step(1, 0, 100), op("aten::mm", 5, 20), launch("cudaLaunchKernel", 10, 5, 7), kernel("gemm", 20, 30, 7)]
    events += [
        {"ph": "C", "name": "Memory Bandwidth", "pid": 0, "ts": t, "args": {"read": r, "write": w}}
        for t, r, w in samples
    ]
    trace = load_trace(write_trace(tmp_path / "c.json", events), workers=1)
    panel = timeline_panel(trace, gpu_activity_frame(trace))
    assert panel.figure is not None
    lanes = [t for t in panel.figure.data if str(t.name).startswith("Memory Bandwidth")]
    assert [t.name for t in lanes] == ["Memory Bandwidth: read", "Memory Bandwidth: write"]
    ticks = dict(zip(panel.figure.layout.yaxis.ticktext, panel.figure.layout.yaxis.tickvals, strict=True))
    gpu_lane = max(v for k, v in ticks.items() if not k.startswith("Memory Bandwidth"))
    for trace_line, column in zip(lanes, (1, 2), strict=True):
        lane = ticks[trace_line.name]
        assert lane > gpu_lane  # below every other lane (the y axis runs downward)
        assert list(trace_line.x) == [0.0, 40.0, 80.0]
        assert list(trace_line.customdata) == [s[column] for s in samples]
        # highest value at the top of the lane, lowest at the bottom
        assert list(trace_line.y) == pytest.approx([lane + 0.4, lane - 0.4, lane])
        # the page's level-of-detail script leaves it alone; its CPU depth folding moves it with the lanes above
        assert trace_line.meta == {"lod": "counter"}
    assert "2 counter lanes" in panel.note


def test_memory_timeline_panel_draws_every_device() -> None:
    from tracelens.renderers.analyses.memory import memory_panels
    from tracelens.renderers.jsonout import memory_json

    trace, result = _analyzed(DF)
    drawn = memory_panels(result, None)  # type: ignore[arg-type]
    figure = drawn.breakdowns[0].figure
    assert figure is not None
    assert sorted(t.name for t in figure.data) == ["CPU allocated", "CPU reserved", "GPU 1 allocated", "GPU 1 reserved"]
    gpu = next(t for t in figure.data if t.name == "GPU 1 allocated")
    assert max(gpu.y) * (1 << 30) == pytest.approx(int(trace.memory.total_allocated.max()))
    assert "timeline" not in memory_json(result, None)["memory"]  # type: ignore[arg-type]


def test_cut_off_and_repaired_files(tmp_path: Path) -> None:
    """A file cut off mid-write keeps the memory events before the cut; a file that needed type repairs says
    its memory events were not read (never "no memory events")."""
    events = [step(1, 0, 100), op("aten::mm", 10, 30)]
    events += [_memory_event(11 + i, 0xA0 + i, 64, 64 * (i + 1)) for i in range(20)]
    whole = write_trace(tmp_path / "whole.json", events).read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: whole.rindex(b"[memory]")])  # inside the last memory event
    trace = load_trace(cut, workers=1)
    assert trace.truncation.truncated and len(trace.memory) == 19
    odd = tmp_path / "odd.json"
    odd.write_bytes(whole.replace(b'"dur": 30', b'"dur": "30"'))
    trace = load_trace(odd, workers=1)
    assert len(trace.memory) == 0
    assert any(w.startswith("memory and counter events, if any, were not read") for w in trace.warnings)
    assert "were not read" in memory_of(trace, select_window(trace)).note


@pytest.mark.slow
def test_workloads_record_memory_events_on_request(tmp_path: Path) -> None:
    """`python -m workloads.record --profile-memory` (CPU smoke shapes) writes [memory] events that the analysis
    reads (CPU allocations here; the same option on the GPU gives the GPU's)."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    from tests.conftest import REPO

    out = tmp_path / "traces"
    command = [sys.executable, "-m", "workloads.record", "--smoke", "--profile-memory", "--variant", "eager_mlp"]
    subprocess.run([*command, "--out", str(out)], cwd=REPO, check=True, capture_output=True, timeout=600)
    trace = load_trace(out / "eager_mlp.json.gz", workers=1)
    result = memory_of(trace, select_window(trace))
    assert len(trace.memory) > 0 and result.allocations_per_step
    assert result.by_op and result.by_op[0].op.startswith("aten::")


H200_MEMORY = ("traces/h200/memory/train_eager_mlp.json.gz", "traces/h200/memory/train_compiled_mlp.json.gz")


@pytest.mark.parametrize("path", H200_MEMORY)
def test_h200_training_traces_with_memory_events_match_the_reference(path: str) -> None:
    """Training steps (forward, backward, AdamW) of the GeGLU MLP recorded on the H200 with
    `python -m workloads.record --extras train --profile-memory` (traces/README.md)."""
    trace = load_trace(Path(path), workers=1)
    result = memory_of(trace, select_window(trace))
    assert len(result.steps) == 5
    _assert_matches_reference(result, Path(path))
    assert result.peak_allocated_bytes is not None and result.peak_allocated_bytes > 0
