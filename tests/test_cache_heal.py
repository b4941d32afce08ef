"""A cache that verifies and heals (issue #19, item 5): every failure the attack found, reproduced.

A damaged entry (truncated, bit-flipped, swapped from another key, `[]`, garbage, empty) is detected by its
checksum, deleted with one `tracelens: warning:` line, rebuilt, and never changes the output; a file edited in
place with the same size and mtime, or replaced by a `mv`, is noticed; huge integers are cached; entries are
fsync'd before they are renamed into place.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cache_helpers import WARNING, make_cache, no_decoding
from tests.conftest import TRACES, kernel, launch, one_gemm_trace, op, step, unwrapped, write_trace
from tracelens._cache import Cache
from tracelens.cli import main

Damage = Callable[[Path, Path], None]  # (the entry, another entry of the same kind)


def _truncate(entry: Path, other: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _flip_a_bit(entry: Path, other: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[len(data) * 3 // 4] ^= 0x10
    entry.write_bytes(bytes(data))


def _swap(entry: Path, other: Path) -> None:
    shutil.copyfile(other, entry)  # a whole, valid entry of another key


def _empty_list(entry: Path, other: Path) -> None:
    entry.write_bytes(b"[]")


def _empty(entry: Path, other: Path) -> None:
    entry.write_bytes(b"")


def _zip(entry: Path, other: Path) -> None:
    entry.write_bytes(b"PK\x03\x04" + os.urandom(200))  # what an .npz entry of 0.1 began with


DAMAGES = [_truncate, _flip_a_bit, _swap, _empty_list, _empty, _zip]


def _run(capsys: pytest.CaptureFixture[str], cache: Cache, *argv: str) -> tuple[str, str]:
    assert main(list(argv), cache=cache) == 0
    captured = capsys.readouterr()
    return captured.out, unwrapped(captured.err)  # each warning on one line


def _two_traces(folder: Path) -> tuple[Path, Path]:
    return one_gemm_trace(folder, "a.json"), one_gemm_trace(folder, "b.json", kernel_us=6)


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__.strip("_"))
def test_a_damaged_trace_entry_is_deleted_rebuilt_and_never_trusted(
    damage: Damage, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_traces(tmp_path)
    cache = make_cache(tmp_path / "cache")
    argv = ("analyze", str(first), "--format", "json", "--no-cache")
    fresh = _run(capsys, make_cache(tmp_path / "unused"), *argv)
    for path in (second, first):
        _run(capsys, cache, "analyze", str(path), "--format", "json")
    shutil.rmtree(cache.folder / "analyses")  # so that the trace entries serve
    entries = sorted((cache.folder / "traces").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    other, entry = entries  # `first`'s entry was written last
    damage(entry, other)
    out, err = _run(capsys, cache, *argv[:-1])
    assert out == fresh[0]
    assert err.count("\n") == 1 and err.startswith(f"{WARNING}{entry} is damaged (")
    assert err.endswith("): deleted, recomputing\n")
    assert entry.exists()  # rebuilt
    shutil.rmtree(cache.folder / "analyses")
    no_decoding(monkeypatch)
    assert _run(capsys, cache, *argv[:-1]) == fresh  # from the rebuilt entry, silently


@pytest.mark.parametrize("damage", [*DAMAGES, "digit"], ids=lambda d: d if isinstance(d, str) else d.__name__[1:])
def test_a_damaged_result_entry_is_deleted_rebuilt_and_never_trusted(
    damage: Damage | str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _two_traces(tmp_path)
    cache = make_cache(tmp_path / "cache")
    other_out = _run(capsys, cache, "analyze", str(second), "--format", "json")
    fresh = _run(capsys, cache, "analyze", str(first), "--format", "json")
    assert other_out != fresh
    entries = sorted((cache.folder / "analyses").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    other, entry = entries
    if damage == "digit":  # change a figure inside the record: "total_us" 5.0 -> another float
        data = entry.read_bytes()
        index = data.index(b"total_us") + len(b"total_us") + 1  # msgpack float64 after its key
        entry.write_bytes(data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :])
    else:
        assert callable(damage)
        damage(entry, other)
    out, err = _run(capsys, cache, "analyze", str(first), "--format", "json")
    assert out == fresh[0]
    assert err == f"{WARNING}{entry} is damaged ({err.split(' is damaged (')[1]}" and err.count("\n") == 1
    assert _run(capsys, cache, "analyze", str(first), "--format", "json") == fresh  # rebuilt, no warning


def test_a_damaged_file_memo_is_deleted_and_the_file_hashed_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = one_gemm_trace(tmp_path)
    cache = make_cache(tmp_path / "cache")
    fresh = _run(capsys, cache, "analyze", str(path), "--format", "json")
    (memo,) = (cache.folder / "paths").iterdir()
    memo.write_bytes(memo.read_bytes().replace(b"content_key", b"content_kez"))
    out, err = _run(capsys, cache, "analyze", str(path), "--format", "json")
    assert out == fresh[0] and err.startswith(f"{WARNING}{memo} is damaged (checksum mismatch)")
    assert _run(capsys, cache, "analyze", str(path), "--format", "json") == fresh


def test_a_directory_in_place_of_an_entry_is_deleted_and_the_result_cached_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 6: a directory (with files in it) where an entry belongs was reported "deleted,
    recomputing" on every run and never deleted, so the result was never cached again."""
    path = one_gemm_trace(tmp_path)
    cache = make_cache(tmp_path / "cache")
    fresh = _run(capsys, cache, "analyze", str(path), "--format", "json")
    (entry,) = (cache.folder / "analyses").iterdir()
    entry.unlink()
    entry.mkdir()
    (entry / "inside").write_text("x")
    out, err = _run(capsys, cache, "analyze", str(path), "--format", "json")
    assert out == fresh[0] and err == f"{WARNING}{entry} is damaged (not a regular file): deleted, recomputing\n"
    assert entry.is_file()  # deleted, and the result stored again
    no_decoding(monkeypatch)
    assert _run(capsys, cache, "analyze", str(path), "--format", "json") == fresh  # served, no warning


