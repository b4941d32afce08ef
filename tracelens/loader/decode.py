"""JSON bytes → typed events: a fast typed pass, a lenient pass for odd types or invalid JSON, and
salvage of files cut off mid-write."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from tracelens.errors import UnusableTraceError
from tracelens.loader.coerce import to_int, valid_strings
from tracelens.loader.extras import ExtraColumns, extra_columns, has_extras, has_memory_or_counters
from tracelens.loader.schema import (
    DIM_ARGS,
    INT_ARGS,
    NO_RAW,
    RAW_ARGS,
    AnyPhaseEvent,
    AnyPhaseEventWithExtras,
    Args,
    Event,
)
from tracelens.model.memory import EXTRAS_NOT_READ

METADATA_KEYS = (
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
    "trace_id",
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "hip_runtime_version",
    "hip_driver_version",
    "roctracer_version",
    "record_shapes",
    "with_stack",
    "profile_memory",
    "with_flops",
    "with_modules",
    "tracelens_run",
    "tracelens_record",
)


class _Document(msgspec.Struct, gc=False):
    traceEvents: list[Event] | None = None
    schemaVersion: msgspec.Raw = NO_RAW
    deviceProperties: msgspec.Raw = NO_RAW
    distributedInfo: msgspec.Raw = NO_RAW
    baseTimeNanoseconds: msgspec.Raw = NO_RAW
    displayTimeUnit: msgspec.Raw = NO_RAW
    traceName: msgspec.Raw = NO_RAW
    trace_id: msgspec.Raw = NO_RAW
    cuda_runtime_version: msgspec.Raw = NO_RAW
    cuda_driver_version: msgspec.Raw = NO_RAW
    cupti_version: msgspec.Raw = NO_RAW
    hip_runtime_version: msgspec.Raw = NO_RAW
    hip_driver_version: msgspec.Raw = NO_RAW
    roctracer_version: msgspec.Raw = NO_RAW
    record_shapes: msgspec.Raw = NO_RAW
    with_stack: msgspec.Raw = NO_RAW
    profile_memory: msgspec.Raw = NO_RAW
    with_flops: msgspec.Raw = NO_RAW
    with_modules: msgspec.Raw = NO_RAW
    tracelens_run: msgspec.Raw = NO_RAW
    tracelens_record: msgspec.Raw = NO_RAW


_UTF8_BOM = b"\xef\xbb\xbf"


class _StreamDocument(_Document, gc=False):
    traceEvents: list[AnyPhaseEvent] | None = None  # type: ignore[assignment,valid-type]


class _StreamDocumentWithExtras(_Document, gc=False):
    traceEvents: list[AnyPhaseEventWithExtras] | None = None  # type: ignore[assignment,valid-type]


STREAM_DOC_DECODER = msgspec.json.Decoder(_StreamDocument)
STREAM_EVENTS_DECODER = msgspec.json.Decoder(list[AnyPhaseEvent])  # type: ignore[valid-type]
# instant and counter events typed (`loader.extras`): only for text that holds some
EXTRAS_DOC_DECODER = msgspec.json.Decoder(_StreamDocumentWithExtras)
EXTRAS_EVENTS_DECODER = msgspec.json.Decoder(list[AnyPhaseEventWithExtras])  # type: ignore[valid-type]
_DOC_DECODER = msgspec.json.Decoder(_Document)
_ARRAY_DECODER = msgspec.json.Decoder(list[Event])


class Decoded(msgspec.Struct):
    """Events plus top-level metadata (values decoded to plain Python) and what was repaired on the way."""

    events: list[Event]
    metadata: dict[str, Any]
    bare_array: bool
    truncated: bool = False
    dropped_tail_bytes: int = 0
    notes: list[str] = msgspec.field(default_factory=list)


def _is_scalar(data: bytes) -> bool:
    """Whether `data` (short) is one JSON null, boolean, number or string."""
    if len(data) > 256:
        return False
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True


def decode_trace(data: bytes, source: str) -> Decoded:
    """Decode a whole trace; raise UnusableTraceError when nothing usable is in `data`."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    start = _first_non_space(data)
    if start < 0:
        raise UnusableTraceError(f"{source}: empty file; pass a trace written by torch.profiler")
    opener = data[start : start + 1]
    if opener not in (b"{", b"["):
        head = data[start : start + 12]
        what = "one JSON value, not a trace (an object with traceEvents, or a list of events)"
        raise UnusableTraceError(f"{source}: {what if _is_scalar(data) else 'not JSON'} (it starts with {head!r})")
    bare_array = opener == b"["
    try:
        return _decode_any(data, source, bare_array)
    except RecursionError as exc:
        raise UnusableTraceError(f"{source}: JSON nested too deeply to read (an args value?)") from exc


