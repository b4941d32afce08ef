"""`compare` eager vs CUDA-graph variant, "What the graph removed" (issue #29.5), against the raw counts of
tests/independent/graph_removal_stdlib.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_cuda_graphs import GRAPHS

_spec = importlib.util.spec_from_file_location(
    "graph_removal_stdlib", Path(__file__).parent / "independent" / "graph_removal_stdlib.py"
)
assert _spec is not None and _spec.loader is not None
stdlib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stdlib)

PAIRS = [("decode_eager", "decode_static_graph"), ("mlp_eager", "mlp_graph"), ("block_eager", "block_ro")]
RAW = {  # JSON field → the script's key
    "launch_calls": "launch",
    "graph_launches": "graph",
    "sync_calls": "sync",
    "runtime_call_us": "api_us",
    "cpu_op_us": "op_us",
    "host_copies": "copy",
    "kernels": "kernels",
}


def _compare(capsys: pytest.CaptureFixture[str], eager: str, graph: str) -> dict:
    paths = [str(GRAPHS / f"{n}.json.gz") for n in (eager, graph)]
    out, _ = run_cli(capsys, "compare", *paths, "--format", "json")
    return json.loads(out)


@pytest.mark.parametrize(("eager", "graph"), PAIRS)
def test_what_the_graph_removed_matches_raw_counts(eager: str, graph: str, capsys: pytest.CaptureFixture[str]) -> None:
    document = _compare(capsys, eager, graph)
    steps = {v["name"]: v for v in document["variants"]}
    (row,) = document["graph_removed"]
    assert row["baseline"]["variant"] == eager and row["variant"]["variant"] == graph
    for side in ("baseline", "variant"):
        figures = row[side]
        out, _ = run_cli(capsys, "analyze", steps[figures["variant"]]["path"], "--format", "json")
        numbers = json.loads(out)["step_numbers"]
        raw = stdlib.counts(steps[figures["variant"]]["path"], numbers)
        for field, key in RAW.items():
            assert figures[field] == pytest.approx(raw[key], abs=0.01), (side, field)
    for field in RAW:
        assert row["removed"][field] == pytest.approx(row["baseline"][field] - row["variant"][field], abs=0.01)
    assert row["removed"]["launch_calls"] > 0 and row["removed"]["cpu_op_us"] > 0
    assert row["variant"]["graph_launches"] >= 1 and row["baseline"]["graph_launches"] == 0


def test_the_generate_pair_states_launches_and_dispatch_removed(capsys: pytest.CaptureFixture[str]) -> None:
    """Done-when of #29: on the generate() pair, the text says launches and dispatch removed per step."""
    paths = [str(GRAPHS / f"{n}.json.gz") for n in PAIRS[0]]
    text, _ = run_cli(capsys, "compare", *paths, "--width", "80")
    assert "What the graph removed: decode_eager → decode_static_graph" in text
    assert "the graph removed 349 kernel-launch calls" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 80


def test_no_graph_no_section(capsys: pytest.CaptureFixture[str]) -> None:
    document = _compare(capsys, "mlp_eager", "mlp_compiled")
    assert document["graph_removed"] == []
