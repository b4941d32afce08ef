"""Every unusable input ends with exactly one `tracelens: error:` line on stderr and exit status 2."""

from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import one_gemm_trace, op, write_trace
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


ROOT = Path(__file__).resolve().parent.parent

CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing file": (lambda folder: folder / "nope.json", "nope.json: no such file"),
    "empty file": (_write("empty.json", b""), "empty.json: empty file"),
    "blank file": (_write("blank.json", b" \n\t\n"), "blank.json: empty file"),
    "directory without traces": (_directory(False), "runs: no .json or .json.gz traces in it"),
    "not JSON": (_write("t.json", b"hello world\n"), "t.json: not JSON (it starts with b'hello world"),
    "one JSON value": (_write("t.json", b"null\n"), "t.json: one JSON value, not a trace (an object with traceEvents"),
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
    # a gzip cut short under a name that is not a trace's (the archive check reads it first)
    "cut gzip named .gz": (_write("a.gz", gzip.compress(b'{"traceEvents": []}')[:2]), "a.gz: corrupt or truncated"),
    "cut gzip named .trace": (_write("a.trace", gzip.compress(b"{}")[:2]), "a.trace: corrupt or truncated"),
    # a gzip cut after its first bytes of white space: truncated, not an empty trace
    "gzip cut after white space": (
        _write("t.json.gz", (ROOT / "traces/h200/eager_mlp.json.gz").read_bytes()[:100]),
        "t.json.gz: corrupt or truncated gzip data: nothing but white space",
    ),
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


# --- issue 19: no traceback from any input; a top-level guard for the unexpected --------------------------


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelens: error: "), captured.err
    return lines[0]


def test_no_arguments_prints_usage_and_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0].startswith("usage: tracelens ")
    assert [line for line in lines if line.startswith("tracelens: error: ")] == [
        "tracelens: error: no command given; choose one of record, analyze, compare, check, report, annotate, cache "
        "(see tracelens --help)"
    ]
    assert captured.out == ""


def test_a_symlink_loop_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.symlink_to(second)
    second.symlink_to(first)
    for argv in (["analyze", str(first)], ["report", str(first)], ["check", str(first), "--expect", str(second)]):
        assert main(argv) == 2
        assert _one_error(capsys) == f"tracelens: error: {first}: symlink loop (too many levels of symbolic links)"


def test_a_file_name_with_byte_0xff_without_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(os.fsdecode(bytes(tmp_path) + b"/\xff.json"))
    write_trace(path, [op("aten::mm", 1, 2)])
    assert main(["analyze", "--no-cache", str(path), "--format", "json", "--debug"]) == 0
    assert '"cpu_op": 1' in capsys.readouterr().out


def test_a_file_name_with_byte_0xff_with_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_dir: Path
) -> None:
    path = Path(os.fsdecode(bytes(tmp_path) + b"/\xff.json"))
    write_trace(path, [op("aten::mm", 1, 2)])
    for _ in range(2):  # cold, then warm
        assert main(["analyze", str(path), "--format", "json"]) == 0
        assert '"cpu_op": 1' in capsys.readouterr().out


