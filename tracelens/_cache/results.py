"""Result entries: the finished result of a command, so the same command on the same files with the same options
skips loading and analyzing altogether.

An entry `<kind>/<name>.msgpack` holds one typed record (`tracelens.records`) encoded with msgspec: MessagePack,
or JSON when the record holds an integer MessagePack cannot carry (beyond 64 bits, e.g. a rank of 2**70). Kinds
in use: `analyses` (`tracelens.analyses.record.CachedAnalysis`), `documents`
(`tracelens.hypotheses.document.CachedDocument`) and `pages` (`tracelens.cli.report.CachedPage`). Records live
beside the code that makes them and are imported only when an entry is read or written, so a hit of `check` or
`report` never imports the analyses.

A command looks its result up (`lookup_result`: a `ResultSlot`, with what was found), computes it when nothing
was, and stores it (`store_result`); nothing here calls back into the command.

The name hashes the code fingerprint, the kind, the content key and the path as given of every input (results
name their paths), and the options (callers add the versions of other libraries their result depends on,
`library_versions`). A record is stored only if it decodes to identical values, types included
(`encode_exactly`), so a hit returns exactly what computing would; tests run `encode_exactly` over every record
type on real traces, so a record that cannot be cached fails a test instead of silently never being cached.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracelens._cache.keys import entry_name, file_identity
from tracelens.records import field_names, is_record

if TYPE_CHECKING:
    from tracelens._cache import Cache

T = TypeVar("T")


class ResultSlot:
    """Where the result of one command on these inputs and options lives in the cache (`lookup_result`): what
    was found there, if anything (`found`, `value`), and, after computing, `store_result`."""

    def __init__(
        self,
        cache: Cache,
        kind: str,
        inputs: Sequence[Path],
        options: Mapping[str, object],
        identities: list[str] | None,
        relative: str | None,
        entry: tuple[dict[str, Any], list[memoryview]] | None,
    ) -> None:
        self.cache, self.kind, self.inputs, self.options = cache, kind, list(inputs), options
        self.identities, self.relative, self.entry = identities, relative, entry

    @property
    def found(self) -> bool:
        """Whether an intact entry is there (its record is read by `value`)."""
        return self.entry is not None

    def value(self, record_type: type[T]) -> T | None:
        """The stored record, or None when there is none or it is not a `record_type` (then it is deleted)."""
        if self.entry is None:
            return None
        header, blobs = self.entry
        self.entry = None
        try:
            return decode(header, blobs[0], record_type)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            assert self.relative is not None
            self.cache.discard(self.cache.folder / self.relative, f"not a {self.kind} record: {exc}")
            return None


def lookup_result(cache: Cache, kind: str, inputs: Sequence[Path], options: Mapping[str, object]) -> ResultSlot:
    """The slot of this kind's result for these inputs (content and path as given), the code and `options`
    (JSON-able), with the entry found there, if any.

    An input not seen at its identity is not hashed here (an entry for it could exist only if the file was
    rewritten with the same bytes): loading hashes it while worker processes decode, and `store_result` finds
    its key remembered.
    """
    if not kind.isidentifier():
        raise ValueError(f"bad cache kind {kind!r}")
    if not cache.enabled:
        return ResultSlot(cache, kind, inputs, options, None, None, None)
    identities = _identities(inputs)
    relative = _relative(cache, kind, inputs, identities, options, hash_new=False) if identities else None
    entry = cache.read(relative) if relative is not None else None
    return ResultSlot(cache, kind, inputs, options, identities, relative, entry)


def store_result(slot: ResultSlot, result: object, record_type: type[Any]) -> bool:
    """Store `result` (a `record_type`) in `slot`, unless an input changed since the lookup or the record does
    not encode exactly (`encode_exactly`); whether it was stored."""
    identities = slot.identities
    if identities is None or _identities(slot.inputs) != identities:
        return False
    relative = slot.relative or _relative(slot.cache, slot.kind, slot.inputs, identities, slot.options, True)
    if relative is None:
        return False
    encoded = encode_exactly(result, record_type)
    if encoded is None:
        return False
    return slot.cache.write(relative, {"kind": slot.kind, "codec": encoded[0]}, [encoded[1]])


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
