"""`tracelens annotate`: the trace written back with findings, checked against the Chrome trace format rules
and loaded again with tracelens.

The tiny trace (tests/report_helpers.py) has, per step, a GEMM at +30..50 µs and a kernel at +60..70 µs, each
starting as soon as its launch call returns: GPU idle gaps 50..60 (step 1), 70..130 and 150..160 (step 2, as
a gap belongs to the step of the activity that ends it), all waiting for a launch.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import recorded_trace, write_trace
from tests.report_helpers import GEMM, tiny_events, tiny_trace
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.cli.annotate import default_output
from tracelens.loader import load_trace
from tracelens.loader.rewrite import AddedSlice, Additions, rewrite_trace
from tracelens.renderers.perfetto import exposed_gaps, occurrences, trace_additions


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


def test_exposed_gaps_by_hand(tmp_path: Path) -> None:
    trace = load_trace(tiny_trace(tmp_path))
    gaps = exposed_gaps(trace)
    assert gaps["gap_start_ns"].tolist() == [50_000, 70_000, 150_000]
    assert gaps["gap_end_ns"].tolist() == [60_000, 130_000, 160_000]
    assert gaps["step"].tolist() == [0, 1, 1]
    assert gaps["launch"].tolist() == [10_000, 60_000, 10_000]
    assert gaps["sync"].tolist() == [0, 0, 0] and gaps["other"].tolist() == [0, 0, 0]
    assert len(exposed_gaps(trace, min_gap_ns=10_001)) == 1


def test_occurrences_of_a_kernel_run() -> None:
    steps = np.array([0, 0, 0, 1, 1, 1, 2])
    first, last = occurrences(["a", "x", "b", "a", "a", "b", "b"], ["a", "b"], steps)
    assert first.tolist() == [0, 4] and last.tolist() == [2, 5]  # the later "a" of step 1 pairs with its "b"
    first, last = occurrences(["a", "x", "a", "b"], ["a", "b"], np.array([0, 0, 1, 1]))
    assert first.tolist() == [2] and last.tolist() == [3]  # a chain may not cross steps
    assert occurrences(["a"], ["a", "b"], np.array([0]))[0].tolist() == []


def test_annotate_writes_valid_trace_with_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tiny_trace(tmp_path)
    output = tmp_path / "annotated.json.gz"
    assert main(["annotate", str(source), "-o", str(output)]) == 0
    assert capsys.readouterr().err == f"Wrote {output} (3 finding slices, 4 events annotated)\n"
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
        ("GPU idle 10.0 µs: launch", 50.0, 10.0, 1),
        ("GPU idle 60.0 µs: launch", 70.0, 60.0, 1),
        ("GPU idle 10.0 µs: launch", 150.0, 10.0, 1),
    ]
    assert gaps[1]["args"] == {
        "finding": "exposed GPU idle gap",
        "cause": "waiting for a launch (exposed CPU dispatch)",
        "launch µs": 60.0,
        "sync µs": 0.0,
        "queued µs": 0.0,
        "other µs": 0.0,
        "device": 0,
        "step": 2,
    }
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
    assert len(after.events) == len(before.events) + 3
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


def test_recorded_mlp_gets_fusion_slices_and_roofline_args(tmp_path: Path) -> None:
    """eager_mlp: 5 steps of mm → gelu → mul → mm; the analysis finds gelu → mul fusable (one run per step)."""
    source = recorded_trace("h200/eager_mlp.json.gz")
    trace = load_trace(source)
    results = analyze(trace)
    assert results.fusion is not None
    assert [o.kind for o in results.fusion.opportunities] == ["chain", "gemm_epilogue"]
    output = tmp_path / "mlp.json.gz"
    assert main(["annotate", str(source), "-o", str(output)]) == 0
    _, events = read_events(output)
    check_format_rules(added(events))
    fusion = [e for e in added(events) if e.get("ph") == "X" and e["name"].startswith("fuse #1: ")]
    assert len(fusion) == len(results.summary.step_table) == 5
    assert fusion[0]["name"] == "fuse #1: " + " → ".join(results.fusion.opportunities[0].kernels)
    epilogue = [e for e in added(events) if e.get("ph") == "X" and e["name"].startswith("epilogue #2: ")]
    assert len(epilogue) == 5  # the GEMM-epilogue opportunity, named as one (it was "fuse #2")
    gemms = [e for e in events if e.get("cat") == "kernel" and e["args"].get("tracelens category") == "gemm"]
    with_roofline = [e for e in gemms if "tracelens achieved TFLOP/s" in e["args"]]
    assert with_roofline and all(e["args"]["tracelens launched by"] == "aten::mm" for e in gemms)
    row = next(r for r in results.roofline.rows if r.kernel == with_roofline[0]["name"])
    assert with_roofline[0]["args"]["tracelens achieved TFLOP/s"] == row.achieved_tflops
