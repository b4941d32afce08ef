"""`compile` of a program that replays its own CUDA graphs, against its twins (traces/h100/graphs_compiled: one
H100 lease, seven shapes of the MLP and the Llama block): `*_graph` → `*_graph_compiled` is that model's
calibration (in-sample: the model changed after its first predictions on them, docs/actions.md); `*_eager` →
`*_graph` (`cuda_graphs`) and `*_eager` → `*_compiled` (`compile`) are held out for their models. Held out for
all three: traces/h100/graphs_compiled_heldout (five other shapes, recorded after the change), and
traces/h100/graphs_compiled_nodesc (Inductor's descriptive names off). The realized step is the after-trace's
mean span from the raw events (the steps that capture no graph)."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests.test_actions import raw_mean_span_us
from tests.test_actions_heldout_graphs import table_row as heldout_row
from tracelens.analyses import analyze
from tracelens.analyses.actions import (
    GRAPHED_BASIS,
    GRAPHED_COMPILE_CELLS,
    GRAPHED_COMPILE_HALF_WIDTH,
    MIN_HALF_WIDTH,
)

ROOT = Path(__file__).resolve().parent.parent / "traces" / "h100" / "graphs_compiled"
HELDOUT = ROOT.with_name("graphs_compiled_heldout")  # recorded after the model was fitted on ROOT
NODESC = ROOT.with_name("graphs_compiled_nodesc")  # Inductor's descriptive names off: `triton_poi__0`
PAIRS = [
    ("mlp_graph", "mlp_graph_compiled", "compile"),
    ("block_graph", "block_graph_compiled", "compile"),
    ("mlp_eager", "mlp_graph", "cuda_graphs"),
    ("block_eager", "block_graph", "cuda_graphs"),
    ("mlp_eager", "mlp_compiled", "compile"),
    ("block_eager", "block_compiled", "compile"),
]
INDUCTOR = re.compile(r"^triton_[a-z]+_(fused_|_\d+$)")  # the names Inductor gives its kernels
Cell = tuple[str, str, str, str, float, float, float, float, str, str]


@functools.cache
def cells(root: Path = ROOT) -> list[Cell]:
    """(folder, before, after, action, predicted, low, high, realized, limited_by, basis) of every pair of the
    recordings under `root`."""
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for before, after, action in PAIRS:
            results = analyze(tracelens.load(folder / f"{before}.json.gz"))
            assert results.actions is not None
            (found,) = [a for a in results.actions.actions if a.action == action]
            realized = raw_mean_span_us(folder / f"{after}.json.gz", without_capture=True)
            out.append(
                (
                    folder.name,
                    before,
                    after,
                    action,
                    found.predicted_step_us,
                    found.low,
                    found.high,
                    realized,
                    found.limited_by,
                    found.basis,
                )
            )
    return out


def _in_graphs(cell: Cell) -> bool:
    return cell[1].endswith("_graph")


@pytest.mark.slow  # analyzes the 42 before-traces (2-4 s on 2 cores)
def test_the_graphed_compile_range_is_the_rule_over_its_twins() -> None:
    """The 14 graph → compiled-then-captured twins are GPU-limited and predicted by the compile-inside-graphs
    model; `GRAPHED_COMPILE_HALF_WIDTH` is the ranges' rule over them (the largest |realized ÷ predicted − 1|,
    rounded up to 0.01, at least `MIN_HALF_WIDTH`): 0.16, from the MLP at 256 tokens (g1: predicted 93.9 µs,
    realized 108.4); every realized step lies in its range."""
    twins = [c for c in cells() if _in_graphs(c)]
    assert len(twins) == GRAPHED_COMPILE_CELLS == 14
    assert all(c[8] == "gpu" and c[9].endswith(GRAPHED_BASIS) for c in twins)
    need = max(abs(realized / predicted - 1) for *_, predicted, _, _, realized, _, _ in twins)
    assert max(MIN_HALF_WIDTH, math.ceil(need * 100 - 1e-9) / 100) == GRAPHED_COMPILE_HALF_WIDTH
    assert all(low <= realized <= high for *_, low, high, realized, _, _ in twins)


@pytest.mark.slow  # analyzes the 42 before-traces (2-4 s on 2 cores)
def test_the_held_out_counts() -> None:
    """Per action, (within ±20 %, inside the range, cells): the compile-inside-graphs twins 14 of 14 within ±20 %
    (the block 5.1-12.3 % long: Inductor's fused kernels are shorter than the fusion analysis' memory-traffic
    estimate; the MLP −13.4 to +1.9 %); held out, `cuda_graphs` on the eager programs 14 of 14 in both, and
    `compile` on them 9 of 14 within ±20 %, 13 inside (all five outside ±20 % are the compiled MLP: −33.8 and
    −74.7 % at 256 and 64 tokens, +25.7 to +32.4 % at three other shapes; before 2026-12-07, with a first step of
    warm-up in the realized mean, 12 of 14)."""
    assert _counts(cells()) == {"compile in graphs": [14, 14, 14], "cuda_graphs": [14, 14, 14], "compile": [9, 13, 14]}


def _counts(found: list[Cell]) -> dict[str, list[int]]:
    """Per action (`compile in graphs` for the graph → compiled-then-captured twins): within ±20 %, inside the
    range, cells."""
    counts: dict[str, list[int]] = {}
    for cell in found:
        predicted, low, high, realized = cell[4:8]
        key = cell[3] + (" in graphs" if _in_graphs(cell) else "")
        row = counts.setdefault(key, [0, 0, 0])
        row[0] += abs(predicted / realized - 1) <= 0.20
        row[1] += low <= realized <= high
        row[2] += 1
    return counts


@pytest.mark.slow  # analyzes the 30 before-traces (2-3 s on 2 cores)
def test_the_counts_on_shapes_recorded_after_the_fit() -> None:
    """Held out for every model (five shapes recorded after the compile-inside-graphs model was fitted): compile
    inside graphs 10 of 10 within ±20 %, 8 inside its ±16 % (outside: the MLP at 32 tokens −15.8 %, the block at
    sequence 3,072 +17.5 %); `cuda_graphs` 10 of 10 both ways; `compile` on the eager programs 7 of 10 within
    ±20 % (the block at two shapes and the MLP at one −26.4 to −28.3 %: the compiled block's CPU-bound wrapper
    ran longer than the calibrated one), 10 of 10 inside its range."""
    assert _counts(cells(HELDOUT)) == {
        "compile in graphs": [10, 8, 10],
        "cuda_graphs": [10, 10, 10],
        "compile": [7, 10, 10],
    }


def table_row(cell: Cell) -> str:
    """The docs row of one cell: the held-out CUDA-graph table's, with the changed step's limit."""
    folder, before, after, action, predicted, low, high, realized, limited_by, _ = cell
    return heldout_row((folder, before, after, action, predicted, low, high, realized), limited_by)


@pytest.mark.slow  # analyzes the 72 before-traces (4-6 s on 2 cores)
def test_the_docs_tables_are_the_recomputed_ones() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "actions.md").read_text(encoding="utf-8")
    for cell in [*cells(), *cells(HELDOUT)]:
        assert table_row(cell) in docs, table_row(cell)


def test_a_graph_that_starts_sooner_ends_its_gpu_bound_step_sooner() -> None:
    """`with_offsets`: the block's graph (37 kernels, each after the one before it; the step waits for the last)
    started 5 µs sooner after its launch, none of its kernels held by the old start-up, ends the step 5 µs sooner;
    with the first alone moved, its second kernel waits 0.3 µs for the old start-up (the trace's launch latency
    floor); the observed graph is unchanged."""
    from tracelens.analyses.critical_path import replay_calls, step_graph, with_offsets

    trace = tracelens.load(ROOT / "g1" / "block_graph.json.gz")
    graph = step_graph(trace, 2)
    assert graph is not None
    first = graph.constraints.binding.index(0)  # the one activity that starts after its launch
    assert graph.constraints.binding.count(0) == 1 and graph.constraints.binding.count(1) == 36
    offset = graph.constraints.offset[first]
    floors = dict.fromkeys(range(len(graph.constraints.binding)), offset - 5_000)
    moved = with_offsets(graph, {first: offset - 5_000}, floors)
    work, length = graph.cpu_columns[0], graph.cpu_columns[1]
    step_ns = replay_calls(graph, work, length, {}).step_ns
    assert step_ns - replay_calls(moved, work, length, {}).step_ns == 5_000
    alone = with_offsets(graph, {first: offset - 5_000})
    assert step_ns - replay_calls(alone, work, length, {}).step_ns == 4_736
    assert graph.constraints.offset[first] == offset and moved.constraints.offset[first] == offset - 5_000


def test_each_kernel_fuses_into_one_chain_at_most() -> None:
    """The block's four chains (rotary, two RMSNorms, silu·mul) take 29 distinct kernels of its 37 as sequences:
    silu·mul, a GEMM between its kernels, takes the step's silu and mul (activities 32 and 34), not the first
    norm's kernels that share their names (by name alone it took activity 1 of that norm)."""
    import numpy as np

    from tracelens.analyses.actions import _sequence_matches
    from tracelens.analyses.critical_path import step_graph

    trace = tracelens.load(ROOT / "g1" / "block_graph.json.gz")
    results = analyze(trace)
    assert results.fusion is not None
    graph = step_graph(trace, 2)
    assert graph is not None
    claimed = np.zeros(len(graph.gpu_columns.name), dtype=bool)
    taken = []
    for chain in [o for o in results.fusion.opportunities if o.kind == "chain"]:
        match = np.asarray(_sequence_matches(trace, graph, chain.kernels, chain.calls_per_step, claimed))
        assert not (match & claimed).any()
        claimed |= match
        taken.append(np.flatnonzero(match).tolist())
    assert sum(len(t) for t in taken) == int(claimed.sum()) == 29
    assert [32, 34] in taken and all(1 not in t for t in taken[3:])


