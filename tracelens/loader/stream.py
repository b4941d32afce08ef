"""Streaming decode of a trace's text (a plain file: the input, or a gzip input gunzipped by
`source.trace_text`): the `traceEvents` array is cut into byte ranges of whole events, and each range is read,
decoded and turned into columns on its own, in this process alone or beside forked children (`forked.start_forked`):
`begin_stream` starts the children, `StreamingDecode.finish` decodes this process's share and gathers the columns.

Peak memory is the columns plus a range of text and its decoded events per process, not the whole text plus
every decoded event. Ranges are cut at `}` `,` `{` between events without parsing; a cut in the wrong place
cannot go unnoticed, because the range before it would not be valid JSON. Anything unexpected (a bare array,
invalid JSON, odd field types, no event boundary within `source.MAX_EVENT_BYTES`) raises `NotStreamable`
and the caller falls back to the whole-file decoder, which owns every lenient repair.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracelens.loader.columns import ChunkColumns, columnize
from tracelens.loader.compact import drop_empty_items, empty_objects_note
from tracelens.loader.decode import EXTRAS_DOC_DECODER, EXTRAS_EVENTS_DECODER, STREAM_DOC_DECODER, metadata_of
from tracelens.loader.extras import extra_columns
from tracelens.loader.forked import ChildDied, Forked, start_forked
from tracelens.loader.schema import CompleteEvent
from tracelens.loader.source import MAX_EVENT_BYTES

CHUNK_BYTES = 4 << 20  # text decoded at once: small chunks stay in CPU caches (docs/benchmarks.md)
HEAD_LIMIT_BYTES = MAX_EVENT_BYTES  # the traceEvents key must appear within this many bytes
_EVENTS_KEY = re.compile(rb'^\s*\{.*?"traceEvents"\s*:\s*\[', re.S)
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


class NotStreamable(Exception):
    """The file needs the whole-file decoder (or is not usable); the caller falls back."""


class Streamed(msgspec.Struct):
    """Column chunks in file order plus the top-level metadata."""

    chunks: list[ChunkColumns]
    metadata: dict[str, Any]
    uncompressed_bytes: int
    notes: list[str] = msgspec.field(default_factory=list)


class StreamingDecode:
    """A decode started by `begin_stream`: the cut points found and the children (if any) decoding their ranges;
    `finish` decodes this process's share and gathers every range's columns in file order."""

    def __init__(
        self,
        metadata: dict[str, Any],
        ranges: list[tuple[Path, str, int, int]],
        size: int,
        progress: ProgressCallback | None,
        forked: Forked[tuple[Path, str, int, int], tuple[dict[str, Any], ChunkColumns | None]] | None,
    ) -> None:
        self.metadata, self.ranges, self.size, self.progress, self.forked = metadata, ranges, size, progress, forked

    def finish(self) -> Streamed:
        """Every range's columns in file order and the top-level metadata; NotStreamable when a range is not
        what the fast path handles. Children that die or stall are replaced by decoding every range here (same
        result, with a note)."""
        notes: list[str] = []
        try:
            results = self._results(notes)
            chunks: list[ChunkColumns] = []
            empty_objects = 0
            for extra, columns in results:
                self.metadata.update(extra)
                if columns is not None:
                    chunks.append(columns)
                    empty_objects += columns.empty_objects
            if empty_objects:
                notes.append(empty_objects_note(empty_objects))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, OSError) as exc:
            raise NotStreamable(str(exc)) from exc
        finally:
            self.close()
            _TEXT_BUFFER.buffer = None  # this thread's buffer, if it decoded ranges itself
        return Streamed(chunks, self.metadata, self.size, notes)

    def _results(self, notes: list[str]) -> list[tuple[dict[str, Any], ChunkColumns | None]]:
        done = [self.ranges[0][2] if self.ranges else 0]

        def arrived(index: int) -> None:
            done[0] += self.ranges[index][3] - self.ranges[index][2]
            if self.progress:
                self.progress(done[0], self.size)

        if self.forked is not None:
            try:
                return self.forked.finish(arrived)
            except ChildDied as exc:  # killed (out of memory?) or stalled: this process decodes instead
                notes.append(f"decoding processes failed ({exc}); the trace was decoded in one process")
        results = []
        for index, job in enumerate(self.ranges):
            results.append(_decode_range_args(job))
            arrived(index)
        return results

    def close(self) -> None:
        """End the children, if any are left (idempotent)."""
        if self.forked is not None:
            self.forked.close()


def begin_stream(
    path: Path, progress: ProgressCallback | None = None, chunk_bytes: int = CHUNK_BYTES, workers: int = 1
) -> StreamingDecode:
    """Start decoding the plain JSON file `path` range by range into columns; raise NotStreamable when the fast
    path does not apply. With `workers` > 1 (and more than two chunks of text) the ranges are decoded by that many
    processes: forked children, started here, which read their ranges themselves, and this process, which decodes
    its share in `finish`; results are merged in file order, so the outcome does not depend on `workers`."""
    size = path.stat().st_size
    parallel = workers > 1 and size > 2 * chunk_bytes
    with path.open("rb") as handle:
        return _begin_ranges(path, handle, size, progress, chunk_bytes, workers if parallel else 1)


def stream_columns(
    path: Path, progress: ProgressCallback | None = None, chunk_bytes: int = CHUNK_BYTES, workers: int = 1
) -> Streamed:
    """`begin_stream(...).finish()`: every range's columns, in file order."""
    return begin_stream(path, progress, chunk_bytes, workers).finish()


