"""The profiler-overhead model (docs/profiler_overhead.md), checked against an independent computation: the
standard library reads each calibration trace's raw events (gzip + json) and its timings.json entry, computes the
profiled step, GPU busy and CPU events per step itself, refits the model's two constants by the documented grid,
and checks the docs' table and the analyzer's figures against that."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tracelens.analyses.profiler_overhead import FIXED_US, PER_EVENT_US, estimate_step_us, verdict_without_profiler
from tracelens.analyses.summary import summary_of
from tracelens.loader import load_trace

ROOT = Path(__file__).resolve().parent.parent
TIMINGS = ("traces/h200/timings.json", "traces/h200/block/timings.json", "traces/h200/extra/timings.json")
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
COUNTED = {"cpu_op", "cuda_runtime"}


def _runs() -> list[tuple[Path, float]]:
    runs = []
    for timings in TIMINGS:
        document = json.loads((ROOT / timings).read_text())
        for run in document["runs"].values():
            runs.append(((ROOT / timings).parent / run["trace"], run["cuda_event_ms"]["median"] * 1e3))
    return runs


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


@cache
def independent(path: Path) -> dict[str, float]:
    """Per-step medians from the raw events: the step period (next ProfilerStep start − this start; the first
    and the last step: their own duration, as tracelens has no step before or after them to measure from), GPU
    busy (union of the GPU activity launched in the step, by correlation id) and the cpu_op + cuda_runtime events
    starting inside the step's ProfilerStep range."""
    with gzip.open(path, "rt") as handle:
        events = [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and re.fullmatch(r"ProfilerStep#\d+", e["name"])),
        key=lambda e: float(e["ts"]),
    )
    bounds = [(float(s["ts"]), float(s["ts"]) + float(s["dur"])) for s in steps]

    def step_of(ts: float) -> int | None:
        for i, (start, end) in enumerate(bounds):
            if start <= ts <= end:
                return i
        return None

    counts = [0] * len(steps)
    launch_step: dict[Any, int] = {}
    for event in events:
        category = event.get("cat")
        if category in COUNTED or category == "cuda_driver":  # a launch is a runtime or a driver call
            i = step_of(float(event["ts"]))
            if i is not None:
                counts[i] += category in COUNTED
                if "correlation" in event.get("args", {}):
                    launch_step[event["args"]["correlation"]] = i
    busy: list[list[tuple[float, float]]] = [[] for _ in steps]
    for event in events:
        if event.get("cat") in GPU_CATEGORIES:
            i = launch_step.get(event.get("args", {}).get("correlation"))
            if i is not None:
                busy[i].append((float(event["ts"]), float(event["ts"]) + float(event["dur"])))
    periods = [
        bounds[i + 1][0] - bounds[i][0] if 0 < i < len(bounds) - 1 else end - start
        for i, (start, end) in enumerate(bounds)
    ]
    return {
        "step_us": statistics.median(periods),
        "busy_us": statistics.median(_union_us(b) for b in busy),
        "events": statistics.median(counts),
    }


def _estimate(row: dict[str, float], fixed: float, per_event: float) -> float:
    return max(row["busy_us"], row["step_us"] - fixed - per_event * row["events"], 0.0)


def _fit(rows: list[tuple[dict[str, float], float]]) -> tuple[float, float, int]:
    """The documented grid: fixed 0-295 µs by 5, per event 0-11.8 µs by 0.2; most traces within ±15 %, then the
    smallest sum of relative errors."""
    best: tuple[tuple[int, float], float, float] | None = None
    for fixed in range(0, 300, 5):
        for tenth in range(0, 120, 2):
            errors = [abs(_estimate(row, fixed, tenth / 10) / measured - 1) for row, measured in rows]
            key = (sum(e <= 0.15 for e in errors), -sum(errors))
            if best is None or key > best[0]:
                best = (key, float(fixed), tenth / 10)
    assert best is not None
    return best[1], best[2], best[0][0]


