"""The loader's value rules, each written once: which event is a complete event, and which JSON value is an
integer. Used by the typed (columnar) path, the lenient whole-file path, the metadata and `rewrite`."""

from __future__ import annotations

import math

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def usable_ts(ts: object) -> bool:
    """Whether a `ts` value places an event in time: an int or a finite float (not a bool, None or a string)."""
    if type(ts) is int:
        return True
    return type(ts) is float and math.isfinite(ts)


def is_complete(ph: object, ts: object) -> bool:
    """A complete event: `ph` "X" with a usable `ts` (instants, flows, counters and metadata are not modelled)."""
    return ph == "X" and usable_ts(ts)


def to_int(value: object) -> int | None:
    """The integer a JSON value stands for, or None: an int, an integral float or a string of decimal digits
    (with an optional sign) that fits int64. A bool is not a number (`true` is None, never 1); neither is
    NaN, 2.5, "1e3" or 2**70 (beyond int64: no column can hold it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _is_decimal(value.strip()):
        number = int(value.strip())
    else:
        return None
    return number if INT64_MIN <= number <= INT64_MAX else None


def _is_decimal(text: str) -> bool:
    digits = text[1:] if text[:1] in ("-", "+") else text
    return digits.isascii() and digits.isdigit()


def valid_text(text: str) -> str:
    """`text` with each lone UTF-16 surrogate (a `"\\ud800"` escape without its pair, which JSON allows and
    UTF-8 cannot encode) replaced by U+FFFD; every other character kept. Pairs of escapes were already joined
    into one character by the decoder."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def valid_strings(value: object) -> object:
    """`value` (decoded JSON) with `valid_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [valid_strings(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(str(key)): valid_strings(item) for key, item in value.items()}
    return value
