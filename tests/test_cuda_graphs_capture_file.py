"""`--capture FILE` (issue #29): replays in one trace matched to the captures recorded in another, checked
against tests/independent/graphs_stdlib.py reading both raw files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli, unwrapped
from tests.test_cuda_graphs import GRAPHS, stdlib
from tracelens.loader import load_trace
from tracelens.model.cuda_graphs import graft_capture
from tracelens.model.events import Kind
from tracelens.model.trace import Trace

PAIRS = ["mlp_graph", "mlp_ro", "block_graph", "block_ro"]  # <name>_replay with <name>_capture


def _assignment(trace: Trace) -> list[tuple[str, str | None]]:
    events, links = trace.events, trace.links
    kernels = np.flatnonzero((events.kind == Kind.KERNEL) & (links.launch >= 0))
    replayed = [i for i in kernels if "GraphLaunch" in events.name_of(links.launch[i])]
    replayed.sort(key=lambda i: (int(events.ts_ns[i]), events.name_of(i)))
    return [(events.name_of(i), events.name_of(links.op[i]) if links.op[i] >= 0 else None) for i in replayed]


def _pair(name: str) -> tuple[Path, Path]:
    return GRAPHS / f"{name}_replay.json.gz", GRAPHS / f"{name}_capture.json.gz"


@pytest.mark.parametrize("name", PAIRS)
def test_replays_get_the_ops_of_the_capture_file(name: str) -> None:
    replay, capture = _pair(name)
    expected_map, given, total, shaped = stdlib.match_detail(str(replay), str(capture))
    expected = [(kname, op["name"] if op else None) for (_, kname), op in sorted(expected_map.items())]
    assert given / total >= 0.95 and shaped / total >= 0.95  # the script: ops, and ops with shapes
    merged, graft = graft_capture(load_trace(replay, workers=1), load_trace(capture, workers=1), capture.name)
    assert graft is not None and graft.matched == 5 and graft.count_mismatch == graft.name_mismatch == 0
    assert _assignment(merged) == expected
    assert not any("no capture in the trace" in w for w in merged.warnings)


@pytest.mark.parametrize("name", PAIRS)
def test_capture_file_gives_roofline_models(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #29's bar on the two-trace recordings: ≥ 90 % of kernel time with a roofline model."""
    replay, capture = _pair(name)
    alone, _ = run_cli(capsys, "analyze", str(replay), "--format", "json")
    out, err = run_cli(capsys, "analyze", str(replay), "--capture", str(capture), "--format", "json")
    assert json.loads(out)["roofline"]["modelled_kernel_time_pct"] >= 90
    assert json.loads(alone)["roofline"]["modelled_kernel_time_pct"] < 90  # the cache keys on --capture
    assert "tracelens: warning" not in err


