"""Grouping by integer codes: masks, group ids in first-seen order, and the "" name of missing rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import load_events
from tracelens.analyses.codes import name_codes_at, name_mask, unique_rows
from tracelens.analyses.dispatch import dispatch_of
from tracelens.analyses.keygroups import first_seen_groups
from tracelens.analyses.window import select_window
from tracelens.model.events import API_KINDS, CPU_KINDS, GPU_ACTIVITY_KINDS, Kind, kind_mask


def test_kind_mask_is_isin() -> None:
    kind = np.array([0, 4, 5, 1, 4, 6], dtype=np.int8)
    assert kind_mask(kind, API_KINDS).tolist() == [False, True, True, False, True, False]
    assert kind_mask(kind, ()).tolist() == [False] * 6
    kinds = np.random.default_rng(7).integers(0, max(Kind) + 1, 500).astype(np.int8)
    for wanted in (GPU_ACTIVITY_KINDS, API_KINDS, CPU_KINDS):
        assert (kind_mask(kinds, wanted) == np.isin(kinds, np.array(wanted, np.int8))).all()


def test_groups_are_numbered_in_order_of_first_appearance() -> None:
    a = np.array([5, 3, 5, 3, 7])
    b = np.array([1, 1, 1, 2, 1])
    group, first = first_seen_groups(a, b)
    assert group.tolist() == [0, 1, 0, 2, 3]  # (5,1) (3,1) (5,1) (3,2) (7,1)
    assert first.tolist() == [0, 1, 3, 4]


def test_groups_of_keys_too_wide_for_one_int64() -> None:
    a = np.array([0, 2**40, 0, 2**40], dtype=np.int64)
    b = np.array([2**40, 0, 2**40, 1], dtype=np.int64)  # radices (2**40 + 1)**2 > 2**62: ranks of rows instead
    group, first = first_seen_groups(a, b, np.array([1, 1, 1, 1]))
    assert group.tolist() == [0, 1, 0, 2]
    assert first.tolist() == [0, 1, 3]


def test_no_rows_no_groups() -> None:
    group, first = first_seen_groups(np.zeros(0, dtype=np.int32))
    assert group.size == 0 and first.size == 0


def test_unique_rows_are_sorted_and_distinct() -> None:
    assert unique_rows(np.array([7, 2, 7, 0, 2]), 9).tolist() == [0, 2, 7]


def test_missing_op_has_the_code_of_an_op_named_blank(tmp_path: Path) -> None:
    """`names_at(-1)` is "", so a call without an op and one issued by an op named "" are one group."""
    events = [
        step(1, 0, 100),
        op("", 10, 10, ext=1),
        launch("cudaLaunchKernel", 12, 5, correlation=1, ext=1),
        kernel("k", 16, 2, correlation=1),
        launch("cudaLaunchKernel", 30, 5, correlation=2),
        kernel("k", 36, 2, correlation=2),
    ]
    trace = load_events(tmp_path, events)
    ev = trace.events
    launches = np.flatnonzero(ev.kind == Kind.RUNTIME)
    codes = name_codes_at(ev, trace.links.op[launches])
    assert codes[0] == codes[1] == ev.names.index("")
    calls = dispatch_of(trace, select_window(trace)).api_calls
    assert [(c.name, c.issued_by, c.calls_per_step) for c in calls] == [("cudaLaunchKernel", "(no op)", 2.0)]
    is_cuda = [name.startswith("cuda") for name in ev.names]
    assert name_mask(trace, lambda s: s.startswith("cuda")).tolist() == [is_cuda[c] for c in ev.name]


def test_name_mask_of_kinds_tests_only_their_names(tmp_path: Path) -> None:
    trace = load_events(tmp_path, [step(1, 0, 100), op("aten::mm", 10, 10), op("aten::mul", 30, 5)])
    tested: list[str] = []

    def is_aten_m(name: str) -> bool:
        tested.append(name)
        return name.startswith("aten::m")

    mask = name_mask(trace, is_aten_m, (Kind.CPU_OP,))
    assert sorted(tested) == ["aten::mm", "aten::mul"]  # not the step's annotation
    assert mask.tolist() == [trace.events.kind[i] == Kind.CPU_OP for i in range(len(trace.events))]
    assert name_mask(trace, lambda s: s.startswith("ProfilerStep"), (Kind.CPU_OP,)).sum() == 0


def test_missing_op_without_blank_name_gets_a_code_past_the_names(tmp_path: Path) -> None:
    trace = load_events(tmp_path, [step(1, 0, 100), launch("cudaLaunchKernel", 30, 5, correlation=2)])
    ev = trace.events
    assert name_codes_at(ev, np.array([-1, 0])).tolist() == [len(ev.names), int(ev.name[0])]


def test_sparse_and_dense_keys_group_alike() -> None:
    rng = np.random.default_rng(7)
    small = rng.integers(0, 5, size=200)
    spread = small * 10**9  # same grouping, keys too sparse for a table over their range
    dense_group, dense_first = first_seen_groups(small, small % 2)
    sparse_group, sparse_first = first_seen_groups(spread, small % 2)
    assert dense_group.tolist() == sparse_group.tolist()
    assert dense_first.tolist() == sparse_first.tolist()
    assert dense_first.tolist() == sorted(int(np.flatnonzero(small == v)[0]) for v in np.unique(small))