def _decode_any(data: bytes, source: str, bare_array: bool) -> Decoded:
    try:
        return _decode_typed(data, bare_array)
    except msgspec.ValidationError:
        return _decode_lenient_json(data, source, bare_array)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            return _salvage(data, source, bare_array)
        try:
            return _decode_repaired(data, source, bare_array)
        except UnusableTraceError:
            return _salvage(data, source, bare_array)


def _first_non_space(data: bytes) -> int:
    """Index of the first non-whitespace byte, -1 if there is none (no copy of `data` is made)."""
    match = _NON_SPACE.search(data)
    return match.start() if match else -1


def _decode_typed(data: bytes, bare_array: bool) -> Decoded:
    if bare_array:
        return Decoded(_ARRAY_DECODER.decode(data), {}, True)
    doc = _DOC_DECODER.decode(data)
    if doc.traceEvents is None:
        raise msgspec.ValidationError("no traceEvents")
    return Decoded(doc.traceEvents, metadata_of(doc), False)


def metadata_of(doc: _Document) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for key in METADATA_KEYS:
        raw = getattr(doc, key)
        if len(raw):
            try:
                metadata[key] = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                continue
    return metadata


# ---------------------------------------------------------------- lenient path


def _decode_lenient_json(data: bytes, source: str, bare_array: bool) -> Decoded:
    """Stdlib JSON with control characters allowed, then field-by-field coercion."""
    invalid = None
    saturated = [0]
    try:
        document = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        invalid = None if str(exc).startswith(_INTEGER_OUT_OF_RANGE) else exc
        try:
            import json  # only for invalid JSON or huge integers (rare): the common paths never import it

            document = json.loads(
                data.decode("utf-8", errors="replace"), strict=False, parse_int=lambda text: _int(text, saturated)
            )
        except (ValueError, RecursionError) as error:
            raise UnusableTraceError(f"{source}: not valid JSON ({error})") from error
    decoded = _from_plain(document, source, bare_array)
    if invalid is not None:
        decoded.notes.append(f"invalid JSON repaired ({invalid})")
    if saturated[0]:
        decoded.notes.append(
            f"{saturated[0]:,} integers of over {MAX_INT_DIGITS:,} digits were read as ±(10^{MAX_INT_DIGITS} - 1), "
            "beyond every range (as any integer too big for its field)"
        )
    return decoded


# Python refuses to convert an integer literal of more digits than this (quadratic time); msgspec's untyped
# decode then fails with "Integer value out of range". Such an integer is beyond every field's range, as one of
# 400 digits is: it is read as the largest integer of this many digits, and the fields' own range checks treat
# it as they treat any integer too big for them (a timestamp days away, a duration not a number, an id none).
MAX_INT_DIGITS = 4_300
_SATURATED = 10**MAX_INT_DIGITS - 1
_INTEGER_OUT_OF_RANGE = "Integer value out of range"


def _int(text: str, saturated: list[int]) -> int:
    """The integer a JSON integer literal spells; one of over `MAX_INT_DIGITS` digits saturates (counted)."""
    negative = text.startswith("-")
    if len(text) - negative <= MAX_INT_DIGITS:
        return int(text)
    saturated[0] += 1
    return -_SATURATED if negative else _SATURATED


# Old Kineto quirks, repaired only after the strict parse failed: an unescaped quote inside a string value
# (`"name": "foo"bar",`), a trailing comma before `}` or `]`. Raw control characters and NaN/Infinity are
# accepted by the stdlib parser (strict=False) directly.
_UNESCAPED_QUOTE_VALUE = re.compile(rb'(:\s*")((?:[^"\\\n]|\\.|"(?![ \t]*[,}\]:\n]))*)("[ \t]*[,}\]\n])')
_TRAILING_COMMA = re.compile(rb",(\s*[}\]])")
_BARE_QUOTE = re.compile(rb'(?<!\\)"')


