"""The trace cache: a second load is served from disk and equals a fresh decode; it never breaks loading."""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import anchor, kernel, launch, op, step, write_trace
from tracelens.cli import main
from tracelens.model.trace import Trace

cache = importlib.import_module("tracelens.cache")


@pytest.fixture(autouse=True)
def _every_trace_cached(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cache, "MIN_CACHED_BYTES", 0)
    return cache_dir


def _equal(a: Trace, b: Trace) -> None:
    for part in ("events", "tracks", "links", "steps", "meta", "truncation"):
        left, right = getattr(a, part), getattr(b, part)
        for field in dataclasses.fields(left):
            x, y = getattr(left, field.name), getattr(right, field.name)
            if isinstance(x, np.ndarray):
                assert x.dtype == y.dtype and x.tolist() == y.tolist(), (part, field.name)
            else:
                assert x == y, (part, field.name)
    assert (a.origin_us, a.uncompressed_bytes, a.warnings) == (b.origin_us, b.uncompressed_bytes, b.warnings)


def _no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> Trace:
        raise AssertionError("decoded although the cache holds the trace")

    monkeypatch.setattr(cache, "load_trace", fail)


def test_second_load_comes_from_the_cache_and_is_identical(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    path = anchor("other/facebookresearch__param/resnet_kineto.json.gz")
    first = cache.load_cached(path)
    entries = sorted(p.suffix for p in cache_dir.iterdir() if p.is_file())
    assert entries == [".json", ".npz"]
    _no_decoding(monkeypatch)
    second = cache.load_cached(path)
    _equal(first, second)
    assert second.path == path


def test_raw_args_survive_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7, **{"Input Dims": [[2, 3], [3, 4]], "Concrete Inputs": ["", "1"]}),
        op("aten::t", 2, 2, ext=8),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, 5, correlation=70, grid=[4, 1, 1]),
    ]
    path = write_trace(tmp_path / "t.json", events)
    first = cache.load_cached(path)
    _no_decoding(monkeypatch)
    second = cache.load_cached(path)
    _equal(first, second)
    dims = second.events.input_dims.tolist()
    assert dims[1] == b"[[2, 3], [3, 4]]" and dims.count(None) == 4
    assert second.events.concrete_inputs.tolist()[1] == b'["", "1"]'


def test_no_cache_and_changed_files_decode_again(tmp_path: Path, cache_dir: Path) -> None:
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    cache.load_cached(path, use_cache=False)
    assert not cache_dir.exists()
    cache.load_cached(path)
    key = cache.content_key(path, cache_dir)
    write_trace(path, [step(1, 0, 50), op("aten::mm", 1, 20), op("aten::add", 30, 5)])
    os.utime(path, ns=(1, 1))  # a different mtime: the path memo no longer applies
    assert cache.content_key(path, cache_dir) != key
    assert len(cache.load_cached(path).events) == 3


def test_a_corrupt_entry_is_ignored(tmp_path: Path, cache_dir: Path) -> None:
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    cache.load_cached(path)
    for npz in cache_dir.glob("*.npz"):
        npz.write_bytes(b"not a zip")
    assert len(cache.load_cached(path).events) == 2


def test_unwritable_cache_dir_does_not_break_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(blocker / "cache"))
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    assert len(cache.load_cached(path).events) == 2


def test_cli_output_is_the_same_from_the_cache(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(anchor("hta/trace_diff/control/control.json.gz"))
    assert main(["analyze", path, "--format", "json", "--no-cache"]) == 0
    fresh = capsys.readouterr().out
    assert main(["analyze", path, "--format", "json"]) == 0  # fills the cache
    capsys.readouterr()
    shutil.rmtree(cache.cache_dir() / "analyses")  # so that the trace entry is what serves the next run
    _no_decoding(monkeypatch)
    assert main(["analyze", path, "--format", "json"]) == 0
    assert capsys.readouterr().out == fresh


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRACELENS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "tracelens"
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    assert not cache.cache_enabled()


def test_changed_loader_code_invalidates_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    cache.load_cached(path)
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "another loader")
    decoded: list[Path] = []
    real = cache.load_trace

    def spy(p: Path, *args: object, **kwargs: object) -> Trace:
        decoded.append(p)
        return real(p, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "load_trace", spy)
    cache.load_cached(path)
    assert decoded == [path]


def test_a_new_file_is_hashed_while_it_decodes_not_before(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    path = anchor("other/facebookresearch__param/resnet_kineto.json.gz")
    order: list[str] = []
    real_load, real_key = cache.load_trace, cache.content_key

    def load(path: Path, progress: object = None, workers: object = None, meanwhile: object = None) -> Trace:
        order.append("decoding")
        assert callable(meanwhile)
        meanwhile()  # what the loader does once its worker processes have work
        order.append("decoded")
        return real_load(path, workers=1)

    def key(path: Path, folder: Path) -> str:
        order.append("hashing")
        return real_key(path, folder)

    monkeypatch.setattr(cache, "load_trace", load)
    monkeypatch.setattr(cache, "content_key", key)
    first = cache.load_cached(path)
    assert order == ["decoding", "hashing", "decoded"]
    assert cache.remembered_key(path, cache_dir) == real_key(path, cache_dir)  # remembered for the next command
    _no_decoding(monkeypatch)
    _equal(first, cache.load_cached(path))  # and stored under it


def test_without_workers_a_new_file_is_hashed_after_decoding(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    path = anchor("other/facebookresearch__param/resnet_kineto.json.gz")
    first = cache.load_cached(path, workers=1)
    assert cache.remembered_key(path, cache_dir) is not None
    _no_decoding(monkeypatch)
    _equal(first, cache.load_cached(path))


def test_the_command_writes_a_big_traces_entry_in_the_background(tmp_path: Path, cache_dir: Path) -> None:
    """`tracelens` (the console entry) forks the entry writer and waits for it after printing its output."""
    import subprocess
    import sys

    path = anchor("hta/trace_diff/control/control.json.gz")  # 35 MB of JSON: over MIN_CACHED_BYTES
    command = [sys.executable, "-m", "tracelens", "analyze", str(path), "--format", "json"]
    env = dict(os.environ, TRACELENS_CACHE_DIR=str(cache_dir))
    first = subprocess.run(command, capture_output=True, env=env, timeout=300, check=True)
    entries = [p for p in cache_dir.iterdir() if p.suffix == ".npz"]
    assert len(entries) == 1 and entries[0].stat().st_size > 1_000_000  # complete when the command has exited
    key = cache.remembered_key(path, cache_dir)
    assert key is not None and entries[0].name.startswith(key)
    trace = cache.read_entry(cache_dir, key, path)
    assert trace is not None and len(trace.events) == 74_937
    again = subprocess.run([*command, "--no-cache"], capture_output=True, env=env, timeout=300, check=True)
    assert again.stdout == first.stdout
