"""The model's serialization and the trace cache: every field of every table survives the round trip on every real
trace we have, and `analyze`, `report` and `annotate` give byte-identical output with the cache off, cold and
warm (issue #13: `annotate` from the cache used to put findings on the wrong events)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import anchors
from tests.cache_helpers import assert_same, make_cache, no_decoding
from tests.conftest import TRACES, anchor, anchor_traces, kernel, launch, op, step, write_trace
from tracelens._cache import Cache
from tracelens._cache.traces import read_trace
from tracelens.cli import main
from tracelens.loader import PendingLoad, load_trace
from tracelens.model.serial import from_plain, to_plain
from tracelens.model.trace import Trace
from tracelens.records import field_names

RECORDED = anchors.recorded(TRACES)
REAL_TRACES = [*anchor_traces(), *RECORDED]


def _label(path: Path) -> str:
    return path.name


# ---------------------------------------------------------------- the model's own serialization


@functools.cache
def _loaded(path: Path) -> Trace:
    return load_trace(path, workers=1)


@pytest.mark.parametrize("path", REAL_TRACES, ids=_label)
def test_every_field_of_every_table_round_trips(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain form and back, and through a cache entry on disk: equal in every field (compared generically)."""
    trace = _loaded(path)
    assert trace.source_rows is not None and trace.source_events >= len(trace.events)  # the fields #13 lost
    arrays, values = trace.to_plain()
    assert all(array.dtype != object for array in arrays.values())
    compared = assert_same(trace, Trace.from_plain(arrays, values))
    assert compared > len(field_names(Trace)) + 30  # leaves of every table, not just the top level
    cache = make_cache(tmp_path / "cache")
    cache.load_trace(path, workers=1)
    no_decoding(monkeypatch)
    assert_same(trace, cache.load_trace(path))


@dataclasses.dataclass(frozen=True)
class _Inner:
    flag: bool
    codes: np.ndarray
    raw: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Outer:
    inners: tuple[_Inner, ...]
    maybe: np.ndarray | None
    where: Path | None
    big: int
    ratio: float
    extra: dict[str, object]
    added_later: str = "new field"


def test_a_new_field_is_carried_without_being_listed_anywhere() -> None:
    raw = np.array([b"x", None, b"", b"\xff"], dtype=object)
    inner = _Inner(True, np.arange(3, dtype=np.int8), raw)
    value = _Outer((inner, inner), None, Path("/t"), 2**70, float("nan"), {"a": [1, None, "\ud800"]}, "set")
    arrays, values = to_plain(value)
    assert values["added_later"] == "set"
    assert_same(value, from_plain(_Outer, arrays, values))


def test_a_field_that_cannot_be_carried_is_an_error_not_a_loss() -> None:
    @dataclasses.dataclass(frozen=True)
    class Odd:
        items: set[int]

    with pytest.raises(TypeError, match="items"):
        to_plain(Odd({1}))

    @dataclasses.dataclass(frozen=True)
    class Mistyped:
        value: float

    with pytest.raises(TypeError, match="value"):
        to_plain(Mistyped(1))  # type: ignore[arg-type]  # an int would come back an int, printed differently
    objects = _Inner(True, np.zeros(1), np.array(["text"], dtype=object))
    with pytest.raises(TypeError, match="raw"):
        to_plain(objects)


# ---------------------------------------------------------------- every result type can be cached

RECORD_TYPES = {"analyses": "CachedAnalysis", "documents": "CachedDocument", "pages": "CachedPage"}


def test_every_kind_of_result_the_commands_cache_is_tested_below() -> None:
    sources = "".join(p.read_text() for p in (Path(__file__).parents[1] / "tracelens" / "cli").glob("*.py"))
    assert set(re.findall(r"lookup_result\(\s*\"(\w+)\"", sources)) == set(RECORD_TYPES)


@pytest.mark.parametrize("path", REAL_TRACES, ids=_label)
def test_every_result_type_round_trips_exactly(path: Path) -> None:
    """A result that would not come back identical is not stored, silently: here that is a failure."""
    from tracelens._cache.results import encode_exactly
    from tracelens.analyses import analyze
    from tracelens.analyses.record import CachedAnalysis
    from tracelens.hypotheses.document import CachedDocument, check_document

    trace = _loaded(path)
    steps = [None, int(trace.steps.number[0])] if trace.steps.source == "ProfilerStep" else [None]
    for step_number in steps:
        record = CachedAnalysis(analyze(trace, step=step_number), trace.warnings)
        assert encode_exactly(record, CachedAnalysis) is not None, step_number
        document = CachedDocument(check_document(trace, step_number), trace.warnings)
        assert encode_exactly(document, CachedDocument) is not None, step_number


