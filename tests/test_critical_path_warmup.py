"""A first step whose span is over 1.5× the median span is warm-up, left out of the critical path's means and of
the actions' replays (docs/critical_path.md#the-steps-analyzed), checked against a standard-library reading of the
raw events: the steady steps of tests/independent/warmup_steps.py that own a GPU activity (by correlation, from
their launch inside the step's CPU range), their spans from tests/rawtrace.py, and the rule applied to them."""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.conftest import TRACES, recorded_trace
from tests.independent.warmup_steps import steady_steps
from tracelens.analyses import analyze

OUTLIER = 1.5  # docs/critical_path.md: a span over this × the median is an outlier
CHOSEN = ("h200/sweep/liger_geglu", "h200/graphs/mlp_compiled", "h200/eager_mlp", "h200/graphs/mlp_ro")


def _steps_with_gpu(evs: list[dict]) -> set[int]:
    """ProfilerStep numbers that launched a GPU activity (kernel, copy or set) inside their CPU range."""
    launches = rawtrace.launch_times(evs)
    found = rawtrace.steps([e for e in evs if not str(e.get("cat", "")).startswith("gpu_")])
    owners = set()
    for e in evs:
        if str(e.get("cat", "")).lower() not in rawtrace.GPU_ACTIVITY_CATS:
            continue
        launched = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        if launched is not None and launched <= float(e["ts"]):
            owners.update(n for n, start, end in found if start <= launched < end)
    return owners


@cache
def expected(path: Path) -> tuple[list[int], float | None]:
    """(the step numbers left out of the means, the mean span µs of the others) read from the raw events."""
    evs = rawtrace.events(path)
    with_gpu = _steps_with_gpu(evs)
    numbers = [n for n in steady_steps(str(path)) if n in with_gpu]
    if not numbers:
        return [], None
    spans = rawtrace.step_spans(evs)
    lengths = [spans[n][2] - spans[n][1] for n in numbers]
    apart = len(lengths) > 2 and lengths[0] > OUTLIER * statistics.median(lengths)
    kept = lengths[1:] if apart else lengths
    return ([numbers[0]] if apart else []), sum(kept) / len(kept)


def check(path: Path) -> None:
    results = analyze(tracelens.load(path))
    path_result = results.critical_path
    left_out, mean_us = expected(path)
    assert [s.number for s in path_result.steps if not s.in_means] == left_out
    if mean_us is not None:
        assert path_result.step_us == pytest.approx(mean_us, abs=0.01)
        assert path_result.steps_analyzed == len([s for s in path_result.steps if s.in_means])
    if left_out:
        (row,) = [s for s in path_result.steps if s.number == left_out[0]]
        assert row.unrepresentative is not None and row.unrepresentative.endswith("left out of the means")
        assert results.actions is not None and results.actions.summary.steps == path_result.steps_analyzed


@pytest.mark.parametrize("name", CHOSEN)
def test_the_first_step_rule_is_the_raw_events_one(name: str) -> None:
    check(recorded_trace(f"{name}.json.gz"))


def test_the_liger_sweeps_triton_compilation_is_left_out() -> None:
    """The Liger GeGLU sweep's first step holds a 1.45 s Triton compilation: the headline is the other steps'."""
    left_out, mean_us = expected(recorded_trace("h200/sweep/liger_geglu.json.gz"))
    assert left_out == [1] and mean_us is not None and 3_000 < mean_us < 4_000


def _recorded() -> list[Path]:
    return sorted(p for p in TRACES.rglob("*.json.gz") if p.stat().st_size < 8_000_000)


@pytest.mark.slow
def test_every_recorded_trace_follows_the_rule() -> None:
    """Every recorded trace under 8 MB with ProfilerSteps (the rule's reading needs them)."""
    checked = apart = 0
    for path in _recorded():
        evs = rawtrace.events(path)
        if not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in evs):
            continue
        check(path)
        checked += 1
        apart += bool(expected(path)[0])
    assert checked > 300 and apart > 20
