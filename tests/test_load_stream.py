"""The streaming / multi-process loader gives exactly what the whole-file decoder gives."""

from __future__ import annotations

import gzip
import importlib
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import anchor, kernel, launch, op, step, write_trace
from tracelens.loader import begin_load, load_trace
from tracelens.model.trace import Trace
from tracelens.records import field_names

stream = importlib.import_module("tracelens.loader.stream")
source = importlib.import_module("tracelens.loader.source")
forked = importlib.import_module("tracelens.loader.forked")
columns = importlib.import_module("tracelens.loader.columns")
decode = importlib.import_module("tracelens.loader.decode")


def _whole(path: Path) -> Trace:
    """The reference: whole-file decode, no streaming."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    decoded = decode.decode_trace(data, str(path))
    table, tracks, origin, _ = columns.build_columns(columns.complete_events(decoded.events))
    return Trace(path, table, tracks, None, None, None, origin, len(data))  # type: ignore[arg-type]


def assert_same_events(a: Trace, b: Trace) -> None:
    for field in field_names(a.events):
        left, right = getattr(a.events, field), getattr(b.events, field)
        if isinstance(left, np.ndarray):
            assert left.dtype == right.dtype, field
            assert left.tolist() == right.tolist(), field
        else:
            assert left == right, field
    assert a.tracks.pid == b.tracks.pid and a.tracks.tid == b.tracks.tid
    assert a.tracks.device.tolist() == b.tracks.device.tolist()
    assert a.origin_us == b.origin_us
    assert a.uncompressed_bytes == b.uncompressed_bytes


def _events(n_steps: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for s in range(n_steps):
        t = s * 100.0
        events += [
            step(s + 1, t, 90.0),
            op("aten::mm", t + 1, 20, ext=10 + s, **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float"]}),
            launch("cudaLaunchKernel", t + 2, 3, correlation=100 + s, ext=10 + s),
            kernel(f"gemm_{s % 3}", t + 30, 5.5, correlation=100 + s, grid=[2, 3, 4], block=[128, 1, 1]),
            {"ph": "f", "id": 100 + s, "pid": 0, "tid": 7, "ts": t + 30, "cat": "ac2g", "name": "ac2g"},
        ]
    return events


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
@pytest.mark.parametrize("workers", [1, 2])
def test_small_chunks_match_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, workers: int
) -> None:
    path = write_trace(tmp_path / name, _events(40), distributedInfo={"rank": 3, "world_size": 4})
    monkeypatch.setattr(source, "BLOCK_BYTES", 97)  # gunzip output in tiny blocks
    with source.trace_text(path) as text:
        assert text.path is not None and text.gzip == name.endswith(".gz")
        streamed = stream.stream_columns(text.path, chunk_bytes=500, workers=workers)
    assert len(streamed.chunks) > 10  # really cut into many chunks
    assert streamed.metadata["distributedInfo"] == {"rank": 3, "world_size": 4}
    table, tracks, origin, _ = columns.merge_columns(streamed.chunks)
    reference = _whole(path)
    got = Trace(path, table, tracks, None, None, None, origin, streamed.uncompressed_bytes)  # type: ignore[arg-type]
    assert_same_events(got, reference)
    assert len(table) == 160 and table.names.count("gemm_0") == 1


def test_metadata_after_the_events_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "after.json"
    path.write_text(json.dumps({"traceEvents": _events(3), "distributedInfo": {"rank": 5}, "traceName": "x"}))
    trace = load_trace(path, workers=1)
    assert trace.meta.rank == 5 and len(trace.steps) == 3


def test_odd_types_fall_back_to_the_lenient_decoder(tmp_path: Path) -> None:
    events = _events(2)
    events[1] = {**events[1], "ts": "12"}  # a string timestamp: typed decode fails, lenient coerces
    path = write_trace(tmp_path / "odd.json", events)
    with pytest.raises(stream.NotStreamable):
        stream.stream_columns(path)
    trace = load_trace(path)
    assert "odd field types were coerced" in trace.warnings
    assert len(trace.events) == 7  # the event with a string ts is dropped (no timestamp)


def test_cut_off_file_falls_back_to_salvage(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "cut.json", _events(5))
    text = path.read_bytes()
    path.write_bytes(text[: int(len(text) * 0.7)])
    trace = load_trace(path)
    assert trace.truncation.truncated


def test_bare_array_is_not_streamed_but_loads(tmp_path: Path) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(_events(2)))
    assert load_trace(path).meta.format == "chrome-array"


def test_anchor_through_the_process_pool_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    path = anchor("hta/trace_diff/control/control.json.gz")
    reference = load_trace(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 4 << 20)
    monkeypatch.setattr(stream.begin_stream, "__defaults__", (None, 4 << 20, 1))
    pending = begin_load(path, workers=2)
    assert pending.streaming is not None and pending.streaming.forked is not None  # a child is decoding
    pooled = pending.finish()
    assert_same_events(pooled, reference)
    assert pooled.uncompressed_bytes == 34_825_284
    assert pooled.links.launch.tolist() == reference.links.launch.tolist()
    assert pooled.steps.number.tolist() == [1009, 1010, 1011, 1012, 1013, 1014]


def test_big_gzip_input_is_spooled_and_decoded_by_forked_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """One gzip path: gunzipped once to a scratch file (tmpfs, else the temporary directory), then decoded like
    a plain file; with no room anywhere, gunzipped into memory and decoded whole. Same events every way, and
    no process pool or reader thread exists any more (issue 19: the pool path could hang)."""
    assert not hasattr(stream, "_fork_pool") and not hasattr(stream, "_background")
    forked_jobs: list[int] = []
    real_forked = stream.start_forked

    def forked_spy(jobs: list[object], workers: int, *rest: object, **options: object) -> object:
        forked_jobs.append(len(jobs))
        return real_forked(jobs, workers, *rest, **options)  # type: ignore[arg-type]

    folders: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp_spy(**kwargs: str) -> str:
        folders.append(real_mkdtemp(**kwargs))
        return folders[-1]

    monkeypatch.setattr(stream, "start_forked", forked_spy)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp_spy)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 4 << 20)
    monkeypatch.setattr(stream.begin_stream, "__defaults__", (None, 4 << 20, 1))
    path = anchor("hta/trace_diff/control/control.json.gz")
    spooled = load_trace(path, workers=2)
    assert forked_jobs and forked_jobs[0] >= 8  # 34.8 MB in ~4 MB ranges
    assert spooled.source_events == 74_937 and spooled.uncompressed_bytes == 34_825_284  # X events with a ts
    assert folders and not any(Path(folder).exists() for folder in folders)  # the spooled text is removed
    shm_folders = [f for f in folders if f.startswith("/dev/shm/")]
    # no room in tmpfs: the temporary directory; no room anywhere: in memory, decoded whole
    real_usage = source.shutil.disk_usage
    for full in (("/dev/shm",), ("/dev/shm", tempfile.gettempdir())):
        folders.clear()
        forked_jobs.clear()

        def usage(folder: object, full: tuple[str, ...] = full) -> object:
            total, used, free = real_usage(folder)
            return type(real_usage(folder))(total, used, 1 << 20 if str(folder).startswith(full) else free)

        monkeypatch.setattr(source.shutil, "disk_usage", usage)
        again = load_trace(path, workers=2)
        assert_same_events(again, spooled)
        assert not any(Path(folder).exists() for folder in folders)
        assert bool(forked_jobs) == (len(full) == 1)  # spooled to the temp dir: ranges; in memory: whole
        assert not [f for f in folders if f.startswith("/dev/shm/") and Path(f, "trace.json").exists()]
    assert shm_folders or not Path("/dev/shm").is_dir()


def test_unknown_or_missing_phase_falls_back_with_the_same_result(tmp_path: Path) -> None:
    events = _events(3)
    events.insert(2, {"ph": "Z", "name": "future phase", "pid": 1, "tid": 1, "ts": 5})
    events.insert(4, {"name": "no phase", "pid": 1, "tid": 1, "ts": 6, "dur": 1})
    path = write_trace(tmp_path / "odd_phase.json", events)
    with pytest.raises(stream.NotStreamable):
        stream.stream_columns(path)
    trace = load_trace(path)
    assert_same_events(trace, _whole(path))
    assert len(trace.events) == 12  # neither the unknown phase nor the event without "ph" is a complete event


def test_decoded_events_may_outlive_the_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sampling profiler (Dask's) can hold frames whose events reference the chunk buffer (Raw args)."""
    held: list[object] = []
    real = stream.columnize

    def holding(events: list[object], complete_type: type | None = None) -> object:
        held.append(events)
        return real(events, complete_type)

    monkeypatch.setattr(stream, "columnize", holding)
    path = write_trace(tmp_path / "t.json", _events(5))
    streamed = stream.stream_columns(path, workers=1)
    assert sum(len(c) for c in streamed.chunks) == 20 and held


