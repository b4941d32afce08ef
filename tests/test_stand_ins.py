"""Redistributable stand-ins for what the non-redistributable corpus traces check (tests/anchors.py:OPTIONAL), so
a fresh clone tests every such feature: whole-microsecond timestamps (deepseek-ai/profile-data's H800 trace;
here `tests/data/eager_mlp_integer_us.json.gz`, written by scripts/derive_integer_us.py), figures read from the
raw events by the standard library or by HTA."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tracelens.cli import main

DATA = Path(__file__).parent / "data"
INTEGER_US = DATA / "eager_mlp_integer_us.json.gz"


def _raw_kernels_per_step(path: Path) -> list[tuple[int, int]]:
    """Stdlib: kernels per ProfilerStep (the step whose span holds the launching runtime call)."""
    counts = Counter(step for event, step in rawtrace.kernel_steps(rawtrace.events(path)) if step is not None)
    return sorted(counts.items())


def test_the_integer_microsecond_stand_in_is_integers() -> None:
    with gzip.open(INTEGER_US, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    timed = [e for e in events if "ts" in e]
    assert len(timed) > 100 and all(isinstance(e["ts"], int) for e in timed)
    assert all(isinstance(e["dur"], int) for e in timed if "dur" in e)


def test_an_integer_microsecond_trace_counts_and_sums_as_the_raw_events(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(INTEGER_US), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    steps = [(row["number"], row["kernels"]) for row in document["step_table"]]
    assert steps == _raw_kernels_per_step(INTEGER_US) and len(steps) == 5
    events = rawtrace.events(INTEGER_US)
    by_step: Counter[int] = Counter()
    for event, step in rawtrace.kernel_steps(events):
        if step is not None:
            by_step[step] += event["dur"]
    assert [row["gpu_kernel_us"] for row in document["step_table"]] == [by_step[n] for n, _ in steps]


def test_integer_microsecond_kernel_totals_equal_hta_exactly(tmp_path: Path) -> None:
    """Whole µs leave HTA nothing to round: over the steps HTA keeps (it drops the last ProfilerStep, HTA #76) its
    kernel totals by name equal tracelens' exactly, and its calls the raw events' count."""
    pytest.importorskip("hta.trace_analysis")
    from tests.test_hta_crosscheck import hta_kernels, our_kernels

    theirs, by_iteration = hta_kernels(INTEGER_US, tmp_path)
    kept = {n for n in by_iteration if n >= 0}
    assert len(kept) == 4
    assert our_kernels(tracelens.load(INTEGER_US), kept) == theirs
    raw = Counter(str(e["name"]) for e, step in rawtrace.kernel_steps(rawtrace.events(INTEGER_US)) if step in kept)
    assert {name: calls for name, (_, calls) in theirs.items()} == dict(raw)


STAND_INS = Path(__file__).resolve().parents[1] / "traces" / "h200" / "stand_ins"


def test_a_trace_without_gpu_activity_warns_and_analyzes_the_cpu_side(capsys: pytest.CaptureFixture[str]) -> None:
    """`cpu_only_train.json.gz` (workloads/stand_ins.py: an eager training loop profiled with CPU activity only, 3
    ProfilerSteps): no kernels, the CPU ops per step as the raw events count them (the outermost `aten::` ops)."""
    path = STAND_INS / "cpu_only_train.json.gz"
    assert main(["analyze", str(path), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["per_step"]["kernels"] == 0 and document["step_numbers"] == [1, 2, 3]
    assert any("no GPU activity" in w for w in document["warnings"])
    events = rawtrace.events(path)
    assert not [e for e in events if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert main(["analyze", str(path), "--no-cache"]) == 0 and "Per step" in capsys.readouterr().out


@pytest.mark.slow  # over 3 s on a 2-core machine
def test_a_graph_break_and_lazy_backward_compiles_belong_to_their_frames() -> None:
    """`nostep_compile_train.json.gz` (workloads/stand_ins.py; the stand-in for Wings236's `trace_compile`): a
    compiled MLP with a graph break trained 3 iterations, no ProfilerStep. Frame 1 compiles inside frame 0's
    region (the resumed frame), the backwards compile lazily on the autograd thread, frame 1's first; Dynamo's
    labels name each (tests/independent/compiles.py pairs each span with the label written just before it).
    Before, frame 1's compile was charged to 0/0 and both backwards to 1/0 (3,452.1 / 1,309.8 ms)."""
    from tests.independent.compiles import compilations
    from tracelens.analyses.pipeline import analyze

    path = STAND_INS / "nostep_compile_train.json.gz"
    expected: dict[str | None, float] = {}
    for compile_id, step, ms in compilations(str(path)):
        assert step == 1
        expected[compile_id] = expected.get(compile_id, 0.0) + ms
    assert [c for c, *_ in compilations(str(path))] == ["0/0", "1/0", "1/0", "0/0"]
    for compile_id, ms in _autotuning_ms(path).items():  # each compile's first-call autotuning
        expected[compile_id] += ms
    compiled = analyze(tracelens.load(path)).compiled
    assert compiled is not None
    assert [(c.id, c.step) for c in compiled.compiles] == [("0/0", 1), ("1/0", 1)]
    for entry in compiled.compiles:  # within 10 ms: smaller than any autotuning span charged to the wrong id
        assert abs(entry.ms - expected[entry.id]) < 10, (entry, expected)


def _autotuning_ms(path: Path) -> dict[str, float]:
    """Stdlib: each `CachingAutotuner.benchmark_all_configs (dynamo_timed)` span's ms, charged to the compile id of
    the compile span (compile_inner or bw_compiler, labelled by tests/independent/compiles.py) that last ended
    before it on the same thread."""
    from tests.independent.compiles import BACKWARD, FORWARD, compilations

    events = rawtrace.events(path)
    spans = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e.get("tid"))
        for e in events
        if e.get("name") in (FORWARD, BACKWARD)
    )
    ids = [compile_id for compile_id, _, _ in compilations(str(path))]  # in order of start, as `spans`
    assert len(ids) == len(spans)
    charged: dict[str, float] = {}
    for e in events:
        if e.get("name") == "CachingAutotuner.benchmark_all_configs (dynamo_timed)":
            before = [i for i, (_, end, tid) in enumerate(spans) if tid == e.get("tid") and end <= float(e["ts"])]
            owner = ids[before[-1]]
            assert owner is not None
            charged[owner] = charged.get(owner, 0.0) + float(e["dur"]) / 1000
    return charged
