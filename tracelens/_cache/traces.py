"""Trace entries: a loaded `Trace` stored as its plain form (`Trace.to_plain`: every field of every table) and
read back without decoding the file again.

An entry `traces/<name>.trace` holds the arrays as blobs (read back as numpy arrays over the file's bytes, no
copy) and the other values, with each array's name, dtype and shape, in the header.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracelens._cache.keys import entry_name, file_identity
from tracelens.loader import PendingLoad, Progress
from tracelens.loader import begin_load as begin_decode
from tracelens.model.trace import Trace
from tracelens.records import replace

if TYPE_CHECKING:
    from tracelens._cache import Cache


class TraceLoad:
    """A trace being loaded through the cache (`Cache.begin_load`): served from an entry, or decoding (worker
    processes running) until `finish`. `store` writes the entry a new big trace deserves; `close` (or leaving a
    `with`) abandons an unfinished load."""

    def __init__(
        self,
        cache: Cache,
        path: Path,
        trace: Trace | None = None,
        pending: PendingLoad | None = None,
        key: str | None = None,
        identity: str | None = None,
    ) -> None:
        self.cache, self.path, self.trace, self.pending = cache, path, trace, pending
        self.key, self.identity = key, identity

    def __enter__(self) -> TraceLoad:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def from_cache(self) -> bool:
        """Whether the trace was read from an entry (nothing decoded)."""
        return self.pending is None and self.trace is not None

    def finish(self) -> Trace:
        """The loaded trace."""
        if self.trace is None:
            assert self.pending is not None
            self.trace = self.pending.finish()
        return self.trace

    def store(self) -> None:
        """Write the trace's entry when it was decoded, is big enough to be worth one (`min_trace_bytes`) and
        the file has not changed since it was read; errors are ignored (a cache never fails a command)."""
        trace, key = self.trace, self.key
        if self.pending is None or trace is None or key is None:
            return
        self.key = None  # once
        if trace.uncompressed_bytes >= self.cache.min_trace_bytes and _unchanged(self.path, self.identity):
            with contextlib.suppress(OSError, TypeError, ValueError):
                write_trace(self.cache, key, trace)

    def close(self) -> None:
        if self.pending is not None and self.trace is None:
            self.pending.close()


def begin_load(cache: Cache, path: Path, progress: Progress | None, workers: int | None) -> TraceLoad:
    """`tracelens.loader.begin_load(path)`, or the trace read from `cache` when the same content was loaded
    before.

    A file whose identity (path, inode, size, mtime, ctime) the cache has not seen is not hashed before its
    decode starts (a new trace is the common case): it is hashed here once the worker processes are decoding,
    and remembered.
    """
    if not cache.enabled or not path.is_file():
        return TraceLoad(cache, path, pending=begin_decode(path, progress, workers))
    try:
        identity: str | None = file_identity(path)
    except OSError:
        identity = None
    key = cache.known_content_key(path, identity) if identity is not None else None
    if key is not None:
        trace = read_trace(cache, key, path)
        if trace is not None:
            return TraceLoad(cache, path, trace=trace)
    pending = begin_decode(path, progress, workers)
    if key is None and identity is not None:
        try:
            key = cache.content_key(path, identity)  # while the worker processes decode
        except BaseException:
            pending.close()
            raise
    return TraceLoad(cache, path, pending=pending, key=key, identity=identity)


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
