"""The results cache for `tracelens check` and `report` (`analyze`: tests/test_analysis_cache.py): the same files
and options again neither load nor analyze, print and write the same output and the same warnings, and miss
whenever a file, its path or the options change; `check` evaluates its hypotheses afresh every run. Only
records that decode to identical values are stored."""

from __future__ import annotations

import gzip
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cache_helpers import WARNING, cached
from tests.conftest import one_gemm_trace, run_cli, spy_on_loads, unwrapped
from tracelens._cache import Cache
from tracelens._cache.results import identical
from tracelens.cli import main
from tracelens.hypotheses.document import CachedDocument, TraceDocument

keys = importlib.import_module("tracelens._cache.keys")
cli_check = importlib.import_module("tracelens.cli.check")
cli_report = importlib.import_module("tracelens.cli.report")


@pytest.fixture(autouse=True)
def _fresh_cache(cache_dir: Path) -> Path:
    return cache_dir


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Paths that `tracelens check` or `report` really loaded (not served from the results cache)."""
    return spy_on_loads(monkeypatch, cli_check, cli_report)


# ---------------------------------------------------------------- check

HYPOTHESES = """
[[hypothesis]]
name = "one gemm"
kernel = "gemm"
measure = "total_us"
op = "=="
value = 5

[[hypothesis]]
name = "one kernel per step"
metric = "per_step.kernels"
op = "=="
value = 1
"""


def _hypotheses(folder: Path, text: str = HYPOTHESES) -> str:
    path = folder / "h.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _verdicts(out: str) -> list[tuple[str, str, object]]:
    return [(v["name"], v["status"], v["measured"]) for v in json.loads(out)["verdicts"]]


def test_check_repeat_is_served_without_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    first_trace, second_trace = one_gemm_trace(tmp_path, "a.json"), one_gemm_trace(tmp_path, "b.json", kernel_us=6)
    argv = (str(first_trace), str(second_trace), "--expect", _hypotheses(tmp_path), "--format", "json")
    first = run_cli(capsys, "check", *argv, expect=1)
    second = run_cli(capsys, "check", *argv, expect=1)
    assert second == first
    assert loads == [first_trace, second_trace]
    assert len(list((cache_dir / "documents").glob("*.msgpack"))) == 2
    assert _verdicts(first[0]) == [
        ("one gemm", "held", 5),
        ("one gemm", "wrong", 6),
        ("one kernel per step", "held", 1),
        ("one kernel per step", "held", 1),
    ]
    text = run_cli(capsys, "check", *argv[:4], expect=1)[0]  # the format is not part of the key
    assert text.rstrip().endswith("3 held, 1 wrong")
    assert len(loads) == 2


def test_check_evaluates_an_edited_hypotheses_file_afresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    path = one_gemm_trace(tmp_path)
    run_cli(capsys, "check", str(path), "--expect", _hypotheses(tmp_path), "--format", "json")
    edited = _hypotheses(tmp_path, HYPOTHESES.replace("value = 5", "value = 4"))
    out = run_cli(capsys, "check", str(path), "--expect", edited, "--format", "json", expect=1)[0]
    assert _verdicts(out) == [("one gemm", "wrong", 5), ("one kernel per step", "held", 1)]
    assert loads == [path]


def test_check_options_path_content_and_no_cache_miss(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    loads: list[Path],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = one_gemm_trace(tmp_path)
    expect = ("--expect", _hypotheses(tmp_path), "--format", "json")
    run_cli(capsys, "check", str(path), *expect)
    run_cli(capsys, "check", str(path), *expect, "--step", "1")
    copy = tmp_path / "copy.json"
    shutil.copy(path, copy)
    out = run_cli(capsys, "check", str(copy), *expect)[0]
    assert [t["path"] for t in json.loads(out)["traces"]] == [str(copy)]
    one_gemm_trace(tmp_path, kernel_us=7)  # same path, new content
    out = run_cli(capsys, "check", str(path), *expect, expect=1)[0]
    assert _verdicts(out)[0] == ("one gemm", "wrong", 7)
    entries = sorted((cache_dir / "documents").glob("*.msgpack"))
    assert len(entries) == 4
    run_cli(capsys, "check", str(path), *expect, "--no-cache", expect=1)
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    run_cli(capsys, "check", str(path), *expect, expect=1)
    assert sorted((cache_dir / "documents").glob("*.msgpack")) == entries
    assert loads == [path, path, copy, path, path, path]


def test_check_repeats_warnings_and_ignores_a_corrupt_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    path = one_gemm_trace(tmp_path)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(path.read_bytes()[:-40]))
    argv = (str(cut), "--expect", _hypotheses(tmp_path))
    first = run_cli(capsys, "check", *argv, expect=1)
    assert "tracelens: warning: cut.json.gz: the trace was cut off mid-write" in first[1]
    assert run_cli(capsys, "check", *argv, expect=1) == first
    (entry,) = (cache_dir / "documents").glob("*.msgpack")
    entry.write_bytes(b"\x92\xa3bad")
    out, err = run_cli(capsys, "check", *argv, expect=1)  # deleted, with a warning, and rewritten
    assert out == first[0] and unwrapped(
        err
    ) == f"{WARNING}{entry} is damaged (not a tracelens cache entry): deleted, recomputing\n" + unwrapped(first[1])
    assert run_cli(capsys, "check", *argv, expect=1) == first
    assert loads == [cut, cut]


def test_check_errors_are_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    path = one_gemm_trace(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    for _ in range(2):  # an unusable trace is never cached: the same one-line error each time
        out, err = run_cli(capsys, "check", str(path), str(bad), "--expect", _hypotheses(tmp_path), expect=2)
        assert out == "" and err.count("\n") == 1 and err.startswith("tracelens: error: ")
    malformed = _hypotheses(tmp_path, "[[hypothesis]]\nname = 1\n")
    out, err = run_cli(capsys, "check", str(path), "--expect", malformed, expect=2)
    assert out == "" and err.count("\n") == 1 and err.startswith("tracelens: error: ")
    assert loads == [path, bad, bad]  # the document of `path` was served from the cache the second time
    assert len(list((cache_dir / "documents").glob("*.msgpack"))) == 1


# ---------------------------------------------------------------- report


def test_report_repeat_writes_the_same_page_without_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    first_trace, second_trace = one_gemm_trace(tmp_path, "a.json"), one_gemm_trace(tmp_path, "b.json", kernel_us=6)
    traces = (str(first_trace), str(second_trace))
    first_out, second_out, fresh_out = tmp_path / "1.html", tmp_path / "2.html", tmp_path / "3.html"
    first = run_cli(capsys, "report", *traces, "-o", str(first_out))
    second = run_cli(capsys, "report", *traces, "-o", str(second_out))
    assert loads == [first_trace, second_trace]
    assert second_out.read_bytes() == first_out.read_bytes()
    assert second[1].startswith(f"Wrote {second_out} (") and second[0] == first[0] == ""  # status lines: stderr
    assert len(list((cache_dir / "pages").glob("*.msgpack"))) == 1
    run_cli(capsys, "report", *traces, "-o", str(fresh_out), "--no-cache")
    assert fresh_out.read_bytes() == first_out.read_bytes()
    assert loads == [first_trace, second_trace] * 2


def test_report_on_a_hit_still_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    path = one_gemm_trace(tmp_path)
    output = tmp_path / "page.html"
    run_cli(capsys, "report", str(path), "-o", str(output))
    output.write_text("mine")
    assert main(["report", str(path), "-o", str(output)]) == 2
    assert capsys.readouterr().err == f"tracelens: error: {output} exists; pass --force to overwrite it\n"
    assert output.read_text() == "mine"
    assert main(["report", str(path), "-o", str(path), "--force"]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    run_cli(capsys, "report", str(path), "-o", str(output), "--force")
    assert output.read_bytes().startswith(b"<!DOCTYPE html>")
    assert loads == [path]


@pytest.mark.slow
def test_report_options_paths_order_and_content_miss(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    loads: list[Path],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first_trace, second_trace = one_gemm_trace(tmp_path, "a.json"), one_gemm_trace(tmp_path, "b.json", kernel_us=6)
    output = ("-o", str(tmp_path / "page.html"), "--force")
    run_cli(capsys, "report", str(first_trace), *output)
    run_cli(capsys, "report", str(first_trace), *output, "--step", "1")
    run_cli(capsys, "report", str(first_trace), *output, "--max-slices", "10")
    run_cli(capsys, "report", str(first_trace), str(second_trace), *output)
    run_cli(capsys, "report", str(second_trace), str(first_trace), *output)
    copy = tmp_path / "copy.json"
    shutil.copy(first_trace, copy)
    run_cli(capsys, "report", str(copy), *output)
    assert b"<title>tracelens report: copy</title>" in (tmp_path / "page.html").read_bytes()
    one_gemm_trace(tmp_path, "a.json", kernel_us=7)  # same path, new content
    run_cli(capsys, "report", str(first_trace), *output)
    entries = sorted((cache_dir / "pages").glob("*.msgpack"))
    assert len(entries) == 7
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    run_cli(capsys, "report", str(first_trace), *output)
    assert sorted((cache_dir / "pages").glob("*.msgpack")) == entries
    assert loads == [
        first_trace,
        first_trace,
        first_trace,
        first_trace,
        second_trace,
        second_trace,
        first_trace,
        copy,
        first_trace,
        first_trace,
    ]


def test_report_repeats_warnings_and_ignores_a_corrupt_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    path = one_gemm_trace(tmp_path)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(path.read_bytes()[:-40]))
    output = tmp_path / "page.html"
    argv = (str(path), str(cut), "-o", str(output), "--force")
    first = run_cli(capsys, "report", *argv)
    page = output.read_bytes()
    assert first[1].count("tracelens: warning: ") == first[1].count("tracelens: warning: cut.json.gz: ") >= 1
    assert "cut off mid-write" in first[1]
    second = run_cli(capsys, "report", *argv)
    assert _warnings(second[1]) == _warnings(first[1]) and output.read_bytes() == page
    (entry,) = (cache_dir / "pages").glob("*.msgpack")
    entry.write_bytes(entry.read_bytes()[:1000])  # cut short
    assert _warnings(run_cli(capsys, "report", *argv)[1]) == [
        f"{WARNING}{entry} is damaged (checksum mismatch): deleted, recomputing",
        *_warnings(first[1]),
    ]
    assert output.read_bytes() == page
    assert loads == [path, cut, path, cut]


# ---------------------------------------------------------------- only exact records are stored


def test_identical_compares_types_all_the_way_down() -> None:
    assert identical({"a": [1, 2.5, None, "x"], "b": (True,)}, {"a": [1, 2.5, None, "x"], "b": (True,)})
    assert identical(math.nan, math.nan)
    assert not identical(1, 1.0)
    assert not identical([(1, 2)], [[1, 2]])
    assert not identical({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not identical(True, 1)
    document = TraceDocument("t", ("t",), "t.json", {"steps": 1})
    assert identical(CachedDocument(document, ()), CachedDocument(document, ()))
    assert not identical(CachedDocument(document, ()), CachedDocument(document, ("w",)))


def test_a_document_that_would_not_come_back_identical_is_not_stored(tmp_path: Path, cache_dir: Path) -> None:
    path = one_gemm_trace(tmp_path)
    document = TraceDocument("t", ("t",), str(path), {"shape": (2, 3)})  # a tuple would come back a list

    def compute() -> CachedDocument:
        return CachedDocument(document, ())

    cache = Cache(cache_dir)
    assert cached(cache, "documents", [path], {}, CachedDocument, compute).document is document
    assert not (cache_dir / "documents").exists()
    plain = TraceDocument("t", ("t",), str(path), {"shape": [2, 3]})
    stored = cached(cache, "documents", [path], {}, CachedDocument, lambda: CachedDocument(plain, ()))
    assert stored.document is plain
    served = cached(cache, "documents", [path], {}, CachedDocument, compute)
    assert served == CachedDocument(plain, ()) and served.document is not plain


# ---------------------------------------------------------------- code changes and the cost of a hit


def test_changed_code_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = one_gemm_trace(tmp_path)
    expect = ("--expect", _hypotheses(tmp_path), "--format", "json")
    check = run_cli(capsys, "check", str(path), *expect)
    report = _warnings(run_cli(capsys, "report", str(path), "-o", str(tmp_path / "page.html"))[1])
    monkeypatch.setattr(keys, "code_fingerprint", lambda: "other code")
    assert run_cli(capsys, "check", str(path), *expect) == check
    assert _warnings(run_cli(capsys, "report", str(path), "-o", str(tmp_path / "page.html"), "--force")[1]) == report
    assert loads == [path] * 4


HIT_PROBE = """
import sys
from tracelens.cli import main
code = main(sys.argv[1:])
print(code, sorted(m for m in ("tracelens.analyses", "pandas", "plotly") if m in sys.modules))
"""


@pytest.mark.parametrize("command", ["check", "report"])
def test_a_hit_imports_neither_the_analyses_nor_pandas_nor_plotly(
    tmp_path: Path, cache_dir: Path, command: str
) -> None:
    path = one_gemm_trace(tmp_path)
    if command == "check":
        argv = ["check", str(path), "--expect", _hypotheses(tmp_path), "--format", "json"]
    else:
        argv = ["report", str(path), "-o", str(tmp_path / "page.html"), "--force"]
    env = {**os.environ, "TRACELENS_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(Path(__file__).parents[1])}
    runs = [
        subprocess.run([sys.executable, "-c", HIT_PROBE, *argv], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    first, second = (run.stdout.splitlines()[-1] for run in runs)
    assert first.startswith("0 ['pandas', 'plotly', 'tracelens.analyses']" if command == "report" else "0 [")
    assert "tracelens.analyses" in first  # the miss analyzed
    assert second == "0 []"


def test_a_new_input_is_computed_first_and_hashed_after(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = one_gemm_trace(tmp_path)
    order: list[str] = []
    real_key = Cache.content_key

    def key(self: Cache, path: Path, identity: str | None = None) -> str | None:
        order.append("key")
        return real_key(self, path, identity)

    def compute() -> CachedDocument:
        order.append("computing")
        return CachedDocument(TraceDocument("t", ("t",), str(path), {"n": 1}), ())

    monkeypatch.setattr(Cache, "content_key", key)
    cache = Cache(cache_dir)
    cached(cache, "documents", [path], {}, CachedDocument, compute)
    assert order == ["computing", "key"]  # not hashed before: nothing can be cached for a file never seen
    served = cached(cache, "documents", [path], {}, CachedDocument, compute)
    assert order == ["computing", "key"] and served.document.document == {"n": 1}  # a hit, from the memo


def _warnings(stderr: str) -> list[str]:
    """stderr without the status line ("Wrote ... in 0.1 s" differs from run to run), each warning on one line."""
    return [line for line in unwrapped(stderr).splitlines() if not line.startswith("Wrote ")]
