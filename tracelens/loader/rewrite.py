"""Write a trace back with additions: re-read the original file, cut its event list into each event's own bytes
(undecoded), merge extra args into chosen events, append new slices on a track of their own, and give the
pieces to write.

Two ways, with the same output bytes: `stream_pieces` reads the text forward (plain, or gunzipped as it is read),
cuts `traceEvents` into ranges of whole events where the streaming loader cuts them (`stream.events_head`,
`stream.next_boundary`), and yields the output range by range: its memory is a range of text plus the
additions, not the file. It raises `NotStreamable` (possibly after yielding: the caller discards what it wrote
and starts again) for files the streaming loader also leaves to the whole-file decoder: a bare array, a cut-off
file, invalid JSON, keys it cannot place. `rewrite_pieces` reads the text whole (memory: the text plus a small
object per event) and handles every file the loader reads, repaired ones included.

This lives in `loader/` because it is the only other place that touches raw trace JSON. Rows are matched to the
file's events through `Trace.source_rows`: row i is the source_rows[i]-th complete (`ph: "X"`) event with a
finite timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracelens.errors import TracelensError
from tracelens.loader.coerce import is_complete
from tracelens.loader.source import (
    BLOCK_BYTES,
    GZIP_MAGIC,
    MAX_EVENT_BYTES,
    EventGapGuard,
    Gunzip,
    check_readable,
    read_trace_bytes,
)
from tracelens.loader.stream import CHUNK_BYTES, RANGE_AFFIXES, NotStreamable, events_head, next_boundary
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US


class AddedSlice(msgspec.Struct, frozen=True):
    """A slice to add, in model time (ns since the trace origin), on the thread named `track`."""

    track: str
    name: str
    ts_ns: int
    dur_ns: int
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class Additions(msgspec.Struct, frozen=True):
    """What to add: slices on their own process, and args merged into existing events by row."""

    slices: tuple[AddedSlice, ...] = ()
    row_args: Mapping[int, Mapping[str, Any]] = msgspec.field(default_factory=dict)
    process_name: str = "tracelens findings"


class RewriteSource(msgspec.Struct, frozen=True):
    """What a rewrite needs of a loaded `Trace` (`rewrite_source`), so that the trace itself can be freed before
    the file is read again: peak memory is then the larger of the analysis and the rewrite, not their sum."""

    path: Path
    source_rows: np.ndarray | None
    expected_events: int
    origin_us: float
    truncated: bool
    dropped_tail_bytes: int
    bare_array: bool


def rewrite_source(trace: Trace) -> RewriteSource:
    """The `RewriteSource` of `trace`; raises TracelensError if it was not loaded from a file."""
    if trace.path is None:
        raise TracelensError("the trace was not loaded from a file; nothing to rewrite")
    rows = trace.source_rows  # table rows are not in file order
    return RewriteSource(
        path=trace.path,
        source_rows=rows,
        expected_events=trace.source_events if rows is not None else len(trace.events),
        origin_us=trace.origin_us,
        truncated=trace.truncation.truncated,
        dropped_tail_bytes=trace.truncation.dropped_tail_bytes,
        bare_array=trace.meta.format == "chrome-array",
    )


def rewrite_trace(trace: Trace, additions: Additions) -> bytes:
    """The trace file of `trace` as JSON bytes with `additions`; raises TracelensError if rows cannot be matched."""
    return b"".join(rewrite_pieces(rewrite_source(trace), additions))


class _Item(msgspec.Struct):
    """The fields of an event the rewrite looks at (the rest stays undecoded)."""

    ph: Any = None
    ts: Any = None
    pid: Any = None


_ITEM = msgspec.json.Decoder(_Item)
_ITEM_LIST = msgspec.json.Decoder(list[_Item])
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS_KEY = msgspec.json.encode("traceEvents")
MAX_RANGE_BYTES = 2 * MAX_EVENT_BYTES  # a range that does not decode at this size is not cut wrong: invalid

__all__ = ["AddedSlice", "Additions", "NotStreamable", "RewriteSource", "rewrite_pieces", "stream_pieces"]


def rewrite_pieces(source: RewriteSource, additions: Additions) -> list[bytes | msgspec.Raw]:
    """The rewritten file as pieces to write in order (their concatenation is the JSON document): each event
    stays its own bytes of the text read (`msgspec.Raw`, no copy, no decode to Python values) except those that
    gain args, which are decoded, merged and encoded again; then the new events. Raises TracelensError if rows
    cannot be matched. Text that is not valid JSON (repaired by the loader) is rewritten through plain values."""
    raw = _text(source)
    try:
        top = None if source.bare_array else _TOP.decode(raw)
        items = _ITEMS.decode(raw if top is None else top.get("traceEvents", b"null"))
    except (msgspec.DecodeError, RecursionError):
        return [_rewrite_plain(source, raw, additions)]
    complete: list[int] = []
    pids: list[int] = []
    for index, item in enumerate(items):
        try:
            fields = _ITEM.decode(item)
        except (msgspec.DecodeError, RecursionError):
            continue
        if is_complete(fields.ph, fields.ts):
            complete.append(index)
        if isinstance(fields.pid, int) and not isinstance(fields.pid, bool):
            pids.append(fields.pid)
    _check_count(source, len(complete))
    pieces: list[bytes | msgspec.Raw] = list(items)
    for position, extra in _args_by_complete_index(source, additions).items():
        pieces[complete[position]] = _annotated(items[complete[position]], extra)
    pieces += [_encode(event) for event in _new_events(source, max(pids, default=0) + 1, additions)]
    joined: list[bytes | msgspec.Raw] = []
    for index, piece in enumerate(pieces):
        joined += (b",", piece) if index else (piece,)
    if top is None:
        return [b"[", *joined, b"]"]
    head: list[bytes | msgspec.Raw] = [b"{"]
    for key, value in top.items():
        if len(head) > 1:
            head.append(b",")
        head.append(msgspec.json.encode(key) + b":")
        head += [b"[", *joined, b"]"] if key == "traceEvents" else [value]
    return [*head, b"}"]


def stream_pieces(source: RewriteSource, additions: Additions, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The bytes of `rewrite_pieces(source, additions)`, yielded range by range as the file is read forward
    (see the module docstring): about `chunk_bytes` of events, plus one event, are held at once. Raises
    NotStreamable (possibly after yielding) for a file that needs `rewrite_pieces`, and TracelensError, after
    the last event, when the events do not match the loader's count."""
    if source.truncated or source.bare_array:
        raise NotStreamable("a repaired file")
    check_readable(source.path)
    try:
        yield from _streamed(source, _args_by_complete_index(source, additions), additions, chunk_bytes)
    except OSError as exc:
        raise TracelensError(f"{source.path}: cannot read: {exc.strerror or exc}") from exc


