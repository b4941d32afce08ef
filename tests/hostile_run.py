"""Running one hostile `tracelens` command in a child process: time, memory and leftovers measured.

Shared by the tests/test_hostile_*.py families. `run(argv)` starts `python -m tracelens ...` with stdin from
/dev/null, a private TMPDIR, an address-space limit (`RLIMIT_AS`) and a wall-clock timeout, and returns what
it did; `Result.assert_clean(...)` states the promise of docs/promises.md: the expected exit status, exactly
one `tracelens: error:` line when it exits 2 (none otherwise), no traceback, in time, nothing left in TMPDIR.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import unwrapped
from tracelens.errors import WARNING_PREFIX

REPO = Path(__file__).resolve().parent.parent
ERROR_PREFIX = "tracelens: error: "


@dataclasses.dataclass(frozen=True)
class Result:
    """What one command did."""

    status: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_bytes: int
    leftovers: tuple[str, ...]

    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith(ERROR_PREFIX)]

    def warnings(self) -> list[str]:
        return [line for line in unwrapped(self.stderr).splitlines() if line.startswith(WARNING_PREFIX)]

    def assert_clean(self, status: int | frozenset[int], warning: str | None = None) -> None:
        allowed = status if isinstance(status, frozenset) else frozenset({status})
        assert "Traceback" not in self.stderr, self.stderr[-3000:]
        assert self.status in allowed, (self.status, self.stderr[-3000:])
        assert len(self.errors()) == (1 if self.status == 2 else 0), self.stderr[-3000:]
        if warning is not None:
            assert any(warning in line for line in self.warnings()), self.stderr[-3000:]
        assert not self.leftovers, self.leftovers


# Runs the command as its own child and writes that child's peak RSS (wait4) to the file named by
# HOSTILE_RSS_FILE, then exits as the child did. Linux carries a process's peak RSS across exec, so a child forked
# straight from this (large) test process would report at least this process's size; forked from this small
# launcher, it starts from the launcher's few MB.
LAUNCHER = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
with open(os.environ["HOSTILE_RSS_FILE"], "w") as out:
    out.write(str(usage.ru_maxrss * 1024))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _limit(memory_bytes: int) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def run(
    argv: Sequence[str],
    tmp: Path,
    timeout_s: float = 30.0,
    memory_bytes: int = 3 << 30,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Result:
    """`python -m tracelens *argv` with TMPDIR = a fresh folder under `tmp` (checked empty afterwards) and
    the cache off unless `env` says otherwise. A timeout fails the calling test (a hang)."""
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELENS_")}
    child_env.update({"TMPDIR": str(tmpdir), "TRACELENS_NO_CACHE": "1", "PYTHONPATH": str(REPO), "COLUMNS": "100"})
    child_env.update(env or {})
    rss_file = tmp / "max_rss_bytes"
    rss_file.unlink(missing_ok=True)
    child_env["HOSTILE_RSS_FILE"] = str(rss_file)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-m", "tracelens", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env,
        cwd=cwd or tmp,
        preexec_fn=lambda: _limit(memory_bytes),
    )
    out, err = _wait_measured(proc, argv, timeout_s)
    seconds = time.monotonic() - started
    max_rss_bytes = int(rss_file.read_text()) if rss_file.exists() else 0
    rss_file.unlink(missing_ok=True)
    return Result(
        status=proc.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        seconds=seconds,
        max_rss_bytes=max_rss_bytes,
        leftovers=tuple(sorted(p.name for p in tmpdir.iterdir())),
    )


def _wait_measured(proc: subprocess.Popen[bytes], argv: Sequence[str], timeout_s: float) -> tuple[bytes, bytes]:
    """The child's stdout and stderr (its peak RSS: `LAUNCHER`'s file). A child still running after `timeout_s`
    is killed with its process group: a hang."""
    streams: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda name=name, pipe=pipe: streams.__setitem__(name, pipe.read()), daemon=True)
        for name, pipe in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, 9)
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise AssertionError(f"hang: {list(argv)[:3]} ran past {timeout_s} s") from None
        time.sleep(0.005)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for reader in readers:
        reader.join(timeout=30)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return streams.get("out", b""), streams.get("err", b"")


def base_document(name: str = "eager_mlp.json.gz") -> dict[str, Any]:
    """A real H200 trace (traces/h200/) as a JSON document, to be edited into a hostile one."""
    with gzip.open(REPO / "traces" / "h200" / name) as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def write(document: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(document))
    return path
