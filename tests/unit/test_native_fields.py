"""The C accelerator of the loader (`tracelens._native.columns`) gives exactly the columns of the pure-Python path:
on real traces, and on odd values it must hand back to Python (string ids, numeric-string arguments, huge ints,
missing fields)."""

from __future__ import annotations

import gzip
import os

import msgspec
import numpy as np
import pytest

from tests.conftest import anchor
from tracelens import native
from tracelens.loader import fields
from tracelens.loader.columns import ChunkColumns, columnize, complete_events
from tracelens.loader.decode import STREAM_EVENTS_DECODER, decode_trace
from tracelens.loader.schema import Args, CompleteEvent, Event
from tracelens.records import field_names, is_record

NATIVE = fields._native
needs_native = pytest.mark.skipif(not native.ENABLED, reason="TRACELENS_NO_NATIVE is set: only the Python twins run")


def test_the_accelerator_is_built() -> None:
    """CI machines have a C compiler: a missing build there would silently cost the loader its speed."""
    if os.environ.get("TRACELENS_NO_NATIVE", "").strip() not in ("", "0"):
        pytest.skip("TRACELENS_NO_NATIVE is set")
    assert fields.native_available() and native.extension is not None


def _python_columns(events: list[Event], monkeypatch: pytest.MonkeyPatch) -> ChunkColumns:
    with monkeypatch.context() as patch:
        patch.setattr(native, "ENABLED", False)
        return columnize(events)


def _assert_same(native: object, python: object) -> None:
    for name in field_names(native):
        a, b = getattr(native, name), getattr(python, name)
        if is_record(a):
            _assert_same(a, b)
        elif isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
        elif isinstance(a, dict):
            assert list(a) == list(b), name
            for key, value in a.items():
                if isinstance(value, tuple):
                    assert value[0].tolist() == b[key][0].tolist() and value[1] == b[key][1], (name, key)
                else:
                    assert value.dtype == b[key].dtype and value.tolist() == b[key].tolist(), (name, key)
        elif isinstance(a, (int, float)):  # counts (e.g. empty_objects)
            assert type(a) is type(b) and a == b, name
        else:
            assert a == b and (not isinstance(a, list) or [type(v) for v in a] == [type(v) for v in b]), name


