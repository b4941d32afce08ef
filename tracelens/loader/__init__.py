"""Load a Kineto / Chrome trace file into a linked `Trace`. Raw JSON never leaves this package.

One way per kind of input: a plain file is decoded range by range (`stream`, in forked children when big); a
gzip file is gunzipped once to a scratch file (`source.trace_text`) and then decoded like a plain one; a file
that needs repair (odd types, invalid JSON, cut off, a bare array) is decoded whole (`decode`). Each gives
columns (`columns`); the model (`model.build`) links them into a `Trace`.

Two phases: `begin_load` starts the decode (worker processes decoding their ranges) and returns; the caller does
its own work in this process while they run, then `PendingLoad.finish` decodes this process's share and links the
trace. `load_trace` is both at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from tracelens.errors import UnusableTraceError
from tracelens.loader.columns import (
    MAX_OFFSET_US,
    ChunkColumns,
    build_meta,
    columnize,
    complete_events,
    merge_columns_full,
)
from tracelens.loader.compact import EMPTY_OBJECTS_NOTE
from tracelens.loader.decode import Decoded, decode_trace, decode_whole_extras
from tracelens.loader.extras import merge_extras
from tracelens.loader.forked import auto_workers
from tracelens.loader.source import TraceText, check_readable, read_text, refuse_tar, trace_text
from tracelens.loader.stream import NotStreamable, StreamingDecode, begin_stream
from tracelens.loader.threads import named_tracks
from tracelens.model.build import Columns, build_trace
from tracelens.model.trace import Trace, Truncation

Progress = Callable[[str, float], None]  # (phase, fraction done in [0, 1])

__all__ = ["PendingLoad", "Progress", "begin_load", "load_trace"]


def load_trace(path: str | Path, progress: Progress | None = None, workers: int | None = None) -> Trace:
    """Read, decode, columnise and link one trace file: `begin_load(...).finish()`.

    Raises `UnusableTraceError` for input that is not a trace (and for anything but a regular file);
    odd-but-usable input loads with `warnings`. `workers`: processes that decode ranges of a big file (default:
    `auto_workers()`); same result for any value.
    """
    return begin_load(path, progress, workers).finish()


def begin_load(path: str | Path, progress: Progress | None = None, workers: int | None = None) -> PendingLoad:
    """Start loading one trace file: check it, gunzip it if needed, cut it into ranges and start the worker
    processes that decode theirs. Returns at once with the load under way; the caller may do other work in this
    process, then calls `finish` (or `close`, to abandon it). Raises as `load_trace` does."""
    path = Path(path)
    report = progress or (lambda phase, fraction: None)
    check_readable(path)
    n_workers = auto_workers() if workers is None else workers
    with contextlib.ExitStack() as stack:  # closed here only if starting fails
        text = stack.enter_context(trace_text(path, lambda done, total: report("gunzipping", done / max(total, 1))))
        streaming = _begin_stream(text, report, n_workers)
        return PendingLoad(path, text, report, streaming, stack.pop_all())
    raise AssertionError("unreachable")  # pragma: no cover - the `with` returns or raises


class PendingLoad:
    """A load begun by `begin_load`: `finish` gives the `Trace`; `close` (or leaving a `with`) abandons it,
    ending the worker processes and removing the scratch text. Usable as a context manager."""

    def __init__(
        self,
        path: Path,
        text: TraceText,
        report: Progress,
        streaming: StreamingDecode | None,
        stack: contextlib.ExitStack,
    ) -> None:
        self.path, self.text, self.report, self.streaming, self.stack = path, text, report, streaming, stack

    def __enter__(self) -> PendingLoad:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End what is still running (idempotent)."""
        if self.streaming is not None:
            self.streaming.close()
        self.stack.close()

    def finish(self) -> Trace:
        """The linked `Trace` (this process decodes its share of the ranges first)."""
        with self.stack:
            decoded, chunks = self._decode()
            size = self.text.size
        return _link(self.path, decoded, chunks, size, self.report)

    def _decode(self) -> tuple[Decoded, list[ChunkColumns]]:
        """Columns of every complete event, and the metadata and repairs: streamed when the text is a
        well-formed file, else decoded whole."""
        if self.streaming is not None:
            try:
                streamed = self.streaming.finish()
                return Decoded([], streamed.metadata, False, notes=streamed.notes), streamed.chunks
            except NotStreamable:
                pass
        return _decode_whole(self.path, self.text, self.report)