def _streamed(
    source: RewriteSource, by_position: Mapping[int, Mapping[str, Any]], additions: Additions, chunk_bytes: int
) -> Iterator[bytes]:
    with source.path.open("rb") as handle:
        text = _ForwardText(_text_blocks(handle, str(source.path)), str(source.path))
        head = events_head(text)
        head_keys = _decoded(_TOP, head + RANGE_AFFIXES["head"][1])
        if list(head_keys)[-1] != "traceEvents":  # the key came earlier too: its value is the later one
            raise NotStreamable("traceEvents twice")
        del head_keys["traceEvents"]
        yield b"".join([b"{", *_members(head_keys), b"," if head_keys else b"", _EVENTS_KEY, b":["])
        events = _EventCount()
        start = target = len(head)
        while (cut := next_boundary(text, target + chunk_bytes)) is not None:
            array = b"".join((b"[", text.take(start, cut[0]), b"]"))
            try:
                items = _ITEMS.decode(array)
            except (msgspec.DecodeError, RecursionError):  # cut inside a string or an event: a longer range
                if cut[0] - start > MAX_RANGE_BYTES:
                    raise NotStreamable(f"no event boundary in {MAX_RANGE_BYTES >> 20} MB") from None
                target = cut[1] + (cut[0] - start)
                continue
            text.forget(cut[1])
            separator = b"," if events.items else b""
            yield separator + events.joined(array, items, by_position)
            start = target = cut[1]
        tail = RANGE_AFFIXES["tail"][0] + text.take(start, None)
    tail_keys = _decoded(_TOP, tail)
    if tail.find(_EVENTS_KEY, len(RANGE_AFFIXES["tail"][0])) >= 0 or not head_keys.keys().isdisjoint(tail_keys):
        raise NotStreamable("keys of the document twice")
    before = events.items
    array = bytes(tail_keys.pop("traceEvents"))
    last = events.joined(array, _decoded(_ITEMS, array), by_position)
    del tail
    _check_count(source, events.complete)
    added = [_encode(event) for event in _new_events(source, events.max_pid + 1, additions)]
    pieces = [last, *added] if events.items > before else added
    yield (b"," if before and pieces else b"") + b",".join(pieces) + b"]"
    yield b"".join([b"," if tail_keys else b"", *_members(tail_keys), b"}"])


