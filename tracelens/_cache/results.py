"""Result entries: the finished result of a command, so the same command on the same files with the same options
skips loading and analyzing altogether.

An entry `<kind>/<name>.msgpack` holds one typed record (`tracelens.records`) encoded with msgspec: MessagePack,
or JSON when the record holds an integer MessagePack cannot carry (beyond 64 bits, e.g. a rank of 2**70). Kinds
in use: `analyses` (`tracelens.analyses.record.CachedAnalysis`), `documents`
(`tracelens.hypotheses.document.CachedDocument`) and `pages` (`tracelens.cli.report.CachedPage`). Records live
beside the code that makes them and are imported only when an entry is read or written, so a hit of `check` or
`report` never imports the analyses.

The name hashes the code fingerprint, the kind, the content key and the path as given of every input (results
name their paths), and the options (callers add the versions of other libraries their result depends on,
`library_versions`). A record is stored only if it decodes to identical values, types included
(`encode_exactly`), so a hit returns exactly what computing would; tests run `encode_exactly` over every record
type on real traces, so a record that cannot be cached fails a test instead of silently never being cached.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracelens._cache.keys import entry_name, file_identity
from tracelens.records import field_names, is_record

if TYPE_CHECKING:
    from tracelens._cache import Cache

T = TypeVar("T")


def cached_result(
    cache: Cache,
    kind: str,
    inputs: Sequence[Path],
    options: Mapping[str, object],
    record_type: Callable[[], type[T]],
    compute: Callable[[], T],
) -> T:
    """`compute()`, or its stored result (see the module docstring). `record_type()` gives the type `compute`
    returns; it is called only when an entry is read or written.

    An input not seen at its identity is not hashed before computing (an entry for it could exist only if the
    file was rewritten with the same bytes): loading hashes it while worker processes decode. Nothing is
    stored if an input changed while the result was computed.
    """
    if not kind.isidentifier():
        raise ValueError(f"bad cache kind {kind!r}")
    if not cache.enabled:
        return compute()
    identities = _identities(inputs)
    relative = _relative(cache, kind, inputs, identities, options, hash_new=False) if identities else None
    if relative is not None:
        entry = cache.read(relative)
        if entry is not None:
            try:
                return decode(entry[0], entry[1][0], record_type())
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                cache.discard(cache.folder / relative, f"not a {kind} record: {exc}")
    result = compute()
    if identities is None or _identities(inputs) != identities:
        return result
    if relative is None:
        relative = _relative(cache, kind, inputs, identities, options, hash_new=True)
    if relative is not None:
        encoded = encode_exactly(result, record_type())
        if encoded is not None:
            cache.write(relative, {"kind": kind, "codec": encoded[0]}, [encoded[1]])
    return result


def encode_exactly(result: object, record_type: type[Any]) -> tuple[str, bytes] | None:
    """(codec, bytes) of `result` that decode to identical values (`identical`), or None if there are none."""
    import msgspec

    for codec, encoder in (("msgpack", msgspec.msgpack), ("json", msgspec.json)):
        try:
            encoded = encoder.encode(result)
        except OverflowError:  # an integer beyond 64 bits: JSON carries it
            continue
        except (TypeError, ValueError, msgspec.EncodeError):
            return None
        try:
            if identical(decode({"codec": codec}, encoded, record_type), result):
                return codec, encoded
        except (ValueError, TypeError, KeyError):
            pass
        return None
    return None


def decode(header: Mapping[str, Any], payload: Any, record_type: type[T]) -> T:
    """The record in an entry's payload; `ValueError` (msgspec's errors are ValueErrors) when it holds none."""
    import msgspec

    decoder = {"msgpack": msgspec.msgpack, "json": msgspec.json}[header["codec"]]
    record: T = decoder.decode(payload, type=record_type)
    return record


def identical(a: object, b: object) -> bool:
    """Equal values of the same types all the way down (records field by field, dicts in key order);
    NaN is identical to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(identical, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(identical(value, b[key]) for key, value in a.items())
    if is_record(a):
        return all(identical(getattr(a, name), getattr(b, name)) for name in field_names(a))
    return a == b


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


def _identities(inputs: Sequence[Path]) -> list[str] | None:
    """The identity of every input, or None when one is not a readable regular file (no entry then)."""
    try:
        if not inputs or not all(path.is_file() for path in inputs):
            return None
        return [file_identity(path) for path in inputs]
    except OSError:
        return None


def _relative(
    cache: Cache,
    kind: str,
    inputs: Sequence[Path],
    identities: Sequence[str],
    options: Mapping[str, object],
    hash_new: bool,
) -> str | None:
    """Where the entry lives, or None when an input's content key is unknown (and `hash_new` is false) or
    cannot be computed."""
    import json  # imported where used: a run with the cache off never imports it

    lookup = cache.content_key if hash_new else cache.known_content_key
    keys = [lookup(path, identity) for path, identity in zip(inputs, identities, strict=True)]
    if any(key is None for key in keys):
        return None
    described = json.dumps(
        {"kind": kind, "inputs": [[str(p), k] for p, k in zip(inputs, keys, strict=True)], "options": options},
        sort_keys=True,
        default=str,
        ensure_ascii=True,
    )
    return f"{kind}/{entry_name('result', described)}.msgpack"