def test_the_independent_figures_agree_with_the_analyzer() -> None:
    """Steps, GPU busy and event counts from the raw events match tracelens' summary within 2 % (the step
    period of a CPU-limited, synchronized step is CPU start to CPU start in both)."""
    for path, _ in _runs():
        mine = independent(path)
        summary = summary_of(load_trace(path))
        free = summary.profiler_free
        assert free is not None and free.events_per_step == pytest.approx(mine["events"], rel=0.02, abs=0.5), path
        assert summary.per_step.step_us == pytest.approx(mine["step_us"], rel=0.02), path
        assert summary.per_step.gpu_busy_us == pytest.approx(mine["busy_us"], rel=0.02), path


def test_the_constants_are_the_fit_of_the_raw_calibration_data() -> None:
    rows = [(independent(path), measured) for path, measured in _runs()]
    fixed, per_event, within = _fit(rows)
    assert (fixed, per_event) == (FIXED_US, PER_EVENT_US)
    doc = (ROOT / "docs/profiler_overhead.md").read_text()
    assert f"the estimate on **{within} of {len(rows)}** traces" in doc
    assert within / len(rows) >= 0.8  # the ±15 % target holds on most traces; the rest are listed as outside it
    left_out = 0
    for i, (row, measured) in enumerate(rows):
        fixed_i, per_event_i, _ = _fit(rows[:i] + rows[i + 1 :])
        left_out += abs(_estimate(row, fixed_i, per_event_i) / measured - 1) <= 0.15
    assert f"on the other {len(rows) - 1}) on **{left_out} of {len(rows)}**" in doc


def test_the_docs_table_is_the_independent_one() -> None:
    """Every row of the docs' table: its measured, profiled and estimated figures within 2 % of the independent
    computation (the estimate from the raw figures with the fitted constants)."""
    doc = (ROOT / "docs/profiler_overhead.md").read_text()
    table = doc.split("<!-- calibration table: begin -->")[1].split("<!-- calibration table: end -->")[0]
    rows = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines() if ".json.gz" in line}
    runs = _runs()
    assert len(rows) == len(runs)
    for path, measured in runs:
        cells = rows[str(path.relative_to(ROOT / "traces/h200"))]
        number = [float(c.replace(",", "").split()[0]) if c.strip() else 0.0 for c in cells[2:7]]
        mine = independent(path)
        assert number[1] == pytest.approx(mine["step_us"], rel=0.02)
        assert number[3] == pytest.approx(measured, abs=0.1)
        assert number[4] == pytest.approx(_estimate(mine, FIXED_US, PER_EVENT_US), rel=0.02)


def test_the_model_formula() -> None:
    assert estimate_step_us(1000.0, 300.0, 100.0) == pytest.approx(1000 - FIXED_US - 100 * PER_EVENT_US)
    assert estimate_step_us(1000.0, 900.0, 100.0) == 900.0  # GPU busy is the floor
    assert estimate_step_us(None, 900.0, 100.0) is None
    assert estimate_step_us(50.0, None, 100.0) == 0.0


def test_a_measured_time_wins_and_the_inflation_is_against_it(tmp_path: Path) -> None:
    """A trace with `tracelens_record` timings: `source` measured, the inflation from the raw median."""
    source = ROOT / "traces/h200/block/liger_block.json.gz"
    with gzip.open(source, "rt") as handle:
        document = json.load(handle)
    document["tracelens_record"] = {
        "version": 1,
        "profiler_free": {"clock": "cuda_events", "steps": 5, "step_us": [1266.0] * 5, "median_step_us": 1266.0},
        "partial_reason": None,
    }
    path = tmp_path / "liger_block.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump(document, handle)
    summary = summary_of(load_trace(path))
    free = summary.profiler_free
    assert free is not None and free.source == "measured" and free.step_us == 1266.0
    profiled = independent(source)["step_us"]
    assert free.inflation_pct == pytest.approx(100 * (profiled / 1266.0 - 1), abs=0.5)
    assert free.estimated_step_us is not None


def test_the_verdict_flip_claims_against_the_cuda_events() -> None:
    """Where `analyze` says the verdict would read gpu without the profiler (the estimate), the CUDA-event step
    (independent GPU busy from the raw events ÷ the timings.json median) says so too on the share the docs
    state; and the docs state how many flips the estimate misses."""
    from tracelens.analyses import analyze
    from tracelens.analyses.bound import Bound

    claimed = right = missed = 0
    for path, measured in _runs():
        report = analyze(load_trace(path))
        bound, free = report.get(Bound), report.summary.profiler_free
        assert bound is not None and free is not None
        says = verdict_without_profiler(bound.bound, report.summary.per_step.gpu_busy_us, free.step_us) == "gpu"
        truly = bound.bound in ("cpu", "mixed") and independent(path)["busy_us"] / measured >= 0.85
        claimed += says
        right += says and truly
        missed += truly and not says
    doc = " ".join((ROOT / "docs/profiler_overhead.md").read_text().split())
    assert f"right on {right} of the {claimed} traces where it says so" in doc
    assert f"misses {missed} flip" in doc


