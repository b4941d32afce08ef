"""The profiler-free estimate on the CUDA-graph recordings (docs/profiler_overhead.md#held-out-the-cuda-graph-
recordings), none of which the model was fitted on: every steady trace of `traces/h200/graphs` and
`traces/h100/graphs_heldout` against the CUDA-event step of its `timings.json` (stdlib). Steps with no
kernel-launch call (pure CUDA-graph replays) take a stand-in unit; their estimate is recomputed here from the raw
events. `PYTHONPATH=. python tests/test_profiler_overhead_graphs.py` prints the docs' table."""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

import tracelens
from tests.test_profiler_overhead import _calibration, _estimate, independent
from tracelens.analyses import analyze
from tracelens.analyses.profiler_overhead import STAND_IN_LAUNCH_US, ProfilerFree

ROOT = Path(__file__).resolve().parent.parent / "traces"
DOC = ROOT.parent / "docs" / "profiler_overhead.md"
FOLDERS = [ROOT / "h200" / "graphs", *sorted(p for p in (ROOT / "h100" / "graphs_heldout").glob("r*") if p.is_dir())]
REPLAYS = re.compile(r"^((mlp|block)_graph(_replay)?|graph_eager_mlp_t\d+)\.json\.gz$")


def steady_traces() -> list[tuple[Path, float]]:
    """(trace, CUDA-event median step µs) of every trace with timings but the captures (a trace of its capture
    alone is warm-up: the CUDA events time the steady step, which it does not hold)."""
    out = []
    for folder in FOLDERS:
        for run in json.loads((folder / "timings.json").read_text())["runs"].values():
            path = folder / Path(run["trace"]).name
            if path.exists() and "capture" not in path.name:
                out.append((path, float(run["cuda_event_ms"]["median"]) * 1e3))
    return out


@cache
def _free(path: Path) -> ProfilerFree:
    free = analyze(tracelens.load(path)).summary.profiler_free  # as `analyze` shows it: its steady steps
    assert free is not None and free.source == "estimated" and free.step_us is not None, path
    return free


def _program(path: Path) -> str:
    """The table's row: `graph replays` for the pure replays, else the variant (sweep tokens dropped)."""
    name = path.name.removesuffix(".json.gz")
    return "graph replays" if REPLAYS.match(path.name) else re.sub(r"_t\d+$", "", name)


def _pct(value: float) -> str:
    return f"{100 * value:+.1f} %".replace("-", "−")


def table() -> list[str]:
    """The docs' rows: per program, traces, within ±15 % of CUDA events, inside the stated range, error range."""
    cells: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for path, measured in steady_traces():
        free = _free(path)
        assert free.step_us is not None and free.estimate_low_us is not None and free.estimate_high_us is not None
        cells[_program(path)].append(
            (free.step_us / measured - 1, free.estimate_low_us <= measured <= free.estimate_high_us)
        )
    rows = []
    for program, found in sorted(cells.items()):
        errors = [e for e, _ in found]
        within, inside = sum(abs(e) <= 0.15 for e in errors), sum(i for _, i in found)
        rows.append(f"| {program} | {len(found)} | {within} | {inside} | {_pct(min(errors))} to {_pct(max(errors))} |")
    total = sum(len(v) for v in cells.values())
    within = sum(abs(e) <= 0.15 for v in cells.values() for e, _ in v)
    inside = sum(i for v in cells.values() for _, i in v)
    rows.append(f"| all | {total} | **{within}** | {inside} | |")
    return rows


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_the_table_is_the_recomputed_one() -> None:
    doc = DOC.read_text(encoding="utf-8")
    rows = table()
    for row in rows:
        assert row in doc, row
    total, within = rows[-1].split(" | ")[1:3]  # the README says the "all" row
    readme = " ".join((ROOT.parent / "README.md").read_text(encoding="utf-8").split())
    assert f"on {within.strip('*')} of {total} CUDA-graph recordings" in readme


REPLAY_ONLY = re.compile(r"^((mlp|block)_graph_replay|graph_eager_mlp_t\d+)\.json\.gz$")  # no capture in the trace


@pytest.mark.parametrize("path", [p for p, _ in steady_traces() if REPLAY_ONLY.match(p.name)], ids=str)
def test_a_replay_is_the_stdlib_model_with_the_stand_in_unit(path: Path) -> None:
    """On the replay-only traces (every step a replay: the steps tracelens analyzes are all of them) there is no
    kernel-launch call in any step, and the estimate is the stdlib model (tests/test_profiler_overhead.py) with
    `STAND_IN_LAUNCH_US` as the unit."""
    row = independent(path)
    assert row["launch_us"] != row["launch_us"]  # NaN: no kernel-launch call in any step
    expected = min(_estimate({**row, "launch_us": STAND_IN_LAUNCH_US}), row["step_us"])
    assert _free(path).step_us == pytest.approx(expected, rel=0.01)


def test_the_stand_in_unit_is_the_calibrations_median() -> None:
    """`STAND_IN_LAUNCH_US`: the median over the calibration traces of their median kernel-launch call (stdlib)."""
    units = [independent(path)["launch_us"] for path, _ in _calibration()]
    assert pytest.approx(statistics.median(units), abs=5e-4) == STAND_IN_LAUNCH_US


if __name__ == "__main__":
    print("\n".join(table()))
