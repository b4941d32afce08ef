"""Errors that end a command with a clear one-line message and an exit status."""

from __future__ import annotations


class TracelensError(Exception):
    """A problem the user can fix; the CLI prints `tracelens: error: <message>` and exits with `exit_code`."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UnusableTraceError(TracelensError):
    """The input cannot be read as a trace at all (missing, empty, not JSON, not gzip, not a trace)."""
