"""Held out: the CUDA-graph actions on recordings made after their models were written, on an H100
(traces/h100/graphs_heldout: two device leases, three recordings each). Each before → after pair of one
recording: the prediction of the action the after-trace took, against the after-trace's mean span from the raw
events (the steps that capture no graph); docs/actions.md#held-out-cuda-graphs-and-reduce-overhead-on-an-h100
gives the table and these counts."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracelens
from tests.test_actions import raw_mean_span_us
from tracelens.analyses import analyze

ROOT = Path(__file__).resolve().parent.parent / "traces" / "h100" / "graphs_heldout"
PAIRS = [
    ("mlp_eager", "mlp_graph_replay", "cuda_graphs"),
    ("block_eager", "block_graph_replay", "cuda_graphs"),
    ("mlp_compiled", "mlp_ro_replay", "cuda_graphs"),
    ("mlp_compiled", "mlp_ro", "cuda_graphs"),
    ("block_compiled", "block_ro_replay", "cuda_graphs"),
    ("block_compiled", "block_ro", "cuda_graphs"),
    ("mlp_eager", "mlp_ro_replay", "compile_reduce_overhead"),
    ("mlp_eager", "mlp_ro", "compile_reduce_overhead"),
    ("block_eager", "block_ro_replay", "compile_reduce_overhead"),
    ("block_eager", "block_ro", "compile_reduce_overhead"),
    ("decode_eager", "decode_static_graph", "compile_reduce_overhead"),
    # the program's own graphs replaced by torch.compile's (its model there since 2026-12-06, after these recordings)
    ("mlp_graph", "mlp_ro_replay", "compile_reduce_overhead"),
    ("mlp_graph", "mlp_ro", "compile_reduce_overhead"),
    ("block_graph", "block_ro_replay", "compile_reduce_overhead"),
    ("block_graph", "block_ro", "compile_reduce_overhead"),
]


def cells() -> list[tuple[str, str, str, str, float, float, float, float]]:
    """(recording, before, after, action, predicted, low, high, realized) of every pair in every recording."""
    out = []
    for folder in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        for before, after, action in PAIRS:
            if not (folder / f"{before}.json.gz").exists():
                continue  # r2, r3: no decode loop
            results = analyze(tracelens.load(folder / f"{before}.json.gz"))
            assert results.actions is not None
            (found,) = [a for a in results.actions.actions if a.action == action][:1]
            realized = raw_mean_span_us(folder / f"{after}.json.gz", without_capture=True)
            out.append((folder.name, before, after, action, found.predicted_step_us, found.low, found.high, realized))
    return out


LEASES = {"r1": "17:38", "r2": "17:38", "r3": "17:38", "r4": "19:48", "r5": "19:48", "r6": "19:48"}  # UTC


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_the_held_out_counts() -> None:
    """Per device lease (two H100 machines, three recordings each) and action: (within ±20 %, inside the range, cells).
    cuda_graphs (hand-captured and on the compiled programs): 15 and 16 of 18 within ±20 %, all inside their
    range; compile_reduce_overhead: 8 of 13 in the first lease (its compiled wrapper cost more than the H200
    fit's), 11 of 13 in the second; on the programs' own graphs (hand-captured → reduce-overhead), 7 and 11 of
    12, 12 and 12 inside. The docs' table is these cells."""
    found = cells()
    by_lease: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for folder, before, _, action, predicted, low, high, realized in found:
        cell = (abs(predicted / realized - 1) <= 0.20, low <= realized <= high)
        key = action + (" on own graphs" if before.endswith("_graph") else "")
        by_lease.setdefault((LEASES[folder], key), []).append(cell)
    counts = {k: (sum(w for w, _ in v), sum(i for _, i in v), len(v)) for k, v in by_lease.items()}
    assert counts == {
        ("17:38", "cuda_graphs"): (15, 18, 18),
        ("17:38", "compile_reduce_overhead"): (8, 12, 13),
        ("17:38", "compile_reduce_overhead on own graphs"): (7, 12, 12),
        ("19:48", "cuda_graphs"): (16, 18, 18),
        ("19:48", "compile_reduce_overhead"): (11, 12, 13),
        ("19:48", "compile_reduce_overhead on own graphs"): (11, 12, 12),
    }


def test_the_own_graph_cells_that_a_no_change_prediction_would_pass_too() -> None:
    """Most reduce-overhead cells on the programs' own graphs are weak: the before-trace's own step lies inside
    the stated range too (the ±60 % of a CPU-limited step), so the range says little there; the ±20 % count is
    the claim. Before-step inside the range on 20 of the 24 cells (both leases)."""
    weak = 0
    for folder in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        for before in ("mlp_graph", "block_graph"):
            results = analyze(tracelens.load(folder / f"{before}.json.gz"))
            assert results.actions is not None
            (found,) = [a for a in results.actions.actions if a.action == "compile_reduce_overhead"]
            observed = raw_mean_span_us(folder / f"{before}.json.gz", without_capture=True)
            weak += 2 * (found.low <= observed <= found.high)  # the two after-recordings of each
    assert weak == 20


def table_row(cell: tuple[str, str, str, str, float, float, float, float], limited_by: str | None = None) -> str:
    """The docs row of one cell (with a limit column after the action where `limited_by` is given)."""
    folder, before, after, action, predicted, low, high, realized = cell
    error = f"{100 * (predicted / realized - 1):+.1f} %".replace("-", "−")
    inside = "yes" if low <= realized <= high else "**no**"
    stated = f"{predicted:,.1f} ({low:,.0f}–{high:,.0f})"
    action = action if limited_by is None else f"{action} | {limited_by}"
    return f"| {folder} | `{before}` → `{after}` | {action} | {stated} | {realized:,.1f} | {error} | {inside} |"


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_the_docs_table_is_the_recomputed_one() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "actions.md").read_text(encoding="utf-8")
    for cell in cells():
        assert table_row(cell) in docs, table_row(cell)


if __name__ == "__main__":
    for cell in cells():
        print(table_row(cell))


SYNC_CHAIN = Path(__file__).resolve().parent.parent / "traces" / "h100" / "sync_chain_graphs"


def test_a_host_sync_splits_the_graphs() -> None:
    """`.item()` inside the step: reduce-overhead runs one graph per side of the graph break (two
    `cudaGraphLaunch` per step in the raw events), and `cuda_graphs` on the compiled program predicts as many,
    its range holding the realized step on both recordings (it predicted one graph, 188.4 and 181.1 µs against
    356.8 and 349.6, -47 %, before the split)."""
    from tests import rawtrace

    for repeat in ("r0", "r1"):
        after = SYNC_CHAIN / f"sync_chain_ro_{repeat}.json.gz"
        events = rawtrace.events(after)
        steps = rawtrace.steps([e for e in events if e.get("cat") == "user_annotation"])
        launches = [
            sum(1 for e in events if e.get("name") == "cudaGraphLaunch" and s <= e["ts"] <= t) for _, s, t in steps
        ]
        assert set(launches[1:]) == {2}  # the first may hold the capture
        results = analyze(tracelens.load(SYNC_CHAIN / f"sync_chain_compiled_{repeat}.json.gz"))
        assert results.actions is not None
        (graphs,) = [a for a in results.actions.actions if a.action == "cuda_graphs"]
        assert graphs.predicted_launches_per_step == 2 and "2 graph launches/step (host syncs split it)" in graphs.basis
        realized = raw_mean_span_us(after, without_capture=True)
        assert graphs.low <= realized <= graphs.high