@pytest.mark.parametrize("name", ["mlp_graph", "block_graph"])
def test_capture_file_gives_the_compile_prediction(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """With the capture in a second trace, `compile` on the program's own graphs is predicted as on the recording
    that captured in the trace (`<name>`: the same program, its capture in its first step), within 5 %; without
    it, left out with the note that names --capture."""
    replay, capture = _pair(name)

    def compile_of(*args: str) -> dict:
        out, _ = run_cli(capsys, "analyze", *args, "--format", "json")
        actions = json.loads(out)["actions"]
        found = [a for a in actions["actions"] if a["action"] == "compile"]
        return found[0] if found else {"note": actions["note"]}

    grafted = compile_of(str(replay), "--capture", str(capture))
    in_trace = compile_of(str(GRAPHS / f"{name}.json.gz"))
    assert abs(grafted["predicted_step_us"] / in_trace["predicted_step_us"] - 1) < 0.05
    assert abs(grafted["saved_us"] / in_trace["saved_us"] - 1) < 0.05
    assert "given with --capture" in compile_of(str(replay))["note"]


def test_every_command_takes_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replay, capture = _pair("mlp_ro")
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text('[[hypothesis]]\nname = "5 kernels"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 5\n')
    run_cli(capsys, "check", str(replay), "--capture", str(capture), "--expect", str(hypotheses))
    run_cli(capsys, "compare", str(GRAPHS / "mlp_eager.json.gz"), str(replay), "--capture", str(capture))
    run_cli(capsys, "report", str(replay), "--capture", str(capture), "-o", str(tmp_path / "r.html"))
    run_cli(capsys, "annotate", str(replay), "--capture", str(capture), "-o", str(tmp_path / "a.json"))
    annotated = json.loads((tmp_path / "a.json").read_text())["traceEvents"]
    assert not any(str(e.get("pid", "")).startswith("capture: ") for e in annotated)  # no capture rows written


def test_capture_file_without_a_capture_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    replay, _ = _pair("mlp_ro")
    _, err = run_cli(capsys, "analyze", str(replay), "--capture", str(GRAPHS / "mlp_eager.json.gz"))
    lines = [line for line in unwrapped(err).splitlines() if line.startswith("tracelens: warning:")]
    assert len(lines) == 1 and "no CUDA-graph capture in that trace" in lines[0]


def test_unusable_capture_file_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replay, _ = _pair("mlp_ro")
    bad = tmp_path / "bad.json"
    bad.write_text("garbage")
    _, err = run_cli(capsys, "analyze", str(replay), "--capture", str(bad), expect=2)
    assert err.count("\n") == 1 and err.startswith("tracelens: error: --capture ")


def test_count_mismatch_is_counted_never_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    replay, _ = _pair("mlp_ro")  # 5 replays of 5 kernels; block_ro's capture has another count
    merged, graft = graft_capture(
        load_trace(replay, workers=1), load_trace(GRAPHS / "block_ro_capture.json.gz", workers=1), "x"
    )
    assert graft is not None and (graft.matched, graft.count_mismatch, graft.name_mismatch) == (0, 5, 0)
    assert all(op is None or "CUDAGraph" in op or "Compiled" in op for _, op in _assignment(merged))
    assert sum("5 CUDA-graph launches match no capture" in w for w in merged.warnings) == 1


def test_kernel_name_mismatch_is_counted(tmp_path: Path) -> None:
    """The capture file replays its capture; renaming one kernel of that replay makes the names disagree."""
    replay, capture = _pair("mlp_ro")
    with gzip.open(capture, "rt") as f:
        document = json.load(f)
    graph = {
        e["args"]["correlation"]
        for e in document["traceEvents"]
        if e.get("ph") == "X" and "GraphLaunch" in e.get("name", "")
    }
    renamed = 0
    for event in document["traceEvents"]:
        if event.get("cat") == "kernel" and event["args"].get("correlation") in graph and "nvjet" in event["name"]:
            event["name"] = "some_other_kernel"
            renamed += 1
    assert renamed
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(document))
    merged, graft = graft_capture(load_trace(replay, workers=1), load_trace(changed, workers=1), changed.name)
    assert graft is not None and (graft.matched, graft.name_mismatch) == (0, 5)
    expected, _ = stdlib.match(str(replay), str(changed))  # the script agrees: nothing matched
    assert not any(expected.values())
    assert sum("kernel names differ" in w for w in merged.warnings) == 1


def test_results_cache_keys_on_the_capture_file(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the cache on: a result computed with --capture is not served without it, nor with another file."""
    replay, capture = _pair("block_graph")

    def modelled(*extra: str) -> float:
        out, _ = run_cli(capsys, "analyze", str(replay), *extra, "--format", "json")
        return float(json.loads(out)["roofline"]["modelled_kernel_time_pct"])

    with_capture = modelled("--capture", str(capture))
    assert modelled() < 90 <= with_capture
    assert modelled("--capture", str(GRAPHS / "mlp_ro_capture.json.gz")) < 90  # another graph: no match
    assert modelled("--capture", str(capture)) == with_capture
    assert any(cache_dir.rglob("*.msgpack"))