def _checked(before: Path, after: Path, folder: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """`analyze BEFORE --predict`, then `check AFTER --expect --format json`: its verdicts."""
    from tracelens.cli import main

    predictions = folder / f"{before.parent.name}_{before.stem}_{after.stem}.toml"
    assert main(["analyze", str(before), "--summary", "--predict", str(predictions)]) == 0
    capsys.readouterr()
    assert main(["check", str(after), "--expect", str(predictions), "--format", "json"]) in (0, 1)
    verdicts: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["verdicts"]
    return verdicts


def _kernels(path: Path) -> list[dict[str, Any]]:
    """Stdlib: the trace's kernel events."""
    from tests import rawtrace

    return [e for e in rawtrace.events(path) if e.get("cat") == "kernel"]


def _inductor_kernels(path: Path) -> int:
    """Stdlib: how many kernels of the trace carry a name Inductor gives (`INDUCTOR`)."""
    return sum(bool(INDUCTOR.match(e["name"])) for e in _kernels(path))


def _check_takes_compile(
    folder: Path, program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], held: bool = True
) -> None:
    before, after = folder / f"{program}_graph.json.gz", folder / f"{program}_graph_compiled.json.gz"
    assert _inductor_kernels(before) == 0 and _inductor_kernels(after) > 0
    verdicts = _checked(before, after, tmp_path, capsys)
    assert {v["taken_action"] for v in verdicts} == {"compile"}
    (checked,) = [v for v in verdicts if v["status"] != "not_applicable"]
    assert checked["action"] == "compile" and checked["held"] is held
    assert abs(checked["measured"] - raw_mean_span_us(after, without_capture=True)) < 0.05


