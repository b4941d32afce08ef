"""Edge cases of capture ↔ replay matching (docs/cuda_graphs.md) on tiny synthetic traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests.conftest import kernel, launch, op, step, write_trace
from tracelens.loader import load_trace
from tracelens.model.events import Kind


def _capture(t0: float, names: list[str], corr0: int) -> list[dict[str, Any]]:
    """A capture at t0: one op per launch (op name = the given name), no GPU kernel."""
    events = [launch("cudaStreamBeginCapture", t0, 1, corr0)]
    for i, name in enumerate(names):
        ts = t0 + 10 + 10 * i
        events += [
            op(name, ts, 8, ext=corr0 + 1 + i),
            launch("cudaLaunchKernel", ts + 1, 2, corr0 + 1 + i, ext=corr0 + 1 + i),
        ]
    events.append(launch("cudaStreamEndCapture", t0 + 10 + 10 * len(names), 1, corr0 + 99))
    return events


def _replay(t0: float, kernels: list[str], corr: int) -> list[dict[str, Any]]:
    events = [launch("cudaGraphLaunch", t0, 3, corr)]
    events += [kernel(name, t0 + 5 + 4 * i, 3, corr) for i, name in enumerate(kernels)]
    return events


def _ops_of_replayed(path: Path) -> tuple[list[str | None], tuple[str, ...]]:
    trace = load_trace(path, workers=1)
    events, links = trace.events, trace.links
    ks = np.flatnonzero(events.kind == Kind.KERNEL)
    ks = ks[np.argsort(events.ts_ns[ks], kind="stable")]
    return [events.name_of(links.op[i]) if links.op[i] >= 0 else None for i in ks], trace.warnings


def test_two_graphs_each_replay_takes_its_own_capture(tmp_path: Path) -> None:
    events = _capture(0, ["aten::mm", "aten::gelu"], 100) + _capture(100, ["aten::add", "aten::mul", "aten::mm"], 200)
    events += [
        step(1, 300, 200),
        *_replay(310, ["k_mm", "k_gelu"], 1000),
        *_replay(400, ["k_add", "k_mul", "k_mm"], 1001),
    ]
    ops, warnings = _ops_of_replayed(write_trace(tmp_path / "t.json", events))
    assert ops == ["aten::mm", "aten::gelu", "aten::add", "aten::mul", "aten::mm"]
    assert not [w for w in warnings if "graph" in w.lower()]


def test_one_graph_replayed_many_times_per_step(tmp_path: Path) -> None:
    events = [*_capture(0, ["aten::mm", "aten::gelu"], 100), step(1, 300, 500)]
    for r in range(5):
        events += _replay(310 + 50 * r, ["k_mm", "k_gelu"], 1000 + r)
    ops, _ = _ops_of_replayed(write_trace(tmp_path / "t.json", events))
    assert ops == ["aten::mm", "aten::gelu"] * 5


def test_capture_with_a_kernel_the_replay_lacks_is_warned_not_guessed(tmp_path: Path) -> None:
    events = [*_capture(0, ["aten::mm", "aten::gelu", "aten::mul"], 100), step(1, 300, 200)]
    events += _replay(310, ["k_mm", "k_gelu"], 1000)
    ops, warnings = _ops_of_replayed(write_trace(tmp_path / "t.json", events))
    assert ops == [None, None]
    assert [w for w in warnings if w.startswith("1 CUDA-graph launches match no capture")]
