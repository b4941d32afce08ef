"""Shared test helpers: where the real-trace corpus lives, and tiny hand-written traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
ANCHORS = Path(os.environ.get("TRACELENS_ANCHORS", REPO.parent / "shared" / "anchor_traces"))
TRACES = REPO / "traces"


def anchor(relative: str) -> Path:
    """Path of a corpus trace; skips the test when the corpus is not beside the checkout."""
    path = ANCHORS / relative
    if not path.exists():
        pytest.skip(f"anchor trace corpus not found at {ANCHORS} (set TRACELENS_ANCHORS)")
    return path


def anchor_traces() -> list[Path]:
    """Every .json/.json.gz trace in the corpus (tar archives excluded)."""
    if not ANCHORS.exists():
        return []
    return sorted(
        p
        for p in ANCHORS.rglob("*.json*")
        if p.name.endswith((".json", ".json.gz"))
        and "trace_perf_report_csvs" not in p.parts
        and p.name != "execution_details.json"
    )


def recorded_trace(relative: str) -> Path:
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"recorded trace {relative} not committed yet")
    return path


def write_trace(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    """Write a tiny trace (gzip if the name ends in .gz) with `events` as traceEvents."""
    document = {"schemaVersion": 1, **top, "traceEvents": events}
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def op(
    name: str, ts: float, dur: float, ext: int | None = None, tid: int = 1, cat: str = "cpu_op", **args: Any
) -> dict[str, Any]:
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(
    name: str, ts: float, dur: float, correlation: int, ext: int | None = None, tid: int = 1, cat: str = "cuda_runtime"
) -> dict[str, Any]:
    args: dict[str, Any] = {"correlation": correlation, "cbid": 211}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(
    name: str, ts: float, dur: float, correlation: int, stream: int = 7, cat: str = "kernel", **args: Any
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": correlation, "device": 0, "stream": stream, **args},
    }


def step(number: int, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return op(f"ProfilerStep#{number}", ts, dur, cat="user_annotation", tid=tid)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write to the user's ~/.cache/tracelens."""
    os.environ["TRACELENS_CACHE_DIR"] = str(tmp_path_factory.mktemp("tracelens-cache"))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own, with the cache turned on (tests of the caches use it)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(folder))
    monkeypatch.delenv("TRACELENS_NO_CACHE", raising=False)
    return folder


def spy_on_loads(monkeypatch: pytest.MonkeyPatch, *modules: Any) -> list[Path]:
    """Record every trace a command loads (`Cache.begin_load`, served from the trace cache or decoded); returns
    the list of their paths. `modules`: the CLI modules under test (every command loads through the cache)."""
    from tracelens._cache import Cache

    seen: list[Path] = []
    real = Cache.begin_load

    def spy(self: Cache, path: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(Path(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Cache, "begin_load", spy)
    return seen


def one_gemm_trace(folder: Path, name: str = "t.json", kernel_us: float = 5) -> Path:
    """A one-step trace: aten::mm launching one `gemm` kernel of `kernel_us`."""
    events = [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, kernel_us, correlation=70),
    ]
    return write_trace(folder / name, events)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, expect: int = 0) -> tuple[str, str]:
    """`tracelens ARGV` in-process; asserts its exit status and returns (stdout, stderr)."""
    from tracelens.cli import main

    assert main(list(argv)) == expect
    captured = capsys.readouterr()
    return captured.out, captured.err
