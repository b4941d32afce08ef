"""Hostile inputs that used to hang (issue 32, item 1): very long names in the text tables, and hypothesis
regexes with catastrophic backtracking. Each run must end in bounded time with the promised exit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_run import base_document, run, write

LONG = 200_000


def _long_kernel_names(document: dict[str, Any], text: str) -> None:
    for event in document["traceEvents"]:
        if event.get("cat") == "kernel":
            event["name"] = text + event["name"]


def _long_op_names(document: dict[str, Any], text: str) -> None:
    for event in document["traceEvents"]:
        if event.get("cat") == "cpu_op":
            event["name"] = event["name"] + text


# one name with no break (a word), one of many words, one of separators: each stresses another wrap path
NAMES: dict[str, str] = {
    "word": "k" * LONG,
    "words": "ab " * (LONG // 3),
    "separators": "a_" * (LONG // 2),
    "digits": "7" * LONG,
}
EDITS: dict[str, Callable[[dict[str, Any], str], None]] = {"kernel": _long_kernel_names, "op": _long_op_names}


# long op names take ~2 s a case on a 2-core machine (the op tables lay out every name): slow; kernel names not
@pytest.mark.parametrize("where", [pytest.param(w, marks=pytest.mark.slow) if w == "op" else w for w in sorted(EDITS)])
@pytest.mark.parametrize("shape", sorted(NAMES))
def test_long_names_lay_out_in_bounded_time(tmp_path: Path, where: str, shape: str) -> None:
    document = base_document()
    EDITS[where](document, NAMES[shape])
    trace = write(document, tmp_path / "long.json")
    result = run(["analyze", str(trace)], tmp_path, timeout_s=25)
    result.assert_clean(0)
    assert "…" in result.stdout  # the long name is shown abbreviated, with the marker
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


# ---------------------------------------------------------------- regexes in hypotheses files

# a quantified group that itself holds a quantifier: exponential backtracking on a subject that almost matches
NESTED = ["(.*)*x", "(a+)+$", "(\\w+\\s?)*:", "((ab)*)+c", "(?:[a-z]+_)*zz", "(x|y+)*!", "(?=(a+)+b)"]
SAFE = ["gemm.*", "^nvjet_[a-z0-9_]+$", "(ab)+c", "(?:sm90|sm100)_xmma"]


def _hypotheses(tmp_path: Path, pattern: str) -> Path:
    path = tmp_path / "h.toml"
    text = f'[[hypothesis]]\nname = "p"\nkernel = "re:{pattern}"\nop = ">="\nvalue = 0\n'
    path.write_text(text.replace("\\", "\\\\"))
    return path


@pytest.mark.parametrize("pattern", NESTED)
def test_nested_quantifiers_are_refused_by_name(tmp_path: Path, pattern: str) -> None:
    document = base_document()
    _long_kernel_names(document, "a" * 30_000)  # a subject that would make the backtracking explode
    trace = write(document, tmp_path / "t.json")
    result = run(["check", str(trace), "--expect", str(_hypotheses(tmp_path, pattern))], tmp_path, timeout_s=20)
    result.assert_clean(2)
    assert pattern in result.errors()[0].replace("\\\\", "\\")


@pytest.mark.parametrize("pattern", SAFE)
def test_safe_patterns_are_searched(tmp_path: Path, pattern: str) -> None:
    from tracelens.hypotheses.regex import unsafe_reason

    assert unsafe_reason(pattern) is None