@pytest.mark.slow
def test_the_held_out_table_lists_every_recorded_trace() -> None:
    """Every `tracelens record` trace with CUDA-event timings under traces/h200/record/ has its row (measured
    median as in the raw metadata, events per step as counted from the raw events); none: the docs say so."""
    recorded = []
    for path in sorted((ROOT / "traces/h200/record").glob("*.json.gz")):
        with gzip.open(path, "rt") as handle:
            free = (json.load(handle).get("tracelens_record") or {}).get("profiler_free") or {}
        if free.get("clock") == "cuda_events":
            recorded.append((path, float(free["median_step_us"])))
    doc = (ROOT / "docs/profiler_overhead.md").read_text()
    section = doc.split("<!-- held-out table: begin -->")[1].split("<!-- held-out table: end -->")[0]
    if not recorded:
        assert "No held-out recording yet" in section
        return
    rows = {line.split("|")[1].strip(): line.split("|") for line in section.splitlines() if ".json.gz" in line}
    assert len(rows) == len(recorded)
    for path, measured in recorded:
        cells = rows[str(path.relative_to(ROOT / "traces/h200"))]
        assert float(cells[6].replace(",", "")) == pytest.approx(measured, abs=0.1)
        assert float(cells[3].replace(",", "")) == pytest.approx(independent(path)["events"], rel=0.02, abs=1)


HELD_OUT_TIMINGS = (
    "traces/h200/sweep_long/r1/timings.json",
    "traces/h200/sweep_long/r2/timings.json",
    "traces/h200/sweep_repeats/r1/timings.json",
    "traces/h200/sweep_repeats/r2/timings.json",
    "traces/h200/block_long/r1/timings.json",
    "traces/h200/block_long/r2/timings.json",
    "traces/h200/attn_long/r1/timings.json",
    "traces/h200/attn_long/r2/timings.json",
)


def _range(row: dict[str, float]) -> tuple[float, float]:
    """The documented range of the estimate: × RANGE_GPU where the profiled step is at most 1.5 × GPU busy, else ×
    RANGE_CPU, the low end at least 0.95 × the GPU's busy time (or the estimate, where that is lower)."""
    from tracelens.analyses.profiler_overhead import BUSY_FLOOR, RANGE_CPU, RANGE_GPU

    estimate = _estimate(row, FIXED_US, PER_EVENT_US)
    low, high = RANGE_GPU if row["step_us"] <= 1.5 * row["busy_us"] else RANGE_CPU
    return max(estimate * low, BUSY_FLOOR * min(row["busy_us"], estimate)), estimate * high


def _held_out_runs() -> list[tuple[Path, float]]:
    runs = []
    for timings in HELD_OUT_TIMINGS:
        document = json.loads((ROOT / timings).read_text())
        for run in document["runs"].values():
            runs.append(((ROOT / timings).parent / run["trace"], run["cuda_event_ms"]["median"] * 1e3))
    for path in sorted((ROOT / "traces/h200/record").glob("*.json.gz")):
        with gzip.open(path, "rt") as handle:
            free = (json.load(handle).get("tracelens_record") or {}).get("profiler_free") or {}
        if free.get("clock") == "cuda_events":
            runs.append((path, float(free["median_step_us"])))
    return runs


