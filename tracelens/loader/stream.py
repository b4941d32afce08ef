"""Streaming decode: the file is read (and gunzipped) in blocks, the `traceEvents` array is cut into chunks
of whole events, and each chunk is decoded and turned into columns before the next one is read.

Peak memory is the columns plus one chunk of text and its decoded events, not the whole text plus every
decoded event. Chunks are cut at `}` `,` `{` between events without parsing; a cut in the wrong place
cannot go unnoticed, because the chunk before it would not be valid JSON. Anything unexpected (a bare
array, invalid JSON, odd field types, a truncated file) raises `NotStreamable` and the caller falls back
to the whole-file decoder, which owns every lenient repair.
"""

from __future__ import annotations

import math
import os
import queue
import re
import shutil
import sys
import threading
import types
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tracelens.loader.columns import ChunkColumns, columnize
from tracelens.loader.decode import STREAM_DOC_DECODER, STREAM_EVENTS_DECODER, metadata_of
from tracelens.loader.forked import ChildDied, run_forked, scratch_folder
from tracelens.loader.schema import CompleteEvent
from tracelens.loader.source import GZIP_MAGIC

_gzip_module: types.ModuleType = zlib
try:  # optional: python-isal gunzips ~1.6x faster than zlib
    from isal import isal_zlib

    _gzip_module = isal_zlib
except ImportError:  # pragma: no cover - depends on the environment
    pass

BLOCK_BYTES = 8 << 20  # read / gunzip output granularity
CHUNK_BYTES = 4 << 20  # text decoded at once: small chunks stay in CPU caches (measured faster than 8 or 16 MB)
HEAD_LIMIT_BYTES = 64 << 20  # the traceEvents key must appear within this many bytes
GZIP_RATIO = 10  # typical Kineto JSON compresses 10-20x; decides whether a pool pays off
_EVENTS_KEY = re.compile(rb'^\s*\{.*?"traceEvents"\s*:\s*\[', re.S)
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


class NotStreamable(Exception):
    """The file needs the whole-file decoder (or is not usable); the caller falls back."""


@dataclass
class Streamed:
    """Column chunks in file order plus the top-level metadata."""

    chunks: list[ChunkColumns]
    metadata: dict[str, Any]
    uncompressed_bytes: int
    notes: list[str] = field(default_factory=list)


def stream_columns(
    path: Path,
    progress: ProgressCallback | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    workers: int = 1,
    meanwhile: Callable[[], object] | None = None,
) -> Streamed:
    """Decode `path` chunk by chunk into columns; raise NotStreamable when the fast path does not apply.

    With `workers` > 1 the chunks are decoded by that many forked processes (forked before any thread of ours
    starts): byte ranges of a plain file by children that read them themselves (`forked.run_forked`); a gzip
    file is first gunzipped to a temporary file and decoded the same way, or, when its text would not fit
    there, gunzipped as a stream whose pieces go to a process pool. Results are merged in file order, so the
    outcome does not depend on `workers`. `meanwhile` runs in this process once the workers have work (never
    without workers).
    """
    size = path.stat().st_size
    with path.open("rb") as probe:
        gz = probe.read(2) == GZIP_MAGIC
        expected_text = _gzip_text_bytes(probe, size) if gz else size
    parallel = workers > 1 and expected_text > 2 * chunk_bytes
    if not gz:
        with path.open("rb") as handle:
            return _decode_ranges(path, handle, size, progress, chunk_bytes, workers if parallel else 1, meanwhile)
    if parallel and (spooled := _spool_gunzipped(path, expected_text, progress)) is not None:
        try:  # decoded like a plain file: the children read their own ranges
            with spooled.open("rb") as handle:
                text_bytes = spooled.stat().st_size
                later = _rescaled(progress, SPOOL_SHARE, 1.0)
                return _decode_ranges(spooled, handle, text_bytes, later, chunk_bytes, workers, meanwhile)
        finally:
            shutil.rmtree(spooled.parent, ignore_errors=True)
    pool = _fork_pool(workers) if parallel else None
    try:
        with path.open("rb") as handle:
            if pool is not None:
                chunk_bytes = balanced_chunk_bytes(expected_text, chunk_bytes, workers)
            blocks = _background(_gunzip_blocks(handle))
            return _decode_pieces(blocks, size, progress, chunk_bytes, pool, workers, meanwhile)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