def test_an_entry_that_cannot_be_deleted_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = one_gemm_trace(tmp_path)
    cache = make_cache(tmp_path / "cache")
    fresh = _run(capsys, cache, "analyze", str(path), "--format", "json")
    (entry,) = (cache.folder / "analyses").iterdir()
    entry.unlink()
    entry.mkdir()
    monkeypatch.setattr(shutil, "rmtree", lambda path: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    out, err = _run(capsys, cache, "analyze", str(path), "--format", "json")
    assert out == fresh[0]
    assert err == (
        f"{WARNING}{entry} is damaged (not a regular file) and cannot be deleted (Permission denied); "
        "recomputing without the cache\n"
    )


def test_prune_to_zero_deletes_what_took_an_entrys_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32 item 6: `cache prune --max-size 0` said it deleted a directory in place of an entry, and did not."""
    path = one_gemm_trace(tmp_path)
    cache = make_cache(tmp_path / "cache")
    _run(capsys, cache, "analyze", str(path), "--format", "json")
    (entry,) = (cache.folder / "analyses").iterdir()
    entry.unlink()
    entry.mkdir()
    (entry / "inside").write_text("x")
    _, err = _run(capsys, cache, "cache", "prune", "--max-size", "0")
    assert not entry.exists() and list((cache.folder / "analyses").iterdir()) == []
    assert not [p for p in cache.folder.rglob("*") if p.is_file()]  # the cache is empty, as it says
    assert " 0 left (" in err


def _gemm_events(kernel_us: float) -> list[dict[str, object]]:
    return [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, kernel_us, correlation=70),
    ]


def test_an_in_place_edit_keeping_size_and_mtime_is_noticed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.json", _gemm_events(5))
    cache = make_cache(tmp_path / "cache")
    before = _run(capsys, cache, "analyze", str(path), "--format", "json")[0]
    assert '"total_us": 5.0' in before
    stat = path.stat()
    data = path.read_bytes()
    edited = data.replace(b'"dur": 5,', b'"dur": 7,')
    assert len(edited) == len(data) and edited != data
    with path.open("r+b") as handle:  # in place: same inode
        handle.write(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ino,
    )
    after = _run(capsys, cache, "analyze", str(path), "--format", "json")[0]
    assert '"total_us": 7.0' in after


def test_a_file_moved_over_the_path_with_the_same_size_and_mtime_is_noticed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "t.json", _gemm_events(5))
    cache = make_cache(tmp_path / "cache")
    assert '"total_us": 5.0' in _run(capsys, cache, "analyze", str(path), "--format", "json")[0]
    stat = path.stat()
    replacement = write_trace(tmp_path / "new.json", _gemm_events(7))
    assert replacement.stat().st_size == stat.st_size
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    replacement.rename(path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert '"total_us": 7.0' in _run(capsys, cache, "analyze", str(path), "--format", "json")[0]


# ---------------------------------------------------------------- what used to crash or go unsaved


def test_a_rank_of_2_to_the_70_is_cached(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "t.json", _gemm_events(5), distributedInfo={"rank": 2**70, "world_size": 2**71})
    cache = make_cache(tmp_path / "cache")
    first = _run(capsys, cache, "analyze", str(path), "--format", "json")
    # the loader keeps a rank beyond 64 bits as unknown, with a warning; the result is cached all the same
    assert '"rank": null' in first[0] and "rank" in first[1]
    assert len(list((cache.folder / "analyses").iterdir())) == 1
    assert len(list((cache.folder / "traces").iterdir())) == 1
    assert _run(capsys, cache, "analyze", str(path), "--format", "json") == first
    shutil.rmtree(cache.folder / "analyses")
    assert _run(capsys, cache, "analyze", str(path), "--format", "json") == first  # from the trace entry


def test_entries_are_fsynced_before_they_are_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "replace", lambda a, b: (events.append(f"replace {Path(b).parent.name}"), real_replace(a, b))[1]
    )
    cache = make_cache(tmp_path / "cache")
    cache.load_trace(TRACES / "h200" / "eager_mlp.json.gz")
    renames = [i for i, e in enumerate(events) if e.startswith("replace")]
    assert [events[i] for i in renames] == ["replace paths", "replace traces"]
    assert all(events[i - 1] == "fsync" for i in renames)  # the file's data is on disk before it gets its name


def test_a_fifo_or_a_link_to_a_device_in_place_of_an_entry_is_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = _two_traces(tmp_path)
    cache = make_cache(tmp_path / "cache")
    fresh = {path: _run(capsys, cache, "analyze", str(path), "--format", "json") for path in (first, second)}
    entries = sorted((cache.folder / "analyses").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    entries[0].unlink()
    os.mkfifo(entries[0])
    entries[1].unlink()
    entries[1].symlink_to("/dev/zero")
    for path in (first, second):
        out, err = _run(capsys, cache, "analyze", str(path), "--format", "json")
        assert out == fresh[path][0] and "is damaged (not a regular file): deleted, recomputing" in err
    assert all(entry.is_file() and not entry.is_symlink() for entry in entries)  # rebuilt


def test_every_quarter_of_a_big_entry_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Big entries are hashed in parallel quarters: a flipped byte in any of them is found."""
    cache = make_cache(tmp_path / "cache")
    blob = os.urandom(6 << 20)
    entry = cache.folder / "traces" / ("a" * 40 + ".trace")
    for quarter in range(4):
        assert cache.write(f"traces/{entry.name}", {"kind": "test"}, [blob])
        header, blobs = cache.read(f"traces/{entry.name}") or ({}, [])
        assert header["kind"] == "test" and blobs[0] == blob
        data = bytearray(entry.read_bytes())
        data[len(data) * quarter // 4 + len(data) // 8] ^= 0x01
        entry.write_bytes(bytes(data))
        assert cache.read(f"traces/{entry.name}") is None
        assert "checksum mismatch" in capsys.readouterr().err and not entry.exists()


def test_a_killed_writers_temporary_file_is_swept_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32 item 7: a writer killed mid-write leaves `.NAME.PID.tracelens-tmp`; the next command that uses
    the cache deletes it, in any folder of the cache, even when that command writes nothing (a cache hit), and
    even when the pid has since been reused (untouched for over an hour)."""
    path = one_gemm_trace(tmp_path)
    cache = make_cache(tmp_path / "cache")
    fresh = _run(capsys, cache, "analyze", str(path), "--format", "json")
    (cache.folder / "traces").mkdir(exist_ok=True)
    child = os.fork()
    if child == 0:  # pragma: no cover - a process that exits at once: its pid is then free
        os._exit(0)
    os.waitpid(child, 0)
    dead = cache.folder / "traces" / f".{'a' * 64}.trace.{child}.tracelens-tmp"
    reused = cache.folder / "analyses" / f".{'b' * 64}.msgpack.1.tracelens-tmp"  # pid 1 is alive
    recent = cache.folder / "analyses" / f".{'c' * 64}.msgpack.1.tracelens-tmp"  # may still be being written
    for leftover in (dead, reused, recent):
        leftover.write_bytes(b"half an entry")
    two_hours_ago = time.time() - 7200
    os.utime(reused, (two_hours_ago, two_hours_ago))
    assert _run(capsys, make_cache(cache.folder), "analyze", str(path), "--format", "json") == fresh  # a hit
    assert not dead.exists() and not reused.exists() and recent.exists()
