"""Wrong exit codes (issue 32, item 2): huge step numbers are odd-but-usable input (a warning, exit 0), and a
file whose size reads 0 but that has content (/proc files) is one error line, never a division by zero."""

from __future__ import annotations

from pathlib import Path

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
