"""Wrong exit codes (issue 32, item 2): huge step numbers are odd-but-usable input (a warning, exit 0), and a
file whose size reads 0 but that has content (/proc files) is one error line, never a division by zero.
Integers of any length in a value are odd-but-usable input: a 5,000-digit one was refused as invalid JSON
(Python converts at most 4,300 digits) where a 400-digit one was analyzed with a warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hostile_run import base_document, run, write


@pytest.mark.parametrize("digits", [20, 400, 4301, 5000, 20000])
def test_huge_step_numbers_are_a_warning(tmp_path: Path, digits: int) -> None:
    document = base_document()
    step = next(e for e in document["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
    step["name"] = "ProfilerStep#" + "7" * digits
    result = run(["analyze", str(write(document, tmp_path / "t.json")), "--format", "json"], tmp_path)
    result.assert_clean(0, warning="too large")


@pytest.mark.parametrize("name", ["/proc/self/status", "/proc/self/stat", "/proc/self/environ", "/proc/version"])
def test_files_of_size_zero_with_content_are_one_error(tmp_path: Path, name: str) -> None:
    if not Path(name).exists():
        pytest.skip(f"{name}: not on this system")
    run(["analyze", name], tmp_path).assert_clean(2)


_MARKER = 987654321987


def _with_integer(field: str, digits: int, tmp_path: Path) -> Path:
    """The eager MLP with the first kernel's `field` (ts, dur, an args id, pid) an integer of `digits` nines."""
    document = base_document()
    kernel = next(e for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel")
    if field == "args":
        kernel.setdefault("args", {})["correlation"] = _MARKER
    else:
        kernel[field] = _MARKER
    path = tmp_path / f"{field}_{digits}.json"
    path.write_text(json.dumps(document).replace(str(_MARKER), "9" * digits, 1))
    return path


def _analysis(path: Path, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    result = run(["analyze", str(path), "--format", "json"], tmp_path, timeout_s=60)
    result.assert_clean(0)
    document: dict[str, Any] = json.loads(result.stdout)
    document.pop("warnings", None)
    for key in ("path", "uncompressed_bytes"):  # the file differs in these, not in its figures
        document.get("trace", {}).pop(key, None)
    return document, result.warnings()


def _same_figures(field: str, digits: int, tmp_path: Path) -> None:
    """The analysis with a `digits`-digit integer in `field` has the figures of the one with 400 digits (which
    was always analyzed: too big for every range), and its warnings say why."""
    expected, expected_warnings = _analysis(_with_integer(field, 400, tmp_path), tmp_path)
    got, warnings = _analysis(_with_integer(field, digits, tmp_path), tmp_path)
    assert got == expected
    expected_set = {w.replace(f"{field}_400.json", "FILE") for w in expected_warnings}
    got_set = {w.replace(f"{field}_{digits}.json", "FILE") for w in warnings}
    assert expected_set <= got_set, (expected_set, got_set)
    extra = got_set - expected_set
    if digits > 4300:  # the saturation is said, with the coercion it takes
        assert any("integers of over 4,300 digits" in w for w in extra), warnings
    assert all("integers of over" in w or "odd field types" in w for w in extra), extra
    field_warning = {"ts": "timestamp days away", "dur": "not a number or over a day", "args": "no launch"}
    assert any(field_warning[field] in w for w in warnings), warnings


@pytest.mark.parametrize("digits", [5000, 100_000])
@pytest.mark.parametrize("field", ["ts", "dur", "args"])
def test_integers_of_any_length_are_odd_but_usable(tmp_path: Path, field: str, digits: int) -> None:
    _same_figures(field, digits, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("digits", [20, 4301, 1_000_000])
@pytest.mark.parametrize("field", ["ts", "dur", "args"])
def test_integers_of_any_length_are_odd_but_usable_all(tmp_path: Path, field: str, digits: int) -> None:
    _same_figures(field, digits, tmp_path)


@pytest.mark.parametrize("digits", [400, 5000])
def test_a_huge_pid_is_odd_but_usable(tmp_path: Path, digits: int) -> None:
    result = run(["analyze", str(_with_integer("pid", digits, tmp_path)), "--format", "json"], tmp_path)
    result.assert_clean(0)