class _EventCount:
    """Events seen so far in a streamed rewrite: all items, complete events, and the largest integer pid."""

    def __init__(self) -> None:
        self.items = 0
        self.complete = 0
        self.max_pid = 0

    def joined(self, array: bytes, items: list[msgspec.Raw], by_position: Mapping[int, Mapping[str, Any]]) -> bytes:
        """The `items` of the JSON array `array` joined by commas, those at complete-event positions in
        `by_position` with its args merged."""
        pieces: list[bytes | msgspec.Raw] = list(items)
        for index, fields in enumerate(_fields(array, items)):
            if fields is None:
                continue
            if is_complete(fields.ph, fields.ts):
                extra = by_position.get(self.complete)
                if extra is not None:
                    pieces[index] = _annotated(items[index], extra)
                self.complete += 1
            pid = fields.pid
            if isinstance(pid, int) and not isinstance(pid, bool) and pid > self.max_pid:
                self.max_pid = pid
        self.items += len(items)
        return b",".join(pieces)


def _fields(array: bytes, items: list[msgspec.Raw]) -> list[_Item | None]:
    """`_Item` of each item of `array` (None for one that is not an object), decoded at once when every item
    is one."""
    try:
        return list(_ITEM_LIST.decode(array))
    except (msgspec.DecodeError, RecursionError):
        pass
    out: list[_Item | None] = []
    for item in items:
        try:
            out.append(_ITEM.decode(item))
        except (msgspec.DecodeError, RecursionError):
            out.append(None)
    return out


def _decoded(decoder: Any, text: bytes | msgspec.Raw) -> Any:
    try:
        return decoder.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from None


def _members(keys: Mapping[str, msgspec.Raw]) -> list[bytes]:
    """`"key":value` of each key, joined by commas (as `rewrite_pieces` writes them)."""
    out: list[bytes] = []
    for key, value in keys.items():
        out += [b",", msgspec.json.encode(key), b":", bytes(value)]
    return out[1:]


def _text_blocks(handle: Any, name: str) -> Iterator[bytes]:
    """The text of an open trace file in blocks: gunzipped as it is read when it starts with the gzip magic."""
    if handle.read(2) == GZIP_MAGIC:
        handle.seek(0)
        yield from Gunzip(handle, name)
        return
    handle.seek(0)
    yield from iter(lambda: handle.read(BLOCK_BYTES), b"")


class _ForwardText:
    """Text given in blocks, read as a file that only goes forward: `seek` and `read` anywhere at or after the
    first byte kept (what `stream.events_head` and `stream.next_boundary` need), `take` a range's bytes, and
    `forget` the text before an offset. It holds the text from the last `forget` to the furthest read, and
    refuses text without an event end for `MAX_EVENT_BYTES` (`source.EventGapGuard`), so that is bounded."""

    def __init__(self, blocks: Iterator[bytes], source: str) -> None:
        self._blocks = blocks
        self._guard = EventGapGuard(source)
        self._text = bytearray()
        self._base = 0  # the offset of _text[0] in the whole text
        self._position = 0

    def seek(self, position: int) -> int:
        if position < self._base:
            raise ValueError(f"offset {position} was forgotten")
        self._position = position
        return position

    def read(self, size: int) -> bytes:
        data = self.take(self._position, self._position + size)
        self._position += len(data)
        return data

    def take(self, start: int, end: int | None) -> bytes:
        """Bytes [start, end) of the text (to its end when `end` is None); `start` not before the first kept."""
        self._fill(end)
        stop = None if end is None else end - self._base
        return bytes(memoryview(self._text)[start - self._base : stop])

    def forget(self, offset: int) -> None:
        """Free the text before `offset`."""
        del self._text[: offset - self._base]
        self._base = offset

    def _fill(self, end: int | None) -> None:
        while end is None or self._base + len(self._text) < end:
            block = next(self._blocks, None)
            if block is None:
                return
            self._guard.feed(block)
            self._text += block


