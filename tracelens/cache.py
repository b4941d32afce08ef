"""A cache of loaded traces in columnar form, so a trace is decoded once and re-read in a fraction of the time.

One entry per trace *content*: `<dir>/<content key>.npz` (uncompressed numpy arrays: every EventTable column,
tracks, links, steps) plus `<content key>.json` (names, metadata, warnings). The content key is a SHA-256
hash of the file's bytes and of the code that builds a Trace (tracelens/load, tracelens/model, this module),
so edited files, changed loaders and new releases never see stale entries. Hashing a big file costs time, so
`<dir>/paths/<hash of path, size, mtime, code>` remembers the content key of a file that has not changed
since. Everything under the directory is derived data: deleting it is always safe. Traces under 16 MB of JSON
are not stored (they decode about as fast as they would hash).

Location: `$TRACELENS_CACHE_DIR`, else `$XDG_CACHE_HOME/tracelens`, else `~/.cache/tracelens`.
`TRACELENS_NO_CACHE=1` turns the cache off, like `--no-cache`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import mmap
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tracelens import __version__
from tracelens.loader import Progress, load_trace
from tracelens.model.events import EventTable
from tracelens.model.trace import Device, Links, StepTable, Trace, TraceMeta, TrackTable, Truncation

CACHE_FORMAT = 1  # bump when the loader's output or this layout changes
MIN_CACHED_BYTES = 16 << 20  # smaller traces load faster than they hash: not stored
_RAW_COLUMNS = ("input_dims", "input_types", "concrete_inputs")
_HASH_BLOCK = 8 << 20


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the code that builds a Trace (loader/ and model/, the C accelerator's source and build included):
    editing it invalidates every entry."""
    digest = hashlib.blake2b(f"{CACHE_FORMAT}\0{__version__}".encode(), digest_size=8)
    root = Path(__file__).resolve().parent
    sources = [*root.glob("loader/*.py"), *root.glob("_native*"), *root.glob("model/*.py"), Path(__file__).resolve()]
    for source in sorted(sources):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def remembered_key(path: Path, folder: Path) -> str | None:
    """The content key of `path` if its (path, size, mtime) memo has it; None when the file must be hashed."""
    memo = _memo_path(path, folder)
    try:
        remembered = memo.read_text().strip()
    except OSError:
        return None
    return remembered if len(remembered) == 40 else None


def _memo_path(path: Path, folder: Path) -> Path:
    stat = path.stat()
    fast = hashlib.blake2b(
        f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{code_fingerprint()}".encode(),
        digest_size=16,
    ).hexdigest()
    return folder / "paths" / fast


def cache_dir() -> Path:
    """Where entries live (not created here)."""
    if setting := os.environ.get("TRACELENS_CACHE_DIR"):
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "tracelens"


def cache_enabled() -> bool:
    return os.environ.get("TRACELENS_NO_CACHE", "").strip() in ("", "0")