def _decode_repaired(data: bytes, source: str, bare_array: bool) -> Decoded:
    """Invalid JSON: the stdlib parser (control characters, NaN, Infinity), then with quirks repaired."""
    try:
        return _decode_lenient_json(data, source, bare_array)
    except UnusableTraceError:
        repaired = _TRAILING_COMMA.sub(rb"\1", _UNESCAPED_QUOTE_VALUE.sub(_escape_inner_quotes, data))
        if repaired == data:
            raise
        decoded = _decode_lenient_json(repaired, source, bare_array)
        if not any(note.startswith("invalid JSON repaired") for note in decoded.notes):
            decoded.notes.append("invalid JSON repaired (unescaped quotes or trailing commas)")
        return decoded


def _escape_inner_quotes(match: re.Match[bytes]) -> bytes:
    return match.group(1) + _BARE_QUOTE.sub(rb'\\"', match.group(2)) + match.group(3)


def _from_plain(document: object, source: str, bare_array: bool) -> Decoded:
    if isinstance(document, dict):
        raw_events = document.get("traceEvents")
        metadata = {key: document[key] for key in METADATA_KEYS if key in document}
    else:
        raw_events, metadata = document, {}
    if not isinstance(raw_events, list):
        raise UnusableTraceError(
            f"{source}: JSON but not a trace: no 'traceEvents' list (is this a torch.profiler trace?)"
        )
    events = [event for item in raw_events if (event := _coerce_event(item)) is not None]
    if raw_events and not events:
        raise UnusableTraceError(f"{source}: JSON but not a trace: no item of 'traceEvents' is an event")
    return Decoded(events, metadata, bare_array, notes=["odd field types were coerced"])


def _as_number(value: object) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    return None


def _as_id(value: object) -> int | str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return str(value)


def _as_dims(value: object) -> list[int] | None:
    if isinstance(value, list) and value and all(to_int(v) is not None for v in value):
        return [int(v) for v in value]
    return None


def _as_raw(value: object) -> msgspec.Raw:
    if value is None:
        return NO_RAW
    try:
        return msgspec.Raw(msgspec.json.encode(value))
    except UnicodeEncodeError:  # a lone surrogate escape in a string: kept with U+FFFD (`valid_text`)
        return _as_raw(valid_strings(value))
    except (TypeError, msgspec.EncodeError):
        return NO_RAW


def _coerce_args(args: object) -> Args | None:
    """The `Args` of a JSON `args` object of any value types: each field by its kind (`schema.INT_ARGS`: an int or
    None; `DIM_ARGS`: a non-empty list of ints or None; `RAW_ARGS`: the value's JSON, or empty)."""
    if not isinstance(args, dict):
        return None
    get = args.get
    return Args(*[coerce(get(key)) for key, coerce in _ARG_COERCIONS])  # positional: in `Args` field order


_COERCE_BY_KIND: dict[str, Callable[[object], Any]] = {
    **dict.fromkeys(INT_ARGS, to_int),
    **dict.fromkeys(DIM_ARGS, _as_dims),
    **dict.fromkeys(RAW_ARGS, _as_raw),
}
_ARG_COERCIONS = tuple((f.encode_name, _COERCE_BY_KIND[f.name]) for f in msgspec.structs.fields(Args))


def _coerce_event(item: object) -> Event | None:
    if not isinstance(item, dict):
        return None
    name = item.get("name", "")
    cat = item.get("cat", "")
    ph = item.get("ph", "")
    return Event(
        ph=ph if isinstance(ph, str) else "",
        cat=cat if isinstance(cat, str) else "",
        name=name if isinstance(name, str) else str(name),
        pid=_as_id(item.get("pid")),
        tid=_as_id(item.get("tid")),
        ts=_as_number(item.get("ts")),
        dur=_as_number(item.get("dur")),
        args=_coerce_args(item.get("args")),
    )


# ---------------------------------------------------------------- salvage of cut-off files

_MAX_SALVAGE_DECODES = 8  # full decodes of a candidate prefix (each costs one pass over the file)
_MAX_SALVAGE_CANDIDATES = 2_000_000  # `}` positions looked at, walking back from the cut (each a few string scans)
_NON_SPACE = re.compile(rb"\S")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _salvage(data: bytes, source: str, bare_array: bool) -> Decoded:
    """Keep every complete event of a file cut off mid-write; raise if none is complete.

    Walks back from the cut over `}` that end a list item; candidates inside a string (odd count of
    unescaped quotes before them) are skipped without decoding, so the work is bounded on any input.
    """
    if bare_array:
        events_start = _first_non_space(data) + 1
        prefix_close = b"]"
    else:
        match = _EVENTS_KEY.search(data)
        if match is None:
            raise UnusableTraceError(f"{source}: cut off before the first event (no 'traceEvents' list)")
        events_start = match.end()
        prefix_close = b"]}"
    for trust_quotes in (True, False):  # unescaped quotes in names (old kineto) break the quote count
        decoded = _salvage_walk(data, source, bare_array, events_start, prefix_close, trust_quotes)
        if decoded is not None:
            return decoded
    raise UnusableTraceError(f"{source}: not valid JSON and no complete event could be salvaged")


