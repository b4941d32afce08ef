"""The C extension's `enclosing` gives the nesting of the vectorised Python (`nesting._enclosing_in_sorted`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import anchor
from tracelens.loader import load_trace
from tracelens.model import nesting

NATIVE = nesting._native
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C extension is not built")

ROWS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 12)), min_size=0, max_size=120)


def _python_depths(cand: np.ndarray) -> list[int]:
    depth = [0] * cand.size
    for i, c in enumerate(cand.tolist()):
        depth[i] = depth[c] + 1 if c >= 0 else 0
    return depth


@needs_native
@settings(max_examples=300)
@given(ROWS)
def test_same_parents_and_depths_as_the_vectorised_python(rows: list[tuple[int, int, int]]) -> None:
    track = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = start + np.array([r[2] for r in rows], dtype=np.int64)
    order = np.lexsort((np.arange(len(rows)), -end, start, track))
    start, end, track = start[order], end[order], track[order]
    expected = nesting._enclosing_in_sorted(start, end, track)
    cand, depth = nesting._enclosing(start, end, track)
    assert cand.tolist() == expected.tolist()
    assert depth is not None and depth.tolist() == _python_depths(expected)


@needs_native
@pytest.mark.parametrize(
    "relative", ["other/facebookresearch__param/resnet_kineto.json.gz", "hta/trace_diff/control/control.json.gz"]
)
def test_real_traces_nest_the_same(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = load_trace(anchor(relative)).events
    parent, depth = nesting.nest(events)
    monkeypatch.setattr(nesting, "_native", None)
    python_parent, python_depth = nesting.nest(events)
    assert parent.tolist() == python_parent.tolist() and depth.tolist() == python_depth.tolist()
    assert int(depth.max()) >= 5  # real nesting, not a flat trace


def test_the_extension_refuses_other_dtypes() -> None:
    if NATIVE is None:
        pytest.skip("the C extension is not built")
    with pytest.raises(TypeError):
        NATIVE.enclosing(np.zeros(3, np.int32), np.zeros(3, np.int64), np.zeros(3, np.int64), 0)
    with pytest.raises(ValueError):
        NATIVE.enclosing(np.zeros(3, np.int64), np.zeros(2, np.int64), np.zeros(3, np.int64), 0)
    with pytest.raises(TypeError):
        NATIVE.enclosing(np.zeros(3, np.int64), np.zeros(3, np.int64), np.zeros(3, np.int64))
