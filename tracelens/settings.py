"""Parsing settings from the environment and sizes from options, in one place: bounded and validated.

Every environment variable tracelens reads as a number (`TRACELENS_WORKERS`, `COLUMNS`, `LINES`,
`TRACELENS_DASK_TIMEOUT_S`) and every size (`--max-size`, `TRACELENS_CACHE_MAX_SIZE`) is parsed here: ASCII
digits only (no `²`, no other Unicode digits), at most `MAX_DIGITS` of them (no 5,000-digit integer
conversion), and within a stated range; anything else is one `TracelensError` (exit 2) naming the setting,
or a `ValueError` for `parse_size`, which its callers turn into their message.
"""

from __future__ import annotations

import math
import os
import re

from tracelens.errors import TracelensError

MAX_DIGITS = 18  # a setting with more digits than this is no count anyone meant
MAX_SIZE_BYTES = 1 << 60  # 1 EiB: a size above this is refused, not turned into infinity
TERMINAL_MAX = 100_000  # COLUMNS and LINES: at most this many cells
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*([0-9]{1,18}(?:\.[0-9]{1,9})?)\s*([kmgt]?)(?:i?b)?\s*")


def parse_count(text: str, name: str, minimum: int, maximum: int) -> int:
    """`text` as a whole number in [minimum, maximum]; `TracelensError` (exit 2) naming `name` otherwise."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS or not minimum <= int(value) <= maximum:
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value):,} characters)"
        raise TracelensError(f"{name} must be a whole number from {minimum:,} to {maximum:,} (got {shown!r})")
    return int(value)


def env_count(name: str, minimum: int, maximum: int) -> int | None:
    """The environment variable `name` as a count (see `parse_count`); None when unset or empty."""
    setting = os.environ.get(name, "").strip()
    return parse_count(setting, name, minimum, maximum) if setting else None


def env_seconds(name: str, default_s: float, minimum_s: float, maximum_s: float) -> float:
    """The environment variable `name` as seconds in [minimum_s, maximum_s]; `default_s` when unset or empty;
    `TracelensError` (exit 2) when malformed, not finite or out of range."""
    setting = os.environ.get(name, "").strip()
    if not setting:
        return default_s
    try:
        value = float(setting) if setting.isascii() and len(setting) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not minimum_s <= value <= maximum_s:
        raise TracelensError(
            f"{name} must be a number of seconds from {minimum_s:g} to {maximum_s:g} (got {setting[:40]!r})"
        )
    return value


def parse_size(text: str) -> int:
    """Bytes in a size such as `2G`, `2GiB`, `500M`, `1.5g` or `1048576` (units are powers of 1024), at most
    `MAX_SIZE_BYTES`; `ValueError` otherwise."""
    match = _SIZE.fullmatch(text.lower()) if text.isascii() and len(text) <= 40 else None
    if match is None:
        shown = text if len(text) <= 40 else f"{text[:40]}… ({len(text):,} characters)"
        raise ValueError(f"not a size: {shown!r} (use e.g. 2G, 500M or a number of bytes)")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value > MAX_SIZE_BYTES:
        raise ValueError(f"size {text.strip()!r} is more than {MAX_SIZE_BYTES >> 60} EiB")
    return value


def check_terminal_environment() -> None:
    """`COLUMNS` and `LINES`, when set, are counts of cells from 1 to `TERMINAL_MAX` (rich reads them at every
    console's start): `TracelensError` (exit 2) otherwise."""
    for name in ("COLUMNS", "LINES"):
        env_count(name, 1, TERMINAL_MAX)