def _salvage_walk(
    data: bytes, source: str, bare_array: bool, events_start: int, prefix_close: bytes, trust_quotes: bool
) -> Decoded | None:
    cut = len(data)
    quotes = _quote_count(data, 0, cut) if trust_quotes else 0
    decodes = 0
    repaired = False
    for _ in range(_MAX_SALVAGE_CANDIDATES):
        previous = cut
        cut = data.rfind(b"}", events_start, cut)
        if cut < 0:
            break
        if trust_quotes:
            quotes -= _quote_count(data, cut, previous)
        if quotes % 2 or not _ends_an_item(data, cut + 1):
            continue
        end = cut + 1
        list_closed = _next_byte(data, end) == b"]"
        decodes += 1
        try:
            decoded = _decode_prefix(data[:end], prefix_close, bare_array, source)
        except msgspec.DecodeError as exc:
            if decodes >= _MAX_SALVAGE_DECODES:
                break
            if "truncated" in str(exc) or repaired:
                continue
            repaired = True  # invalid JSON before the cut: one repaired attempt
            try:
                decoded = _decode_repaired(data[:end] + prefix_close, source, bare_array)
            except UnusableTraceError:
                continue
        decoded.dropped_tail_bytes = len(data) - end
        if list_closed and not bare_array:  # only top-level keys after the event list were lost
            decoded.notes.append(
                f"the file ends {decoded.dropped_tail_bytes:,} bytes after the complete event list (cut off while "
                "writing the last top-level keys); no event was lost"
            )
        else:
            decoded.truncated = True
        return decoded
    return None


def _decode_prefix(prefix: bytes, close: bytes, bare_array: bool, source: str) -> Decoded:
    """Decode `prefix` closed with `close`; if the cut came after the event list, with `}` alone."""
    for closer in (close, b"}") if close == b"]}" else (close,):
        try:
            try:
                return _decode_typed(prefix + closer, bare_array)
            except msgspec.ValidationError:
                return _decode_lenient_json(prefix + closer, source, bare_array)
        except msgspec.DecodeError as exc:
            error = exc
    raise error


def _quote_count(data: bytes, start: int, end: int) -> int:
    """Unescaped double quotes in data[start:end] (a `\\"` pair is rare enough to ignore)."""
    return data.count(b'"', start, end) - data.count(b'\\"', start, end)


def _next_byte(data: bytes, position: int) -> bytes:
    return data[position : position + 64].lstrip()[:1]


def _ends_an_item(data: bytes, position: int) -> bool:
    """True when the next non-space byte after `position` is ',' or ']' or the data ends."""
    tail = data[position : position + 64].lstrip()
    return not tail or tail[:1] in (b",", b"]")


# ---------------------------------------------------------------- memory and counter events of the whole-file path


def decode_whole_extras(data: bytes, decoded: Decoded) -> tuple[ExtraColumns | None, str | None]:
    """The memory, counter and metadata events of a whole text (`loader.extras`), by a second, typed decode run
    only when the text holds a marker of one; of a cut-off text, its salvaged prefix. Text that needed other
    repairs (odd types, invalid JSON) is not decoded again: its memory and counter events are left out, and the
    note says so (it starts with `EXTRAS_NOT_READ`); its metadata events too, without a note (the threads keep
    their pid/tid labels)."""
    if not has_extras(data):
        return None, None
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    if decoded.dropped_tail_bytes:
        prefix = data[: len(data) - decoded.dropped_tail_bytes]
        texts = [prefix + b"]"] if decoded.bare_array else [prefix + b"]}", prefix + b"}"]
    else:
        texts = [data]
    for text in texts:
        try:
            if decoded.bare_array:
                events = EXTRAS_EVENTS_DECODER.decode(text)
            else:
                events = EXTRAS_DOC_DECODER.decode(text).traceEvents or []
            return extra_columns(events), None
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
    if not has_memory_or_counters(data):  # only thread names were missed: the tracks keep pid/tid labels
        return None, None
    return None, f"{EXTRAS_NOT_READ}: the file needed repairs to decode (only its complete events are analyzed)"
