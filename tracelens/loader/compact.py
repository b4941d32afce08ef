"""Empty objects in the event list cost nothing kept: `drop_empty_items` removes them from a range's text
before it is decoded.

An empty object `{}` in `traceEvents` has no phase, so it is no event in any path (the whole-file decoder
builds an `Event` of defaults and drops it, the streaming decoder refuses it for lacking `ph`), but decoding it
costs a struct per item: a gzip of a gigabyte of `{}, ` became a quarter-billion structs. Removing such items
from the text first makes their cost a scan of bytes. The C extension does it in place (`_native.drop_empty_items`,
a copy at memory speed); `python_drop_empty_items` below is its twin (the same bytes and counts; the tests
compare them on a family of texts), the oracle under TRACELENS_NO_NATIVE=1.
"""

from __future__ import annotations

import re

from tracelens import native
from tracelens.native import extension as _native

_SPACE = b" \t\r\n"
_SCALAR_END = re.compile(rb'[,\]}{\[" \t\r\n]')
_STRING_END = re.compile(rb'(?:[^"\\]|\\.)*"', re.S)  # from just after an opening quote to just after the close
_STRUCTURAL = re.compile(rb'["{}\[\]]')


EMPTY_OBJECTS_NOTE = "empty objects in traceEvents were skipped (an object without a phase is no event)"


def empty_objects_note(count: int) -> str:
    """The warning for `count` empty objects skipped."""
    return f"{count:,} {EMPTY_OBJECTS_NOTE}"


def drop_empty_items(buffer: bytearray | memoryview, start: int, end: int) -> tuple[int, int] | None:
    """Remove each empty object `{ }` among the comma-separated JSON values of `buffer[start:end]` (the text of
    a range of trace events; in the last range, followed by the `]` that closes the list and the rest of the
    document, which is kept unchanged), in place. The values kept are joined by single commas. Returns
    (the new end of the text, the number of values removed); None when the text is not a comma-separated run of
    values (then it is not valid JSON either, and the buffer must not be decoded)."""
    if native.ENABLED:
        result: tuple[int, int] | None = _native.drop_empty_items(buffer, start, end)
        return result
    return python_drop_empty_items(buffer, start, end)


def python_drop_empty_items(buffer: bytearray | memoryview, start: int, end: int) -> tuple[int, int] | None:
    """The Python twin of `_native.drop_empty_items` (same contract as `drop_empty_items`)."""
    if start < 0 or end < start or end > len(buffer):
        raise ValueError("drop_empty_items: a range outside the buffer")
    text = bytes(buffer[start:end])
    n = len(text)
    out = bytearray()
    r = dropped = kept = 0
    first = True
    while True:
        r = _skip_space(text, r)
        if r >= n:
            break
        if text[r : r + 1] == b"]":  # the end of the event list: the rest stays as it is
            out += text[r:]
            break
        if not first:
            if text[r : r + 1] != b",":
                return None
            r = _skip_space(text, r + 1)
            if r >= n:
                return None
        first = False
        stop = _value_end(text, r)
        if stop < 0:
            return None
        value = text[r:stop]
        if value[:1] == b"{" and value[-1:] == b"}" and not value[1:-1].strip(_SPACE):
            dropped += 1
        else:
            if kept:
                out += b","
            out += value
            kept += 1
        r = stop
    buffer[start : start + len(out)] = out
    return start + len(out), dropped


def _skip_space(text: bytes, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _value_end(text: bytes, i: int) -> int:
    """The index just past the JSON value starting at text[i] (delimited by strings and brackets, as the C
    twin does), -1 when it does not end within `text`."""
    first = text[i : i + 1]
    if first in (b"{", b"["):
        depth = 0
        j = i
        while True:
            found = _STRUCTURAL.search(text, j)
            if found is None:
                return -1
            j = found.start()
            char = text[j : j + 1]
            if char == b'"':
                closed = _STRING_END.match(text, j + 1)
                if closed is None:
                    return -1
                j = closed.end()
                continue
            depth += 1 if char in (b"{", b"[") else -1
            j += 1
            if depth == 0:
                return j
    if first == b'"':
        closed = _STRING_END.match(text, i + 1)
        return closed.end() if closed is not None else -1
    found = _SCALAR_END.search(text, i)
    stop = found.start() if found is not None else len(text)
    return stop if stop > i else -1
