"""Outputs are written atomically and never over an existing file without --force; inputs are never modified."""

from __future__ import annotations

import errno
import gzip
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
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
    with pytest.raises(TracelensError, match="cannot write: disk full"):
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


# --- issue 19: only regular files are ever replaced; stdout is `-o -`; no folder is created -----------------


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelens: error: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["analyze", "report", "annotate"])
def test_force_never_replaces_a_symlink(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("precious")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    assert main([command, str(small_trace), "-o", str(link), "--force"]) == 2
    assert "is a symbolic link; tracelens replaces only regular files" in _one_error(capsys)
    assert link.is_symlink() and target.read_text() == "precious"


def test_force_never_replaces_a_fifo_a_device_or_a_directory(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["analyze", str(small_trace), "-o", str(fifo), "--force"]) == 2
    assert _one_error(capsys).endswith(
        "pipe is a FIFO, not a regular file; tracelens never replaces it (use -o - for stdout)"
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    for device in ("/dev/null", "/dev/full"):  # as root, a rename over these would replace the device
        before = os.lstat(device)
        assert main(["report", str(small_trace), "-o", device, "--force"]) == 2
        assert f"{device} is a character device, not a regular file" in _one_error(capsys)
        assert os.lstat(device).st_rdev == before.st_rdev and stat.S_ISCHR(os.lstat(device).st_mode)
    assert main(["annotate", str(small_trace), "-o", str(tmp_path), "--force"]) == 2
    assert _one_error(capsys) == f"tracelens: error: {tmp_path} is a directory; pass a file name"


def test_dev_stdout_is_refused_and_dash_writes_to_stdout(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(small_trace), "-o", "/dev/stdout"]) == 2
    assert "/dev/stdout is a symbolic link" in _one_error(capsys)
    assert main(["analyze", str(small_trace), "--format", "json", "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == "tracelens.analyze/1" and "Wrote" not in captured.err
    assert main(["report", str(small_trace), "-o", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("<!DOCTYPE html>") and captured.err == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input"]  # no file named "-"


def test_missing_output_folder_is_an_error_not_created(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("analyze", "compare", "report", "annotate"):
        out = tmp_path / "new" / "deeper" / "out.txt"
        traces = [str(small_trace), str(small_trace)] if command == "compare" else [str(small_trace)]
        assert main([command, *traces, "-o", str(out)]) == 2
        assert _one_error(capsys).endswith(f"folder {out.parent} does not exist; create it first")
    assert not (tmp_path / "new").exists()


def test_the_hypotheses_file_is_an_input_too(
    tmp_path: Path, small_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text('[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\nop = ">="\nvalue = 0\n')
    before = hypotheses.read_bytes()
    assert main(["check", str(small_trace), "--expect", str(hypotheses), "-o", str(hypotheses), "--force"]) == 2
    assert _one_error(capsys) == f"tracelens: error: {hypotheses} is an input of this command; pick another output file"
    assert hypotheses.read_bytes() == before
    link = tmp_path / "same.toml"  # another name for the same file (a hard link) is the same input
    os.link(hypotheses, link)
    assert main(["check", str(small_trace), "--expect", str(hypotheses), "-o", str(link), "--force"]) == 2
    assert "is an input of this command" in _one_error(capsys)


@pytest.mark.parametrize(
    ("error", "message"), [(errno.EROFS, "Read-only file system"), (errno.ENOSPC, "No space left on device")]
)
def test_output_write_errors_are_one_line(
    tmp_path: Path,
    small_trace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: int,
    message: str,
) -> None:
    real_open = os.open

    def failing_open(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(".tracelens-tmp"):
            raise OSError(error, os.strerror(error), str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", failing_open)
    out = tmp_path / "out.json"
    for command in ("analyze", "report", "annotate"):
        assert main([command, str(small_trace), "-o", str(out)]) == 2
        assert _one_error(capsys) == f"tracelens: error: {out}: cannot write: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input"]


TRACELENS = [sys.executable, "-c", "from tracelens.cli import run; run()"]  # the console entry point


def _cli(*argv: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRACELENS, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_or_closed_stdout_is_one_error_line(small_trace: Path) -> None:
    with open("/dev/full", "w") as full:
        result = _cli("analyze", str(small_trace), stdout=full)
    assert (result.returncode, result.stderr) == (
        2,
        "tracelens: error: cannot write to stdout: No space left on device\n",
    )
    command = " ".join(shlex.quote(part) for part in [*TRACELENS, "analyze", str(small_trace)])
    result = subprocess.run(f"{command} >&-", shell=True, capture_output=True, text=True, timeout=120)  # closed stdout
    assert (result.returncode, result.stderr) == (2, "tracelens: error: cannot write to stdout: it is closed\n")


# --- issue 13: one trace stem and one duplicate-label scheme in every command ---------------------------


def test_every_command_names_a_trace_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`x.trace.json` is `x` everywhere (compare and check once disagreed: `x.trace` vs `x`), and two traces
    of one name are `x` and `x #2` in compare, check and report."""
    from tests.conftest import one_gemm_trace
    from tracelens.naming import trace_stem, unique_labels

    assert [trace_stem(n) for n in ("a/x.trace.json", "w.1.pt.trace.json.gz", "x.json", ".json.gz")] == [
        "x",
        "w.1",
        "x",
        "trace",
    ]
    assert unique_labels(["x", "y", "x", "x #2", "x"]) == ["x", "y", "x #3", "x #2", "x #4"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = one_gemm_trace(tmp_path / "a", "x.trace.json"), one_gemm_trace(tmp_path / "b", "x.trace.json")
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text('[[hypothesis]]\nname = "k"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 1\n')
    monkeypatch.chdir(tmp_path)

    assert main(["compare", str(first), str(second), "--format", "json"]) == 0
    assert [v["name"] for v in json.loads(capsys.readouterr().out)["variants"]] == ["x", "x #2"]
    assert main(["check", str(first), str(second), "--expect", str(hypotheses), "--format", "json"]) == 0
    assert [t["label"] for t in json.loads(capsys.readouterr().out)["traces"]] == ["x", "x #2"]
    assert main(["report", str(first), str(second)]) == 0
    assert capsys.readouterr().err.startswith("Wrote x-vs-x.tracelens.html (")
    assert "<title>tracelens report: x, x #2</title>" in (tmp_path / "x-vs-x.tracelens.html").read_text()
    assert main(["annotate", str(first)]) == 0
    assert capsys.readouterr().err.startswith("Wrote x.tracelens.json.gz (")


def test_pieces_are_written_in_order_and_a_failing_generator_leaves_the_old_file(tmp_path: Path) -> None:
    """An output given as pieces (annotate's streamed rewrite) is their concatenation; a generator that raises
    half way leaves the old file as it was and no temporary file, and its exception reaches the caller."""
    out = tmp_path / "out.json"
    write_output(out, (piece for piece in (b"[1,", bytearray(b" 2"), memoryview(b"]"))), force=False)
    assert out.read_bytes() == b"[1, 2]"

    def failing() -> Iterator[bytes]:
        yield b"[3,"
        raise ValueError("the rewrite failed")

    with pytest.raises(ValueError, match="the rewrite failed"):
        write_output(out, failing(), force=True)
    assert out.read_bytes() == b"[1, 2]" and [p.name for p in tmp_path.iterdir()] == ["out.json"]
