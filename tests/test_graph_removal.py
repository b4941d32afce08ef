"""`compare` eager vs CUDA-graph variant, "What the graph removed" (issue #29.5), against the raw counts of
tests/independent/graph_removal_stdlib.py."""

from __future__ import annotations

import gzip
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


def test_a_removal_that_added_says_added(capsys: pytest.CaptureFixture[str]) -> None:
    """A figure the graph raised reads "added N", not "removed -N": reduce-overhead's wrapper on the MLP added CPU
    op time (the JSON keeps the signed value, eager − graph)."""
    document = _compare(capsys, "mlp_eager", "mlp_ro")
    (row,) = document["graph_removed"]
    cpu = row["removed"]["cpu_op_us"]
    assert cpu < 0
    sentence = next(v for v in document["verdicts"] if v.startswith("mlp_ro against mlp_eager"))
    assert f"added {abs(cpu):,.1f} CPU op µs" in sentence and " -" not in sentence


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_another_program_gets_no_removal_and_is_named_first(capsys: pytest.CaptureFixture[str]) -> None:
    """HTA's trace_diff pair ran on an A100 and a V100: `compare` says first that the second is another program
    (as the GPU names in the raw metadata say) and shows no "what the graph removed" between them."""
    from tests import rawtrace
    from tests.anchors import CORPUS

    paths = [CORPUS / "hta/trace_diff" / f"{n}/{n}.json.gz" for n in ("control", "test")]
    names = []
    for path in paths:
        assert any(e.get("cat") == "kernel" for e in rawtrace.events(path))
        with gzip.open(path, "rt") as handle:
            devices = json.load(handle).get("deviceProperties") or []
        names.append({d.get("name") for d in devices})
    assert names[0] != names[1]
    out, _ = run_cli(capsys, "compare", *map(str, paths), "--format", "json")
    document = json.loads(out)
    assert document["graph_removed"] == []
    assert document["verdicts"][0].startswith("test is another program than control (recorded on Tesla V100")


@pytest.mark.parametrize(("eager", "graph"), PAIRS)
def test_the_docs_table_is_compares(eager: str, graph: str, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cuda_graphs.md's table of what the graph removed is `compare --format json`'s, row for row (it once
    kept 18.7 and 68.4 µs for the MLP after the figures became 19.6 and 71.4)."""
    row = _compare(capsys, eager, graph)["graph_removed"][0]
    removed, before, after = row["removed"], row["baseline"], row["variant"]
    stayed = ", ".join(f"{after[k]:g}" for k in ("graph_launches", "sync_calls", "host_copies"))
    line = (
        f"| {eager} → {graph} | {removed['launch_calls']:g} ({before['launch_calls']:g} → {after['launch_calls']:g})"
        f" | {removed['cpu_op_us']:,.1f} | {removed['runtime_call_us']:,.1f} | {removed['gpu_idle_us']:,.1f}"
        f" | {stayed} |"
    )
    docs = (Path(__file__).resolve().parent.parent / "docs" / "cuda_graphs.md").read_text(encoding="utf-8")
    assert line in docs.splitlines(), line


def test_each_graph_variant_is_paired_with_the_eager_variant_of_its_program(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`compare mlp_eager mlp_graph block_eager block_graph`: the block's graph variant against the block's eager
    one, not none at all (the first eager variant, the MLP, is another program than the block; auditor,
    2026-12-07), each row's figures the raw counts (tests/independent/graph_removal_stdlib.py)."""
    names = ("mlp_eager", "mlp_graph", "block_eager", "block_graph")
    out, _ = run_cli(capsys, "compare", *(str(GRAPHS / f"{n}.json.gz") for n in names), "--format", "json")
    document = json.loads(out)
    pairs = [(r["baseline"]["variant"], r["variant"]["variant"]) for r in document["graph_removed"]]
    assert pairs == [("mlp_eager", "mlp_graph"), ("block_eager", "block_graph")]
    paths = {v["name"]: v["path"] for v in document["variants"]}
    block = document["graph_removed"][1]
    for side in ("baseline", "variant"):
        analyzed, _ = run_cli(capsys, "analyze", paths[block[side]["variant"]], "--format", "json")
        raw = stdlib.counts(paths[block[side]["variant"]], json.loads(analyzed)["step_numbers"])
        for field, key in RAW.items():
            assert block[side][field] == pytest.approx(raw[key], abs=0.01), (side, field)