SPOOL_MAX_BYTES = 1 << 30  # gzip text up to this size is gunzipped to a temporary file (tmpfs) and decoded in ranges
SPOOL_SHARE = 0.25  # of the progress bar: the gunzip


def _spool_gunzipped(path: Path, expected_text: int, progress: ProgressCallback | None) -> Path | None:
    """The gunzipped text of `path` in a private temporary folder (in tmpfs where there is one), or None when it
    would not fit (over SPOOL_MAX_BYTES or a quarter of the free space; the caller streams instead). A gzip
    stream that is cut short or corrupt raises NotStreamable, as streaming it would."""
    try:
        folder = Path(scratch_folder())
    except OSError:
        return None
    target = folder / "trace.json"
    try:
        limit = min(SPOOL_MAX_BYTES, shutil.disk_usage(folder).free // 4)
        if expected_text > limit:
            raise _NoRoom
        size = path.stat().st_size
        early = _rescaled(progress, 0.0, SPOOL_SHARE)
        with path.open("rb") as source, target.open("wb") as out:
            written = 0
            for block, done in _gunzip_blocks(source):
                written += len(block)
                if written > limit:  # the trailer's size was wrong (it is modulo 4 GiB)
                    raise _NoRoom
                out.write(block)
                if early:
                    early(done, size)
        return target
    except (_NoRoom, OSError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    except (zlib.error, _gzip_module.error) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise NotStreamable(str(exc)) from exc
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


class _NoRoom(Exception):
    pass


def _rescaled(progress: ProgressCallback | None, start: float, end: float) -> ProgressCallback | None:
    """`progress` for one phase of a load: its (done, total) mapped onto [start, end] of the whole."""
    if progress is None:
        return None
    whole = 1 << 20
    return lambda done, total: progress(int(whole * (start + (end - start) * done / max(total, 1))), whole)


def _gzip_text_bytes(handle: Any, size: int) -> int:
    """The uncompressed size a gzip file announces in its trailer (ISIZE, modulo 4 GiB, last member only);
    a typical ratio where that cannot be right. Used only to size chunks."""
    if size < 18:
        return size * GZIP_RATIO
    handle.seek(size - 4)
    announced = int.from_bytes(handle.read(4), "little")
    return announced if announced >= size else size * GZIP_RATIO


def auto_workers() -> int:
    """Processes for chunk decoding: $TRACELENS_WORKERS if set, else up to 4 CPUs, but 1 where forking is
    unsafe or unavailable."""
    if (setting := os.environ.get("TRACELENS_WORKERS", "").strip()).isdigit():
        return max(1, int(setting))
    if not hasattr(os, "fork") or _in_pool_worker():
        return 1
    if threading.active_count() > 1:  # forking a threaded process can deadlock the child
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _in_pool_worker() -> bool:
    """Whether this process is a multiprocessing worker (then it does not fork workers of its own); a process
    that never imported multiprocessing is not one."""
    process = sys.modules.get("multiprocessing.process")
    return process is not None and process.parent_process() is not None


def _fork_pool(workers: int) -> Any:
    import multiprocessing  # only for gzip input: 7-11 ms of start-up otherwise

    try:
        return multiprocessing.get_context("fork").Pool(workers)
    except (OSError, ValueError):  # pragma: no cover - no fork or no resources
        return None


def decode_piece(kind: str, text: bytes | bytearray | memoryview) -> tuple[dict[str, Any], ChunkColumns | None]:
    """Metadata and columns of one piece (see `_pieces`); runs in a worker process or in-process."""
    if kind == "head":
        return metadata_of(STREAM_DOC_DECODER.decode(text)), None
    if kind == "events":  # other phases were decoded to empty structs: columnize skips them
        return {}, columnize(STREAM_EVENTS_DECODER.decode(text), CompleteEvent)
    doc = STREAM_DOC_DECODER.decode(text)
    return metadata_of(doc), columnize(doc.traceEvents or [], CompleteEvent)


def decode_range(path: Path, kind: str, start: int, end: int) -> tuple[dict[str, Any], ChunkColumns | None]:
    """`decode_piece` of bytes [start, end) of a plain file, read straight into the decoder's buffer."""
    prefix, suffix = _AFFIXES[kind]
    buffer = bytearray(len(prefix) + (end - start) + len(suffix))
    buffer[: len(prefix)] = prefix
    if suffix:
        buffer[-len(suffix) :] = suffix
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        handle.seek(start)
        filled = len(prefix)
        while filled < len(prefix) + end - start:
            got = handle.readinto(view[filled : len(prefix) + end - start])
            if not got:
                raise NotStreamable(f"{path} changed while being read")
            filled += got
    try:  # no view.release(): a sampling profiler (Dask's) may briefly hold frames that reference Raw args
        return decode_piece(kind, buffer)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from None


def _decode_ranges(
    path: Path,
    handle: Any,
    size: int,
    progress: ProgressCallback | None,
    chunk_bytes: int,
    workers: int = 1,
    meanwhile: Callable[[], object] | None = None,
) -> Streamed:
    """Plain files: byte ranges cut between events are read and decoded one by one, or by `workers` forked
    children (then this process only finds the cut points, and the ranges are sized so that every worker gets
    the same number of equal ranges)."""
    head = handle.read(1 << 20)
    if head.lstrip()[:1] != b"{":
        raise NotStreamable("not a JSON object")
    match = _EVENTS_KEY.match(head)
    if match is None:
        head += handle.read(HEAD_LIMIT_BYTES)
        match = _EVENTS_KEY.match(head)
        if match is None:
            raise NotStreamable("no traceEvents array near the start")
    try:
        metadata = decode_piece("head", _payload("head", head[: match.end()]))[0]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise NotStreamable(str(exc)) from exc
    ranges: list[tuple[Path, str, int, int]] = []
    start = match.end()
    chunk_bytes = balanced_chunk_bytes(size - start, chunk_bytes, workers)
    target = start + chunk_bytes
    while target < size - chunk_bytes // 4:
        handle.seek(target)
        window = handle.read(64 << 10)  # events are small: a boundary is almost always this close
        found = _BOUNDARY.search(window)
        if found is None:
            window += handle.read((1 << 20) - len(window))
            found = _BOUNDARY.search(window)
        if found is None:
            target += chunk_bytes
            continue
        end = target + found.start() + 1
        ranges.append((path, "events", start, end))
        start = target + found.end() - 1
        target = start + chunk_bytes
    ranges.append((path, "tail", start, size))
    chunks: list[ChunkColumns] = []
    try:
        if workers > 1:
            results = iter(_decode_in_children(ranges, workers, size, progress, meanwhile))
        else:
            results = map(_decode_range_args, ranges)
        for (_, _, _, end), (extra, columns) in zip(ranges, results, strict=True):
            metadata.update(extra)
            if columns is not None:
                chunks.append(columns)
            if progress and workers == 1:
                progress(end, size)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, OSError, ChildDied) as exc:
        raise NotStreamable(str(exc)) from exc
    return Streamed(chunks, metadata, size)


def _decode_in_children(
    ranges: list[tuple[Path, str, int, int]],
    workers: int,
    size: int,
    progress: ProgressCallback | None,
    meanwhile: Callable[[], object] | None,
) -> list[tuple[dict[str, Any], ChunkColumns | None]]:
    """`decode_range` of every range, by forked children; progress counts the bytes of the ranges done."""
    done = [ranges[0][2] if ranges else 0]

    def arrived(index: int) -> None:
        done[0] += ranges[index][3] - ranges[index][2]
        if progress:
            progress(done[0], size)

    return run_forked(ranges, workers, _decode_range_args, arrived, meanwhile)


def balanced_chunk_bytes(total_bytes: int, chunk_bytes: int, workers: int) -> int:
    """The range size that splits `total_bytes` into a multiple of `workers` ranges of at most about
    `chunk_bytes` each (so no worker decodes a last, lone range while the others wait)."""
    if workers <= 1 or total_bytes <= 0:
        return chunk_bytes
    rounds = max(1, math.ceil(total_bytes / (workers * chunk_bytes)))
    return max(1, math.ceil(total_bytes / (rounds * workers)))


def _decode_range_args(job: tuple[Path, str, int, int]) -> tuple[dict[str, Any], ChunkColumns | None]:
    return decode_range(*job)


_AFFIXES = {"head": (b"", b"]}"), "events": (b"[", b"]"), "tail": (b'{"traceEvents":[', b"")}


def _payload(kind: str, text: bytes | memoryview) -> bytes:
    prefix, suffix = _AFFIXES[kind]
    return b"".join((prefix, text, suffix))


def _decode_pieces(
    blocks: Iterator[tuple[bytes, int]],
    size: int,
    progress: ProgressCallback | None,
    chunk_bytes: int,
    pool: Any = None,
    workers: int = 1,
    meanwhile: Callable[[], object] | None = None,
) -> Streamed:
    chunks: list[ChunkColumns] = []
    metadata: dict[str, Any] = {}
    total = [0]
    pending: deque[Any] = deque()

    def counted() -> Iterator[tuple[bytes, int]]:
        for block, done in blocks:
            total[0] += len(block)
            yield block, done

    def absorb(result: tuple[dict[str, Any], ChunkColumns | None]) -> None:
        metadata.update(result[0])
        if result[1] is not None:
            chunks.append(result[1])

    try:
        for kind, text, done in _pieces(counted(), chunk_bytes):
            payload = _payload(kind, text)
            del text
            if pool is not None and kind == "events":
                pending.append(pool.apply_async(decode_piece, (kind, payload)))
                if meanwhile is not None and len(pending) > workers:  # every worker has a piece
                    meanwhile()
                    meanwhile = None
                while len(pending) > 2 * workers:
                    absorb(pending.popleft().get())
            else:
                while pending and kind == "tail":
                    absorb(pending.popleft().get())
                absorb(decode_piece(kind, payload))
            del payload
            if progress:
                progress(done, size)
    except (
        msgspec.DecodeError,
        msgspec.ValidationError,
        RecursionError,
        zlib.error,
        _gzip_module.error,
        OSError,
    ) as exc:
        raise NotStreamable(str(exc)) from exc
    return Streamed(chunks, metadata, total[0])


def _pieces(blocks: Iterator[tuple[bytes, int]], chunk_bytes: int) -> Iterator[tuple[str, bytes | memoryview, int]]:
    """("head", text up to and including `"traceEvents": [`), ("events", whole events), ("tail", the rest)."""
    pending: list[bytes] = []
    pending_bytes = 0
    head_done = False
    done = 0
    for block, done in blocks:
        pending.append(block)
        pending_bytes += len(block)
        if not head_done:
            text = b"".join(pending)
            match = _EVENTS_KEY.match(text)
            if match is None:
                if len(text) > HEAD_LIMIT_BYTES or text.lstrip()[:1] not in (b"{", b""):
                    raise NotStreamable("no traceEvents array near the start")
                pending = [text]
                continue
            yield "head", text[: match.end()], done
            pending, pending_bytes, head_done = [text[match.end() :]], len(text) - match.end(), True
        if pending_bytes >= chunk_bytes:
            text = b"".join(pending)
            start = 0
            while (cut := _boundary_after(text, start + chunk_bytes)) is not None:
                yield "events", memoryview(text)[start : cut[0]], done
                start = cut[1]
            rest = text[start:] if start else text
            pending, pending_bytes = [rest], len(rest)
    if not head_done:
        raise NotStreamable("no traceEvents array")
    yield "tail", b"".join(pending), done


def _boundary_after(text: bytes, position: int) -> tuple[int, int] | None:
    """(end of an event, start of the next) at the first `}`,`{` separator at or after `position`."""
    if position >= len(text):
        return None
    found = _BOUNDARY.search(text, position)
    return (found.start() + 1, found.end() - 1) if found is not None else None


def _gunzip_blocks(handle: Any) -> Iterator[tuple[bytes, int]]:
    """Decompressed blocks of every gzip member; a stream cut short raises NotStreamable."""
    done = 0
    decomp = _gzip_module.decompressobj(wbits=47)
    fed = False  # the current member has input but has not reached its end
    while compressed := handle.read(BLOCK_BYTES):
        done += len(compressed)
        data = compressed
        while True:
            out = decomp.decompress(data, BLOCK_BYTES)
            fed = True
            if out:
                yield out, done
            if decomp.eof:
                data = decomp.unused_data
                decomp = _gzip_module.decompressobj(wbits=47)
                fed = False
                if not data:
                    break
                continue
            data = decomp.unconsumed_tail
            if not data and len(out) < BLOCK_BYTES:
                break
    if fed:
        raise NotStreamable("gzip stream cut short")


_END = object()


def _background(blocks: Iterator[tuple[bytes, int]], depth: int = 4) -> Iterator[tuple[bytes, int]]:
    """Produce `blocks` on a thread (reading and gunzip release the GIL, so they overlap decoding)."""
    slots: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in blocks:
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer
            put(exc)

    thread = threading.Thread(target=produce, name="tracelens-reader", daemon=True)
    thread.start()
    try:
        while (item := slots.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
