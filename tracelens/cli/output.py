"""Writing results: the one place that decides what a command may write, and how.

Policy (`check_writable`, checked before any work and again just before writing):
- `-o -` means stdout; no `-o` means stdout for analyze/compare/check and a default file for report/annotate;
- only a regular file is ever replaced, and only with `--force`: a symbolic link, directory, device node, FIFO
  or socket is refused even with `--force` (a rename over `/dev/full` would replace the device with a file);
- an input of the command (trace, hypotheses file) is never an output, even with `--force`;
- the output's folder must exist: no folder is created implicitly;
- files are written atomically (`tracelens.atomic`); a write that fails (read-only folder, full disk, closed or
  full stdout) is one `tracelens: error:` line, exit status 2.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tracelens.atomic import atomic_writer, write_atomic
from tracelens.errors import TracelensError
from tracelens.escapes import escape_controls

STDOUT_NAME = "-"


def is_stdout(path: Path | None) -> bool:
    """Whether `path` means stdout (no `-o`, or `-o -`)."""
    return path is None or str(path) == STDOUT_NAME


def check_writable(path: Path, force: bool, inputs: Sequence[Path] = ()) -> None:
    """Raise `TracelensError` unless `path` may be written (see the module docstring); stdout always may."""
    if is_stdout(path):
        return
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        _check_folder(path)
        return
    except OSError as exc:
        raise TracelensError(f"{path}: cannot write: {describe_os_error(exc)}") from None
    if stat.S_ISLNK(status.st_mode):
        raise TracelensError(f"{path} is a symbolic link; tracelens replaces only regular files (use -o - for stdout)")
    if stat.S_ISDIR(status.st_mode):
        raise TracelensError(f"{path} is a directory; pass a file name")
    if not stat.S_ISREG(status.st_mode):
        kind = _file_kind(status.st_mode)
        raise TracelensError(f"{path} is {kind}, not a regular file; tracelens never replaces it (use -o - for stdout)")
    for source in inputs:
        if _same_file(path, source):
            raise TracelensError(f"{path} is an input of this command; pick another output file")
    if not force:
        raise TracelensError(f"{path} exists; pass --force to overwrite it")


def write_output(path: Path, content: str | bytes | Iterable[Any], force: bool, inputs: Sequence[Path] = ()) -> None:
    """Write a command's output atomically (`tracelens.atomic`), or to stdout for `-o -`, after checking the
    policy once more (the file system may have changed while the command ran). `content` may be pieces to
    write in order (an output too big to join in memory; a generator's pieces are made while they are written
    to a file, and joined before anything is written to stdout); what the generator raises is raised, with
    nothing written."""
    # a lone surrogate (a file name's undecodable byte) is written as `\udcff`: the output stays valid UTF-8
    data = content.encode("utf-8", errors="backslashreplace") if isinstance(content, str) else content
    if is_stdout(path):
        pieces: Iterable[Any] = [data] if isinstance(data, bytes) else data
        write_stdout(b"".join(pieces))  # stdout: one write (a pipe's reader sees whole output)
        return
    check_writable(path, force, inputs)
    try:
        if isinstance(data, bytes | bytearray | memoryview):
            write_atomic(path, data)
        else:
            with atomic_writer(path) as write:
                for piece in data:  # a generator's pieces, made here while they are written
                    write(piece)
    except OSError as exc:
        raise TracelensError(f"{path}: cannot write: {describe_os_error(exc)}") from None


def write_stdout(data: bytes) -> None:
    """Write `data` to stdout and flush it; a closed or full stdout is a `TracelensError` (a closed pipe, as
    in `| head`, is not: it ends the command quietly, see `tracelens.cli.main`)."""
    stream = sys.stdout
    if stream is None:
        raise TracelensError("cannot write to stdout: it is closed")
    try:
        stream.flush()
        binary = getattr(stream, "buffer", None)
        if binary is None:  # a text-only stream (io.StringIO in a notebook or a test)
            stream.write(data.decode("utf-8", errors="replace"))
            stream.flush()
        else:
            binary.write(data)
            binary.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: the stream was closed in this process
        reason = describe_os_error(exc) if isinstance(exc, OSError) else "it is closed"
        raise TracelensError(f"cannot write to stdout: {reason}") from None


def emit(text: str, output: Path | None, force: bool, inputs: Sequence[Path] = ()) -> None:
    """Print `text` to stdout, or write it to `output` and say so on stderr."""
    write_output(Path(STDOUT_NAME) if output is None else output, text, force, inputs)
    if not is_stdout(output):
        status(f"Wrote {output}")


def status(line: str) -> None:
    """A status line ("Wrote …"): always on stderr, so stdout carries only results."""
    print(escape_controls(line), file=sys.stderr)


def describe_os_error(exc: OSError) -> str:
    """`No space left on device` etc., without the errno number and file name Python adds."""
    if exc.errno == errno.ELOOP:
        return "symlink loop (too many levels of symbolic links)"
    return exc.strerror or str(exc) or type(exc).__name__


def _check_folder(path: Path) -> None:
    folder = path.parent
    try:
        status = os.stat(folder)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise TracelensError(f"{path}: folder {folder} does not exist; create it first") from None
        raise TracelensError(f"{path}: cannot write: {describe_os_error(exc)}") from None
    if not stat.S_ISDIR(status.st_mode):
        raise TracelensError(f"{path}: {folder} is not a folder")


def _same_file(path: Path, source: Path) -> bool:
    try:
        return os.path.samefile(path, source)
    except (OSError, ValueError):
        return False


def _file_kind(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
