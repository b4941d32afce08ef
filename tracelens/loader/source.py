"""The text of a trace file: what may be read (a regular file), how it is read (plain, or gunzipped once, by
one gunzip), and the bound that refuses input that cannot be a trace before it costs more than a few MB.

Every byte of text the loader reads in full passes `EventGapGuard`: a trace ends an object (`}`) at least
every `MAX_EVENT_BYTES` bytes, so text without one for that long (endless whitespace, zeros, one giant
string) is refused there, whatever follows. Work and memory are therefore linear in the input and bounded
by what is read before the refusal.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import stat
import types
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from tracelens.errors import UnusableTraceError

_gzip_module: types.ModuleType = zlib
try:  # python-isal: a dependency except on Windows on Arm (no wheel there); the same bytes as zlib, faster
    from isal import isal_zlib

    _gzip_module = isal_zlib
except ImportError:  # pragma: no cover - depends on the environment
    pass

GZIP_MAGIC = b"\x1f\x8b"
TRACE_SUFFIXES = (".json", ".json.gz")  # file names taken for traces in directories and archives of ranks
BLOCK_BYTES = 8 << 20  # read and gunzip granularity
MAX_EVENT_BYTES = 64 << 20  # a trace ends an object (`}`) at least this often (10 MB names are fine)

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


def is_trace_name(name: str) -> bool:
    """Whether a file of this name is taken for a trace (not, e.g., an archive of rank traces)."""
    return name.endswith(TRACE_SUFFIXES)


def check_readable(path: Path) -> None:
    """Raise UnusableTraceError unless `path` is an existing regular file (after symlinks). Character devices
    (`/dev/zero`), FIFOs and sockets are refused without being opened: they could be endless or block."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UnusableTraceError(f"{path}: no such file; pass the path of a .json or .json.gz trace") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission on a folder
        raise UnusableTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        raise UnusableTraceError(_directory_message(path))
    if not stat.S_ISREG(mode):
        raise UnusableTraceError(
            f"{path}: is a {_file_kind(mode)}, not a regular file; save the trace to a file and pass that"
        )


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO (pipe)"))
    return next((name for test, name in kinds if test(mode)), "socket or special file")


def _directory_message(path: Path) -> str:
    traces = sorted(p.name for p in path.iterdir() if is_trace_name(p.name) and p.is_file())
    if not traces:
        return f"{path}: is a directory with no trace files (.json, .json.gz) in it; pass one trace file"
    return f"{path}: is a directory ({len(traces)} trace files in it, e.g. {traces[0]}); pass one trace file"


