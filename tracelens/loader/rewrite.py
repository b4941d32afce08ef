"""Write a trace back with additions: re-read the original file, decode it to plain JSON values, merge extra
args into chosen events, append new slices on a track of their own, and encode it again.

This lives in `loader/` because it is the only other place that touches raw trace JSON. Rows are matched to the
file's events through `Trace.source_rows`: row i is the source_rows[i]-th complete (`ph: "X"`) event with a
finite timestamp.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

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


def rewrite_trace(trace: Trace, additions: Additions) -> bytes:
    """The trace file of `trace` as JSON bytes with `additions`; raises TracelensError if rows cannot be matched."""
    if trace.path is None:
        raise TracelensError("the trace was not loaded from a file; nothing to rewrite")
    document = _decode(trace)
    events = document["traceEvents"] if isinstance(document, dict) else document
    complete = [i for i, e in enumerate(events) if _is_complete(e)]
    rows = trace.source_rows  # table rows are not in file order
    expected = trace.source_events if rows is not None else len(trace.events)
    if len(complete) != expected:
        raise TracelensError(
            f"{trace.path}: found {len(complete):,} complete events but the loader read {expected:,}; "
            "cannot match events to add findings"
        )
    for row, extra in sorted(additions.row_args.items()):
        if row >= (len(rows) if rows is not None else len(complete)):
            continue  # a row of another file (a --capture trace's ops): not in this one
        event = events[complete[int(rows[row]) if rows is not None else row]]
        args = event.get("args")
        event["args"] = {**(args if isinstance(args, dict) else {}), **extra}
    events.extend(_new_events(trace, events, additions))
    try:
        return msgspec.json.encode(document)
    except UnicodeEncodeError:  # a lone surrogate escape (`"\ud800"`) in a name: written back as the same escape
        return json.dumps(document, ensure_ascii=True).encode()


def _decode(trace: Trace) -> Any:
    assert trace.path is not None
    raw = read_trace_bytes(trace.path).data
    if trace.truncation.truncated:
        raw = _closed(raw[: len(raw) - trace.truncation.dropped_tail_bytes], trace.meta.format == "chrome-array")
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        try:
            document = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
        except ValueError as exc:
            raise TracelensError(f"{trace.path}: cannot re-read the trace ({exc})") from exc
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TracelensError(f"{trace.path}: cannot re-read the trace (no traceEvents list)")
    return document


def _closed(head: bytes, bare_array: bool) -> bytes:
    """A file cut off after its last complete event, closed again."""
    return head.rstrip().rstrip(b",") + (b"]" if bare_array else b"]}")


def _is_complete(event: object) -> bool:
    return isinstance(event, dict) and is_complete(event.get("ph"), event.get("ts"))


def _new_events(trace: Trace, events: list[Any], additions: Additions) -> list[dict[str, Any]]:
    """Metadata naming the new process and threads, then the slices (µs in the file's own clock)."""
    if not additions.slices:
        return []
    pid = _free_pid(events)
    tracks = sorted({s.track for s in additions.slices})
    tid_of = {track: index + 1 for index, track in enumerate(tracks)}
    first_us = round(trace.origin_us, 3)
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
                "ts": round(trace.origin_us + item.ts_ns / NS_PER_US, 3),
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