def test_ranges_are_balanced_over_the_workers() -> None:
    mb = 1 << 20
    # 72 MB over 2 workers with 16 MB ranges: 6 ranges of 12 MB (3 rounds), not 4 x 16 + 8
    assert stream.balanced_chunk_bytes(72 * mb, 16 * mb, 2) == 12 * mb
    assert stream.balanced_chunk_bytes(72 * mb, 16 * mb, 1) == 16 * mb  # one process: as asked
    assert stream.balanced_chunk_bytes(10 * mb, 16 * mb, 4) == math.ceil(10 * mb / 4)
    assert stream.balanced_chunk_bytes(0, 16 * mb, 2) == 16 * mb


def test_a_plain_file_is_cut_into_equal_ranges_per_worker(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _events(3000)}))
    started = stream.begin_stream(path, chunk_bytes=path.stat().st_size // 5, workers=2)
    assert started.forked is not None and started.forked.processes == 2  # one child, and this process
    streamed = started.finish()
    sizes = [len(chunk) for chunk in streamed.chunks]
    assert len(sizes) == 2 * 3  # 5 ranges' worth of bytes become 3 rounds of 2 equal ranges
    alone = stream.begin_stream(path, chunk_bytes=path.stat().st_size // 5)
    assert alone.forked is None and sum(len(chunk) for chunk in alone.finish().chunks) == 4 * 3000  # no child
    assert sum(sizes) == 4 * 3000  # every complete event, once
    assert max(sizes) <= 1.03 * min(sizes)  # equal bytes; events differ a little in length


def test_gzip_size_is_guessed_from_the_trailer(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    text = json.dumps({"traceEvents": _events(3000)}).encode()
    path.write_bytes(gzip.compress(text))
    assert source._gzip_text_bytes(path, path.stat().st_size) == len(text)
    with source.trace_text(path) as spooled:
        assert spooled.size == len(text) and not spooled.gzip_truncated
        assert spooled.path is not None and spooled.path.read_bytes() == text
        streamed = stream.stream_columns(spooled.path, chunk_bytes=len(text) // 5, workers=2)
    assert not spooled.path.exists()
    sizes = [len(chunk) for chunk in streamed.chunks]
    assert len(sizes) == 6  # 3 rounds of 2 equal ranges
    assert sum(sizes) == 4 * 3000
    assert max(sizes) <= 1.03 * min(sizes)


def _auto_workers_here(_: object) -> int:
    return forked.auto_workers()


def test_a_multiprocessing_worker_decodes_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-rank loads run in pool workers: they must not fork decoders of their own."""
    import multiprocessing

    monkeypatch.delenv("TRACELENS_WORKERS", raising=False)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_auto_workers_here, (None,)) == 1
    monkeypatch.setenv("TRACELENS_WORKERS", "1")
    assert forked.auto_workers() == 1


def test_threads_decoding_at_once_each_read_their_own_text(tmp_path: Path) -> None:
    """Decoding in-process reuses a text buffer per thread, never one shared by threads that load at once."""
    import threading

    paths = [write_trace(tmp_path / f"t{k}.json", _events(30 + 7 * k)) for k in range(4)]
    expected = [columns.merge_columns(stream.stream_columns(p, chunk_bytes=400, workers=1).chunks) for p in paths]
    got: dict[int, object] = {}
    start = threading.Barrier(len(paths))

    def load(k: int) -> None:
        start.wait()
        for _ in range(5):
            got[k] = columns.merge_columns(stream.stream_columns(paths[k], chunk_bytes=400, workers=1).chunks)

    threads = [threading.Thread(target=load, args=(k,)) for k in range(len(paths))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k, (table, tracks, origin, _) in enumerate(expected):
        other_table, other_tracks, other_origin, _ = got[k]  # type: ignore[misc]
        assert other_table.names == table.names and other_origin == origin and other_tracks.pid == tracks.pid
        assert other_table.ts_ns.tolist() == table.ts_ns.tolist() and other_table.name.tolist() == table.name.tolist()