class EventGapGuard:
    """Fed every block of text in order; raises UnusableTraceError once `MAX_EVENT_BYTES` pass without a `}`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.seen = 0  # bytes fed so far
        self.last_close = 0  # offset just after the last `}` fed

    def feed(self, block: bytes) -> None:
        found = block.rfind(b"}")
        if found >= 0:
            self.last_close = self.seen + found + 1
        self.seen += len(block)
        if self.seen - self.last_close > MAX_EVENT_BYTES:
            raise UnusableTraceError(
                f"{self.source}: not a trace: no event ends in {MAX_EVENT_BYTES >> 20} MB of text "
                f"(from byte {self.last_close:,})"
            )


class Gunzip(msgspec.Struct):
    """Decompressed blocks of every gzip member of `handle` (one block of output per `BLOCK_BYTES`).

    A stream cut short, or corrupt after some output, ends the blocks and sets `truncated`; corrupt data with
    no output at all raises UnusableTraceError. `compressed_done` counts the input bytes read so far."""

    handle: BinaryIO
    source: str
    truncated: bool = False
    compressed_done: int = 0

    def __iter__(self) -> Iterator[bytes]:
        decomp = _gzip_module.decompressobj(wbits=47)
        fed = False  # the current member has input but has not reached its end
        produced = False
        try:
            while compressed := self.handle.read(BLOCK_BYTES):
                self.compressed_done += len(compressed)
                data = compressed
                while True:
                    out = decomp.decompress(data, BLOCK_BYTES)
                    fed = True
                    if out:
                        produced = True
                        yield out
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
        except (zlib.error, _gzip_module.error) as exc:
            if not produced:
                raise UnusableTraceError(f"{self.source}: corrupt gzip data ({exc})") from exc
            fed = True
        self.truncated = fed


def is_gzip(path: Path) -> bool:
    with path.open("rb") as probe:
        return probe.read(2) == GZIP_MAGIC


# ---------------------------------------------------------------- the text as a file


class TraceText(msgspec.Struct, frozen=True):
    """The uncompressed text of a trace: a plain file (`path`: the input itself, or its gunzipped copy in a
    scratch folder), or, where no scratch folder has room, the bytes in memory (`data`)."""

    path: Path | None
    data: bytes | None
    size: int  # bytes of text
    gzip: bool
    gzip_truncated: bool


@contextlib.contextmanager
def trace_text(path: Path, progress: ProgressCallback | None = None) -> Iterator[TraceText]:
    """The text of `path` (a checked regular file) for the duration of the `with`. A gzip file is gunzipped
    once, to a private scratch folder (tmpfs where it has room, else the temporary directory; removed on exit),
    or into memory when neither has room. Raises UnusableTraceError for corrupt gzip data or text that cannot
    be a trace (`EventGapGuard`)."""
    try:
        size = path.stat().st_size
        if not is_gzip(path):
            if path.name.endswith(".gz"):
                raise UnusableTraceError(
                    f"{path}: not gzip data despite the .gz suffix; rename it to .json if it is plain JSON"
                )
            yield TraceText(path, None, size, False, False)
            return
        announced = _gzip_text_bytes(path, size)
        for folder in _scratch_candidates():
            spooled = _spool(path, folder, announced, progress)
            if spooled is not None:
                try:
                    yield spooled
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
                return
        raw = read_trace_bytes(path, progress)
        yield TraceText(None, raw.data, len(raw.data), True, raw.gzip_truncated)
    except OSError as exc:
        raise UnusableTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _scratch_candidates() -> Iterator[Path]:
    """New private folders to try in turn: in tmpfs (memory) and in the temporary directory. Each is created
    only when asked for; the caller removes it."""
    from tracelens.loader.forked import new_scratch_folder, scratch_parents

    for parent in scratch_parents():
        try:
            yield Path(new_scratch_folder(parent))
        except OSError:
            continue


SCRATCH_SHARE = 4  # a spooled text takes at most 1/4 of its folder's free space (decoders write results there too)


def _spool(path: Path, folder: Path, announced: int, progress: ProgressCallback | None) -> TraceText | None:
    """Gunzip `path` into `folder`; None (folder removed) when it has no room for the text."""
    try:
        limit = shutil.disk_usage(folder).free // SCRATCH_SHARE
        if announced > limit:
            raise _NoRoom
        target = folder / "trace.json"
        size = path.stat().st_size
        guard = EventGapGuard(str(path))
        with path.open("rb") as source, target.open("wb") as out:
            blocks = Gunzip(source, str(path))
            written = 0
            for block in blocks:
                guard.feed(block)
                written += len(block)
                if written > limit:  # the trailer's size was wrong (it is modulo 4 GiB, or cut off)
                    raise _NoRoom
                out.write(block)
                if progress:
                    progress(blocks.compressed_done, size)
        if not written and blocks.truncated:
            raise UnusableTraceError(f"{path}: corrupt or truncated gzip data: nothing could be decompressed")
        return TraceText(target, None, written, True, blocks.truncated)
    except (_NoRoom, OSError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


class _NoRoom(Exception):
    pass


GZIP_RATIO = 10  # typical Kineto JSON compresses 10-20x


def _gzip_text_bytes(path: Path, size: int) -> int:
    """The uncompressed size a gzip file announces in its trailer (ISIZE, modulo 4 GiB, last member only);
    a typical ratio where that cannot be right. Only a first guess: spooling checks what it writes."""
    if size < 18:
        return size * GZIP_RATIO
    with path.open("rb") as handle:
        handle.seek(size - 4)
        announced = int.from_bytes(handle.read(4), "little")
    return announced if announced >= size else size * GZIP_RATIO


# ---------------------------------------------------------------- the text in memory (whole-file decoding)


class RawTrace(msgspec.Struct, frozen=True):
    """The uncompressed JSON text of one trace file."""

    path: Path
    data: bytes
    compressed_bytes: int | None
    gzip_truncated: bool


def read_trace_bytes(path: Path, progress: ProgressCallback | None = None) -> RawTrace:
    """Read `path` whole (gzip detected by magic, not by suffix); raise UnusableTraceError on unusable files."""
    check_readable(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            gz = handle.read(2) == GZIP_MAGIC
            handle.seek(0)
            if not gz and path.name.endswith(".gz"):
                raise UnusableTraceError(
                    f"{path}: not gzip data despite the .gz suffix; rename it to .json if it is plain JSON"
                )
            data, truncated = read_text(handle, size, str(path), gz, progress)
    except OSError as exc:
        raise UnusableTraceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if gz and truncated and not data.strip():
        what = "nothing" if not data else "nothing but white space"
        raise UnusableTraceError(f"{path}: corrupt or truncated gzip data: {what} could be decompressed")
    refuse_tar(path, data)
    return RawTrace(path, data, size if gz else None, truncated)


def read_text(
    handle: BinaryIO, size: int, source: str, gz: bool, progress: ProgressCallback | None = None
) -> tuple[bytes, bool]:
    """All text of an open file (gunzipped when `gz`), through `EventGapGuard`; and whether the gzip stream
    was cut short."""
    guard = EventGapGuard(source)
    parts: list[bytes] = []
    done = 0
    gunzip = Gunzip(handle, source) if gz else None
    for block in gunzip if gunzip is not None else iter(lambda: handle.read(BLOCK_BYTES), b""):
        guard.feed(block)
        parts.append(block)
        done += len(block)
        if progress:
            progress(gunzip.compressed_done if gunzip is not None else done, size)
    return b"".join(parts), gunzip is not None and gunzip.truncated


def refuse_tar(path: Path, data: bytes) -> None:
    """A tar archive (POSIX `ustar` magic at byte 257) holds several files: ask for one of them."""
    if data[257:262] != b"ustar":
        return
    import tarfile  # only here: every run would pay for its import otherwise

    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            names = [member.name for member in archive.getmembers() if member.isfile()]
    except (tarfile.TarError, EOFError):
        names = []
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    listed = f" of {len(names)} file{'s' if len(names) > 1 else ''} ({shown})" if names else ""
    raise UnusableTraceError(f"{path}: a tar archive{listed}; extract it (tar xf) and pass one trace file")