def test_check_and_compare_take_compile_on_the_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check AFTER --expect` (of `analyze BEFORE --predict`) on the block's graph → compiled-then-captured twin
    at 256 tokens: AFTER took `compile` (its graphs replay kernels named as Inductor names them, BEFORE's none:
    counted in the raw events), its prediction checked, held, against the step measured from the raw events;
    `compare` takes the same action. From the eager block (compile and cuda_graphs at once) and from the compiled
    block (its code captured by hand, not torch.compile's graphs) no prediction is checked, and `took` says why."""
    from tracelens.cli import main

    folder = ROOT / "g1"
    _check_takes_compile(folder, "block", tmp_path, capsys)
    before, after = folder / "block_graph.json.gz", folder / "block_graph_compiled.json.gz"
    assert main(["compare", "--width", "200", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out[out.index("Predictions checked") :].splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row.split("│")[1:4]] for row in rows] == [
        ["block_graph_compiled", "compile (the step)", "yes"]
    ]
    for other, took in (("block_eager", "compile and cuda_graphs"), ("block_compiled", "captured compiled code")):
        verdicts = _checked(folder / f"{other}.json.gz", after, tmp_path, capsys)
        assert {(v["status"], v["took"]) for v in verdicts} == {("not_applicable", took)}
    predictions = tmp_path / f"g1_block_compiled.json_{after.stem}.toml"  # written by `_checked` above
    assert main(["check", str(after), "--expect", str(predictions)]) in (0, 1)
    out = capsys.readouterr().out
    assert "block_graph_compiled captured its compiled code" in out and "took captured" not in out


@pytest.mark.slow  # checks the 24 twins (about 7 s on 2 cores)
def test_check_takes_compile_on_every_twin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As on the block at 256 tokens, on the 14 twins and the 10 held out: `compile` taken and checked every time,
    held on all but the two held-out twins outside the range (`test_the_counts_on_shapes_recorded_after_the_fit`:
    the MLP at 32 tokens, the block at sequence 3,072)."""
    wrong = {("h3", "mlp"), ("h4", "block")}
    for folder in sorted(p for p in [*ROOT.iterdir(), *HELDOUT.iterdir()] if p.is_dir()):
        for program in ("mlp", "block"):
            _check_takes_compile(folder, program, tmp_path, capsys, held=(folder.name, program) not in wrong)


@pytest.mark.parametrize("program", ["mlp", "block"])
def test_check_takes_compile_with_descriptive_names_off(
    program: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inductor's kernels named `triton_poi__0` (`descriptive_names` off; counted in the raw events) are
    Inductor's: the compiled-then-captured twin took `compile`, checked and held."""
    after = NODESC / f"{program}_graph_compiled.json.gz"
    assert not any(e["name"].startswith("triton_") and "_fused_" in e["name"] for e in _kernels(after))
    _check_takes_compile(NODESC, program, tmp_path, capsys)


if __name__ == "__main__":
    for cell in [*cells(), *cells(HELDOUT)]:
        print(table_row(cell))