def _args_by_complete_index(source: RewriteSource, additions: Additions) -> dict[int, Mapping[str, Any]]:
    """The args to merge, by the position of their event among the file's complete events (rows of another
    file, a `--capture` trace's, are left out)."""
    rows = source.source_rows
    n_rows = len(rows) if rows is not None else source.expected_events
    out: dict[int, Mapping[str, Any]] = {}
    for row, extra in sorted(additions.row_args.items()):
        if 0 <= row < n_rows:
            out[int(rows[row]) if rows is not None else row] = extra
    return out


def _annotated(item: msgspec.Raw, extra: Mapping[str, Any]) -> bytes:
    """The event `item` with `extra` merged into its args (an `args` that is not an object is replaced)."""
    event = msgspec.json.decode(item)
    args = event.get("args")
    event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
    return _encode(event)


def _encode(value: Any) -> bytes:
    try:
        return msgspec.json.encode(value)
    except UnicodeEncodeError:  # a lone surrogate escape (`"\ud800"`) in a name: written back as the same escape
        return json.dumps(value, ensure_ascii=True).encode()


def _check_count(source: RewriteSource, found: int) -> None:
    if found != source.expected_events:
        raise TracelensError(
            f"{source.path}: found {found:,} complete events but the loader read {source.expected_events:,}; "
            "cannot match events to add findings"
        )


def _rewrite_plain(source: RewriteSource, raw: bytes, additions: Additions) -> bytes:
    """The rewrite through plain JSON values (text the strict decoder refuses: repaired by the loader)."""
    try:
        document = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    except (ValueError, RecursionError) as exc:
        raise TracelensError(f"{source.path}: cannot re-read the trace ({exc})") from exc
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TracelensError(f"{source.path}: cannot re-read the trace (no traceEvents list)")
    complete = [i for i, e in enumerate(events) if _is_complete(e)]
    _check_count(source, len(complete))
    rows = source.source_rows
    for row, extra in sorted(additions.row_args.items()):
        if row >= (len(rows) if rows is not None else len(complete)):
            continue  # a row of another file (a --capture trace's ops): not in this one
        event = events[complete[int(rows[row]) if rows is not None else row]]
        args = event.get("args")
        event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
    events.extend(_new_events(source, _free_pid(events), additions))
    return _encode(document)


def _text(source: RewriteSource) -> bytes:
    raw = read_trace_bytes(source.path).data
    if source.truncated:
        raw = _closed(raw[: len(raw) - source.dropped_tail_bytes], source.bare_array)
    return raw


def _closed(head: bytes, bare_array: bool) -> bytes:
    """A file cut off after its last complete event, closed again."""
    return head.rstrip().rstrip(b",") + (b"]" if bare_array else b"]}")


def _is_complete(event: object) -> bool:
    return isinstance(event, dict) and is_complete(event.get("ph"), event.get("ts"))


def _new_events(source: RewriteSource, pid: int, additions: Additions) -> list[dict[str, Any]]:
    """Metadata naming the new process (`pid`) and threads, then the slices (µs in the file's own clock)."""
    if not additions.slices:
        return []
    tracks = sorted({s.track for s in additions.slices})
    tid_of = {track: index + 1 for index, track in enumerate(tracks)}
    first_us = round(source.origin_us, 3)
    out: list[dict[str, Any]] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": pid,
            "tid": 0,
            "ts": first_us,
            "args": {"name": additions.process_name},
        },
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": first_us, "args": {"sort_index": -1}},
    ]
    for track, tid in tid_of.items():
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": first_us, "args": {"name": track}})
    for item in additions.slices:
        out.append(
            {
                "ph": "X",
                "cat": "tracelens",
                "name": item.name,
                "pid": pid,
                "tid": tid_of[item.track],
                "ts": round(source.origin_us + item.ts_ns / NS_PER_US, 3),
                "dur": round(item.dur_ns / NS_PER_US, 3),
                "args": dict(item.args),
            }
        )
    return out


def _free_pid(events: list[Any]) -> int:
    """An integer pid that no event uses: one above the largest integer pid."""
    pids = [e.get("pid") for e in events if isinstance(e, dict)]
    numbers = [p for p in pids if isinstance(p, int) and not isinstance(p, bool)]
    return max(numbers, default=0) + 1
