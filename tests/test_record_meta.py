"""The loader's reading of `tracelens_record` (tracelens/loader/record_meta.py): what is taken as a measured
profiler-free step, and what is refused (never a 0, a NaN or a negative step)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tracelens.loader import load_trace
from tracelens.loader.record_meta import profiler_free_of

GOOD = {"clock": "cuda_events", "steps": 5, "step_us": [10.0] * 5, "median_step_us": 10.0}


def test_a_complete_record_is_read() -> None:
    timing = profiler_free_of({"tracelens_record": {"version": 1, "profiler_free": GOOD, "partial_reason": "x"}})
    assert timing is not None
    assert (timing.step_us, timing.steps, timing.clock, timing.key, timing.partial_reason) == (
        10.0, 5, "cuda_events", "tracelens_record", "x",
    )  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"median_step_us": 0},
        {"median_step_us": -1.0},
        {"median_step_us": float("nan")},
        {"median_step_us": float("inf")},
        {"median_step_us": True},
        {"median_step_us": "10"},
        {"median_step_us": None},
        {"steps": 0},
        {"steps": 2.5},
        {"steps": True},
        {"clock": "sundial"},
    ],
)
def test_unusable_timings_are_not_read(change: dict[str, Any]) -> None:
    assert profiler_free_of({"tracelens_record": {"profiler_free": {**GOOD, **change}}}) is None


@pytest.mark.parametrize("record", [None, [], "x", {"profiler_free": None}, {"profiler_free": [1]}])
def test_a_record_without_timings_is_not_read(record: object) -> None:
    assert profiler_free_of({"tracelens_record": record}) is None
    assert profiler_free_of({}) is None


def test_the_loader_carries_it_and_the_options(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
    ]
    document = {
        "traceEvents": events,
        "tracelens_record": {"profiler_free": GOOD, "options": {"shapes": False, "stack": True, "memory": False}},
    }
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(document, handle)
    meta = load_trace(path).meta
    assert meta.profiler_free is not None and meta.profiler_free.step_us == 10.0
    assert (meta.record_shapes, meta.with_stack, meta.profile_memory) == (False, True, False)
