"""`dispatch.ops`, the CPU self time per step by op name (docs/definitions.md#exposed-dispatch-and-the-verdict),
against a stdlib reading of the raw events: on each CPU thread, events nest by time (an event is a child of the
innermost one still running at its start that holds its end), an op's self time is its duration less its direct
children's, summed per op name over the ProfilerSteps that start on the trace's step track and divided by their
number. Traces without compilation or capture, so the analyzed steps are every complete step."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tracelens.analyses import analyze
from tracelens.loader import load_trace

ROOT = Path(__file__).resolve().parent.parent / "traces"
TRACES = (
    "h200/eager_mlp.json.gz",
    "h200/graphs/decode_eager.json.gz",
    "h200/block/train_eager_block.json.gz",
    # an op that launches GPU work in some calls and none in others (aten::copy_, ViewBackward0): one row
    "h100/record2/hf_llama_train.json.gz",
    "h100/record3/hf_gpt2_train_eager.json.gz",
)
CPU_CATEGORIES = {"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"}


def raw_self_us(path: Path) -> dict[str, float]:
    """Per cpu_op name: self time per step, µs."""
    with gzip.open(path, "rt") as handle:
        doc = json.load(handle)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in CPU_CATEGORIES]
    steps = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    totals: dict[str, float] = {}
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        stack: list[tuple[float, dict[str, Any], list[float]]] = []  # (end, event, [children's time])
        for e in [*evs, {"ts": float("inf"), "dur": 0, "cat": "", "name": ""}]:
            ts, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
            while stack and (ts >= stack[-1][0] or end > stack[-1][0] + 1.0):
                _, closed, children = stack.pop()
                start = float(closed["ts"])
                if closed.get("cat") == "cpu_op" and any(a <= start < b for a, b in steps):
                    name = str(closed["name"])
                    totals[name] = totals.get(name, 0.0) + max(0.0, float(closed["dur"]) - children[0])
            if stack:
                stack[-1][2][0] += float(e.get("dur", 0))
            stack.append((end, e, [0.0]))
    return {name: total / len(steps) for name, total in totals.items()}


@pytest.mark.parametrize("name", TRACES)
def test_the_ops_cpu_self_time_is_the_raw_events(name: str) -> None:
    path = ROOT / name
    dispatch = analyze(load_trace(path)).dispatch
    expected = raw_self_us(path)
    assert dispatch.ops, name
    for op in dispatch.ops:
        assert op.self_us_per_step == pytest.approx(expected[op.name], rel=0.02, abs=1.0), op.name
    assert len({op.name for op in dispatch.ops}) == len(dispatch.ops)  # one row per name
    ranked = sorted(expected, key=lambda n: -expected[n])[:3]
    assert [op.name for op in dispatch.ops[:3]] == ranked


def test_the_report_shows_the_same_ops_as_the_raw_events() -> None:
    """The report's panel (every row of `dispatch.ops`) names the ops with the most self time per step, and
    each row's µs/step is the raw events' figure (one quantity, one value: analyze's table and the page)."""
    from tracelens.renderers.page import build_report

    path = ROOT / TRACES[0]
    trace = load_trace(path)
    document = build_report([(trace, analyze(trace))])
    table = document.panel("dispatch-ops").table
    assert table is not None and table.columns[0] == "op" and table.rows
    expected = raw_self_us(path)
    shown = {row[0]: float(row[3].replace(",", "")) for row in table.rows}
    assert len(shown) == min(15, len(expected))
    top = sorted(expected.values(), reverse=True)[: len(shown)]
    assert sorted(shown.values(), reverse=True) == pytest.approx(top, abs=0.06)
    for name, us in shown.items():
        assert us == pytest.approx(expected[name], abs=0.06), name
