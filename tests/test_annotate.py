"""`tracelens annotate`: the trace written back with findings, checked against the Chrome trace format rules
and loaded again with tracelens.

The tiny trace (tests/report_helpers.py) has, per step, a GEMM ending at +50 µs and the next kernel at +60 µs:
one 10 µs GPU idle gap per step, so 2 gap slices.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_trace
from tests.report_helpers import GEMM, tiny_events, tiny_trace
from tracelens.analyses import analyze
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.cli import main
from tracelens.cli.annotate import default_output
from tracelens.load import load_trace
from tracelens.load.rewrite import AddedSlice, Additions, rewrite_trace
from tracelens.report.annotations import gpu_idle_gaps, trace_additions


def read_events(path: Path) -> tuple[dict[str, Any] | list[Any], list[dict[str, Any]]]:
    data = path.read_bytes()
    document = json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
    events = document["traceEvents"] if isinstance(document, dict) else document
    return document, events


def check_format_rules(events: list[dict[str, Any]]) -> None:
    """Chrome trace rules for what annotate adds: ph, ts, pid, tid everywhere; X events have dur >= 0;
    metadata names the new process and its threads."""
    for event in events:
        assert {"ph", "ts", "pid", "tid"} <= set(event), event
        assert isinstance(event["ts"], int | float)
        if event["ph"] == "X":
            assert isinstance(event["dur"], int | float) and event["dur"] >= 0, event


def added(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events on the process named "tracelens findings"."""
    pids = [e["pid"] for e in events if e.get("name") == "process_name" and e["args"] == {"name": "tracelens findings"}]
    assert len(pids) == 1
    return [e for e in events if e.get("pid") == pids[0]]


def test_gpu_idle_gaps_by_hand(tmp_path: Path) -> None:
    trace = load_trace(tiny_trace(tmp_path))
    gaps = gpu_idle_gaps(trace, gpu_activity_frame(trace))
    assert gaps.start_ns.tolist() == [50_000, 150_000]
    assert gaps.end_ns.tolist() == [60_000, 160_000]
    assert gaps.step.tolist() == [0, 1]
    assert len(gpu_idle_gaps(trace, gpu_activity_frame(trace), min_gap_ns=10_001)) == 0


def test_annotate_writes_valid_trace_with_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tiny_trace(tmp_path)
    output = tmp_path / "annotated.json.gz"
    assert main(["annotate", str(source), "-o", str(output)]) == 0
    assert capsys.readouterr().out == f"Wrote {output} (2 finding slices, 4 events annotated)\n"
    document, events = read_events(output)
    assert isinstance(document, dict) and document["schemaVersion"] == 1
    check_format_rules(events)
    new = added(events)
    pid = new[0]["pid"]
    assert pid == 101  # one above the largest integer pid (100)
    assert {
        "ph": "M",
        "name": "process_name",
        "pid": pid,
        "tid": 0,
        "ts": 0.0,
        "args": {"name": "tracelens findings"},
    } in new
    assert {
        "ph": "M",
        "name": "thread_name",
        "pid": pid,
        "tid": 1,
        "ts": 0.0,
        "args": {"name": "GPU 0 idle (exposed gaps)"},
    } in new
    gaps = [e for e in new if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"], e["tid"]) for e in gaps] == [
        ("GPU idle 10.0 µs", 50.0, 10.0, 1),
        ("GPU idle 10.0 µs", 150.0, 10.0, 1),
    ]
    assert gaps[1]["args"] == {"finding": "exposed GPU idle gap", "device": 0, "step": 2}
    gemm = [e for e in events if e.get("name") == GEMM]
    assert [e["args"]["tracelens launched by"] for e in gemm] == ["aten::mm", "aten::mm"]
    assert gemm[0]["args"]["tracelens category"] == "gemm"
    assert gemm[0]["args"]["correlation"] == 11  # original args kept
    original = {json.dumps(e, sort_keys=True) for e in tiny_events() if e.get("cat") != "kernel"}
    assert original <= {json.dumps(e, sort_keys=True) for e in events}  # everything else unchanged


def test_annotated_trace_loads_again(tmp_path: Path) -> None:
    source = tiny_trace(tmp_path)
    output = tmp_path / "annotated.json"
    assert main(["annotate", str(source), "-o", str(output)]) == 0
    assert output.read_bytes()[:1] == b"{"  # plain JSON when the name does not end in .gz
    before, after = load_trace(source), load_trace(output)
    assert len(after.events) == len(before.events) + 2
    assert analyze(after).summary.per_step.kernels == 2
    again = tmp_path / "twice.json.gz"
    assert main(["annotate", str(output), "-o", str(again)]) == 0  # annotating an annotated trace works


def test_annotate_default_output_and_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert default_output(Path("traces/x.json.gz")) == Path("x.tracelens.json.gz")
    source = tiny_trace(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["annotate", str(source)]) == 0
    assert (work / "tiny.tracelens.json.gz").is_file()
    assert main(["annotate", str(source)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["annotate", str(source), "--force"]) == 0


def test_rewrite_of_a_bare_array_and_a_truncated_file(tmp_path: Path) -> None:
    events = tiny_events()
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(events))
    trace = load_trace(bare)
    extra = Additions(slices=(AddedSlice("t", "x", 1_000, 2_000, {"k": 1}),), row_args={0: {"note": "first"}})
    document = json.loads(rewrite_trace(trace, extra))
    assert isinstance(document, list) and len(document) == len(events) + 4  # 3 metadata + 1 slice
    assert document[0]["args"] == {"note": "first"}
    assert document[-1] == {
        "ph": "X",
        "cat": "tracelens",
        "name": "x",
        "pid": 101,
        "tid": 1,
        "ts": 1.0,
        "dur": 2.0,
        "args": {"k": 1},
    }
    full = write_trace(tmp_path / "full.json", events).read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(full[: full.rfind(b"{")] + b'{"ph": "X", "na')  # cut mid-event
    truncated = load_trace(cut)
    assert truncated.truncation.truncated
    rewritten = json.loads(rewrite_trace(truncated, trace_additions(truncated, analyze(truncated))))
    assert len(rewritten["traceEvents"]) >= len(events) - 1
