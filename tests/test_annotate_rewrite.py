"""`load.rewrite`: rows are matched to the file's events exactly as the loader numbered them, also for files
the loader had to repair (odd field types, a bare array, a cut-off tail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import kernel, write_trace
from tests.report_helpers import GEMM, tiny_events
from tracelens.errors import TracelensError
from tracelens.loader import load_trace
from tracelens.loader.rewrite import AddedSlice, Additions, rewrite_trace


def test_rows_skip_events_the_loader_skips(tmp_path: Path) -> None:
    events = tiny_events()
    odd = [
        {"ph": "X", "name": "string ts", "pid": 1, "tid": 1, "ts": "5", "dur": 1},  # lenient path: no ts
        {"ph": "i", "name": "instant", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
        {"ph": "X", "name": "no ts", "pid": 1, "tid": 1, "dur": 1},
        ["not", "an", "event"],
    ]
    path = write_trace(tmp_path / "odd.json", odd + events)
    trace = load_trace(path)
    gemm_rows = [i for i in range(len(trace.events)) if trace.events.name_of(i) == GEMM]
    marked = Additions(row_args={row: {"mark": row} for row in gemm_rows})
    document = json.loads(rewrite_trace(trace, marked))
    marks = [
        (e["name"], e["args"]["mark"])
        for e in document["traceEvents"]
        if isinstance(e, dict) and "mark" in e.get("args", {})
    ]
    assert marks == [(GEMM, gemm_rows[0]), (GEMM, gemm_rows[1])]
    assert document["traceEvents"][:4] == odd  # untouched


def test_a_changed_file_is_refused(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", tiny_events())
    trace = load_trace(path)
    write_trace(path, [*tiny_events(), kernel("late", 300, 1, correlation=999)])
    with pytest.raises(TracelensError, match="cannot match events"):
        rewrite_trace(trace, Additions(slices=(AddedSlice("t", "x", 0, 1),)))


def test_added_pid_avoids_every_integer_pid(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", tiny_events())
    trace = load_trace(path)
    document = json.loads(
        rewrite_trace(trace, Additions(slices=(AddedSlice("b", "x", 0, 1), AddedSlice("a", "y", 5, 1))))
    )
    new = document["traceEvents"][len(tiny_events()) :]
    assert {e["pid"] for e in new} == {101}
    names = {e["args"]["name"]: e["tid"] for e in new if e["name"] == "thread_name"}
    assert names == {"a": 1, "b": 2}  # threads numbered in name order
    assert [(e["name"], e["tid"]) for e in new if e["ph"] == "X"] == [("x", 2), ("y", 1)]