def load_cached(
    path: str | Path,
    progress: Progress | None = None,
    use_cache: bool = True,
    workers: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Trace:
    """`load_trace(path)`, served from the cache when the same content was loaded before.

    A cache that cannot be read or written is ignored: loading never fails because of it. `meanwhile` as in
    `load_trace` (not called when the trace comes from the cache).

    A file this cache has not seen at this path, size and mtime is decoded without first hashing it (its
    content may have been cached under another path, but a new trace is the common case): the hash is computed
    while worker processes decode, and remembered for the next command.
    """
    path = Path(path)
    if not (use_cache and cache_enabled()) or not path.is_file():
        return load_trace(path, progress, workers=workers, meanwhile=meanwhile)
    folder = cache_dir()
    key = _known_key(path, folder)
    if key is not None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            trace = read_entry(folder, key, path)
            if trace is not None:
                return trace
    hashed: list[str | None] = []

    def during_decode() -> None:
        if meanwhile is not None:
            meanwhile()
        if key is None:
            hashed.append(_try_content_key(path, folder))

    trace = load_trace(path, progress, workers=workers, meanwhile=during_decode)
    if key is None:
        key = hashed[0] if hashed else _try_content_key(path, folder)
    if key is not None and trace.uncompressed_bytes >= MIN_CACHED_BYTES:
        _store(folder, key, trace)
    return trace


background_writes = False  # the `tracelens` command sets it: entries are written by a forked child
_writers: list[int] = []  # pids of those children, waited for by `finish_writes`


def _store(folder: Path, key: str, trace: Trace) -> None:
    """`write_entry`, errors ignored; with `background_writes` (and no other thread to fork with) in a forked
    child, so the command's analyses run meanwhile on the other core."""
    if background_writes and hasattr(os, "fork") and threading.active_count() == 1:
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:  # pragma: no cover - the writer child
            status = 1
            try:
                write_entry(folder, key, trace)
                status = 0
            finally:
                os._exit(status)
        if pid > 0:
            _writers.append(pid)
            return
    with contextlib.suppress(OSError, ValueError):
        write_entry(folder, key, trace)


def finish_writes() -> None:
    """Wait for the entry writers started in the background (the command does before it exits)."""
    while _writers:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(_writers.pop(), 0)


def _known_key(path: Path, folder: Path) -> str | None:
    try:
        return remembered_key(path, folder)
    except OSError:
        return None


def _try_content_key(path: Path, folder: Path) -> str | None:
    try:
        return content_key(path, folder)
    except OSError:
        return None


def content_key(path: Path, folder: Path) -> str:
    """The content key of `path`, from the (path, size, mtime) memo when the file has not changed."""
    remembered = remembered_key(path, folder)
    if remembered is not None:
        return remembered
    memo = _memo_path(path, folder)
    digest = hashlib.sha256()  # hardware-accelerated on current CPUs: ~2x BLAKE2b's speed on big files
    digest.update(f"{code_fingerprint()}\0".encode())
    _hash_file(digest, path)
    key = digest.hexdigest()[:40]
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomic(memo, key.encode())
    except OSError:
        pass
    return key


# ---------------------------------------------------------------- entries


def write_entry(folder: Path, key: str, trace: Trace) -> None:
    """Store `trace` under `key` (atomically: readers never see half an entry)."""
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    events = trace.events
    for field in dataclasses.fields(EventTable):
        value = getattr(events, field.name)
        if field.name in _RAW_COLUMNS:
            arrays.update(_pack_raw(field.name, value))
        elif isinstance(value, np.ndarray):
            arrays[f"events.{field.name}"] = value
    for name in ("is_gpu", "device", "stream"):
        arrays[f"tracks.{name}"] = getattr(trace.tracks, name)
    for name in ("parent", "depth", "launch", "op", "step"):
        arrays[f"links.{name}"] = getattr(trace.links, name)
    for name in ("number", "start_ns", "end_ns", "complete"):
        arrays[f"steps.{name}"] = getattr(trace.steps, name)
    meta = trace.meta
    document = {
        "format": CACHE_FORMAT,
        "version": __version__,
        "code": code_fingerprint(),
        "names": list(events.names),
        "tracks": {"pid": list(trace.tracks.pid), "tid": list(trace.tracks.tid)},
        "links": {"by_id": trace.links.op_by_external_id, "by_time": trace.links.op_by_containment},
        "steps_source": trace.steps.source,
        "meta": {
            **{f.name: getattr(meta, f.name) for f in dataclasses.fields(TraceMeta) if f.name != "devices"},
            "devices": [dataclasses.asdict(d) for d in meta.devices],
        },
        "origin_us": trace.origin_us,
        "uncompressed_bytes": trace.uncompressed_bytes,
        "truncation": dataclasses.asdict(trace.truncation),
        "warnings": list(trace.warnings),
        "n_events": len(events),
    }
    text = json.dumps(document, ensure_ascii=False, allow_nan=True).encode()
    handle, temp_name = tempfile.mkstemp(prefix=f".{key}.", suffix=".npz.tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as temp:
            np.savez(temp, **arrays)  # type: ignore[arg-type]
        os.replace(temp_name, folder / f"{key}.npz")
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    write_file_atomic(folder / f"{key}.json", text)  # written last: its presence marks a complete entry


def read_entry(folder: Path, key: str, path: Path) -> Trace | None:
    """The trace stored under `key` (with `path` as its path), or None when there is no complete entry."""
    try:
        document = json.loads((folder / f"{key}.json").read_bytes())
    except FileNotFoundError:
        return None
    if document.get("code") != code_fingerprint():
        return None
    with np.load(folder / f"{key}.npz", allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    n = int(document["n_events"])
    columns: dict[str, Any] = {}
    for field in dataclasses.fields(EventTable):
        if field.name in _RAW_COLUMNS:
            columns[field.name] = _unpack_raw(field.name, arrays, n)
        elif field.name == "names":
            columns["names"] = tuple(document["names"])
        else:
            columns[field.name] = arrays[f"events.{field.name}"]
    meta_doc = dict(document["meta"])
    meta_doc["devices"] = tuple(Device(**d) for d in meta_doc["devices"])
    tracks = TrackTable(
        pid=tuple(document["tracks"]["pid"]),
        tid=tuple(document["tracks"]["tid"]),
        is_gpu=arrays["tracks.is_gpu"],
        device=arrays["tracks.device"],
        stream=arrays["tracks.stream"],
    )
    links = Links(
        parent=arrays["links.parent"],
        depth=arrays["links.depth"],
        launch=arrays["links.launch"],
        op=arrays["links.op"],
        step=arrays["links.step"],
        op_by_external_id=int(document["links"]["by_id"]),
        op_by_containment=int(document["links"]["by_time"]),
    )
    steps = StepTable(
        number=arrays["steps.number"],
        start_ns=arrays["steps.start_ns"],
        end_ns=arrays["steps.end_ns"],
        complete=arrays["steps.complete"],
        source=document["steps_source"],
    )
    return Trace(
        path=path,
        events=EventTable(**columns),
        tracks=tracks,
        meta=TraceMeta(**meta_doc),
        links=links,
        steps=steps,
        origin_us=float(document["origin_us"]),
        uncompressed_bytes=int(document["uncompressed_bytes"]),
        truncation=Truncation(**document["truncation"]),
        warnings=tuple(document["warnings"]),
    )


def _pack_raw(name: str, column: np.ndarray) -> dict[str, np.ndarray]:
    """An object column of bytes-or-None as (rows, offsets, one byte blob)."""
    rows = np.flatnonzero(column != None)  # noqa: E711 (elementwise on an object array)
    values = [column[i] for i in rows]
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    blob = np.frombuffer(b"".join(values), dtype=np.uint8)
    return {f"raw.{name}.rows": rows.astype(np.int64), f"raw.{name}.offsets": offsets, f"raw.{name}.blob": blob}


def _unpack_raw(name: str, arrays: dict[str, np.ndarray], n: int) -> np.ndarray:
    rows = arrays[f"raw.{name}.rows"]
    offsets = arrays[f"raw.{name}.offsets"].tolist()
    blob = arrays[f"raw.{name}.blob"].tobytes()
    out = np.full(n, None, dtype=object)
    if rows.size:
        holder = np.empty(rows.size, dtype=object)
        holder[:] = [blob[offsets[i] : offsets[i + 1]] for i in range(rows.size)]
        out[rows] = holder
    return out


def _hash_file(digest: Any, path: Path) -> None:
    """Feed the file's bytes to `digest`: through a memory map (no copy of the file), or block by block where
    it cannot be mapped (an empty file, a pipe)."""
    with path.open("rb") as handle:
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                digest.update(mapped)
                return
        except (OSError, ValueError):
            handle.seek(0)
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)


def write_file_atomic(target: Path, data: bytes) -> None:
    """Write `data` to `target` via a temporary file in the same folder: readers never see half of it."""
    handle, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
