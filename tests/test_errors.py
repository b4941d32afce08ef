"""Every unusable input ends with exactly one `tracelens: error:` line on stderr and exit status 2."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import op, write_trace
from tracelens.cli import main


def _tar(path: Path, compress: bool) -> Path:
    member = path.parent / "rank0.json"
    write_trace(member, [op("aten::mm", 1, 2)])
    with tarfile.open(path, "w:gz" if compress else "w") as archive:
        archive.add(member, arcname="rank0.json")
    return path


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return make


def _directory(with_trace: bool) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "runs"
        path.mkdir()
        (path / "notes.txt").write_text("x")
        if with_trace:
            write_trace(path / "a.json", [op("aten::mm", 1, 2)])
        return path

    return make


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing file": (lambda folder: folder / "nope.json", "nope.json: no such file"),
    "empty file": (_write("empty.json", b""), "empty.json: empty file"),
    "blank file": (_write("blank.json", b" \n\t\n"), "blank.json: empty file"),
    "directory without traces": (_directory(False), "runs: no .json or .json.gz traces in it"),
    "not JSON": (_write("t.json", b"hello world\n"), "t.json: not JSON (it starts with b'hello world"),
    "not gzip despite .gz": (_write("t.json.gz", b"PK\x03\x04 a zip"), "t.json.gz: not gzip data despite"),
    "JSON but not a trace": (_write("t.json", b'{"name": "x"}'), "t.json: JSON but not a trace: no 'traceEvents'"),
    "JSON array of numbers": (_write("t.json", b"[1, 2, 3]"), "t.json: JSON but not a trace"),
    "trace without timed events": (
        _write("t.json", b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}'),
        "t.json: a trace with no events with a duration",
    ),
    "gzip of non-JSON": (_write("t.json.gz", gzip.compress(b"hello world")), "t.json.gz: not JSON"),
    "gzip of nothing": (_write("t.json.gz", gzip.compress(b"")), "t.json.gz: empty file"),
    "corrupt gzip": (_write("t.json.gz", b"\x1f\x8b\x08\x00garbage"), "t.json.gz: corrupt or truncated gzip data"),
    "corrupt deflate data": (
        _write("t.json.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbagegarbage"),
        "t.json.gz: corrupt gzip data",
    ),
    "JSON cut before any event": (_write("t.json", b'{"schemaVersion": 1, "traceE'), "t.json: cut off before the"),
    "binary garbage": (_write("t.json", bytes(range(256)) * 4), "t.json: not JSON"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_unusable_input_gives_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    make, expected = CASES[case]
    path = make(tmp_path)
    assert main(["analyze", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("tracelens: error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in captured.err


def test_load_trace_refuses_a_tar_archive(tmp_path: Path) -> None:
    """The CLI analyzes a tar of rank traces; the one-file loader says what the archive holds."""
    from tracelens.errors import UnusableTraceError
    from tracelens.loader import load_trace

    with pytest.raises(UnusableTraceError, match=r"a tar archive of 1 file \(rank0.json\); extract it"):
        load_trace(_tar(tmp_path / "ranks.tar", False))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads unreadable files")
def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.json", [op("aten::mm", 1, 2)])
    path.chmod(0)
    assert main(["analyze", str(path)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"tracelens: error: {path}: cannot read: Permission denied"]


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelens: error: ")


def test_a_utf8_bom_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bom.json"
    text = io.BytesIO()
    text.write(b"\xef\xbb\xbf")
    text.write(write_trace(tmp_path / "plain.json", [op("aten::mm", 1, 2)]).read_bytes())
    path.write_bytes(text.getvalue())
    assert main(["analyze", str(path), "--format", "json"]) == 0
    assert '"cpu_op": 1' in capsys.readouterr().out
