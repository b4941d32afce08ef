"""Writing results: stdout, or a file written atomically and never over an existing one without --force."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tracelens.errors import TracelensError


def check_writable(path: Path, force: bool, inputs: Sequence[Path] = ()) -> None:
    """Raise before any work is done if `path` exists and `force` is off, or if it is one of the `inputs`
    (even `--force` never writes over the trace being read)."""
    for source in inputs:
        if path.exists() and source.exists() and path.resolve() == source.resolve():
            raise TracelensError(f"{path} is an input of this command; pick another output file")
    if path.exists() and not force:
        raise TracelensError(f"{path} exists; pass --force to overwrite it")
    if path.is_dir():
        raise TracelensError(f"{path} is a directory; pass a file name")


def write_atomic(path: Path, content: str | bytes, force: bool) -> None:
    """Write to a temporary file beside `path`, then rename over it."""
    check_writable(path, force)
    data = content.encode("utf-8") if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
        os.chmod(temp_name, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def emit(text: str, output: Path | None, force: bool) -> None:
    """Print `text` to stdout, or write it to `output` and say so on stderr."""
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(output, text, force)
    print(f"Wrote {output}", file=sys.stderr)
