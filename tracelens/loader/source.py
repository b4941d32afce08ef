"""Reading a trace file into bytes: plain JSON or gzip, detecting files cut off mid-write."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracelens.errors import UnusableTraceError

GZIP_MAGIC = b"\x1f\x8b"
TRACE_SUFFIXES = (".json", ".json.gz")  # file names taken for traces in directories and archives of ranks


def is_trace_name(name: str) -> bool:
    """Whether a file of this name is taken for a trace (not, e.g., an archive of rank traces)."""
    return name.endswith(TRACE_SUFFIXES)


CHUNK_BYTES = 8 << 20

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


@dataclass(frozen=True)
class RawTrace:
    """The uncompressed JSON text of one trace file."""

    path: Path
    data: bytes
    compressed_bytes: int | None
    gzip_truncated: bool


def read_trace_bytes(path: Path, progress: ProgressCallback | None = None) -> RawTrace:
    """Read `path` (gzip detected by magic, not by suffix); raise UnusableTraceError on unusable files."""
    check_readable(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(2)
            handle.seek(0)
            if head == GZIP_MAGIC:
                data, truncated = _gunzip(handle, size, progress)
                if truncated and not data:
                    raise UnusableTraceError(f"{path}: corrupt or truncated gzip data: nothing could be decompressed")
                _refuse_tar(path, data)
                return RawTrace(path, data, size, truncated)
            if path.name.endswith(".gz"):
                raise UnusableTraceError(
                    f"{path}: not gzip data despite the .gz suffix; rename it to .json if it is plain JSON"
                )
            data = _read_plain(handle, size, progress)
            _refuse_tar(path, data)
    except OSError as exc:
        raise UnusableTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return RawTrace(path, data, None, False)


def check_readable(path: Path) -> None:
    """Raise UnusableTraceError unless `path` is an existing file."""
    if not path.exists():
        raise UnusableTraceError(f"{path}: no such file; pass the path of a .json or .json.gz trace")
    if path.is_dir():
        raise UnusableTraceError(_directory_message(path))


def _directory_message(path: Path) -> str:
    traces = sorted(p.name for p in path.iterdir() if p.name.endswith((".json", ".json.gz")) and p.is_file())
    if not traces:
        return f"{path}: is a directory with no trace files (.json, .json.gz) in it; pass one trace file"
    return f"{path}: is a directory ({len(traces)} trace files in it, e.g. {traces[0]}); pass one trace file"


def _refuse_tar(path: Path, data: bytes) -> None:
    """A tar archive (POSIX `ustar` magic at byte 257) holds several files: ask for one of them."""
    if data[257:262] != b"ustar":
        return
    import tarfile  # only here: 5-7 ms of start-up otherwise

    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            names = [member.name for member in archive.getmembers() if member.isfile()]
    except (tarfile.TarError, EOFError):
        names = []
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    listed = f" of {len(names)} file{'s' if len(names) > 1 else ''} ({shown})" if names else ""
    raise UnusableTraceError(f"{path}: a tar archive{listed}; extract it (tar xf) and pass one trace file")


def _read_plain(handle: object, size: int, progress: ProgressCallback | None) -> bytes:
    parts: list[bytes] = []
    done = 0
    reader = handle.read  # type: ignore[attr-defined]
    while chunk := reader(CHUNK_BYTES):
        parts.append(chunk)
        done += len(chunk)
        if progress:
            progress(done, size)
    return b"".join(parts)


def _gunzip(handle: object, size: int, progress: ProgressCallback | None) -> tuple[bytes, bool]:
    """Decompress all gzip members; a stream cut short returns what was decoded and truncated=True."""
    reader = handle.read  # type: ignore[attr-defined]
    parts: list[bytes] = []
    done = 0
    decomp = zlib.decompressobj(wbits=47)
    member_fed = False  # the current member has received input but not reached its end
    try:
        while chunk := reader(CHUNK_BYTES):
            done += len(chunk)
            while chunk:
                parts.append(decomp.decompress(chunk))
                member_fed = not decomp.eof
                if decomp.eof:  # the next gzip member, if any, starts in unused_data
                    chunk = decomp.unused_data
                    decomp = zlib.decompressobj(wbits=47)
                else:
                    chunk = b""
            if progress:
                progress(done, size)
        parts.append(decomp.flush())
    except zlib.error as exc:
        if not any(parts):
            name = getattr(handle, "name", "input")
            raise UnusableTraceError(f"{name}: corrupt gzip data ({exc})") from exc
        return b"".join(parts), True
    return b"".join(parts), member_fed
