"""Trace entries: a loaded `Trace` stored as its plain form (`Trace.to_plain`: every field of every table) and
read back without decoding the file again.

An entry `traces/<name>.trace` holds the arrays as blobs (read back as numpy arrays over the file's bytes, no
copy) and the other values, with each array's name, dtype and shape, in the header.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracelens._cache.keys import entry_name, file_identity
from tracelens.loader import Progress
from tracelens.loader import load_trace as decode_trace
from tracelens.model.trace import Trace
from tracelens.records import replace

if TYPE_CHECKING:
    from tracelens._cache import Cache


def load_trace(
    cache: Cache,
    path: Path,
    progress: Progress | None,
    workers: int | None,
    meanwhile: Callable[[], object] | None,
) -> Trace:
    """`tracelens.loader.load_trace(path)`, served from `cache` when the same content was loaded before.

    A file whose identity (path, inode, size, mtime, ctime) the cache has not seen is decoded without first
    hashing it (a new trace is the common case): the hash is computed while worker processes decode (in
    `meanwhile`), and remembered. Nothing is stored if the file changed while it was read.
    """
    if not cache.enabled or not path.is_file():
        return decode_trace(path, progress, workers=workers, meanwhile=meanwhile)
    try:
        identity: str | None = file_identity(path)
    except OSError:
        identity = None
    key = cache.known_content_key(path, identity) if identity is not None else None
    if key is not None:
        trace = read_trace(cache, key, path)
        if trace is not None:
            return trace
    hashed: list[str | None] = []

    def during_decode() -> None:
        if meanwhile is not None:
            meanwhile()
        if key is None and identity is not None:
            hashed.append(cache.content_key(path, identity))

    trace = decode_trace(path, progress, workers=workers, meanwhile=during_decode)
    if key is None and identity is not None:
        key = hashed[0] if hashed else cache.content_key(path, identity)
    if key is not None and trace.uncompressed_bytes >= cache.min_trace_bytes and _unchanged(path, identity):
        _store(cache, key, trace)
    return trace


def _unchanged(path: Path, identity: str | None) -> bool:
    try:
        return identity is not None and file_identity(path) == identity
    except OSError:
        return False


def _relative(key: str) -> str:
    return f"traces/{entry_name('trace', key)}.trace"


def read_trace(cache: Cache, key: str, path: Path) -> Trace | None:
    """The trace stored for content `key` (with `path` as its path), or None (no entry, or a damaged one)."""
    relative = _relative(key)
    entry = cache.read(relative)
    if entry is None:
        return None
    header, blobs = entry
    try:
        if header.get("content_key") != key:
            raise ValueError("stored for other content")
        arrays = {
            name: np.frombuffer(blob, dtype=np.dtype(dtype)).reshape(shape)
            for (name, dtype, shape), blob in zip(header["arrays"], blobs, strict=True)
        }
        trace = Trace.from_plain(arrays, header["values"])
    except (KeyError, TypeError, ValueError) as exc:
        cache.discard(cache.folder / relative, f"not a trace: {exc}")
        return None
    return replace(trace, path=path)


def write_trace(cache: Cache, key: str, trace: Trace) -> bool:
    """Store `trace` as the entry of content `key`; whether it was stored."""
    arrays, values = trace.to_plain()
    contiguous = {name: np.ascontiguousarray(array) for name, array in arrays.items()}
    header = {
        "kind": "trace",
        "content_key": key,
        "arrays": [[name, array.dtype.str, list(array.shape)] for name, array in contiguous.items()],
        "values": values,
    }
    return cache.write(_relative(key), header, [array.data for array in contiguous.values()])


def _store(cache: Cache, key: str, trace: Trace) -> None:
    """`write_trace`, errors ignored; with `cache.background_writes` (and no other thread to fork with) in a
    forked child, so the command's analyses run meanwhile on another core."""
    if cache.background_writes and hasattr(os, "fork") and threading.active_count() == 1:
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # pragma: no cover - the writer child
            status = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's handler
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                status = 0 if write_trace(cache, key, trace) else 1
            finally:
                os._exit(status)
        if pid > 0:
            cache.writers.append(pid)
            return
    with contextlib.suppress(OSError, TypeError, ValueError):
        write_trace(cache, key, trace)
