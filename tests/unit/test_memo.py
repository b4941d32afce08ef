"""One memo (`tracelens.model.memo`): a value kept per live trace, computed once, dropped when the trace is
freed; and no other module keeps values keyed by a trace's identity."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import numpy as np

from tests.unit.tiny import cpu_bound_events, load_events
from tracelens.model.memo import TraceTable, per_trace

PACKAGE = Path(__file__).resolve().parents[2] / "tracelens"


def test_a_value_is_computed_once_per_trace_and_dropped_with_it(tmp_path: Path) -> None:
    calls: list[int] = []

    @per_trace
    def n_events(trace: object) -> np.ndarray:
        calls.append(id(trace))
        return np.arange(3)

    first, second = load_events(tmp_path, cpu_bound_events()), load_events(tmp_path, cpu_bound_events())
    value = n_events(first)
    assert n_events(first) is value and len(calls) == 1  # the same trace: the kept value
    assert n_events(second) is not value and len(calls) == 2  # an equal trace of its own: computed again
    assert not value.flags.writeable  # shared between callers: read-only
    (table,) = [c.cell_contents for c in n_events.__closure__ or () if isinstance(c.cell_contents, TraceTable)]
    assert first in table and second in table
    del first
    gc.collect()
    assert len(table._values) == 1  # the freed trace's entry went with it


def _id_keys(path: Path) -> list[str]:
    """`id(x)` calls where x names a trace (`trace`, `self.trace`, `ctx.trace`, ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id" and node.args:
            argument = ast.unparse(node.args[0])
            if argument.split(".")[-1].endswith("trace"):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} id({argument})")
    return found


def test_no_other_module_keys_values_by_a_traces_identity() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _id_keys(path)]
    assert found and all(hit.startswith("tracelens/model/memo.py:") for hit in found), found
