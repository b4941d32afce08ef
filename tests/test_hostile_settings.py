"""Hostile settings (issue 32, item 2): every environment variable read as a number and every size option,
set to what no one meant — Unicode digits, thousands of digits, infinities — ends in one error line and exit 2
(or, for the cache size, a warning and the default), never an internal error or a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile_run import REPO, run

TRACE = REPO / "traces" / "h200" / "eager_mlp.json.gz"
# a generator of junk counts: Unicode digits, huge, zero, negative, float, empty-looking, infinity
JUNK_COUNTS = ["²", "٣", "1" * 5000, "9" * 400, "0", "-3", "2.5", "1e9", "inf", "\u00a0"]
COUNT_SETTINGS = ["TRACELENS_WORKERS", "COLUMNS", "LINES"]
JUNK_SIZES = ["9" * 400, "1" * 5000, "²G", "1e999", "99999999999999999999T", "inf"]


@pytest.mark.parametrize("junk", JUNK_COUNTS, ids=lambda j: f"{j[:6]}x{len(j)}")
@pytest.mark.parametrize("name", COUNT_SETTINGS)
def test_junk_counts_are_one_error(tmp_path: Path, name: str, junk: str) -> None:
    if junk == "\u00a0":  # blank after stripping: the setting is unset
        run(["analyze", str(TRACE)], tmp_path, env={name: junk}).assert_clean(0)
        return
    result = run(["analyze", str(TRACE)], tmp_path, timeout_s=20, env={name: junk})
    result.assert_clean(2)
    assert name in result.errors()[0]
    assert len(result.errors()[0]) < 300  # the 5,000 digits are not echoed


@pytest.mark.parametrize("junk", JUNK_SIZES, ids=lambda j: f"{j[:6]}x{len(j)}")
def test_junk_prune_sizes_are_one_error(tmp_path: Path, junk: str) -> None:
    result = run(["cache", "prune", "--max-size", junk], tmp_path, env={"TRACELENS_CACHE_DIR": str(tmp_path / "c")})
    result.assert_clean(2)
    assert "--max-size" in result.errors()[0]


CACHE_COMMANDS = [["analyze", str(TRACE)], ["cache", "info"], ["cache", "prune"], ["compare", str(TRACE), str(TRACE)]]


@pytest.mark.parametrize("junk", JUNK_SIZES, ids=lambda j: f"{j[:6]}x{len(j)}")
@pytest.mark.parametrize("command", CACHE_COMMANDS, ids=lambda c: "-".join(c[:2]).replace("/", "")[:20])
def test_junk_cache_max_size_is_one_error(tmp_path: Path, junk: str, command: list[str]) -> None:
    """A malformed TRACELENS_CACHE_MAX_SIZE is one error line on every command (a warning and the default size
    before; a raw traceback before that)."""
    env = {"TRACELENS_CACHE_MAX_SIZE": junk, "TRACELENS_NO_CACHE": "", "TRACELENS_CACHE_DIR": str(tmp_path / "c")}
    result = run(command, tmp_path, timeout_s=30, env=env)
    result.assert_clean(2)
    assert "TRACELENS_CACHE_MAX_SIZE" in result.errors()[0]
    assert len(result.errors()[0]) < 300  # the 5,000 digits are not echoed