def test_internal_errors_are_one_line_exit_3_with_traceback_only_under_debug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracelens.cli.analyze import AnalyzeCommand

    def broken(self: object, args: object) -> int:
        raise KeyError("a bug\x1b[2J")

    monkeypatch.setattr(AnalyzeCommand, "run", broken)
    trace = one_gemm_trace(tmp_path)
    assert main(["analyze", str(trace)]) == 3
    assert _one_error(capsys) == (
        "tracelens: error: internal error (KeyError: 'a bug\\x1b[2J'); please report it with --debug output"
    )
    assert main(["analyze", str(trace), "--debug"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "KeyError" in err
    assert err.splitlines()[-1].startswith("tracelens: error: internal error (KeyError")
    assert main(["--debug", "analyze", str(trace)]) == 3  # before the command as well
    assert "Traceback" in capsys.readouterr().err


HYPOTHESES_HEAD = '[[hypothesis]]\nname = "a"\nmetric = "per_step.kernels"\n'
HOSTILE_HYPOTHESES = {
    "arrays nested 1,000 deep": (
        HYPOTHESES_HEAD + 'op = "=="\nvalue = ' + "[" * 1000 + "]" * 1000,
        "not usable: arrays or tables nested too deeply",
    ),
    "a 5,000-digit value": (HYPOTHESES_HEAD + 'op = "=="\nvalue = ' + "9" * 5000, "a number too long to read"),
    "a 400-digit value with <": (
        HYPOTHESES_HEAD + 'op = "<"\nvalue = ' + "9" * 400,
        'hypothesis 1 ("a"): value is too large (400 digits)',
    ),
    "a 400-digit tolerance": (
        HYPOTHESES_HEAD + 'op = "=="\nvalue = 1\ntolerance = ' + "9" * 400,
        "tolerance must be a number, not 9999",
    ),
    "a 400-digit factor": (
        HYPOTHESES_HEAD + 'op = "<"\nthan = { trace = "t", factor = ' + "9" * 400 + " }",
        "than: factor must be a positive number, not 9999",
    ),
    "a superscript index": (
        '[[hypothesis]]\nname = "a"\nmetric = "kernels.²"\nop = "=="\nvalue = 1',
        'metric "kernels.²" on t: no key "²" in the entries of kernels',
    ),
    "a 5,000-digit index": (
        '[[hypothesis]]\nname = "a"\nmetric = "kernels.' + "9" * 5000 + '"\nop = "=="\nvalue = 1',
        "metric is 5,008 characters long; at most 1,000",
    ),
    "not UTF-8": ("\udcff", "not UTF-8 text (byte 1)"),
}


@pytest.mark.parametrize("case", list(HOSTILE_HYPOTHESES))
def test_hostile_hypotheses_files_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, expected = HOSTILE_HYPOTHESES[case]
    trace = one_gemm_trace(tmp_path)
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    assert main(["check", str(trace), "--expect", str(hypotheses)]) == 2
    line = _one_error(capsys)
    # an entry's problem names the line of its [[hypothesis]] header: "h.toml:1: hypothesis 1 ..."
    assert re.match(rf"tracelens: error: {re.escape(str(hypotheses))}(:\d+)?: ", line) and expected in line, line
    assert len(line) < 400


def test_a_utf8_bom_in_a_hypotheses_file_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = one_gemm_trace(tmp_path)
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_bytes(b"\xef\xbb\xbf" + (HYPOTHESES_HEAD + 'op = "=="\nvalue = 1\n').encode())
    assert main(["check", str(trace), "--expect", str(hypotheses)]) == 0
    assert "1 held, 0 wrong" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--peak-tbps", "-3"], None, "--peak-tbps: a peak must be a finite number > 0, not -3 TB/s"),
        (["--peak-tbps", "0"], None, "--peak-tbps: a peak must be a finite number > 0, not 0 TB/s"),
        (["--peak-tbps", "nan"], None, "--peak-tbps: a peak must be a finite number > 0, not nan TB/s"),
        (["--peak-tflops", "bf16=-1,fp32=67"], None, "--peak-tflops: a peak must be a finite number > 0, not -1"),
        (["--peak-tflops", "inf"], None, "--peak-tflops: a peak must be a finite number > 0, not inf TFLOP/s"),
        (["--peak-tflops", "bf16="], None, "bad peak figures in --peak-tflops (could not convert string to float: '')"),
        ([], '{"hbm_tbps": 0}', "TRACELENS_PEAKS: a peak must be a finite number > 0, not 0 TB/s"),
        ([], '{"bf16": -5}', "TRACELENS_PEAKS: a peak must be a finite number > 0, not -5 bf16 TFLOP/s"),
        ([], "[1]", "bad peak figures in TRACELENS_PEAKS"),
    ],
)
def test_impossible_peaks_are_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: str | None,
    expected: str,
) -> None:
    trace = one_gemm_trace(tmp_path)
    if env is not None:
        monkeypatch.setenv("TRACELENS_PEAKS", env)
    assert main(["analyze", str(trace), *argv]) == 2
    assert expected in _one_error(capsys)
    if env is not None:  # every command reads TRACELENS_PEAKS (the roofline of report, check, annotate)
        assert main(["report", str(trace), "-o", str(tmp_path / "r.html")]) == 2
        assert expected in _one_error(capsys)


