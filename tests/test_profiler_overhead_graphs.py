"""The profiler-free estimate of CUDA-graph replays (docs/profiler_overhead.md#held-out-cuda-graph-replays): steps
with no kernel-launch call get the floor alone. Held out: the pure graph-replay traces of the graphs folders,
against the CUDA-event step of their `timings.json` (stdlib), and the floor recomputed from the raw events."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tracelens
from tests.test_profiler_overhead import independent
from tracelens.analyses.profiler_overhead import LEAD_SHARE
from tracelens.analyses.summary import summary_of

ROOT = Path(__file__).resolve().parent.parent / "traces"
FOLDERS = [ROOT / "h200" / "graphs", *sorted(p for p in (ROOT / "h100" / "graphs_heldout").glob("r*") if p.is_dir())]
REPLAYS = re.compile(r"^((mlp|block)_graph(_replay)?|graph_eager_mlp_t\d+)\.json\.gz$")


def replay_traces() -> list[tuple[Path, float]]:
    """(trace, CUDA-event median step µs) of every pure graph-replay trace with timings."""
    out = []
    for folder in FOLDERS:
        for run in json.loads((folder / "timings.json").read_text())["runs"].values():
            path = folder / Path(run["trace"]).name
            if REPLAYS.match(path.name) and path.exists():
                out.append((path, float(run["cuda_event_ms"]["median"]) * 1e3))
    return out


def test_the_held_out_counts() -> None:
    found = [(summary_of(tracelens.load(path)).profiler_free, measured) for path, measured in replay_traces()]
    assert len(found) == 30
    assert all(free is not None and free.source == "estimated" for free, _ in found)
    within = sum(abs(free.step_us / measured - 1) <= 0.15 for free, measured in found if free and free.step_us)
    inside = sum(
        free.estimate_low_us <= measured <= free.estimate_high_us
        for free, measured in found
        if free and free.estimate_low_us is not None and free.estimate_high_us is not None
    )
    doc = " ".join((ROOT.parent / "docs" / "profiler_overhead.md").read_text(encoding="utf-8").split())
    assert f"on **{within} of {len(found)}** and the CUDA-event step inside the stated range on {inside}" in doc
    assert (within, inside) == (28, 30)


@pytest.mark.parametrize("path", [p for p, _ in replay_traces() if p.name.endswith("_replay.json.gz")], ids=str)
def test_the_estimate_is_the_stdlib_floor(path: Path) -> None:
    """On the replay-only traces (every step a replay, no capture: the steps tracelens analyzes are all of them)
    the estimate is the raw events' median GPU busy + LEAD_SHARE × median lead (tests/test_profiler_overhead.py)."""
    row = independent(path)
    assert row["launch_us"] != row["launch_us"]  # NaN: no kernel-launch call in any step
    free = summary_of(tracelens.load(path)).profiler_free
    assert free is not None and free.step_us is not None
    assert free.step_us == pytest.approx(min(row["busy_us"] + LEAD_SHARE * row["lead_us"], row["step_us"]), rel=0.01)
