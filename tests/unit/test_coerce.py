"""The loader's single value rules (`loader/coerce.py`): one int converter, one complete-event check, one text
repair; and every path that reads values uses them (they disagreed on bools before)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import kernel, launch, op, step, write_trace
from tracelens.loader import load_trace
from tracelens.loader.coerce import is_complete, to_int, usable_ts, valid_text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7),
        (-3, -3),
        (2.0, 2),
        ("12", 12),
        (" 12 ", 12),
        ("-5", -5),
        ("+5", 5),
        (2**63 - 1, 2**63 - 1),
        (-(2**63), -(2**63)),
        (True, None),  # a bool is not a number: never 1
        (False, None),
        (2.5, None),
        (math.nan, None),
        (math.inf, None),
        ("1e3", None),
        ("١٢", None),  # Arabic-Indic digits: str.isdigit() says yes, JSON never means them as a number
        ("", None),
        (None, None),
        ([1], None),
        (2**63, None),  # beyond int64: no column holds it
        (2**70, None),
        (-(2**63) - 1, None),
    ],
)
def test_to_int(value: object, expected: int | None) -> None:
    assert to_int(value) == expected


def test_complete_events_need_ph_x_and_a_usable_ts() -> None:
    assert is_complete("X", 0) and is_complete("X", 1.5)
    assert not is_complete("X", True) and not is_complete("X", math.nan) and not is_complete("X", None)
    assert not is_complete("X", "5") and not is_complete("B", 5)
    assert usable_ts(-1) and not usable_ts(math.inf)


def test_valid_text_replaces_lone_surrogates_only() -> None:
    assert valid_text("plain") == "plain"
    assert valid_text("gemm_\u00e9_\U0001f600") == "gemm_\u00e9_\U0001f600"
    assert valid_text("a\ud800b") == "a\ufffdb"
    assert valid_text("\udfff") == "\ufffd"


def test_bools_read_as_absent_on_the_typed_and_the_lenient_path(tmp_path: Path) -> None:
    """`"External id": true` is no id whichever decoder reads the file; so is `"schemaVersion": true`."""
    events = [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, 5, correlation=70),
        op("aten::add", 30, 5),
    ]
    events[-1]["args"] = {"External id": True}
    typed = load_trace(write_trace(tmp_path / "typed.json", events))
    odd = [*events, {**events[1], "ts": "not a number"}]  # an odd type: the lenient whole-file path
    lenient = load_trace(write_trace(tmp_path / "lenient.json", odd))
    assert "odd field types were coerced" in lenient.warnings
    for trace in (typed, lenient):
        add = trace.events.names.index("aten::add")
        assert trace.events.external_id[trace.events.name == add].tolist() == [-1]
    document = json.loads((tmp_path / "typed.json").read_text())
    document["schemaVersion"] = True
    (tmp_path / "meta.json").write_text(json.dumps(document))
    assert load_trace(tmp_path / "meta.json").meta.schema_version is None
