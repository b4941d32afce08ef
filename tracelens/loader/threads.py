"""Thread and process names from the trace's metadata (`ph: "M"`) events → the `TrackTable`'s `thread_name`,
`process_name` and `sort_index` columns (the events read: `fields.METADATA_EVENTS`).

Each chunk gives its metadata events as rows (`metadata_rows`: M event name, pid label, tid label, value; labels
as the tracks spell them, `str(pid)`), only when it holds one: the C extension's pass over the chunk says so
(`has_meta`), so a chunk without one costs nothing. `named_tracks` gives every CPU track its names. The rule,
where a thread has several `thread_name` events (Kineto writes `thread 529 (pt_autograd_0)` and then
`thread 529 (python3)` for the autograd thread): the first whose short name (`model.trace.short_thread_name`)
differs from its process's name, else the first. A process's name is its first `process_name`; a thread's sort
index its first integer `thread_sort_index`. Values that are not a string (an integer for a sort index) are left
out.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from tracelens.loader.coerce import valid_text
from tracelens.loader.fields import METADATA_EVENTS
from tracelens.loader.schema import MetadataEvent
from tracelens.model.trace import TrackTable, short_thread_name

MetaRow = tuple[str, str, str, Any]  # (M event name, pid label, tid label, decoded value)


def metadata_rows(events: list[Any]) -> list[MetaRow]:
    """The `METADATA_EVENTS` among decoded `events` (any phases), in file order, with their values decoded; values
    that are not JSON or of the wrong type are left out."""
    rows: list[MetaRow] = []
    for event in events:
        if type(event) is not MetadataEvent or event.name not in METADATA_EVENTS or event.args is None:
            continue
        raw = getattr(event.args, METADATA_EVENTS[event.name][0])
        if not len(raw):
            continue
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        value = _value(METADATA_EVENTS[event.name][1], value)
        if value is not None:
            rows.append((event.name, _label(event.pid), _label(event.tid), value))
    return rows


def named_tracks(tracks: TrackTable, parts: list[list[MetaRow]]) -> TrackTable:
    """`tracks` with `thread_name`, `process_name` and `sort_index` filled from the chunks' rows (in file order),
    by the rule in the module docstring; GPU tracks get "" and -1."""
    threads: dict[tuple[str, str], list[str]] = {}
    processes: dict[str, str] = {}
    sort_index: dict[tuple[str, str], int] = {}
    for rows in parts:
        for event, pid, tid, value in rows:
            column = METADATA_EVENTS[event][1]
            if column == "thread_name":
                threads.setdefault((pid, tid), []).append(value)
            elif column == "process_name":
                processes.setdefault(pid, value)
            else:
                sort_index.setdefault((pid, tid), value)
    thread_name, process_name, index = [], [], []
    for track in range(len(tracks)):
        pid, tid = tracks.pid[track], tracks.tid[track]
        cpu = not tracks.is_gpu[track]
        process = processes.get(pid, "") if cpu else ""
        thread_name.append(_pick(threads.get((pid, tid), []), tid, process) if cpu else "")
        process_name.append(process)
        index.append(sort_index.get((pid, tid), -1) if cpu else -1)
    return msgspec.structs.replace(
        tracks,
        thread_name=tuple(thread_name),
        process_name=tuple(process_name),
        sort_index=np.array(index, dtype=np.int64),
    )


def _pick(names: list[str], tid: str, process: str) -> str:
    """The first of `names` whose short name is not the process's name, else the first ("" for none)."""
    for name in names:
        if short_thread_name(name, tid) != short_thread_name(process, tid):
            return name
    return names[0] if names else ""


def _value(column: str, value: Any) -> Any:
    if column == "sort_index":
        return value if type(value) is int and -(2**63) <= value < 2**63 else None
    return valid_text(value) if isinstance(value, str) and value.strip() else None


def _label(value: object) -> str:
    return "" if value is None else valid_text(str(value))