def _begin_stream(text: TraceText, report: Progress, workers: int) -> StreamingDecode | None:
    """The streaming decode of a well-formed plain text, started; None when the text needs the whole-file path."""
    if text.path is None or text.gzip_truncated:
        return None
    try:
        return begin_stream(
            text.path, lambda done, total: report("reading and decoding", done / max(total, 1)), workers=workers
        )
    except NotStreamable:
        return None


def _link(path: Path, decoded: Decoded, chunks: list[ChunkColumns], size: int, report: Progress) -> Trace:
    """Merge the chunks' columns and link them into the `Trace`."""
    report("building columns", 0.0)
    n_complete = sum(len(chunk) for chunk in chunks)
    if not n_complete:
        empty = [note for note in decoded.notes if EMPTY_OBJECTS_NOTE in note]
        detail = f"; {empty[0]}" if empty else ""
        raise UnusableTraceError(f"{path}: a trace with no events with a duration{detail}; nothing to analyze")
    extras = [chunk.extras for chunk in chunks if chunk.extras is not None]
    merged = merge_columns_full(chunks)  # empties `chunks`
    if not len(merged.table):
        raise UnusableTraceError(f"{path}: a trace with no events with a usable time; nothing to analyze")
    memory, counters, extra_notes = merge_extras(extras, merged.origin_us, merged.tracks, MAX_OFFSET_US)
    tracks = named_tracks(merged.tracks, [part.metadata for part in extras])
    del extras
    report("linking", 0.0)
    trace = build_trace(
        Columns(
            path=path,
            events=merged.table,
            tracks=tracks,
            meta=build_meta(decoded.metadata, merged.categories, decoded.bare_array),
            origin_us=merged.origin_us,
            uncompressed_bytes=size,
            truncation=Truncation(decoded.truncated, decoded.dropped_tail_bytes),
            source_rows=merged.source_rows,
            source_events=n_complete,
            notes=[*decoded.notes, *merged.notes, *extra_notes],
            memory=memory,
            counters=counters,
        )
    )
    report("done", 1.0)
    return trace


def _decode_whole(path: Path, text: TraceText, report: Progress) -> tuple[Decoded, list[ChunkColumns]]:
    """The whole-file path: every lenient repair (odd types, invalid JSON, cut-off files, bare arrays)."""
    if text.data is not None:
        data = text.data
    else:
        assert text.path is not None
        with text.path.open("rb") as handle:
            data = read_text(
                handle,
                text.size,
                str(path),
                False,
                lambda done, total: report("reading", done / total if total else 0.0),
            )[0]
    refuse_tar(path, data)
    if text.gzip_truncated and not data.strip():  # a cut-off gzip, not an empty trace
        what = "nothing" if not data else "nothing but white space"
        raise UnusableTraceError(f"{path}: corrupt or truncated gzip data: {what} could be decompressed")
    report("decoding JSON", 0.0)
    decoded = decode_trace(data, str(path))
    if text.gzip_truncated and not decoded.truncated:
        decoded.notes.append("the gzip stream ends early, but after the end of the JSON: nothing was lost")
    extras, note = decode_whole_extras(data, decoded)
    if note:
        decoded.notes.append(note)
    del data
    chunks = [columnize(complete_events(decoded.events))]
    chunks[0].extras = extras
    decoded.events = []
    return decoded, chunks
