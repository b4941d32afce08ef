"""The C extension's `link` and `step_of` give the launches, ops and steps of numpy's `linking.link_launches`,
`linking.link_ops` and `steps.assign_steps`: on random tables (ids shared, missing, ops that do and do not enclose
their launches) and on real traces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import anchor
from tracelens import native
from tracelens.loader import load_trace
from tracelens.model import linking, steps
from tracelens.model.events import EventTable, Kind
from tracelens.model.nesting import nest
from tracelens.model.trace import StepTable

needs_native = pytest.mark.skipif(not native.ENABLED, reason="TRACELENS_NO_NATIVE is set: only the Python twins run")

KINDS = [Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER, Kind.KERNEL, Kind.MEMCPY, Kind.USER_ANNOTATION, Kind.OTHER]
ROWS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 2),  # track
        st.integers(0, 40),  # start (µs)
        st.integers(0, 9),  # duration (µs)
        st.integers(-1, 6),  # correlation
        st.integers(-1, 6),  # External id
    ),
    min_size=0,
    max_size=120,
)


def _table(rows: list[tuple[Kind, int, int, int, int, int]]) -> EventTable:
    rows = sorted(rows, key=lambda r: r[2])
    n = len(rows)

    def column(index: int, dtype: type, scale: int = 1) -> np.ndarray:
        return np.array([r[index] * scale for r in rows], dtype=dtype)

    minus_one = np.full(n, -1, dtype=np.int64)
    return EventTable(
        kind=column(0, np.int8),
        name=np.zeros(n, dtype=np.int32),
        track=column(1, np.int32),
        ts_ns=column(2, np.int64, 1000),
        dur_ns=column(3, np.int64, 1000),
        correlation=column(4, np.int64),
        external_id=column(5, np.int64),
        sequence_number=minus_one,
        device=minus_one,
        stream=minus_one,
        bytes=minus_one,
        grid_blocks=minus_one,
        block_threads=minus_one,
        input_dims=np.full(n, None, dtype=object),
        input_types=np.full(n, None, dtype=object),
        concrete_inputs=np.full(n, None, dtype=object),
        input_strides=np.full(n, None, dtype=object),
        names=("x",),
    )


def _assert_links_match(events: EventTable, monkeypatch: pytest.MonkeyPatch) -> None:
    parent, _ = nest(events)
    launch, op, by_id, by_time = linking.link(events, parent)
    numpy_launch = linking.link_launches(events)
    numpy_op, numpy_by_id, numpy_by_time = linking.link_ops(events, parent, numpy_launch)
    assert launch.dtype == numpy_launch.dtype and launch.tolist() == numpy_launch.tolist()
    assert op.dtype == numpy_op.dtype and op.tolist() == numpy_op.tolist()
    assert (by_id, by_time) == (numpy_by_id, numpy_by_time)
    for window in ([(0, 10_000), (10_000, 25_000), (30_000, 31_000)], [(0, 10**12)], []):
        table = StepTable(
            np.arange(len(window), dtype=np.int64),
            np.array([w[0] for w in window], dtype=np.int64),
            np.array([w[1] for w in window], dtype=np.int64),
            np.ones(len(window), dtype=bool),
            "ProfilerStep",
        )
        step = steps.assign_steps(events, table, launch)
        with monkeypatch.context() as patch:
            patch.setattr(native, "ENABLED", False)
            numpy_step = steps.assign_steps(events, table, launch)
        assert step.dtype == numpy_step.dtype and step.tolist() == numpy_step.tolist()


@needs_native
@settings(max_examples=300, deadline=None)
@given(ROWS)
def test_random_tables_link_and_step_as_numpy_does(rows: list[tuple[Kind, int, int, int, int, int]]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _assert_links_match(_table(rows), monkeypatch)


@needs_native
@pytest.mark.parametrize(
    "relative",
    ["hta/trace_diff/control/control.json.gz", "other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz"],
)
def test_real_traces_link_as_numpy_does(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load_trace(anchor(relative))
    assert trace.links.op_by_external_id + trace.links.op_by_containment > 100
    _assert_links_match(trace.events, monkeypatch)


@needs_native
def test_what_is_not_a_nesting_hands_linking_back_to_numpy() -> None:
    """Parents that loop (no nesting gives them) make the extension decline, never climb forever; far-apart ids
    are hashed like any."""
    table = _table([(Kind.RUNTIME, 0, i, 1, i << 40, -1) for i in range(10)])
    parent = np.full(len(table), -1, dtype=np.int32)
    args = [
        table.kind,
        table.correlation,
        table.external_id,
        table.ts_ns,
        table.dur_ns,
        table.track,
        parent,
        linking._IS_API,
        linking._IS_GPU,
        int(Kind.CPU_OP),
        1000,
    ]
    assert linking._native.link(*args) is not None
    args[6] = np.array([1, 0, *([-1] * 8)], dtype=np.int32)  # a parent loop: not a nesting
    assert linking._native.link(*args) is None
