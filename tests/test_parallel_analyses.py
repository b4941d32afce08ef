"""`analyze(..., workers=2)` runs the registry's `apart` analyses in a forked child: the same report as one
process (the analyses are pure), on big traces only, and a child that dies or raises does not change that."""

from __future__ import annotations

import os
import signal

import msgspec
import pytest

from tests.conftest import anchor, recorded_trace
from tracelens.analyses import pipeline
from tracelens.analyses.registry import ANALYSES
from tracelens.loader import load_trace
from tracelens.records import replace
from tracelens.renderers.jsonout import analyze_dict

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _document(path: str, workers: int) -> bytes:
    return msgspec.json.encode(analyze_dict(pipeline.analyze(load_trace(path, workers=1), workers=workers)))


@pytest.mark.parametrize(
    "relative",
    ["h200:eager_mlp.json.gz", "h200:extra/train_eager_mlp.json.gz", "anchor:hta/trace_diff/control/control.json.gz"],
)
def test_two_processes_give_the_one_process_report(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kind, name = relative.split(":", 1)
    path = str(recorded_trace(f"h200/{name}") if kind == "h200" else anchor(name))
    forks: list[int] = []
    real = pipeline.run_forked
    monkeypatch.setattr(pipeline, "run_forked", lambda *a, **k: (forks.append(1), real(*a, **k))[1])
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_EVENTS", 0)  # these traces are small: force the fork
    assert _document(path, 2) == _document(path, 1)
    assert forks == [1]  # the two-process run forked once; the one-process run did not


def test_small_traces_are_analyzed_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "run_forked", lambda *a, **k: pytest.fail("forked for a small trace"))
    trace = load_trace(recorded_trace("h200/eager_mlp.json.gz"), workers=1)
    assert len(trace.events) < pipeline.PARALLEL_MIN_EVENTS
    pipeline.analyze(trace, workers=4)


def _entry(name: str) -> int:
    return next(i for i, entry in enumerate(ANALYSES) if entry.name == name)


def test_a_child_that_dies_is_replaced_by_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(recorded_trace("h200/eager_mlp.json.gz"))
    expected = _document(path, 1)
    parent = os.getpid()
    index = _entry("critical_path")
    real = ANALYSES[index].run

    def killed_in_child(ctx: object) -> object:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(ctx)  # type: ignore[arg-type]

    entries = list(ANALYSES)
    entries[index] = replace(entries[index], run=killed_in_child)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_EVENTS", 0)
    trace = load_trace(path, workers=1)
    report = pipeline.analyze(trace, analyses=entries, workers=2)
    assert msgspec.json.encode(analyze_dict(report)) == expected


def test_an_error_in_the_child_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    index = next(i for i, entry in enumerate(ANALYSES) if entry.apart)  # an analysis the child runs
    real = ANALYSES[index].run

    def fails_in_child(ctx: object) -> object:
        if os.getpid() != parent:
            raise ValueError("an analysis failed in the child")
        return real(ctx)  # type: ignore[arg-type]

    entries = list(ANALYSES)
    entries[index] = replace(entries[index], run=fails_in_child)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_EVENTS", 0)
    trace = load_trace(recorded_trace("h200/eager_mlp.json.gz"), workers=1)
    with pytest.raises(ValueError, match="an analysis failed in the child"):
        pipeline.analyze(trace, analyses=entries, workers=2)


def test_a_process_that_ignores_sigchld_still_gets_its_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """With SIGCHLD ignored the kernel reaps children itself (waitpid then fails): the results still come."""
    path = str(recorded_trace("h200/eager_mlp.json.gz"))
    expected = _document(path, 1)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_EVENTS", 0)
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert _document(path, 2) == expected
        big = load_trace(anchor("hta/trace_diff/control/control.json.gz"), workers=2)  # the loader's children too
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert len(big.events) == len(load_trace(anchor("hta/trace_diff/control/control.json.gz"), workers=1).events)