@pytest.mark.parametrize("paths", [RECORDED[:1], RECORDED[:3]], ids=["one", "three"])
def test_report_pages_round_trip_exactly(paths: list[Path], tmp_path: Path) -> None:
    from tracelens._cache.results import encode_exactly
    from tracelens.cli.report import CachedPage, _build_page

    page = _build_page(paths, None, None, make_cache(tmp_path / "cache"))
    assert encode_exactly(page, CachedPage) is not None


# ---------------------------------------------------------------- the trace cache


def test_second_load_comes_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = anchor("other/facebookresearch__param/resnet_kineto.json.gz")
    cache = make_cache(tmp_path / "cache")
    first = cache.load_trace(path)
    assert [p.suffix for p in (tmp_path / "cache" / "traces").iterdir()] == [".trace"]
    no_decoding(monkeypatch)
    second = cache.load_trace(path)
    assert_same(first, second)
    assert second.path == path
    assert second.events.ts_ns.flags.writeable  # arrays over the entry's bytes, as writable as decoded ones


def test_raw_args_survive_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7, **{"Input Dims": [[2, 3], [3, 4]], "Concrete Inputs": ["", "1"]}),
        op("aten::t", 2, 2, ext=8),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, 5, correlation=70, grid=[4, 1, 1]),
    ]
    path = write_trace(tmp_path / "t.json", events)
    cache = make_cache(tmp_path / "cache")
    first = cache.load_trace(path)
    no_decoding(monkeypatch)
    second = cache.load_trace(path)
    assert_same(first, second)
    dims = second.events.input_dims.tolist()
    assert dims[1] == b"[[2, 3], [3, 4]]" and dims.count(None) == 4


