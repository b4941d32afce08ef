"""The C accelerator of the memory events' columns (`tracelens._native.memory_columns`) gives exactly the columns of
the pure-Python path (`loader.extras.python_memory_columns`): on real traces, and on odd values (unusable times,
absent or null args, ints beyond int64, string and missing ids, other instants, counters)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from tests.conftest import anchor
from tracelens import native
from tracelens.loader import extras
from tracelens.loader.decode import EXTRAS_DOC_DECODER, EXTRAS_EVENTS_DECODER
from tracelens.loader.extras import MemoryColumns, python_memory_columns

needs_native = pytest.mark.skipif(not native.ENABLED, reason="TRACELENS_NO_NATIVE is set: only the Python twins run")


def _native(events: list[object]) -> MemoryColumns:
    columns = extras._native_memory_columns(events)
    assert columns is not None, "the accelerator handed the chunk back to Python"
    return columns


def _assert_same(native: MemoryColumns, python: MemoryColumns) -> None:
    assert native.ts_us.dtype == python.ts_us.dtype == np.float64
    assert np.array_equal(native.ts_us, python.ts_us, equal_nan=True)
    assert list(native.ints) == list(python.ints)
    for name, column in native.ints.items():
        assert column.dtype == python.ints[name].dtype == np.int64 and column.tolist() == python.ints[name].tolist()
    assert native.pair_codes.dtype == python.pair_codes.dtype == np.int64
    assert native.pair_codes.tolist() == python.pair_codes.tolist()
    assert native.pairs == python.pairs and [list(map(type, p)) for p in native.pairs] == [
        list(map(type, p)) for p in python.pairs
    ]
    assert native.has_counters == python.has_counters
    assert native.has_meta == python.has_meta


def _memory(ts: object = 10, pid: object = 1, tid: object = 2, args: str | None = None, ph: str = "i") -> str:
    fields = [f'"ph": "{ph}"', '"name": "[memory]"', f'"pid": {_json(pid)}', f'"tid": {_json(tid)}']
    if ts is not ...:
        fields.append(f'"ts": {ts}')
    if args is not None:
        fields.append(f'"args": {args}')
    return "{" + ", ".join(fields) + "}"


def _json(value: object) -> str:
    return "null" if value is None else f'"{value}"' if isinstance(value, str) else str(value)


FULL_ARGS = (
    '{"Addr": 94, "Bytes": 512, "Total Allocated": 1024, "Total Reserved": 2048, "Device Id": 0, "Device Type": 1}'
)
ODD = {
    "plain": [_memory(), _memory(ts=11.5, args=FULL_ARGS), _memory(ts=12, args=FULL_ARGS)],
    "unusable times": [_memory(ts="null"), _memory(ts=...), _memory(ts=2**70), _memory(ts=10**400), _memory(ts=3)],
    "absent and null args": [
        _memory(args="null"),
        _memory(args="{}"),
        _memory(args='{"Bytes": null, "Addr": null, "Device Id": -1}'),
        _memory(args='{"Bytes": -512}'),
    ],
    "ints beyond int64": [
        _memory(args=f'{{"Addr": {2**64}, "Bytes": {-(2**63)}, "Total Allocated": {2**63}}}'),
        _memory(args=f'{{"Addr": {2**63 - 1}}}'),
    ],
    "ids": [
        _memory(pid="Spans", tid="x"),
        _memory(pid=None, tid=None),
        _memory(pid=1, tid="2"),
        _memory(pid=1, tid=2),
        _memory(pid="Spans", tid="x"),
        _memory(pid=2**70, tid=-1),
        _memory(pid=1, tid=2),
    ],
    "other events": [
        '{"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "t", "ts": 5, "s": "g"}',
        _memory(ph="I"),
        '{"ph": "X", "cat": "cpu_op", "name": "[memory]", "pid": 1, "tid": 2, "ts": 1, "dur": 2}',
        '{"ph": "f", "id": 3, "pid": 1, "tid": 2, "ts": 4}',
        _memory(ts=7),
    ],
    "counters": ['{"ph": "C", "name": "mem", "pid": 1, "ts": 4, "args": {"a": 1}}', _memory()],
    "counters only": ['{"ph": "C", "name": "mem", "pid": 1, "ts": 4, "args": {"a": 1}}'],
    "none": ['{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 1, "dur": 2}'],
}


@needs_native
@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_values_give_the_python_columns(case: str) -> None:
    events = EXTRAS_EVENTS_DECODER.decode(("[" + ", ".join(ODD[case]) + "]").encode())
    _assert_same(_native(events), python_memory_columns(events))


@needs_native
def test_unusable_times_are_skipped_and_an_int_beyond_float_range_reads_nan() -> None:
    events = EXTRAS_EVENTS_DECODER.decode(("[" + ", ".join(ODD["unusable times"]) + "]").encode())
    ts = _native(events).ts_us
    assert ts[0] == float(2**70) and np.isnan(ts[1]) and ts[2] == 3.0 and ts.size == 3


@needs_native
def test_absent_args_read_as_the_schema_defaults() -> None:
    events = EXTRAS_EVENTS_DECODER.decode(("[" + ", ".join(ODD["absent and null args"]) + "]").encode())
    ints = _native(events).ints
    assert ints["bytes"].tolist() == [0, 0, -1, -512]  # no args: 0 bytes; an explicit null: -1
    assert ints["addr"].tolist() == [-1, -1, -1, -1] and ints["device_id"].tolist() == [-1, -1, -1, -1]


@needs_native
@pytest.mark.parametrize(
    "relative",
    [
        "hta/df_index_resolver/df_index_resolver.json.gz",
        "amd_tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz",
    ],
)
def test_real_traces_give_the_python_columns(relative: str) -> None:
    events = EXTRAS_DOC_DECODER.decode(gzip.decompress(anchor(relative).read_bytes())).traceEvents or []
    native = _native(events)
    assert native.ts_us.size > 100
    _assert_same(native, python_memory_columns(events))
