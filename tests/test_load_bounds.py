"""The loader's promises on hostile input (issue 19): bounded work, no hang on devices or FIFOs, workers
validated, forked children that cannot inherit the command's signal handlers; and the loader package layout
(issue 13)."""

from __future__ import annotations

import gzip
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import kernel, launch, op, run_cli, step, write_trace
from tracelens.errors import TracelensError, UnusableTraceError
from tracelens.loader import load_trace

REPO = Path(__file__).resolve().parents[1]
source = importlib.import_module("tracelens.loader.source")
stream = importlib.import_module("tracelens.loader.stream")
forked = importlib.import_module("tracelens.loader.forked")


def _events(n_steps: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for s in range(n_steps):
        t = s * 100.0
        events += [
            step(s + 1, t, 90.0),
            op("aten::mm", t + 1, 20, ext=10 + s),
            launch("cudaLaunchKernel", t + 2, 3, correlation=100 + s, ext=10 + s),
            kernel("gemm", t + 30, 5.5, correlation=100 + s),
        ]
    return events


def _cli(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`tracelens ARGV` as a fresh process (as users run it: signal handlers installed), with a timeout."""
    return subprocess.run(
        [sys.executable, "-c", "from tracelens.cli import run; run()", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "TRACELENS_NO_CACHE": "1", **(env or {})},
    )


def test_the_loader_package_is_importable_beside_the_public_function() -> None:
    """`tracelens.load` is the function; the package `tracelens.loader` no longer hides behind it."""
    import tracelens
    import tracelens.loader.stream as by_import

    assert callable(tracelens.load) and tracelens.load is load_trace
    assert by_import is stream and sys.modules["tracelens.loader.stream"] is stream


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when the block runs longer than `seconds` (SIGALRM)."""

    def expired(number: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _gzip_of(path: Path, parts: list[tuple[bytes, int]]) -> Path:
    """A gzip file of each `bytes` repeated `count` times, compressed as a stream (no big buffer here)."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        for data, count in parts:
            for _ in range(count):
                out.write(compressor.compress(data))
        out.write(compressor.flush())
    return path


MB = 1 << 20


@pytest.mark.slow
def test_endless_whitespace_in_a_gzip_is_refused_after_the_event_bound(tmp_path: Path) -> None:
    """The attack of issue 19: `{"traceEvents":[` then 1 GB of spaces (1 MB of gzip). Refused once 64 MB pass
    without an event ending, in time and memory that do not grow with what follows."""
    events = json.dumps(_events(3))[1:-1].encode()
    path = _gzip_of(tmp_path / "spaces.json.gz", [(b'{"traceEvents":[' + events + b",", 1), (b" " * MB, 1024)])
    assert path.stat().st_size < 8 * MB
    started = time.monotonic()
    with deadline(60), pytest.raises(UnusableTraceError, match=r"not a trace: no event ends in 64 MB of text"):
        load_trace(path, workers=2)
    assert time.monotonic() - started < 30  # ~1 s here; the old streamer took ~55 s and 2 GB for 1 GB


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_no_event_boundary_is_refused_in_linear_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """With the bound lowered to 1 MB: a plain or gzip trace whose events stop and whose text goes on (a
    giant string, no `}`) is refused after reading about the bound, not the whole file; plain and gzip alike."""
    monkeypatch.setattr(source, "MAX_EVENT_BYTES", MB)
    monkeypatch.setattr(stream, "MAX_EVENT_BYTES", MB)
    events = json.dumps(_events(50))[1:-1].encode()
    head = b'{"traceEvents":[' + events + b', {"ph": "X", "name": "'
    path = tmp_path / name
    if name.endswith(".gz"):
        _gzip_of(path, [(head, 1), (b"x" * MB, 24)])
    else:
        path.write_bytes(head + b"x" * (24 * MB))
    read: list[int] = []
    real_read = source.read_text

    def counting(handle: object, *args: object, **kwargs: object) -> tuple[bytes, bool]:
        try:
            data, cut = real_read(handle, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            read.append(handle.tell())  # type: ignore[attr-defined]
        return data, cut

    monkeypatch.setattr("tracelens.loader.read_text", counting)
    with deadline(60), pytest.raises(UnusableTraceError, match=r"no event ends in 1 MB"):
        load_trace(path, workers=1)
    assert not read or read[0] <= 10 * MB  # the plain file: refused after reading ~1 MB + a block, not 24 MB


def test_a_huge_single_event_below_the_bound_still_loads(tmp_path: Path) -> None:
    """The bound refuses only what cannot be a trace: a 10 MB name (seen in real attacks) loads."""
    events = _events(2)
    events.insert(1, op("x" * (10 * MB), 1, 1))
    path = write_trace(tmp_path / "big_name.json", events)
    with deadline(60):
        trace = load_trace(path, workers=2)
    assert len(trace.events) == 9 and max(len(n) for n in trace.events.names) == 10 * MB


def test_character_devices_and_fifos_are_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)  # nobody writes: opening it to read would block forever
    for target, kind in (("/dev/zero", "character device"), (str(fifo), "FIFO")):
        result = _cli("analyze", target, timeout=30)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("tracelens: error:") == 1 and kind in result.stderr
        assert "not a regular file" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(UnusableTraceError, match="character device"):
        load_trace("/dev/zero")


@pytest.mark.parametrize("setting", ["abc", "0", "-2", "1.5", "2 2", "٣"])
def test_a_malformed_workers_setting_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], setting: str
) -> None:
    path = write_trace(tmp_path / "t.json", _events(2))
    monkeypatch.setenv("TRACELENS_WORKERS", setting)
    with pytest.raises(TracelensError, match="TRACELENS_WORKERS must be a whole number"):
        forked.auto_workers()
    _, err = run_cli(capsys, "analyze", str(path), "--no-cache", expect=2)
    assert err.strip().splitlines() == [
        f"tracelens: error: TRACELENS_WORKERS must be a whole number from 1 to 1,048,576 (got {setting!r})"
    ]


def test_the_workers_setting_is_capped_by_the_cpus_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setenv("TRACELENS_WORKERS", "99999")
    assert forked.auto_workers() == cpus
    monkeypatch.setenv("TRACELENS_WORKERS", " 1 ")
    assert forked.auto_workers() == 1


def _handler_in_child(_: int) -> tuple[object, object]:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def test_forked_children_do_not_inherit_signal_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracelens.loader import forked

    def handler(number: int, frame: object) -> None:  # what the command installs: raise SystemExit
        raise SystemExit(128 + number)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        results = forked.run_forked([0, 1], 2, _handler_in_child)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert results == [(signal.SIG_DFL, signal.SIG_DFL)] * 2


def _sleep_forever(_: int) -> int:
    time.sleep(3600)
    return 0


def test_a_stalled_child_is_killed_and_reported_not_waited_for() -> None:
    from tracelens.loader import forked

    started = time.monotonic()
    with deadline(30), pytest.raises(forked.ChildStalled):
        forked.run_forked([0, 1], 2, _sleep_forever, stall_s=0.5)
    assert time.monotonic() - started < 10


def _truncated_gzip_claiming_over_a_gib(folder: Path) -> Path:
    """A gzip trace cut off mid-write whose last 4 bytes (read as the size field) claim more than 1 GiB:
    the input that took the old process-pool path."""
    text = json.dumps({"traceEvents": _events(40000)}).encode()  # ~10 MB of text: decoded in ranges
    packed = gzip.compress(text, 1)
    end = len(packed) * 3 // 4
    while int.from_bytes(packed[end - 4 : end], "little") <= 1 << 30:  # most cuts claim > 1 GiB
        end -= 1
    cut = packed[:end]
    path = folder / "cut.json.gz"
    path.write_bytes(cut)
    return path


_LOAD_LIKE_THE_COMMAND = """
import shutil, signal, sys
from tracelens.cli import _terminated
from tracelens.errors import TracelensError
from tracelens.loader import load_trace, source
signal.signal(signal.SIGTERM, _terminated)  # the command's handler, which the old pool workers inherited
if sys.argv[2] == "low-shm":  # Docker's 64 MB /dev/shm with 16 MB free: the text goes to the temp dir
    real = shutil.disk_usage
    def usage(folder):
        total, used, free = real(folder)
        return type(real(folder))(64 << 20, 48 << 20, 16 << 20) if str(folder).startswith("/dev/shm") else real(folder)
    source.shutil.disk_usage = usage
try:
    print(load_trace(sys.argv[1], workers=2).source_events)
except TracelensError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.slow
def test_the_former_pool_path_never_hangs_under_repeated_loads_and_sigterm(tmp_path: Path) -> None:
    """Stress (issue 19 item 2): 10 loads, each a fresh process with the command's SIGTERM handler, of a
    truncated gzip whose size field claims > 1 GiB and of a whole 10 MB gzip (both took the old process-pool
    path), 2 decoding workers, two in three with a low /dev/shm (16 MB free); half are sent SIGTERM while they
    decode. Each must end within the timeout, with its result or the signal's status: never a hang (the old
    path hung ~1 run in 300)."""
    cut = _truncated_gzip_claiming_over_a_gib(tmp_path)
    whole = tmp_path / "whole.json.gz"
    whole.write_bytes(gzip.compress(json.dumps({"traceEvents": _events(40000)}).encode(), 1))
    statuses, pids = [], []
    for run in range(10):
        path = cut if run % 2 else whole
        command = [sys.executable, "-c", _LOAD_LIKE_THE_COMMAND, str(path), "low-shm" if run % 3 else "shm"]
        env = {**os.environ, "TRACELENS_NO_CACHE": "1"}
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pids.append(process.pid)
        if run % 4 >= 2:
            time.sleep(0.1 * (run % 5))
            process.send_signal(signal.SIGTERM)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"load {run} of {path.name} hung")
        assert b"Traceback" not in err, err
        statuses.append(process.returncode)
        if process.returncode == 0:
            assert int(out) == (160_000 if path == whole else int(out))
    assert set(statuses) <= {0, 128 + signal.SIGTERM, -signal.SIGTERM}
    assert statuses[0] == statuses[1] == 0
    scratch = [Path("/dev/shm"), Path(tempfile.gettempdir())]
    assert not [p for folder in scratch for pid in pids for p in folder.glob(f"tracelens-{pid}-*")]  # cleaned up