def test_small_traces_are_not_stored_by_default(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    cache = Cache(tmp_path / "cache")
    cache.load_trace(path)
    assert not (tmp_path / "cache" / "traces").exists()
    assert len(list((tmp_path / "cache" / "paths").iterdir())) == 1  # its content key is remembered


def test_no_cache_and_changed_files_decode_again(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    folder = tmp_path / "cache"
    make_cache(folder).disabled().load_trace(path)
    assert not folder.exists()
    cache = make_cache(folder)
    cache.load_trace(path)
    key = cache.content_key(path)
    write_trace(path, [step(1, 0, 50), op("aten::mm", 1, 20), op("aten::add", 30, 5)])
    assert cache.content_key(path) != key
    assert len(cache.load_trace(path).events) == 3


def test_unwritable_cache_folder_does_not_break_loading(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    assert len(make_cache(blocker / "cache").load_trace(path).events) == 2


def test_default_location_and_switches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TRACELENS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("TRACELENS_NO_CACHE", raising=False)
    cache = Cache.from_environment()
    assert (cache.folder, cache.enabled, cache.max_bytes) == (tmp_path / "tracelens", True, 2 << 30)
    monkeypatch.setenv("TRACELENS_NO_CACHE", "1")
    monkeypatch.setenv("TRACELENS_CACHE_MAX_SIZE", "500M")
    cache = Cache.from_environment()
    assert (cache.enabled, cache.max_bytes) == (False, 500 << 20)


def test_changed_code_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracelens._cache.keys as keys

    path = write_trace(tmp_path / "t.json", [step(1, 0, 50), op("aten::mm", 1, 20)])
    cache = make_cache(tmp_path / "cache")
    cache.load_trace(path)
    key = cache.known_content_key(path)
    assert key is not None and read_trace(cache, key, path) is not None
    monkeypatch.setattr(keys, "code_fingerprint", lambda: "other code")
    assert read_trace(cache, key, path) is None  # another entry name: never read
    assert cache.known_content_key(path) == key  # a file's content key does not depend on the code


def test_a_new_file_is_hashed_while_it_decodes_not_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracelens._cache.traces as traces

    path = anchor("other/facebookresearch__param/resnet_kineto.json.gz")
    cache = make_cache(tmp_path / "cache")
    order: list[str] = []
    real_begin, real_key = traces.begin_decode, Cache.content_key

    class Pending:
        def __init__(self, pending: PendingLoad) -> None:
            self.pending = pending

        def finish(self) -> Trace:
            order.append("finishing")
            return self.pending.finish()

        def close(self) -> None:
            self.pending.close()

    def begin(path: Path, progress: object = None, workers: object = None) -> Pending:
        order.append("decoding")
        return Pending(real_begin(path, workers=1))

    def key(self: Cache, path: Path, identity: str | None = None) -> str | None:
        order.append("hashing")
        return real_key(self, path, identity)

    monkeypatch.setattr(traces, "begin_decode", begin)
    monkeypatch.setattr(Cache, "content_key", key)
    first = cache.load_trace(path)
    assert order == ["decoding", "hashing", "finishing"]
    assert cache.known_content_key(path) is not None  # remembered for the next command
    no_decoding(monkeypatch)
    assert_same(first, cache.load_trace(path))


def test_the_command_writes_a_big_traces_entry_before_it_exits(tmp_path: Path) -> None:
    """`tracelens` (the console entry) writes a big trace's entry after printing its output, before it exits."""
    path = anchor("hta/trace_diff/control/control.json.gz")  # 35 MB of JSON: over the size threshold
    folder = tmp_path / "cache"
    command = [sys.executable, "-m", "tracelens", "analyze", str(path), "--format", "json"]
    env = dict(os.environ, TRACELENS_CACHE_DIR=str(folder))
    first = subprocess.run(command, capture_output=True, env=env, timeout=300, check=True)
    (entry,) = (folder / "traces").iterdir()
    assert entry.stat().st_size > 1_000_000  # complete when the command has exited
    cache = make_cache(folder)
    key = cache.known_content_key(path)
    assert key is not None
    trace = read_trace(cache, key, path)
    assert trace is not None and len(trace.events) == 74_937
    again = subprocess.run([*command, "--no-cache"], capture_output=True, env=env, timeout=300, check=True)
    assert again.stdout == first.stdout and first.stderr == again.stderr == b""


# ---------------------------------------------------------------- byte-identical outputs: off, cold, warm


def _outputs(path: Path, folder: Path, tmp: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> list[bytes]:
    """`analyze --format json`, `analyze` (text), `report` and `annotate` of `path` with a cache in `folder`."""
    cache = make_cache(folder)
    outputs = []
    for argv in (["analyze", str(path), "--format", "json"], ["analyze", str(path)]):
        assert main([*argv, *flags], cache=cache) == 0
        outputs.append(capsys.readouterr().out.encode())
    for command, name in (("report", "page.html"), ("annotate", "annotated.json")):
        target = tmp / name
        assert main([command, str(path), "-o", str(target), "--force", *flags], cache=cache) == 0
        outputs.append(target.read_bytes())
        capsys.readouterr()
    return outputs


ANNOTATED = [TRACES / "h200" / "eager_mlp.json.gz", TRACES / "h200" / "liger_mlp.json.gz"]


@pytest.mark.slow
@pytest.mark.parametrize("path", ANNOTATED, ids=_label)
def test_outputs_are_identical_with_the_cache_off_cold_and_warm(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    off = _outputs(path, folder, tmp_path, capsys, "--no-cache")
    assert not folder.exists()
    cold = _outputs(path, folder, tmp_path, capsys)
    for kind in ("analyses", "pages"):  # the trace entry, not the finished results, serves what follows
        shutil.rmtree(folder / kind)
    with monkeypatch.context() as patch:
        no_decoding(patch)
        from_trace_entry = _outputs(path, folder, tmp_path, capsys)
        warm = _outputs(path, folder, tmp_path, capsys)
    assert cold == off and from_trace_entry == off and warm == off
    assert b"tracelens launched by" in off[3]


def test_annotate_from_the_cache_puts_findings_on_the_right_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case of issue #13: eager_mlp with every trace cached; 33 of its 35 annotated kernels got another
    op as their launcher when `source_rows` was not stored. Checked against the file itself: a kernel's
    launcher is the CPU op with the kernel's `External id`."""
    path = TRACES / "h200" / "eager_mlp.json.gz"
    cache = make_cache(tmp_path / "cache")
    for run in range(2):
        if run:
            no_decoding(monkeypatch)  # the second run's trace comes from the cache
        target = tmp_path / f"{run}.json"
        assert main(["annotate", str(path), "-o", str(target)], cache=cache) == 0
        assert "35 events annotated" in capsys.readouterr().err
        events = json.loads(target.read_bytes())["traceEvents"]
        ops: dict[object, set[str]] = {}
        for event in events:
            if event.get("cat") == "cpu_op" and "External id" in event.get("args", {}):
                ops.setdefault(event["args"]["External id"], set()).add(event["name"])
        launched = [
            (event["args"]["tracelens launched by"], ops.get(event["args"].get("External id"), set()))
            for event in events
            if "tracelens launched by" in event.get("args", {})
        ]
        assert len(launched) == 35 and all(op in candidates for op, candidates in launched)
