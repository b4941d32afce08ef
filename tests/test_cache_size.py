"""The cache's size: `tracelens cache info` and `prune`, and the cap with least-recently-used eviction after
every write, so a long-lived machine never fills up silently (issue #13)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.cache_helpers import make_cache
from tests.conftest import one_gemm_trace, run_cli
from tracelens._cache import Cache, parse_size
from tracelens.cli import main
from tracelens.errors import TracelensError


def _sizes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def _age(path: Path, seconds_ago: float) -> None:
    when = time.time() - seconds_ago
    os.utime(path, (when, when))


def test_parse_size() -> None:
    assert [parse_size(s) for s in ("0", "1024", "2G", "2GiB", "500m", "1.5k", " 3 MB ")] == [
        0,
        1024,
        2 << 30,
        2 << 30,
        500 << 20,
        1536,
        3 << 20,
    ]
    for bad in ("", "-1", "2X", "G", "1e9", "nan"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)


def test_writes_evict_the_least_recently_used_entries_over_the_cap(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    cache = make_cache(folder)
    names = [f"{i:040x}.msgpack" for i in range(4)]
    for age, name in zip((40, 30, 20, 10), names, strict=True):
        assert cache.write(f"analyses/{name}", {"kind": "analyses"}, [b"x" * 1000])
        _age(folder / "analyses" / name, age)
    assert cache.read(f"analyses/{names[0]}") is not None  # a hit: now the most recently used
    entry_bytes = (folder / "analyses" / names[0]).stat().st_size
    capped = make_cache(folder, max_bytes=3 * entry_bytes)
    assert capped.write(f"documents/{'f' * 40}.msgpack", {"kind": "documents"}, [b"y" * 1000])
    assert sorted(_sizes(folder)) == [f"analyses/{names[0]}", f"analyses/{names[3]}", f"documents/{'f' * 40}.msgpack"]
    tiny = make_cache(folder, max_bytes=1)
    assert tiny.write(f"pages/{'e' * 40}.msgpack", {"kind": "pages"}, [b"z" * 5000])  # bigger than the cap
    assert sorted(_sizes(folder)) == [f"pages/{'e' * 40}.msgpack"]  # what was just written stays


def test_eviction_never_touches_files_that_are_not_entries(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "analyses").mkdir()
    (folder / "analyses" / "README").write_text("mine too")
    cache = make_cache(folder, max_bytes=0)
    cache.write(f"analyses/{'a' * 40}.msgpack", {}, [b"x"])
    cache.prune(0)
    assert sorted(_sizes(folder)) == ["analyses/README", "notes.txt"]


def test_the_cap_applies_to_what_commands_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = [one_gemm_trace(tmp_path, f"t{i}.json", kernel_us=i + 1) for i in range(3)]
    folder = tmp_path / "cache"
    for path in traces:
        assert main(["analyze", str(path), "--format", "json"], cache=make_cache(folder)) == 0
    capsys.readouterr()
    total = sum(_sizes(folder).values())
    one_result = max(size for name, size in _sizes(folder).items() if name.startswith("analyses/"))
    cache = make_cache(folder, max_bytes=total - one_result)
    assert main(["analyze", str(traces[0]), "--format", "json", "--step", "1"], cache=cache) == 0
    assert sum(_sizes(folder).values()) <= total - one_result


def test_cache_info_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_dir: Path) -> None:
    path = one_gemm_trace(tmp_path)
    out, _ = run_cli(capsys, "cache", "info")
    assert out.startswith(f"cache folder: {cache_dir} (on)\nsize cap:     2.0 GiB")
    assert out.splitlines()[-1].split() == ["total", "0", "0", "B"]
    run_cli(capsys, "analyze", str(path))
    run_cli(capsys, "check", str(path), "--expect", str(_hypotheses(tmp_path)), "--format", "json")
    document = json.loads(run_cli(capsys, "cache", "info", "--format", "json")[0])
    kinds = {kind["name"]: kind["entries"] for kind in document["kinds"]}
    assert kinds == {"analyses": 1, "documents": 1, "paths": 1}
    assert document["bytes"] == sum(_sizes(cache_dir).values()) and document["version"] == 1
    text = run_cli(capsys, "cache", "info")[0]
    assert all(len(line) <= 80 for line in text.splitlines()[1:])  # the first names the folder
    out, err = run_cli(capsys, "cache", "prune")
    assert out == "" and err.startswith("Deleted 0 cache files (0 B); 3 left")
    out, err = run_cli(capsys, "cache", "prune", "--max-size", "0")
    assert err.startswith("Deleted 3 cache files") and _sizes(cache_dir) == {}
    assert main(["cache", "prune", "--max-size", "lots"]) == 2
    assert capsys.readouterr().err.startswith("tracelens: error: --max-size: not a size: 'lots'")


def test_a_bad_cap_in_the_environment_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELENS_CACHE_MAX_SIZE", "big")
    with pytest.raises(TracelensError, match="TRACELENS_CACHE_MAX_SIZE: not a size"):
        Cache.from_environment()


def test_every_command_that_reads_a_trace_has_no_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = one_gemm_trace(tmp_path)
    folder = tmp_path / "cache"
    for argv in (
        ["analyze", str(path)],
        ["compare", str(path), str(path)],
        ["check", str(path), "--expect", str(_hypotheses(tmp_path))],
        ["report", str(path), "-o", str(tmp_path / "r.html"), "--force"],
        ["annotate", str(path), "-o", str(tmp_path / "a.json"), "--force"],
    ):
        assert main([*argv, "--no-cache"], cache=make_cache(folder)) in (0, 1), argv
        assert not folder.exists(), argv
    capsys.readouterr()


def _hypotheses(folder: Path) -> Path:
    path = folder / "h.toml"
    path.write_text('[[hypothesis]]\nname = "one"\nmetric = "per_step.kernels"\nop = "=="\nvalue = 1\n')
    return path


def test_entries_of_earlier_versions_are_counted_and_pruned_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    legacy = ["0" * 40 + ".npz", "0" * 40 + ".json", "." + "1" * 40 + ".abc123.npz.tmp"]
    for name in legacy:
        (folder / name).write_bytes(b"PK\x03\x04 old entry")
    path = one_gemm_trace(tmp_path)
    cache = make_cache(folder)
    assert main(["analyze", str(path), "--format", "json"], cache=cache) == 0
    assert capsys.readouterr().err == ""  # old entries are never read, so never "damaged"
    info = cache.info()
    assert {use.name: use.entries for use in info.folders}["(earlier versions)"] == 3
    cache.prune(info.bytes - sum(len(b"PK\x03\x04 old entry") for _ in legacy))  # the oldest go first
    assert not any((folder / name).exists() for name in legacy)


def test_prune_of_a_read_only_cache_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache whose entries cannot be deleted (read-only; simulated, as root may delete anything): `cache
    prune` says so in one error line, exit 2, and counts what is left (it said "Deleted 0" and exited 0)."""
    import tracelens._cache as cache_module

    run_cli(capsys, "analyze", str(one_gemm_trace(tmp_path)))
    before = _sizes(cache_dir)
    assert before

    def refuse(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_module, "remove_entry", refuse)
    _, err = run_cli(capsys, "cache", "prune", "--max-size", "0", expect=2)
    errors = [line for line in err.splitlines() if line.startswith("tracelens: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"could not delete {len(before)} cache files" in errors[0] and "Permission denied" in errors[0]
    assert _sizes(cache_dir) == before