def decode_piece(kind: str, text: bytes | bytearray | memoryview) -> tuple[dict[str, Any], ChunkColumns | None]:
    """Metadata and columns of one piece (see `_pieces`); runs in a worker process or in-process."""
    if kind == "head":
        return metadata_of(STREAM_DOC_DECODER.decode(text)), None
    if kind == "events":  # columnize skips the phases other than complete events
        return {}, _columns(EXTRAS_EVENTS_DECODER.decode(text))
    doc = EXTRAS_DOC_DECODER.decode(text)
    return metadata_of(doc), _columns(doc.traceEvents or [])


def _columns(events: list[Any]) -> ChunkColumns:
    """Columns of the complete events, and of the memory and counter events when the chunk has any."""
    columns = columnize(events, CompleteEvent)
    columns.extras = extra_columns(events)
    return columns


def decode_range(path: Path, kind: str, start: int, end: int) -> tuple[dict[str, Any], ChunkColumns | None]:
    """`decode_piece` of bytes [start, end) of a plain file, read straight into the decoder's buffer (this
    process's text buffer, `_text_buffer`)."""
    prefix, suffix = RANGE_AFFIXES[kind]
    view = buffer = _text_buffer(len(prefix) + (end - start) + len(suffix))
    buffer[: len(prefix)] = prefix
    if suffix:
        buffer[-len(suffix) :] = suffix
    with path.open("rb", buffering=0) as handle:
        handle.seek(start)
        filled = len(prefix)
        while filled < len(prefix) + end - start:
            got = handle.readinto(view[filled : len(prefix) + end - start])
            if not got:
                raise NotStreamable(f"{path} changed while being read")
            filled += got
    try:  # no view.release(): a sampling profiler (Dask's) may briefly hold frames that reference Raw args
        return decode_piece(kind, buffer)
    except msgspec.ValidationError as exc:  # an item without `ph` (an empty object?) or of an odd type
        return _decode_without_empty_items(kind, buffer, len(prefix), len(prefix) + end - start, exc)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from None


def _decode_without_empty_items(
    kind: str, buffer: memoryview, start: int, end: int, error: msgspec.ValidationError
) -> tuple[dict[str, Any], ChunkColumns | None]:
    """`decode_piece` of the range's text `buffer[start:end]` (between its kind's affixes) with its empty
    objects removed (`compact.drop_empty_items`): they are no events, and decoding them would cost a struct
    each. NotStreamable when there were none (the `error` was another) or the text still does not decode."""
    compacted = drop_empty_items(buffer, start, end)
    if compacted is None or not compacted[1]:
        raise NotStreamable(str(error)) from None
    new_end, dropped = compacted
    suffix = RANGE_AFFIXES[kind][1]
    buffer[new_end : new_end + len(suffix)] = suffix
    try:
        metadata, columns = decode_piece(kind, buffer[: new_end + len(suffix)])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from None
    if columns is not None:
        columns.empty_objects = dropped
    return metadata, columns


class _TextBuffer(threading.local):
    """This thread's buffer for a range's text (`_text_buffer`): threads that load traces at once (a threaded
    scheduler's, which decode in-process) each have their own."""

    buffer: np.ndarray | None = None


_TEXT_BUFFER = _TextBuffer()


