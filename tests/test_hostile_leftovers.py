"""Leftovers after SIGKILL (issue 32, item 5): the scratch folder a killed run extracted a tar into
(`$TMPDIR/tracelens_ranks_<pid>_*`) is swept by the next run once its process is gone and it is a minute old;
a live run's folder, or a fresh one, is never touched."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

from tests.hostile_run import REPO, run

TRACE = REPO / "traces" / "h200" / "eager_mlp.json.gz"


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _folder(tmpdir: Path, pid: int, age_s: float) -> Path:
    folder = tmpdir / f"tracelens_ranks_{pid}_abc{age_s:.0f}"
    folder.mkdir(parents=True)
    (folder / "rank0.json").write_bytes(b"x" * 1000)
    then = time.time() - age_s
    os.utime(folder, (then, then))
    return folder


def test_the_next_run_sweeps_folders_of_killed_runs(tmp_path: Path) -> None:
    archive = tmp_path / "run.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(TRACE, arcname="rank0/trace.json.gz")
    tmpdir = tmp_path / "tmpdir"
    dead, live = _dead_pid(), os.getpid()
    stale = [_folder(tmpdir, dead, 120), _folder(tmpdir, dead, 3600)]
    kept = [_folder(tmpdir, dead, 1), _folder(tmpdir, live, 3600)]  # too fresh; process alive
    result = run(["analyze", str(archive)], tmp_path, timeout_s=60)
    assert result.status == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not any(f.exists() for f in stale)
    assert all(f.exists() for f in kept)
    assert sorted(result.leftovers) == sorted(f.name for f in kept)  # the run's own folder is gone too
