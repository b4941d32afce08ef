"""The one file format of every cache entry: a checksummed container of a small JSON header and binary blobs.

Layout: `MAGIC` (8 bytes), a digest (32 bytes), the header's length (4 bytes, little-endian), the header (UTF-8
JSON object), zero padding to a multiple of 64, then the blobs, each starting at a multiple of 64 (so numpy arrays
read from them are aligned). The digest covers the entry's *name* and every byte after the digest: a truncated,
bit-flipped or padded file fails it, and so does a whole, valid entry copied or renamed over another key's (the
name differs). `unpack` checks all of it before anything is decoded; `BadEntry` says why not.

The digest is SHA-256 over the name and the SHA-256 of each quarter of the content: the quarters of a big entry
are hashed in parallel threads (hashlib releases the GIL), so on two cores a big entry is checked in about half
the wall time of one pass.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from stat import S_ISREG
from typing import Any

import numpy as np

MAGIC = b"tlcache\x01"
_DIGEST_BYTES = 32
_PREFIX = len(MAGIC) + _DIGEST_BYTES
_ALIGN = 64
_PARTS = 4
_PARALLEL_BYTES = 4 << 20  # smaller entries are hashed in this thread
Buffer = bytes | bytearray | memoryview


class BadEntry(ValueError):
    """A cache file that is not a complete, intact entry of this name."""


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def pack(name: str, header: dict[str, Any], blobs: list[Buffer]) -> bytearray:
    """The bytes of the entry `name` (its file name) holding `header` (JSON-able) and `blobs`. The header's
    `blobs` key is set here: [offset, length] of each blob."""
    import json  # see `_digest`

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


def unpack(name: str, data: Buffer) -> tuple[dict[str, Any], list[memoryview]]:
    """The header and blobs (views into `data`) of the entry `name`; `BadEntry` unless it is intact."""
    import json  # see `_digest`

    view = memoryview(data).cast("B")
    if len(view) < _PREFIX + 4 or view[: len(MAGIC)] != MAGIC:
        raise BadEntry("not a tracelens cache entry")
    if view[len(MAGIC) : _PREFIX] != _digest(name, view[_PREFIX:]):
        raise BadEntry("checksum mismatch")
    (length,) = struct.unpack_from("<I", view, _PREFIX)
    try:
        header = json.loads(bytes(view[_PREFIX + 4 : _PREFIX + 4 + length]))
        start = _aligned(_PREFIX + 4 + length)
        blobs = [view[start + offset : start + offset + size] for offset, size in header["blobs"]]
    except (ValueError, TypeError, KeyError) as exc:  # an intact entry of another format
        raise BadEntry(f"unreadable header ({exc})") from None
    if not isinstance(header, dict):
        raise BadEntry("unreadable header")
    return header, blobs


def read_file(path: Path) -> memoryview:
    """The bytes of `path` in one writable buffer (numpy arrays made from it are writable, without a copy; the
    buffer is not zero-filled first). `BadEntry` if it is not a regular file (a FIFO is never waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise BadEntry("not a regular file")
        size = stat.st_size
        view = np.empty(size, dtype=np.uint8).data
        done = 0
        while done < size:
            got = os.readv(fd, [view[done:]])
            if got == 0:
                break
            done += got
    finally:
        os.close(fd)
    return view[:done]


def _digest(name: str, view: memoryview) -> bytes:
    import hashlib  # imported where used, as json is: a run with the cache off never imports either

    step = max(-(-len(view) // _PARTS), 1)
    parts = [view[start : start + step] for start in range(0, max(len(view), 1), step)]
    digests = [b""] * len(parts)

    def work(index: int) -> None:
        digests[index] = hashlib.sha256(parts[index]).digest()

    if len(view) >= _PARALLEL_BYTES:
        helpers = [threading.Thread(target=work, args=(i,)) for i in range(1, len(parts))]
        for helper in helpers:
            helper.start()
        work(0)
        for helper in helpers:
            helper.join()
    else:
        for index in range(len(parts)):
            work(index)
    return hashlib.sha256(name.encode("utf-8", "surrogateescape") + b"\0" + b"".join(digests)).digest()