def _kernel(**changes: object) -> Event:
    args = Args(correlation=7, external_id=3, device=0, stream=7, grid=[4, 2, 1], block=[128, 1, 1])
    values: dict[str, object] = {"cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2}
    values.update(changes)
    values.setdefault("args", args)
    return Event(ph="X", **values)  # type: ignore[arg-type]


ODD = {
    "string and missing ids": [
        _kernel(),
        _kernel(pid="Spans", tid="PyTorch Profiler"),
        _kernel(pid=None, tid=None),
        _kernel(cat="cpu_op", name="aten::mm", pid=123, tid=123, args=None),
    ],
    "numeric-string and huge arguments": [
        _kernel(args=Args(correlation="12", external_id=2**70, device="1", stream=None, bytes="x")),
        _kernel(cat="gpu_memcpy", name="Memcpy HtoD", args=Args(bytes=4096, device=0, stream=7)),
        _kernel(cat="cuda_runtime", name="cudaLaunchKernel", args=Args(correlation=12, external_id=-5)),
    ],
    "odd dims": [
        _kernel(args=Args(grid=[], block=None)),
        _kernel(args=Args(grid="1,2,3", block=[2**40, 2**40])),  # the product leaves int64: -1
        _kernel(args=Args(grid=[2**31, 2**31, 4], block=[1, 2**70])),
        _kernel(cat="cpu_op", name="aten::add", args=Args(grid=[3, 3], block=[5])),
    ],
    "durations and times": [
        _kernel(dur=None),
        _kernel(ts=2**60, dur=1.25),
        _kernel(ts=3, dur=7),
    ],
    "raw arguments": [
        _kernel(
            cat="cpu_op",
            name="aten::linear",
            args=Args(input_dims=msgspec.Raw(b"[[2, 3], [3]]"), concrete_inputs=msgspec.Raw(b'["", ""]')),
        ),
        _kernel(cat="cpu_op", name="aten::t", args=Args(input_type=msgspec.Raw(b'["float"]'))),
        _kernel(),
    ],
    "consecutive equal and unequal keys": [  # the extension reuses the previous code only for an equal key
        _kernel(pid=1, tid="1", cat="kernel"),
        _kernel(pid="1", tid=1, cat="kernel"),
        _kernel(pid=2**40, tid=2**40 + 0, cat="Kernel"),
        _kernel(pid=int("1099511627776"), tid=None, cat="kernel"),
        _kernel(pid=None, tid=None, cat="kérnel"),
        _kernel(pid=None, tid=-1, cat="kérnel"),
        _kernel(cat="cpu_op", name="aten::linear", args=Args(input_dims=msgspec.Raw(b"[[2]]"))),
        _kernel(cat="cpu_op", name="aten::linear", args=Args()),
        _kernel(cat="cpu_op", name="aten::linear", args=Args(input_dims=msgspec.Raw(b"[[3]]"))),
    ],
    "legacy external id": [
        _kernel(cat="Kernel", args=Args(external_id=-1, external_id_legacy=44, correlation=44)),
        _kernel(cat="Runtime", name="cudaLaunchKernel", args=Args(external_id_legacy=44, correlation=44)),
    ],
}


@needs_native
@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_values_give_the_python_columns(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = ODD[case]
    _assert_same(columnize(events), _python_columns(events, monkeypatch))


@needs_native
def test_the_accelerator_reads_what_it_can_and_leaves_the_rest_to_python() -> None:
    events = ODD["numeric-string and huge arguments"]
    out = NATIVE.columns(events, Event, Args, msgspec.Raw, False)
    ints = dict(zip(fields.INT_ARGS, out[10], strict=True))
    assert ints["correlation"] is None and ints["device"] is None and ints["bytes"] is None  # strings: Python's
    assert np.frombuffer(ints["external_id"], np.int64).tolist() == [-1, -1, -5]  # 2**70 does not fit: -1
    assert out[5] == [0] and np.frombuffer(out[4], np.int64).tolist() == [0, 0, 0]


@needs_native
def test_a_chunk_of_mixed_event_types_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    tagged = CompleteEvent(cat="kernel", name="gemm", pid=0, tid=7, ts=11.0, dur=1, args=Args(correlation=8))
    events = [_kernel(), tagged]
    with pytest.raises(TypeError):
        NATIVE.columns(events, Event, Args, msgspec.Raw, False)
    _assert_same(columnize(events), _python_columns(events, monkeypatch))  # type: ignore[arg-type]


@needs_native
@pytest.mark.parametrize(
    "relative",
    [
        "hta/trace_diff/control/control.json.gz",
        "amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "other/facebookresearch__param/resnet_kineto.json.gz",
    ],
)
def test_real_traces_give_the_python_columns(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = anchor(relative)
    data = gzip.decompress(path.read_bytes())
    events = complete_events(decode_trace(data, str(path)).events)
    assert len(events) > 1000
    _assert_same(columnize(events), _python_columns(events, monkeypatch))


@needs_native
def test_selecting_complete_events_skips_other_phases_and_unusable_times(monkeypatch: pytest.MonkeyPatch) -> None:
    def complete(**changes: object) -> CompleteEvent:
        values: dict[str, object] = {"cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}
        values.update(changes)
        return CompleteEvent(**values)  # type: ignore[arg-type]

    instant = STREAM_EVENTS_DECODER.decode(b'[{"ph": "i", "name": "mark", "ts": 3}]')[0]
    events = [complete(), instant, complete(ts=None), complete(ts=float("nan")), complete(ts=2**70), complete(ts=5)]
    selected = columnize(events, CompleteEvent)
    assert selected.ts_us.tolist() == [1.0, float(2**70), 5.0]
    _assert_same(selected, _python_columns_of_complete(events, monkeypatch))


def _python_columns_of_complete(events: list[object], monkeypatch: pytest.MonkeyPatch) -> ChunkColumns:
    with monkeypatch.context() as patch:
        patch.setattr(native, "ENABLED", False)
        return columnize(events, CompleteEvent)
