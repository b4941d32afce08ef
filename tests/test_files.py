"""Outputs are written atomically and never over an existing file without --force; inputs are never modified."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import anchor
from tracelens.cli import main
from tracelens.cli.output import write_output
from tracelens.errors import TracelensError


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    copy = tmp_path / "input" / "triton_example.json.gz"
    copy.parent.mkdir()
    shutil.copyfile(anchor("hta/triton_example/triton_example.json.gz"), copy)
    return copy


def test_output_is_never_overwritten_without_force(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert main(["analyze", str(small_trace), "--format", "json", "-o", str(out)]) == 0
    first = out.read_bytes()
    assert json.loads(first)["schema"] == "tracelens.analyze/1"
    assert capsys.readouterr().err.splitlines()[-1] == f"Wrote {out}"

    out.write_bytes(b"precious")
    assert main(["analyze", str(small_trace), "--format", "json", "-o", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"tracelens: error: {out} exists; pass --force to overwrite it"]
    assert out.read_bytes() == b"precious"

    assert main(["analyze", str(small_trace), "--format", "json", "-o", str(out), "--force"]) == 0
    assert out.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input", "out.json"]  # no temporary file left


def test_output_file_gets_the_usual_mode(tmp_path: Path, small_trace: Path) -> None:
    out = tmp_path / "out.json"
    umask = os.umask(0o022)
    try:
        assert main(["analyze", str(small_trace), "-o", str(out)]) == 0
    finally:
        os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_failed_analysis_writes_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    out = tmp_path / "out.json"
    assert main(["analyze", str(bad), "-o", str(out)]) == 2
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_output_into_a_directory_is_refused(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(small_trace), "-o", str(tmp_path), "--force"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"tracelens: error: {tmp_path} is a directory; pass a file name"]


def test_write_atomic_leaves_the_old_file_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")

    def broken_replace(source: str, target: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_output(out, "new", force=True)
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_atomic_refuses_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    with pytest.raises(TracelensError, match="exists; pass --force"):
        write_output(out, "new", force=False)
    assert out.read_bytes() == b"old"


@pytest.mark.parametrize(
    "name", ["hta/triton_example/triton_example.json.gz", "hta/trace_diff/control/control.json.gz"]
)
def test_read_only_input_is_not_modified(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    for compressed in (True, False):
        copy = tmp_path / ("t.json.gz" if compressed else "t.json")
        if compressed:
            shutil.copyfile(anchor(name), copy)
        else:
            import gzip

            copy.write_bytes(gzip.decompress(anchor(name).read_bytes()))
        copy.chmod(0o444)
        os.utime(copy, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
        before = (copy.read_bytes(), copy.stat().st_mtime_ns, stat.S_IMODE(copy.stat().st_mode))
        for fmt in ("text", "json"):
            assert main(["analyze", str(copy), "--format", fmt]) == 0
        after = (copy.read_bytes(), copy.stat().st_mtime_ns, stat.S_IMODE(copy.stat().st_mode))
        assert after == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name]  # nothing written beside it
        copy.chmod(0o644)
        copy.unlink()
    capsys.readouterr()


@pytest.mark.parametrize("command", ["analyze", "annotate", "report"])
def test_force_never_writes_over_the_input_trace(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    shutil.copy(anchor("hta/triton_example/triton_example.json.gz"), tmp_path / "t.json.gz")
    trace.write_bytes(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    before = trace.read_bytes()
    assert main([command, str(trace), "-o", str(trace), "--force"]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert trace.read_bytes() == before


def test_write_atomic_sweeps_temp_files_of_killed_runs(tmp_path: Path) -> None:
    """A run killed mid-write (SIGKILL) leaves `.NAME.PID.tracelens-tmp`; the next write to the folder removes
    it when PID no longer runs, and keeps a live process's temp file."""
    import subprocess
    import sys

    from tracelens.atomic import TEMP_SUFFIX, write_atomic

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.json.{int(dead.stdout)}{TEMP_SUFFIX}"
    live = tmp_path / f".other.json.{os.getppid()}{TEMP_SUFFIX}"
    stale.write_bytes(b"half")
    live.write_bytes(b"in progress")
    write_atomic(tmp_path / "out.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "out.json"])
    assert (tmp_path / "out.json").read_bytes() == b"{}"
