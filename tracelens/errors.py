"""Errors that end a command with a clear one-line message and an exit status; warnings, which do not (`warn`:
the one place a `tracelens: warning:` reaches stderr)."""

from __future__ import annotations

import os
import sys
import textwrap

from tracelens.escapes import escape_controls

WARNING_PREFIX = "tracelens: warning: "
MIN_WARNING_WIDTH = 40  # as `--width`: narrower, a warning is still laid out for 40 columns
WARNING_INDENT = "  "  # a warning's continuation lines (its first holds the prefix, for grep)


class TracelensError(Exception):
    """A problem the user can fix; the CLI prints `tracelens: error: <message>` and exits with `exit_code`."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UnusableTraceError(TracelensError):
    """The input cannot be read as a trace at all (missing, empty, not JSON, not gzip, not a trace)."""


def warn(message: str) -> None:
    """Print `message` on stderr as a warning, control characters escaped (`escapes.escape_controls`: a file
    name is data, never a terminal command): `warning_text` for `stderr_width()` columns on a terminal or with
    `$COLUMNS`; one line into a pipe or a log, so that a script's grep finds the whole message."""
    message, width = escape_controls(message), stderr_width()
    print(WARNING_PREFIX + message if width is None else warning_text(message, width), file=sys.stderr)


def warning_text(message: str, width: int) -> str:
    """`tracelens: warning: MESSAGE` in lines of at most `width` columns (at least `MIN_WARNING_WIDTH`), broken
    at spaces, the lines after the first indented by `WARNING_INDENT`; the prefix is whole on the first line
    (`grep 'tracelens: warning:'` finds every warning). A word longer than a line (a path) is never broken: its
    line is longer."""
    return textwrap.fill(
        message,
        width=max(width, MIN_WARNING_WIDTH),
        initial_indent=WARNING_PREFIX,  # never alone on its line: a long first word (a path) stays beside it
        subsequent_indent=WARNING_INDENT,
        break_long_words=False,
        break_on_hyphens=False,
    )


def stderr_width() -> int | None:
    """Columns for stderr: `$COLUMNS` where it is a positive whole number, else the width of the terminal stderr
    is, else None (a pipe or a log: no width to wrap to)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no stderr, not a file, or not a terminal
        return None
