"""The one file format of every cache entry: a checksummed container of a small JSON header and binary blobs.

Layout: `MAGIC` (8 bytes), a SHA-256 digest (32 bytes), the header's length (4 bytes, little-endian), the header
(UTF-8 JSON object), zero padding to a multiple of 64, then the blobs, each starting at a multiple of 64 (so numpy
arrays read from them are aligned). The digest covers the entry's *name* and every byte after the digest: a
truncated, bit-flipped or padded file fails it, and so does a whole, valid entry copied or renamed over another
key's (the name differs). `unpack` checks all of it before anything is decoded; `BadEntry` says why not.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

MAGIC = b"tlcache\x01"
_DIGEST_BYTES = 32
_PREFIX = len(MAGIC) + _DIGEST_BYTES
_ALIGN = 64
Buffer = bytes | bytearray | memoryview


class BadEntry(ValueError):
    """A cache file that is not a complete, intact entry of this name."""


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def pack(name: str, header: dict[str, Any], blobs: list[Buffer]) -> bytearray:
    """The bytes of the entry `name` (its file name) holding `header` (JSON-able) and `blobs`. The header's
    `blobs` key is set here: [offset, length] of each blob."""
    views = [memoryview(blob).cast("B") for blob in blobs]
    layout: list[list[int]] = []
    offset = 0
    for view in views:
        layout.append([offset, view.nbytes])
        offset = _aligned(offset + view.nbytes)
    text = json.dumps({**header, "blobs": layout}, ensure_ascii=True, allow_nan=True).encode()
    start = _aligned(_PREFIX + 4 + len(text))
    out = bytearray(start + (layout[-1][0] + layout[-1][1] if layout else 0))
    out[: len(MAGIC)] = MAGIC
    out[_PREFIX : _PREFIX + 4] = struct.pack("<I", len(text))
    out[_PREFIX + 4 : _PREFIX + 4 + len(text)] = text
    for (blob_offset, length), view in zip(layout, views, strict=True):
        out[start + blob_offset : start + blob_offset + length] = view
    out[len(MAGIC) : _PREFIX] = _digest(name, memoryview(out)[_PREFIX:])
    return out


def unpack(name: str, data: bytearray) -> tuple[dict[str, Any], list[memoryview]]:
    """The header and blobs (views into `data`) of the entry `name`; `BadEntry` unless it is intact."""
    view = memoryview(data)
    if len(data) < _PREFIX + 4 or view[: len(MAGIC)] != MAGIC:
        raise BadEntry("not a tracelens cache entry")
    if view[len(MAGIC) : _PREFIX] != _digest(name, view[_PREFIX:]):
        raise BadEntry("checksum mismatch")
    (length,) = struct.unpack_from("<I", data, _PREFIX)
    try:
        header = json.loads(bytes(view[_PREFIX + 4 : _PREFIX + 4 + length]))
        start = _aligned(_PREFIX + 4 + length)
        blobs = [view[start + offset : start + offset + size] for offset, size in header["blobs"]]
    except (ValueError, TypeError, KeyError) as exc:  # an intact entry of another format
        raise BadEntry(f"unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise BadEntry("unreadable header")
    return header, blobs


def read_file(path: Path) -> bytearray:
    """The bytes of `path` in one writable buffer (numpy arrays made from it are writable, without a copy)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = bytearray(size)
        view = memoryview(data)
        done = 0
        while done < size:
            got = os.readv(fd, [view[done:]])
            if got == 0:
                break
            done += got
    finally:
        os.close(fd)
    return data if done == size else data[:done]


def _digest(name: str, view: memoryview) -> bytes:
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(view)
    return digest.digest()