def _text_buffer(size: int) -> memoryview:
    """A buffer of `size` bytes for the text of one range: the one the previous range of this thread used when it
    is large enough (its pages are mapped already: a fresh buffer per range costs a page fault per page), else
    a numpy array (uninitialised, and large enough for numpy to ask for huge pages: fewer page faults).
    Nothing holds a range's text once it is decoded (raw fields are copied out by `columnize`), so it can be
    overwritten; a buffer is never resized (an object still viewing it would make that fail)."""
    if _TEXT_BUFFER.buffer is None or len(_TEXT_BUFFER.buffer) < size:
        _TEXT_BUFFER.buffer = np.empty(size + size // 8, dtype=np.uint8)  # room for the next ranges
    return _TEXT_BUFFER.buffer.data[:size]


def _begin_ranges(
    path: Path, handle: Any, size: int, progress: ProgressCallback | None, chunk_bytes: int, workers: int = 1
) -> StreamingDecode:
    """Byte ranges cut between events, sized so that each of `workers` processes gets the same number of equal
    ranges; with `workers` > 1, `workers` - 1 forked children start on theirs."""
    head = events_head(handle)
    try:
        metadata = decode_piece("head", _payload("head", head))[0]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from exc
    ranges: list[tuple[Path, str, int, int]] = []
    start = len(head)
    chunk_bytes = balanced_chunk_bytes(size - start, chunk_bytes, workers)
    target = start + chunk_bytes
    while target < size - chunk_bytes // 4:
        cut = next_boundary(handle, target)
        if cut is None:
            break
        ranges.append((path, "events", start, cut[0]))
        start = cut[1]
        target = start + chunk_bytes
    ranges.append((path, "tail", start, size))
    forked = None
    if workers > 1:
        try:
            forked = start_forked(ranges, workers - 1, _decode_range_args, work_here=True)
        except OSError:  # no process or scratch folder to be had: this process decodes every range
            forked = None
    return StreamingDecode(metadata, ranges, size, progress, forked)


def events_head(handle: Any) -> bytes:
    """The text of the open file from its start to just after `"traceEvents": [` (read from the current
    position, the file's start); NotStreamable when the file is not an object or the key does not come within
    `HEAD_LIMIT_BYTES`. `RANGE_AFFIXES["head"]` closes it into a document of the keys before `traceEvents`."""
    head = handle.read(1 << 20)
    if head.lstrip()[:1] != b"{":
        raise NotStreamable("not a JSON object")
    match = _EVENTS_KEY.match(head)
    if match is None:
        head += handle.read(HEAD_LIMIT_BYTES)
        match = _EVENTS_KEY.match(head)
        if match is None:
            raise NotStreamable("no traceEvents array near the start")
    return bytes(head[: match.end()])


_WINDOW_BYTES = 64 << 10  # events are small: a boundary is almost always this close


def next_boundary(handle: Any, position: int) -> tuple[int, int] | None:
    """(end of an event, start of the next) at the first `}` `,` `{` at or after `position` of the open file;
    None at the end of the file. Raises NotStreamable when none comes within `MAX_EVENT_BYTES` (no event is
    that long: the whole-file path then refuses or repairs the text), so the search is bounded."""
    handle.seek(position)
    text = bytearray(handle.read(_WINDOW_BYTES))
    searched_from = 0
    while True:
        found = _BOUNDARY.search(text, searched_from)
        if found is not None:
            return position + found.start() + 1, position + found.end() - 1
        if len(text) >= MAX_EVENT_BYTES:
            raise NotStreamable(f"no event boundary in {MAX_EVENT_BYTES >> 20} MB from byte {position:,}")
        more = handle.read(len(text))  # doubling: a search resumed at an early `}` is repeated O(log) times
        if not more:
            return None
        # a boundary not found yet starts at or after the last `}` searched (`,` and spaces are not `}`)
        last_close = text.rfind(b"}")
        searched_from = last_close if last_close >= 0 else len(text)
        text += more


def balanced_chunk_bytes(total_bytes: int, chunk_bytes: int, workers: int) -> int:
    """The range size that splits `total_bytes` into a multiple of `workers` ranges of at most about
    `chunk_bytes` each (so no worker decodes a last, lone range while the others wait)."""
    if workers <= 1 or total_bytes <= 0:
        return chunk_bytes
    rounds = max(1, math.ceil(total_bytes / (workers * chunk_bytes)))
    return max(1, math.ceil(total_bytes / (rounds * workers)))


def _decode_range_args(job: tuple[Path, str, int, int]) -> tuple[dict[str, Any], ChunkColumns | None]:
    return decode_range(*job)


# what closes a range of each kind into a JSON document (also used by `rewrite`)
RANGE_AFFIXES = {"head": (b"", b"]}"), "events": (b"[", b"]"), "tail": (b'{"traceEvents":[', b"")}


def _payload(kind: str, text: bytes | memoryview) -> bytes:
    prefix, suffix = RANGE_AFFIXES[kind]
    return b"".join((prefix, text, suffix))