def test_the_range_is_the_calibration_spread() -> None:
    """RANGE_GPU / RANGE_CPU are the smallest and largest CUDA-event step ÷ estimate over the calibration traces
    whose profiled step is at most / more than 1.5 × GPU busy (from the raw events), rounded outward to 0.01:
    every calibration trace lies in its range."""
    import math

    from tracelens.analyses.profiler_overhead import BUSY_FLOOR, RANGE_CPU, RANGE_GPU

    ratios: dict[bool, list[float]] = {True: [], False: []}
    for path, measured in _runs():
        row = independent(path)
        assert measured / row["busy_us"] >= BUSY_FLOOR + 0.04, path  # the floor has a margin on every trace
        ratios[row["step_us"] <= 1.5 * row["busy_us"]].append(measured / _estimate(row, FIXED_US, PER_EVENT_US))
        low, high = _range(row)
        assert low <= measured <= high, path
    for gpu, fitted in ((True, RANGE_GPU), (False, RANGE_CPU)):
        assert fitted == (math.floor(100 * min(ratios[gpu])) / 100, math.ceil(100 * max(ratios[gpu])) / 100)


@pytest.mark.slow
def test_the_range_out_of_sample() -> None:
    """On the held-out recordings (the long and repeat sweeps, the `tracelens record` traces) the CUDA-event step
    lies in the stated range on the share the docs give; the analyzer's range is the independent one."""
    inside = 0
    runs = _held_out_runs()
    for path, measured in runs:
        row = independent(path)
        low, high = _range(row)
        inside += low <= measured <= high
        free = summary_of(load_trace(path)).profiler_free
        assert free is not None and free.estimate_low_us is not None and free.estimate_high_us is not None
        assert free.estimate_low_us == pytest.approx(low, rel=0.03), path
        assert free.estimate_high_us == pytest.approx(high, rel=0.03), path
    doc = " ".join((ROOT / "docs/profiler_overhead.md").read_text().split())
    assert f"in its range on **{inside} of {len(runs)}** held-out traces" in doc
    # the high end may lie above the profiled step: the reference was longer than it on two CPU-limited runs
    longer = sorted(measured / independent(path)["step_us"] for path, measured in runs)
    assert f"by **{100 * longer[-1] - 100:.0f} and {100 * longer[-2] - 100:.0f} %**" in doc
    assert longer[-3] < 1.06


def test_the_reproducibility_table_is_the_raw_one() -> None:
    """docs' reproducibility table (traces/h200/sweep_long): each program's four CUDA-event medians as in the
    timings files, its two profiled median steps from the raw events, and the prose's spreads recomputed."""
    folders = [ROOT / "traces/h200/sweep_long/r1", ROOT / "traces/h200/sweep_long/r2"]
    loops: dict[str, list[float]] = {}
    for folder in folders:
        document = json.loads((folder / "timings.json").read_text())
        for name, run in document["runs"].items():
            loops.setdefault(name, []).append(run["cuda_event_ms"]["median"] * 1e3)
        for group in document["interleaved"].values():
            for name, result in group.items():
                loops[name].append(result["cuda_event_ms"]["median"] * 1e3)
    doc = (ROOT / "docs/profiler_overhead.md").read_text()
    table = doc.split("<!-- reproducibility table: begin -->")[1].split("<!-- reproducibility table: end -->")[0]
    rows = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines() if "sweep_" in line}
    assert set(rows) == set(loops)
    small_event_spread = small_profiled_spread = big_spread = 0.0
    for name, (loop1, loop2, inter1, inter2) in ((n, (v[0], v[2], v[1], v[3])) for n, v in loops.items()):
        cells = rows[name]
        shown = [float(x.replace(",", "")) for cell in cells[2:4] for x in cell.split("/")]
        assert shown == pytest.approx([loop1, inter1, loop2, inter2], abs=0.06)
        profiled = [independent(folder / f"{name}.json.gz")["step_us"] for folder in folders]
        assert [float(x.replace(",", "")) for x in cells[5].split("/")] == pytest.approx(profiled, rel=0.02)
        events = [loop1, inter1, loop2, inter2]
        if name.endswith("_t4096"):
            big_spread = max(big_spread, max(events) / min(events), max(profiled) / min(profiled))
        else:  # within one process: its two loops
            for a, b in ((loop1, inter1), (loop2, inter2)):
                small_event_spread = max(small_event_spread, max(a, b) / min(a, b))
            small_profiled_spread = max(small_profiled_spread, max(profiled) / min(profiled))
    prose = " ".join(doc.split())
    assert f"moves up to {small_event_spread:.2f}× between the loops of one process" in prose
    assert f"up to {small_profiled_spread:.1f}× between the two processes" in prose
    assert big_spread <= 1.05  # "from 4,096 tokens (GPU-bound) both agree within 5 %"
