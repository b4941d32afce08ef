"""Atomic file writes: the one place tracelens writes a file (command outputs and cache entries alike).

Contract of `write_atomic(path, data)` and of `atomic_writer(path)` (the caller writes the pieces; what the caller
raises inside it leaves `path` as it was):
- the bytes go to a temporary file in `path`'s folder, are flushed and fsync'd, then renamed over `path`, and the
  folder is fsync'd: a reader sees the old file or the whole new one, never a part, even after a crash;
- the temporary file is named `.{name}.{pid}.tracelens-tmp`; a file of that form left by a process that no longer
  runs (a run killed with SIGKILL) is deleted by the next write to the same folder;
- the new file gets the usual mode (0666 less the umask), not mkstemp's 0600;
- policy (may this path be written at all, `--force`, inputs) is the caller's: see `tracelens.cli.output`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tracelens-tmp"
_TEMP_NAME = re.compile(r"^\..+\.(\d+)" + re.escape(TEMP_SUFFIX) + r"$")


def write_atomic(path: Path, data: Any, *, durable: bool = True) -> None:
    """Write `data` (bytes or any buffer) to `path` atomically (see the module docstring). `durable=False` skips
    the fsyncs (for scratch files whose loss after a power cut is harmless). The parent folder must exist."""
    with atomic_writer(path, durable=durable) as write:
        write(data)


@contextlib.contextmanager
def atomic_writer(path: Path, *, durable: bool = True) -> Iterator[Callable[[Any], None]]:
    """`write(piece)` appends a piece (bytes or any buffer) to `path`'s temporary file; when the block ends the
    file replaces `path` atomically (see the module docstring). Whatever the block raises leaves `path` as it
    was and no temporary file. So that the caller, not this module, produces the pieces (a generator of a layer
    above is resumed by its own layer). `durable` as in `write_atomic`."""
    folder = path.parent
    sweep_stale_temps(folder)
    temp = folder / f".{path.name}.{os.getpid()}{TEMP_SUFFIX}"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        try:

            def write(piece: Any) -> None:
                view = memoryview(piece)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]

            yield write
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if durable:
        _fsync_folder(folder)


def sweep_stale_temps(folder: Path) -> int:
    """Delete temporary files of `write_atomic` in `folder` whose writing process is gone; returns how many."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        match = _TEMP_NAME.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            (folder / name).unlink()
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def scratch_prefix(kind: str) -> str:
    """The name prefix of a scratch folder of this process: `tracelens_<kind>_<pid>_` (`sweep_stale_folders`
    reads the pid back)."""
    return f"tracelens_{kind}_{os.getpid()}_"


def sweep_stale_folders(folder: Path, kind: str, min_age_s: float = 60.0) -> int:
    """Delete the `scratch_prefix(kind)` folders in `folder` whose process is gone (killed before it could clean
    up) and that are older than `min_age_s` (a pid can be reused: the age rules out a folder being created);
    returns how many."""
    pattern = re.compile(rf"tracelens_{re.escape(kind)}_(\d{{1,10}})_")
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and now - entry.stat(follow_symlinks=False).st_mtime > min_age_s:
                shutil.rmtree(entry.path)
                removed += 1
    return removed
