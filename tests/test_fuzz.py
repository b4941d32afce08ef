"""Property and fuzz tests: randomly mutated traces never produce a traceback.

Either the analysis succeeds (with warnings) and its invariants hold, or the CLI exits 2 with one
`tracelens: error:` line. Example counts are bounded so the whole file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import math
import os
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import anchors
from tests.conftest import kernel, launch, op, step
from tracelens.analyses import analyze
from tracelens.cli import main
from tracelens.errors import TracelensError
from tracelens.loader import load_trace
from tracelens.model.events import CPU_KINDS, GPU_ACTIVITY_KINDS, Kind
from tracelens.model.trace import Trace
from tracelens.renderers.jsonout import analyze_dict

FUZZ = settings(  # TRACELENS_FUZZ_EXAMPLES=2000 to hunt for bugs locally; the default keeps CI fast
    max_examples=int(os.environ.get("TRACELENS_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,  # no .hypothesis/ folder in the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _base_events() -> list[dict[str, Any]]:
    """Three steps on a main thread plus a backward thread: ops, launches, kernels, a memcpy and a memset."""
    events: list[dict[str, Any]] = []
    correlation = 0
    for number in range(3):
        t0 = 1000.0 + number * 100
        events.append(step(number, t0, 90))
        for k, name in enumerate(("aten::mm", "aten::add", "aten::relu")):
            correlation += 1
            start = t0 + 5 + k * 20
            events += [
                op(name, start, 15, ext=correlation),
                launch("cudaLaunchKernel", start + 2, 4, correlation=correlation, ext=correlation),
                kernel(f"kernel_{name[6:]}", start + 10, 8, correlation=correlation),
            ]
        correlation += 1
        events += [
            op("aten::copy_", t0 + 70, 10, ext=correlation, tid=2),
            launch("cudaMemcpyAsync", t0 + 71, 3, correlation=correlation, ext=correlation, tid=2),
            kernel("Memcpy HtoD (Pageable -> Device)", t0 + 75, 2, correlation=correlation, cat="gpu_memcpy"),
        ]
        correlation += 1
        events += [
            launch("cudaMemsetAsync", t0 + 85, 1, correlation=correlation, tid=1),
            kernel("Memset (Device)", t0 + 87, 1, correlation=correlation, cat="gpu_memset", stream=8),
        ]
    events.append({"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}})
    events.append({"ph": "i", "name": "Iteration Start", "pid": 100, "tid": 1, "ts": 1000, "s": "g"})
    return events


def _real_events() -> list[dict[str, Any]]:
    path = anchors.find("hta/triton_example/triton_example.json.gz")
    if path is None:
        return _base_events()
    document = json.loads(gzip.decompress(path.read_bytes()))
    events: list[dict[str, Any]] = document["traceEvents"]
    return events


BASES = {"built": _base_events(), "triton_example": _real_events()}
TOP = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 132}]}

# ---------------------------------------------------------------- mutations

FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
ARG_FIELDS = [
    "correlation",
    "External id",
    "external id",
    "device",
    "stream",
    "grid",
    "block",
    "bytes",
    "Input Dims",
    "Sequence number",
]
odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from([1e300, -1e300, 2**63, -(2**63) - 1, 2**64, -1, 0, -0.0, 1e-300]),
)
names = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["ProfilerStep#1", "ProfilerStep#99", "ProfilerStep#x", "ProfilerStep#-1", "Memcpy", ""]),
    st.integers(min_value=1_000, max_value=200_000),  # a name of that many "ü" (kept short in reports)
)


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


Mutation = tuple[str, int, Any]
mutation = st.one_of(
    st.tuples(st.just("drop"), st.integers(0, 10**6), st.sampled_from(FIELDS)),
    st.tuples(st.just("drop_arg"), st.integers(0, 10**6), st.sampled_from(ARG_FIELDS)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.tuples(st.sampled_from(FIELDS), odd_values)),
    st.tuples(st.just("set_arg"), st.integers(0, 10**6), st.tuples(st.sampled_from(ARG_FIELDS), odd_values)),
    st.tuples(st.just("name"), st.integers(0, 10**6), names),
    st.tuples(st.just("duplicate"), st.integers(0, 10**6), st.integers(1, 3)),
    st.tuples(st.just("same_id"), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.none()),
    st.tuples(st.just("dur"), st.integers(0, 10**6), st.sampled_from([-5.0, math.nan, math.inf, -math.inf, 1e18])),
    st.tuples(st.just("ts"), st.integers(0, 10**6), st.sampled_from([-1e6, math.nan, 1e17, 2**62, 0.0001])),
    st.tuples(st.just("deep"), st.integers(0, 10**6), st.integers(1, 300)),
    st.tuples(st.just("not_an_event"), st.integers(0, 10**6), odd_values),
)


def _mutate(events: list[dict[str, Any]], mutations: list[Mutation]) -> list[Any]:
    out: list[Any] = copy.deepcopy(events)
    for kind, position, value in mutations:
        if not out:
            break
        index = position % len(out)
        event = out[index]
        if not isinstance(event, dict):
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else None
        if kind == "drop":
            event.pop(value, None)
        elif kind == "drop_arg" and args is not None:
            args.pop(value, None)
        elif kind == "set":
            event[value[0]] = value[1]
        elif kind == "set_arg":
            event.setdefault("args", {})
            if isinstance(event["args"], dict):
                event["args"][value[0]] = value[1]
        elif kind == "name":
            event["name"] = "ü" * value if isinstance(value, int) else value
        elif kind == "duplicate":
            out[index:index] = [copy.deepcopy(event) for _ in range(value)]
        elif kind == "same_id" and args is not None:
            other = out[value % len(out)]
            if isinstance(other, dict) and isinstance(other.get("args"), dict):
                for key in ("correlation", "External id"):
                    if key in other["args"]:
                        args[key] = other["args"][key]
        elif kind == "delete":
            del out[index]
        elif kind == "dur":
            event["dur"] = value
        elif kind == "ts":
            event["ts"] = value
        elif kind == "deep":
            event.setdefault("args", {})
            if isinstance(event["args"], dict):
                event["args"]["Input Dims"] = _deep(value)
        elif kind == "not_an_event":
            out[index] = value
    return out


def _serialize(events: list[Any], bare_array: bool) -> bytes:
    document: Any = events if bare_array else {**TOP, "traceEvents": events}
    return json.dumps(document, allow_nan=True).encode()


# ---------------------------------------------------------------- checks


def _run_cli(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["analyze", str(path), "--format", "json"])
    return status, out.getvalue(), err.getvalue()


def _check_cli(path: Path) -> dict[str, Any] | None:
    status, out, err = _run_cli(path)
    assert "Traceback" not in err
    lines = err.splitlines()
    if status == 2:
        assert len(lines) == 1 and lines[0].startswith("tracelens: error: "), lines
        assert out == ""
        return None
    assert status == 0, (status, err)
    assert all(line.startswith("tracelens: warning: ") for line in lines), lines
    document: dict[str, Any] = json.loads(out)
    return document


def check_invariants(trace: Trace) -> dict[str, Any]:
    """The model and summary invariants; returns the JSON document (path removed)."""
    ev, links = trace.events, trace.links
    n = trace.n_events
    gpu = np.isin(ev.kind, np.array(GPU_ACTIVITY_KINDS, np.int8))
    kernels = ev.kind == Kind.KERNEL
    assert (ev.dur_ns >= 0).all()
    assert (np.diff(ev.ts_ns) >= 0).all()  # canonical order: by time first
    assert trace.source_rows is not None and trace.source_rows.size == n
    assert np.unique(trace.source_rows).size == n and (trace.source_rows < trace.source_events).all()
    # a link points at an event of the right kind, or nowhere
    for array in (links.parent, links.launch, links.op):
        assert ((array >= -1) & (array < n)).all()
    has_launch = links.launch >= 0
    assert gpu[has_launch].all()
    assert not np.isin(ev.kind[links.launch[has_launch]], np.array(GPU_ACTIVITY_KINDS, np.int8)).any()
    # nesting: a parent starts no later than its child, on the same track, and is CPU-side
    child = np.flatnonzero(links.parent >= 0)
    parent = links.parent[child]
    assert (ev.ts_ns[parent] <= ev.ts_ns[child]).all()
    assert (ev.track[parent] == ev.track[child]).all()
    assert np.isin(ev.kind[parent], np.array(CPU_KINDS, np.int8)).all()
    assert (links.depth[child] == links.depth[parent] + 1).all()
    # steps: each event in at most one step (one index per event), GPU activity only through its launch
    assert ((links.step >= -1) & (links.step < len(trace.steps))).all()
    assert (links.step[gpu & ~has_launch] == -1).all()

    results = analyze(trace)
    summary = results.summary
    table = summary.step_table
    unknown = [row for row in table if row.kernels is None]
    if unknown:  # launches but no GPU activity: the counts are unknown, never 0, and all of them at once
        assert not gpu.any() and sum(row.launches or 0 for row in table) > 0
        assert all(row.memcpy is None and row.memset is None for row in unknown)
    else:
        counted = [row.kernels for row in table if row.kernels is not None]
        assert sum(counted) <= int(kernels.sum())
        assert sum(counted) == int((kernels & np.isin(links.step, np.flatnonzero(trace.steps.complete))).sum())
        activities = sum(row.kernels + row.memcpy + row.memset for row in table)  # type: ignore[operator]
        assert activities == sum(row.calls for row in summary.kernels)  # each activity counted once
        assert sum(op_row.kernels_per_step for op_row in summary.ops) * max(summary.steps, 1) == pytest.approx(
            sum(counted), abs=0.01 * max(1, len(summary.ops))
        )
    n_devices = max(1, len(np.unique(ev.device[gpu])))
    all_gpu_us = float(ev.dur_ns[gpu].sum()) / 1000.0
    for row in table:
        if row.gpu_busy_us is None:  # no GPU activity in the trace
            assert not gpu.any() and row.gpu_window_us is None
            continue
        assert row.gpu_window_us is not None and row.queue_backlog_us is not None
        assert 0 <= row.gpu_busy_us <= row.gpu_window_us + 1e-6, row  # busy + idle buckets = the window
        assert row.gpu_busy_us <= min(all_gpu_us, row.gpu_window_us * n_devices) + 1e-3
        assert row.step_us is not None and row.step_us >= 0 and row.queue_backlog_us >= 0
    document = analyze_dict(results)
    document["trace"].pop("path")
    json.dumps(document, allow_nan=False)  # valid JSON: no NaN or inf anywhere
    return document


def _write(folder: Path, data: bytes, compress: bool) -> Path:
    path = folder / ("t.json.gz" if compress else "t.json")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def _load_or_unusable(path: Path) -> Trace | None:
    try:
        return load_trace(path)
    except TracelensError as error:
        assert "\n" not in str(error)
        return None


# ---------------------------------------------------------------- the properties


@FUZZ
@given(
    base=st.sampled_from(sorted(BASES)),
    mutations=st.lists(mutation, max_size=8),
    bare_array=st.booleans(),
    compress=st.booleans(),
)
@pytest.mark.slow
def test_mutated_traces_never_crash(base: str, mutations: list[Mutation], bare_array: bool, compress: bool) -> None:
    data = _serialize(_mutate(BASES[base], mutations), bare_array)
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), data, compress)
        trace = _load_or_unusable(path)
        if trace is not None:
            check_invariants(trace)
        document = _check_cli(path)
        assert (document is None) == (trace is None)


@FUZZ
@given(
    base=st.sampled_from(sorted(BASES)),
    mutations=st.lists(mutation, max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
@pytest.mark.slow
def test_shuffled_events_give_the_same_analysis(base: str, mutations: list[Mutation], seed: int) -> None:
    events = _mutate(BASES[base], mutations)
    shuffled = list(events)
    random.Random(seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as folder:
        first = _load_or_unusable(_write(Path(folder), _serialize(events, False), False))
        second = _load_or_unusable(_write(Path(folder), _serialize(shuffled, False), True))
        assert (first is None) == (second is None)
        if first is None or second is None:
            return
        # warnings may name byte offsets of the file, which differ; everything else must be identical
        assert _without_offsets(check_invariants(first)) == _without_offsets(check_invariants(second))


def _without_offsets(document: dict[str, Any]) -> dict[str, Any]:
    document["warnings"] = [re.sub(r"\(byte \d+\)", "(byte N)", w) for w in document["warnings"]]
    return document


@pytest.mark.slow
@FUZZ
@given(
    base=st.sampled_from(sorted(BASES)),
    edits=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=0, max_size=8), st.integers(0, 8)), max_size=4),
    compress=st.booleans(),
)
def test_garbage_bytes_never_crash(base: str, edits: list[tuple[float, bytes, int]], compress: bool) -> None:
    data = bytearray(_serialize(BASES[base], False))
    for where, garbage, remove in edits:
        at = int(where * len(data))
        data[at : at + remove] = garbage
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), bytes(data), compress)
        trace = _load_or_unusable(path)
        if trace is not None:
            check_invariants(trace)
        assert (_check_cli(path) is None) == (trace is None)


@pytest.mark.slow
@FUZZ
@given(
    base=st.sampled_from(sorted(BASES)),
    mutations=st.lists(mutation, max_size=3),
    cut=st.floats(0, 1),
    compress=st.booleans(),
)
def test_traces_cut_anywhere_never_crash(base: str, mutations: list[Mutation], cut: float, compress: bool) -> None:
    data = _serialize(_mutate(BASES[base], mutations), False)
    if compress:
        data = gzip.compress(data, mtime=0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("t.json.gz" if compress else "t.json")
        path.write_bytes(data[: int(cut * len(data))])
        trace = _load_or_unusable(path)
        if trace is not None:
            check_invariants(trace)
        assert (_check_cli(path) is None) == (trace is None)


@pytest.mark.slow
@FUZZ
@given(data=st.binary(max_size=300), compress=st.booleans())
def test_arbitrary_bytes_never_crash(data: bytes, compress: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), data, compress)
        trace = _load_or_unusable(path)
        if trace is not None:
            check_invariants(trace)
        assert (_check_cli(path) is None) == (trace is None)


# ---------------------------------------------------------------- fixed checks of the invariants


def test_unmutated_base_trace_figures() -> None:
    """The built base trace: 3 steps, each 3 kernels + 1 memcpy + 1 memset, 5 launches."""
    with tempfile.TemporaryDirectory() as folder:
        trace = load_trace(_write(Path(folder), _serialize(BASES["built"], False), False))
        check_invariants(trace)
        summary = analyze(trace).summary
    assert summary.step_numbers == [0, 1, 2]
    assert [(r.kernels, r.memcpy, r.memset, r.launches) for r in summary.step_table] == [(3, 1, 1, 5)] * 3
    assert summary.per_step.gpu_busy_us == 3 * 8 + 2 + 1


def test_very_deep_nesting_is_an_error_or_analyzed() -> None:
    deep = '{"ph": "X", "name": "deep", "ts": 1, "dur": 1, "args": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    text = json.dumps({"traceEvents": BASES["built"]})[:-2] + ", " + deep + "]}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "deep.json"
        path.write_text(text)
        trace = _load_or_unusable(path)
        if trace is not None:
            check_invariants(trace)
        assert (_check_cli(path) is None) == (trace is None)


def test_names_ending_in_nul_bytes_are_stripped() -> None:
    """Found by the fuzzer: numpy strings drop trailing NULs, so a launch named "\\x00" matched no API name."""
    with tempfile.TemporaryDirectory() as folder:
        path = _write(
            Path(folder), _serialize(_mutate(BASES["built"], [("name", 2, "cudaLaunchKernel\x00")]), False), False
        )
        trace = load_trace(path)
        check_invariants(trace)
        assert "cudaLaunchKernel\x00" not in trace.events.names
        assert _check_cli(path) is not None
        path = _write(Path(folder), _serialize(_mutate(BASES["built"], [("name", 2, "\x00")]), False), False)
        check_invariants(load_trace(path))
