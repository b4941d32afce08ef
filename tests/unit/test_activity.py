"""The numpy core of GPU activity and the integer-key helpers behind the kernel table and op → kernels."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import kernel, launch, op, step
from tests.unit.tiny import load_events
from tracelens.analyses.activity import gpu_activity
from tracelens.analyses.keygroups import string_keys
from tracelens.analyses.summary import gpu_activity_frame, most_frequent, summary_of
from tracelens.analyses.window import step_mask


def test_string_keys_group_and_sort_as_the_strings() -> None:
    names = ("mm", "add", "", "mm")  # unsorted, with a duplicate and an empty name
    keys, strings = string_keys(names, np.array([3, 1, -1, 0, 2], dtype=np.int32))
    assert strings == ["", "add", "mm"]
    assert keys.tolist() == [2, 1, 0, 2, 0]  # -1 is "", like the empty name


def test_most_frequent_breaks_ties_by_the_smallest_value() -> None:
    group = np.array([0, 0, 0, 0, 1, 3, 3, 3])
    value = np.array([5, 3, 5, 3, 7, 4, 4, 1])
    assert most_frequent(group, value, 4).tolist() == [3, 7, -1, 4]  # group 2 is empty
    assert most_frequent(np.zeros(0, np.int64), np.zeros(0, np.int64), 2).tolist() == [-1, -1]


def test_step_mask_equals_isin() -> None:
    rng = np.random.default_rng(7)
    steps = rng.integers(-1, 9, 500).astype(np.int32)
    for chosen in ([], [0], [3, 8], [2, 5, 9]):
        indices = np.array(chosen, dtype=np.int32)
        assert (step_mask(steps, indices) == np.isin(steps, indices)).all()
    assert step_mask(np.zeros(0, np.int32), np.array([1], np.int32)).size == 0


def _ties_trace(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Step 0-200 µs. kB: 2 calls (zeta, alpha), k0: 2 calls (zeta, zeta), kA: 1 call (alpha); 2 µs each."""
    events = [step(1, 0, 200)]
    launches = [("aten::zeta", "kB"), ("aten::alpha", "kB"), ("aten::zeta", "k0"), ("aten::zeta", "k0"),
                ("aten::alpha", "kA")]  # fmt: skip
    for i, (op_name, kernel_name) in enumerate(launches, start=1):
        ts = 20.0 * i
        events += [
            op(op_name, ts, 10, ext=i),
            launch("cudaLaunchKernel", ts + 1, 2, correlation=i, ext=i),
            kernel(kernel_name, ts + 10, 2, correlation=i),
        ]
    return load_events(tmp_path, events)


def test_kernel_table_ties(tmp_path: Path) -> None:
    summary = summary_of(_ties_trace(tmp_path))
    # kB and k0 tie on time and calls: first appearance decides (kB first, although "k0" sorts first)
    assert [(k.name, k.calls, k.total_us) for k in summary.kernels] == [("kB", 2, 4.0), ("k0", 2, 4.0), ("kA", 1, 2.0)]
    # kB was launched once by each op: the alphabetically first wins, not the first seen (aten::zeta)
    assert [k.op for k in summary.kernels] == ["aten::alpha", "aten::zeta", "aten::alpha"]


def test_op_kernels_ties(tmp_path: Path) -> None:
    ops = summary_of(_ties_trace(tmp_path)).ops
    assert [(o.name, o.calls_per_step, o.kernels_per_step, o.gpu_us_per_step) for o in ops] == [
        ("aten::zeta", 3.0, 3.0, 6.0), ("aten::alpha", 2.0, 2.0, 4.0)
    ]  # fmt: skip
    assert [(k.name, k.calls_per_step, k.us_per_step) for k in ops[0].kernels] == [("k0", 2.0, 4.0), ("kB", 1.0, 2.0)]
    # equal time within aten::alpha: first appearance (kB before kA)
    assert [k.name for k in ops[1].kernels] == ["kB", "kA"]


def test_frame_matches_the_core(tmp_path: Path) -> None:
    trace = _ties_trace(tmp_path)
    frame, core = gpu_activity_frame(trace), gpu_activity(trace)
    assert frame["row"].tolist() == core.row.tolist()
    assert frame["name"].tolist() == ["kB", "kB", "k0", "k0", "kA"]
    assert frame["op"].tolist() == ["aten::zeta", "aten::alpha", "aten::zeta", "aten::zeta", "aten::alpha"]
    assert frame["launch_api"].unique().tolist() == ["cudaLaunchKernel"]
    assert frame["category"].unique().tolist() == ["other"]
    assert [str(t) for t in frame.dtypes] == [
        "int64", "int64", "str", "str", "int64", "int64", "int64", "int64", "int32", "int32", "str", "int64", "str"
    ]  # fmt: skip
    with pytest.raises(ValueError):
        core.dur_ns[0] = 0  # shared between analyses: read-only
    assert gpu_activity(trace) is core


@pytest.mark.parametrize("module", ["activity", "summary", "window", "ranks"])
def test_no_module_level_pandas(module: str) -> None:
    """`tracelens analyze` must not pay for importing pandas: only function-local or TYPE_CHECKING imports."""
    source = Path(__file__).parents[2] / "tracelens" / "analyses" / f"{module}.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(name.split(".")[0] == "pandas" for name in imported), ast.unparse(node)
