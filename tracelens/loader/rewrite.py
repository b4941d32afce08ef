"""Write a trace back with additions: re-read the original file, cut its event list into each event's own bytes
(undecoded), merge extra args into chosen events, append new slices on a track of their own, and give the
pieces to write (their memory is the text read plus a small object per event, not a decoded document).

This lives in `loader/` because it is the only other place that touches raw trace JSON. Rows are matched to the
file's events through `Trace.source_rows`: row i is the source_rows[i]-th complete (`ph: "X"`) event with a
finite timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracelens.errors import TracelensError
from tracelens.loader.coerce import is_complete
from tracelens.loader.source import read_trace_bytes
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US


@dataclass(frozen=True)
class AddedSlice:
    """A slice to add, in model time (ns since the trace origin), on the thread named `track`."""

    track: str
    name: str
    ts_ns: int
    dur_ns: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Additions:
    """What to add: slices on their own process, and args merged into existing events by row."""

    slices: tuple[AddedSlice, ...] = ()
    row_args: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    process_name: str = "tracelens findings"


@dataclass(frozen=True)
class RewriteSource:
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
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])


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
    rows = source.source_rows
    for row, extra in sorted(additions.row_args.items()):
        index = complete[int(rows[row]) if rows is not None else row]
        event = msgspec.json.decode(items[index])
        args = event.get("args")
        event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
        pieces[index] = _encode(event)
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
