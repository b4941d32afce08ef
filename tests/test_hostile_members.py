"""Unbounded time (issue 32, item 6): an archive or run folder with more trace files than `MAX_RANKS` is
analysed in its first `MAX_RANKS` with a warning, in time bounded by that cap, not by the member count."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from tests.hostile_run import REPO, run
from tracelens.parallel import MAX_RANKS

TRACE = REPO / "traces" / "h200" / "eager_mlp.json.gz"


@pytest.mark.slow
@pytest.mark.parametrize("junk", [b"x", b"{}", b""])
def test_archives_with_too_many_members_are_capped(tmp_path: Path, junk: bytes) -> None:
    archive = tmp_path / "many.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(TRACE, arcname="r0/trace.json.gz")
        for index in range(MAX_RANKS + 500):
            info = tarfile.TarInfo(f"r{index + 1}/t.json")
            info.size = len(junk)
            tar.addfile(info, io.BytesIO(junk))
    result = run(["analyze", str(archive), "--format", "json"], tmp_path, timeout_s=90)
    result.assert_clean(frozenset({0, 2}), warning="analysing the first")
    assert result.seconds < 60
