"""Finished results of `tracelens` commands, cached beside the loaded traces (`tracelens.cache`), so running
the same command on the same files with the same options again skips loading and analyzing altogether.

An entry is `<cache dir>/<kind>/<key>.msgpack`, one typed record (a frozen dataclass) encoded with msgspec
(no pickle: a tampered entry fails to decode and is ignored). Kinds in use: `analyses` (`analyze`:
`tracelens.analyses.record.CachedAnalysis`, the `AnalysisReport` and load warnings, a few kB), `documents`
(`check`: `tracelens.hypotheses.document.CachedDocument`, one trace's `TraceDocument` and load warnings) and
`pages` (`report`: `tracelens.cli.report.CachedPage`, the finished HTML page, up to ~10 MB, and every input's
load warnings). Records live beside the code that makes them; this module imports none of them, so a hit
of `check` or `report` never imports the analyses.
The key hashes the kind, the content key of every input file (`tracelens.cache.content_key`), the paths as
given (results name them), the options, and the code of the whole `tracelens` package and the numpy version
(any change to the code is a miss); callers add the versions of other libraries their result depends on to
the options (`library_versions`). A record is stored only if it decodes to identical values (types
included), so a hit returns exactly what computing would. Same location, `--no-cache` and
`TRACELENS_NO_CACHE` as the trace cache; deleting entries is always safe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec
import numpy as np

from tracelens import __version__
from tracelens.cache import cache_dir, cache_enabled, content_key, remembered_key, write_file_atomic

ENTRY_FORMAT = 2  # bump when the entry layout or key changes
T = TypeVar("T")


@functools.lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """A hash of every module of the installed `tracelens` package (the C accelerator's source and build
    included) and of the numpy version."""
    digest = hashlib.blake2b(f"{ENTRY_FORMAT}\0{__version__}\0{np.__version__}".encode(), digest_size=10)
    root = Path(__file__).resolve().parent
    for source in sorted([*root.rglob("*.py"), *root.rglob("_native*")]):
        digest.update(str(source.relative_to(root)).encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def library_versions(*names: str) -> dict[str, str]:
    """The installed versions of these distributions (read from their metadata, not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in names:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "absent"
    return versions


def cached(
    kind: str,
    inputs: Sequence[Path],
    options: Mapping[str, object],
    record_type: Callable[[], type[T]],
    compute: Callable[[], T],
    use_cache: bool = True,
) -> T:
    """`compute()`, or its stored result for this kind, these input files (content and path as given), the
    code and `options` (JSON-able). `record_type()` gives the type `compute` returns (msgspec-encodable); it
    is called only when an entry is read or written, so the record's modules need not be imported before.

    A cache that cannot be read or written is ignored: the command never fails because of it. An input not seen
    at this path, size and mtime is not hashed before computing (an entry for it could exist only if the file
    was rewritten with the same bytes): loading hashes it while worker processes decode (`cache.load_cached`).
    """
    enabled = use_cache and cache_enabled()
    entry = _entry_path(kind, inputs, options) if enabled and _keys_remembered(inputs) else None
    if entry is not None:
        with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
            encoded = entry.read_bytes()
            return msgspec.msgpack.decode(encoded, type=record_type())
    result = compute()
    if enabled and entry is None:
        entry = _entry_path(kind, inputs, options)
    if entry is not None:
        with contextlib.suppress(OSError, TypeError, ValueError, msgspec.EncodeError):
            encoded = msgspec.msgpack.encode(result)
            if _round_trips(encoded, result, record_type()):
                entry.parent.mkdir(parents=True, exist_ok=True)
                write_file_atomic(entry, encoded)
    return result


def _round_trips(encoded: bytes, original: object, record_type: type[T]) -> bool:
    """Whether the entry decodes to the very same values (an int in a field typed float would come back as a
    float and print differently, a tuple in a dict typed Any as a list): only exact entries are stored."""
    try:
        return identical(msgspec.msgpack.decode(encoded, type=record_type), original)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def identical(a: object, b: object) -> bool:
    """Equal values of the same types all the way down (dataclasses field by field, dicts in key order);
    NaN is identical to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(identical, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(identical(value, b[key]) for key, value in a.items())
    if dataclasses.is_dataclass(a):
        return all(identical(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def _keys_remembered(inputs: Sequence[Path]) -> bool:
    """Whether every input's content key is known without hashing it."""
    try:
        folder = cache_dir()
        return all(path.is_file() and remembered_key(path, folder) is not None for path in inputs)
    except OSError:
        return False


def _entry_path(kind: str, inputs: Sequence[Path], options: Mapping[str, object]) -> Path | None:
    """Where the entry lives, or None when it cannot have one (an input that is not a readable file)."""
    if not kind.isidentifier():
        raise ValueError(f"bad cache kind {kind!r}")
    try:
        if not inputs or not all(path.is_file() for path in inputs):
            return None
        folder = cache_dir()
        keys = [content_key(path, folder) for path in inputs]
    except (OSError, ValueError):
        return None
    described = json.dumps(
        {"kind": kind, "inputs": [[str(p), k] for p, k in zip(inputs, keys, strict=True)], "options": options},
        sort_keys=True,
        default=str,
    )
    digest = hashlib.blake2b(f"{package_fingerprint()}\0{described}".encode(), digest_size=20)
    return folder / kind / f"{digest.hexdigest()}.msgpack"
