"""Writing results: stdout, or a file written atomically and never over an existing one without --force."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tracelens.atomic import write_atomic
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


def write_output(path: Path, content: str | bytes, force: bool) -> None:
    """Write a command's output file atomically (`tracelens.atomic`) after `check_writable`."""
    check_writable(path, force)
    data = content.encode("utf-8") if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


def emit(text: str, output: Path | None, force: bool) -> None:
    """Print `text` to stdout, or write it to `output` and say so on stderr."""
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, force)
    print(f"Wrote {output}", file=sys.stderr)
