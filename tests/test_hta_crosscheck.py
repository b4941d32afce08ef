"""Kernel totals by name and per-step kernel counts, checked against HolisticTraceAnalysis on the same traces.

Known, explained differences: HTA 0.5 rounds ns-resolution ts and dur down to whole µs (so sums are compared
with a per-kernel tolerance on float-µs traces), drops the last ProfilerStep (HTA #76), and reads no legacy
`Kernel` category.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import tracelens
from tests.conftest import anchor
from tracelens.model.events import Kind

hta_trace_analysis = pytest.importorskip("hta.trace_analysis")


def hta_kernels(path: Path, tmp_path: Path) -> tuple[dict[str, tuple[float, int]], dict[int, int]]:
    """HTA's kernel (total µs, calls) by name, and kernel count by iteration."""
    shutil.copy(path, tmp_path / path.name)
    analysis = hta_trace_analysis.TraceAnalysis(trace_dir=str(tmp_path))
    frame = analysis.t.get_trace(analysis.t.get_ranks()[0])
    symbols = analysis.t.symbol_table.sym_table
    kernel_cat = [i for i, s in enumerate(symbols) if s == "kernel"]
    kernels = frame[frame["cat"].isin(kernel_cat)]
    totals = {symbols[int(n)]: (float(g["dur"].sum()), len(g)) for n, g in kernels.groupby("name")}
    return totals, {int(k): int(v) for k, v in kernels["iteration"].value_counts().items()}


def our_kernels(trace: tracelens.Trace, steps: set[int] | None = None) -> dict[str, tuple[float, int]]:
    ev = trace.events
    mask = ev.kind == Kind.KERNEL
    if steps is not None:
        numbers = np.where(trace.links.step >= 0, trace.steps.number[np.maximum(trace.links.step, 0)], -1)
        mask &= np.isin(numbers, list(steps))
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for code, dur in zip(ev.name[mask], ev.dur_ns[mask], strict=True):
        totals[ev.names[code]][0] += dur / 1000
        totals[ev.names[code]][1] += 1
    return {name: (total, int(calls)) for name, (total, calls) in totals.items()}


def test_deepseek_kernel_totals_equal_hta_exactly(tmp_path: Path) -> None:
    path = anchor("other/deepseek-ai__profile-data/train.json.gz")  # integer µs: no rounding difference
    theirs, _ = hta_kernels(path, tmp_path)
    assert our_kernels(tracelens.load(path)) == theirs
    assert sum(calls for _, calls in theirs.values()) == 963


def test_qwen_kernel_calls_equal_hta_and_times_within_its_rounding(tmp_path: Path) -> None:
    path = anchor("amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    theirs, _ = hta_kernels(path, tmp_path)
    ours = our_kernels(tracelens.load(path))
    assert set(ours) == set(theirs)
    for name, (total_us, calls) in ours.items():
        assert calls == theirs[name][1]
        # HTA trims ns-resolution events to whole µs ("rounding down ... due to overlapping"), up to ~1 µs each
        assert abs(theirs[name][0] - total_us) <= 2 * calls


@pytest.mark.slow
def test_per_step_kernel_counts_equal_hta_where_hta_keeps_the_step(tmp_path: Path) -> None:
    path = anchor("hta/trace_diff/control/control.json.gz")
    theirs, by_iteration = hta_kernels(path, tmp_path)
    trace = tracelens.load(path)
    summary = tracelens.analyze(trace).summary
    ours_by_step = {row.number: int(row.kernels) for row in summary.step_table}
    assert ours_by_step == {n: 1428 for n in range(1009, 1015)}
    assert by_iteration == {n: 1428 for n in range(1009, 1014)}  # HTA drops the last step, 1014
    assert our_kernels(trace, set(by_iteration)) == theirs  # integer-µs trace: identical totals
