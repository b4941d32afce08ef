"""Finished analyses, cached beside the loaded traces (`tracelens.cache`), so analyzing the same file with the
same options again skips loading and analyzing altogether.

An entry is `<cache dir>/analyses/<key>.msgpack`: the `AnalysisReport` and the trace's load warnings, encoded
with msgspec (typed, no pickle: a tampered entry fails to decode and is ignored). The key hashes the trace's
content key (see `tracelens.cache.content_key`), the code of the whole `tracelens` package (any change to
an analysis is a miss), the path as given (the report names it) and the analysis options. Entries are a few
kB, so traces of any size are kept. Same location, `--no-cache` and `TRACELENS_NO_CACHE` as the trace cache;
deleting entries is always safe.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tracelens import __version__
from tracelens.analyses import AnalysisReport
from tracelens.cache import cache_dir, cache_enabled, content_key, write_file_atomic

ENTRY_FORMAT = 1  # bump when the entry layout changes


@dataclass(frozen=True)
class CachedAnalysis:
    """What `tracelens analyze` prints: the report and the warnings the load gave."""

    report: AnalysisReport
    warnings: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """A hash of every module of the installed `tracelens` package."""
    digest = hashlib.blake2b(f"{ENTRY_FORMAT}\0{__version__}".encode(), digest_size=10)
    root = Path(__file__).resolve().parent
    for source in sorted(root.rglob("*.py")):
        digest.update(str(source.relative_to(root)).encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def analyze_cached(
    path: Path, options: Mapping[str, object], compute: Callable[[], CachedAnalysis], use_cache: bool = True
) -> CachedAnalysis:
    """`compute()`, or its stored result for this file content, code, path and `options` (JSON-able).

    A cache that cannot be read or written is ignored: analyzing never fails because of it.
    """
    entry = _entry_path(path, options) if use_cache and cache_enabled() else None
    if entry is not None:
        with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
            return msgspec.msgpack.decode(entry.read_bytes(), type=CachedAnalysis)
    result = compute()
    if entry is not None:
        with contextlib.suppress(OSError, TypeError, ValueError, msgspec.EncodeError):
            encoded = msgspec.msgpack.encode(result)
            if _round_trips(encoded):
                entry.parent.mkdir(parents=True, exist_ok=True)
                write_file_atomic(entry, encoded)
    return result


def _round_trips(encoded: bytes) -> bool:
    """Whether the entry decodes to the very same values (an int in a field typed float would come back as a
    float and print differently): only exact entries are stored."""
    try:
        return msgspec.msgpack.encode(msgspec.msgpack.decode(encoded, type=CachedAnalysis)) == encoded
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def _entry_path(path: Path, options: Mapping[str, object]) -> Path | None:
    """Where the entry for `path` lives, or None when it cannot have one (not a readable file)."""
    try:
        if not path.is_file():
            return None
        folder = cache_dir()
        trace_key = content_key(path, folder)
    except (OSError, ValueError):
        return None
    described = json.dumps({"path": str(path), "options": options}, sort_keys=True, default=str)
    digest = hashlib.blake2b(f"{trace_key}\0{package_fingerprint()}\0{described}".encode(), digest_size=20)
    return folder / "analyses" / f"{digest.hexdigest()}.msgpack"
