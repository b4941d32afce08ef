"""docs/actions.md#cpu-limited-steps: the host-speed figures, recomputed from the probe's outputs
(tests/data/host_noise/noise_r*.json, written by `python -m workloads.host_noise` on one H200)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "actions.md"


def _rows() -> list[list[dict[str, float | str]]]:
    return [json.loads(p.read_text())["rows"] for p in sorted((ROOT / "tests/data/host_noise").glob("noise_r*.json"))]


def test_the_host_noise_prose_is_recomputed() -> None:
    runs = _rows()
    rows = [row for run in runs for row in run]
    assert len(runs) == 2 and len(rows) == 36
    pure = [float(r["pure_loop_median_us"]) for r in rows]
    within = max(
        max(float(r["pure_loop_median_us"]) for r in run) / min(float(r["pure_loop_median_us"]) for r in run)
        for run in runs
    )
    events = [float(r["event_median_us"]) for r in rows]
    pinned = [float(r["event_median_us"]) for r in rows if r["condition"] == "pinned"]
    nogc = [float(r["event_median_us"]) for r in rows if r["condition"] == "pinned_nogc"]
    steal = max(float(r["steal_pct"]) for r in rows)
    prose = " ".join(DOC.read_text(encoding="utf-8").split())
    assert f"took {min(pure):,.0f} to {max(pure):,.0f} µs (median per block)" in prose
    assert f"moved {within:.2f}× within one process, with at most {steal:.1f} % steal time" in prose
    assert f"moved from {min(events):.1f} to {max(events):.1f} µs alongside" in prose
    assert f"(pinned blocks: {min(pinned):.1f} to {max(pinned):.1f} µs; pinned without GC: {min(nogc):.1f} to" in prose
    assert f"{max(nogc):.1f} µs)" in prose
