"""The analysis cache: `tracelens analyze` on the same file and options again neither loads nor analyzes, prints
the same output and the same warnings, and misses whenever the file, its path, the options or the code change."""

from __future__ import annotations

import gzip
import importlib
import shutil
from pathlib import Path

import pytest

from tests.cache_helpers import WARNING, cached
from tests.conftest import one_gemm_trace, run_cli, spy_on_loads, unwrapped
from tracelens._cache import Cache
from tracelens.analyses import analyze
from tracelens.analyses.record import CachedAnalysis
from tracelens.loader import load_trace
from tracelens.records import replace

keys = importlib.import_module("tracelens._cache.keys")
cli_analyze = importlib.import_module("tracelens.cli.analyze")


@pytest.fixture(autouse=True)
def _fresh_cache(cache_dir: Path) -> Path:
    return cache_dir


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Paths that `tracelens analyze` really loaded (not served from the results cache)."""
    return spy_on_loads(monkeypatch, cli_analyze)


def test_second_run_is_served_without_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path], cache_dir: Path
) -> None:
    path = one_gemm_trace(tmp_path)
    first = run_cli(capsys, "analyze", str(path), "--format", "json")
    second = run_cli(capsys, "analyze", str(path), "--format", "json")
    assert second == first
    assert loads == [path]  # the second run neither loaded nor analyzed
    assert len(list((cache_dir / "analyses").glob("*.msgpack"))) == 1
    assert '"kernels": 1' in first[0]


def test_options_path_and_content_are_part_of_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loads: list[Path]
) -> None:
    path = one_gemm_trace(tmp_path)
    run_cli(capsys, "analyze", str(path), "--format", "json")
    run_cli(capsys, "analyze", str(path), "--format", "json", "--step", "1")
    run_cli(capsys, "analyze", str(path), "--format", "json", "--peak-tflops", "100")
    text = run_cli(capsys, "analyze", str(path))[0]  # the format is not part of the key: the same entry renders as text
    assert "gemm" in text
    copy = tmp_path / "copy.json"
    shutil.copy(path, copy)
    out = run_cli(capsys, "analyze", str(copy), "--format", "json")[0]
    assert str(copy) in out and str(path) not in out  # the report names the path it was given
    one_gemm_trace(tmp_path, kernel_us=7)  # same path, new content
    out = run_cli(capsys, "analyze", str(path), "--format", "json")[0]
    assert '"total_us": 7.0' in out
    assert loads == [path, path, path, copy, path]


def test_warnings_are_repeated_from_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = one_gemm_trace(tmp_path)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(path.read_bytes()[:-40]))
    first = run_cli(capsys, "analyze", str(cut))
    assert "cut off mid-write" in first[1]
    assert run_cli(capsys, "analyze", str(cut)) == first


def test_no_cache_a_corrupt_entry_and_changed_code(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    loads: list[Path],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = one_gemm_trace(tmp_path)
    run_cli(capsys, "analyze", str(path), "--no-cache")
    assert not cache_dir.exists()
    fresh = run_cli(capsys, "analyze", str(path))
    (entry,) = (cache_dir / "analyses").glob("*.msgpack")
    entry.write_bytes(b"\x93not an entry")
    out, err = run_cli(capsys, "analyze", str(path))  # deleted with a warning, and rewritten
    err = unwrapped(err)  # each warning on one line
    assert out == fresh[0] and err.startswith(f"{WARNING}{entry} is damaged (") and err.endswith(unwrapped(fresh[1]))
    assert run_cli(capsys, "analyze", str(path)) == fresh
    monkeypatch.setattr(keys, "code_fingerprint", lambda: "other code")
    assert run_cli(capsys, "analyze", str(path)) == fresh
    assert len(loads) == 4  # --no-cache, first fill, corrupt entry, changed code


def test_a_result_that_would_not_come_back_identical_is_not_stored(tmp_path: Path, cache_dir: Path) -> None:
    path = one_gemm_trace(tmp_path)

    def compute() -> CachedAnalysis:
        results = analyze(load_trace(path))
        odd = replace(results.summary, steps=1.0)  # type: ignore[arg-type]  # an int field, a float
        return CachedAnalysis(replace(results, summary=odd), ())

    first = cached(Cache(cache_dir), "analyses", [path], {}, CachedAnalysis, compute)
    assert first.report.summary.steps == 1.0
    assert not list((cache_dir / "analyses").glob("*.msgpack"))
