"""A load progress bar on stderr: only on a terminal, and only once a load has taken over a second.

It lives beside `errors` below every layer: the loader reports its phases to it, a call down, not back up into
the command."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a bar is shown, not by every command
    from rich.progress import Progress, TaskID

SHOW_AFTER_S = 1.0


class LoadProgress:
    """Callable `(phase, fraction)` for `load_trace`; a context manager that clears the bar at exit."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, phase: str, fraction: float) -> None:
        if not self.enabled:
            return
        if self.progress is None:
            if time.monotonic() - self.started < SHOW_AFTER_S:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=1.0)
        assert self.task is not None
        self.progress.update(self.task, description=f"{self.label}: {phase}", completed=min(fraction, 1.0))

    def __enter__(self) -> LoadProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self.progress is not None:
            self.progress.stop()