STUDY_MLP = Path(__file__).resolve().parent.parent / "traces/h200/eager_mlp.json.gz"


def _cut_mlp(folder: Path) -> Path:
    """The study's eager MLP trace cut in the middle of its JSON (usable, with a warning)."""
    whole = gzip.decompress(STUDY_MLP.read_bytes())
    cut = folder / "cut.json"
    cut.write_bytes(whole[: len(whole) // 2])
    return cut


@pytest.mark.parametrize("terminal", [False, True])
def test_a_warning_is_shown_once_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    """A cut trace's warnings end the text output; on a terminal stderr does not repeat them (each once on the
    screen), into a pipe or file each is on stderr too (a log keeps it)."""
    cut = _cut_mlp(tmp_path)
    monkeypatch.setattr("sys.stdout.isatty", lambda: terminal)
    monkeypatch.setattr("sys.stderr.isatty", lambda: terminal)
    assert main(["analyze", str(cut), "--no-cache"]) == 0
    out, err = capsys.readouterr()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "cut off mid-write after" in plain
    assert ("cut off mid-write" in err) is not terminal


def test_text_sections_with_json_are_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`--summary` / `--section` choose text sections: with `--format json` they are refused, never ignored."""
    trace = str(STUDY_MLP)
    for extra in (["--summary"], ["--section", "bound"]):
        assert main(["analyze", trace, "--format", "json", "--no-cache", *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith("tracelens: error: --summary and --section")


def test_compare_says_when_it_has_nothing_to_compare(capsys: pytest.CaptureFixture[str]) -> None:
    """One trace, or one file twice: compared as asked, with a warning (never silence)."""
    trace = str(STUDY_MLP)
    assert main(["compare", trace, "--no-cache"]) == 0
    assert "one trace, nothing to compare it with" in capsys.readouterr().err
    assert main(["compare", trace, trace, "--no-cache"]) == 0
    assert "the same file is given twice" in capsys.readouterr().err
    other = str(Path(trace).with_name("compiled_mlp.json.gz"))
    assert main(["compare", trace, other, "--no-cache"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_warnings_reach_a_redirected_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text on the terminal, stderr into a log (`2>run.log`): the log still gets every warning (auditor)."""
    cut = _cut_mlp(tmp_path)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert main(["analyze", str(cut), "--no-cache"]) == 0
    assert "cut off mid-write" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["frobnicate"], "(see tracelens --help)"),
        (["analyze", str(STUDY_MLP), "--bogus"], "unrecognized arguments: --bogus (see tracelens --help)"),
        (["analyze", str(STUDY_MLP), "--width", "abc"], "--width: 'abc' is not a whole number of columns"),
        (["analyze", str(STUDY_MLP), "--width", "12"], "--width: 12 is too narrow: at least 40 columns"),
    ],
)
def test_a_usage_error_names_the_help_once_and_no_internal_name(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Usage errors point to the parser's own help, never "tracelens tracelens --help", and a bad --width says
    what it wants, never argparse's "invalid _width value" (new user, 2026-12-07)."""
    assert main(argv) == 2
    line = _one_error(capsys)
    assert expected in line and "tracelens tracelens" not in line and "_width" not in line
