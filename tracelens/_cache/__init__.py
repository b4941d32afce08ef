"""The one cache of tracelens: loaded traces in columnar form and finished command results, on disk.

A `Cache` object says where the cache lives, whether it is on, how big it may grow and how entries are written;
the CLI builds one per command (`Cache.from_environment`) and passes it to what loads traces or caches results.
Nothing here is switched through module globals.

Entries (every one a checksummed container, `tracelens._cache.entry`), under the cache folder:
- `traces/<name>.trace`: a loaded `Trace`, every field (`Trace.to_plain`), for traces of at least
  `min_trace_bytes` of JSON (smaller ones decode about as fast as they hash);
- `<kind>/<name>.msgpack`: a finished result of a command (`analyses`: `analyze`, `documents`: `check`,
  `pages`: `report`), keyed by the content and path of every input, the options and the code;
- `paths/<file identity>`: the content key (SHA-256) of an input file, so an unchanged file is not hashed again.
Entry names hash the one code fingerprint (`keys.code_fingerprint`): new code never reads old entries.

Promises: a damaged entry (truncated, bit-flipped, another entry's content, not an entry at all) fails its
checksum, is deleted with one `tracelens: warning:` line and is rebuilt; it is never trusted and never fatal.
A cache that cannot be read or written never makes a command fail. Entries are written atomically and fsync'd
(`tracelens.atomic`). A read marks an entry used (its mtime); after each write the least recently used entries
are deleted until the cache is at most `max_bytes` (default 2 GiB, `$TRACELENS_CACHE_MAX_SIZE`).

Location: `$TRACELENS_CACHE_DIR`, else `$XDG_CACHE_HOME/tracelens`, else `~/.cache/tracelens`.
`TRACELENS_NO_CACHE=1` turns it off, like `--no-cache`. Deleting the folder is always safe.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from tracelens import errors
from tracelens._cache.entry import BadEntry, Buffer, pack, read_file, unpack
from tracelens._cache.keys import code_fingerprint, file_identity, hash_file, is_content_key
from tracelens.atomic import TEMP_SUFFIX, sweep_stale_temps, write_atomic
from tracelens.errors import TracelensError
from tracelens.records import replace
from tracelens.settings import parse_size

if TYPE_CHECKING:
    from tracelens._cache.results import ResultSlot
    from tracelens._cache.traces import TraceLoad
    from tracelens.loader import Progress
    from tracelens.model.trace import Trace

T = TypeVar("T")
DEFAULT_MAX_BYTES = 2 << 30
STALE_TEMP_S = 3600.0  # a writer's temporary file untouched this long is a leftover, whatever its pid says
MIN_TRACE_BYTES = 16 << 20  # traces with less JSON than this load about as fast as they hash: not stored
_ENTRY_NAME = re.compile(r"^[0-9a-f]{32,64}(\.(trace|msgpack))?$")
_LEGACY_NAME = re.compile(r"^[0-9a-f]{40}\.(npz|json)$")  # entries of tracelens 0.1 before this package
_LEGACY_TEMP = re.compile(r"^\.[0-9a-f]{32,40}\..*\.tmp$")  # and their writers' temporary files


def _ours(name: str) -> bool:
    """Whether `name` is a temporary file of a cache writer (this version's or an earlier one's)."""
    return name.endswith(TEMP_SUFFIX) or _LEGACY_TEMP.match(name) is not None


def remove_entry(path: Path) -> None:
    """Delete what is at `path`: a file, a link (not what it points to), a FIFO, or a directory tree."""
    if stat.S_ISDIR(path.lstat().st_mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def default_folder() -> Path:
    """`$TRACELENS_CACHE_DIR`, else `$XDG_CACHE_HOME/tracelens`, else `~/.cache/tracelens` (not created here)."""
    if setting := os.environ.get("TRACELENS_CACHE_DIR"):
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "tracelens"


class FolderUse(msgspec.Struct, frozen=True):
    """Entries of one subfolder of the cache and the bytes they take."""

    name: str
    entries: int
    bytes: int


class CacheInfo(msgspec.Struct, frozen=True):
    """Where the cache is and what it holds (`Cache.info`): per subfolder, and in all (`entries`, `bytes`)."""

    folder: Path
    enabled: bool
    max_bytes: int
    folders: tuple[FolderUse, ...]
    entries: int
    bytes: int


class Cache(msgspec.Struct):
    """The cache of one command (see the module docstring). `warn` prints a warning line."""

    folder: Path
    enabled: bool = True
    max_bytes: int = DEFAULT_MAX_BYTES
    min_trace_bytes: int = MIN_TRACE_BYTES
    warn: Callable[[str], None] = errors.warn
    swept: bool = False  # whether `sweep_leftovers` ran (once per command)
    undeleted: int = 0  # entries `evict` could not delete (a read-only cache), this command
    undeleted_reason: str = ""  # the first such failure's reason

    @classmethod
    def from_environment(cls, *, enabled: bool = True) -> Cache:
        """The cache the environment describes: location, `TRACELENS_NO_CACHE`, `TRACELENS_CACHE_MAX_SIZE`.
        Raises `TracelensError` (exit 2) when the size is malformed (read even with the cache off)."""
        max_bytes = DEFAULT_MAX_BYTES
        if setting := os.environ.get("TRACELENS_CACHE_MAX_SIZE", "").strip():
            try:
                max_bytes = parse_size(setting)
            except ValueError as exc:  # like every other setting: one error line, exit 2
                raise TracelensError(f"TRACELENS_CACHE_MAX_SIZE: {exc}") from None
        off = os.environ.get("TRACELENS_NO_CACHE", "").strip() not in ("", "0")
        return cls(default_folder(), enabled and not off, max_bytes)

    def disabled(self) -> Cache:
        """This cache, turned off (`--no-cache`)."""
        return replace(self, enabled=False)

    @property
    def fingerprint(self) -> str:
        """The one code fingerprint every entry name includes."""
        return code_fingerprint()

    # ------------------------------------------------------------ what commands call

    def begin_load(self, path: str | Path, progress: Progress | None = None, workers: int | None = None) -> TraceLoad:
        """`tracelens.loader.begin_load(path)`, or the trace read from the cache when the same content was loaded
        before (see `tracelens._cache.traces.begin_load`): `finish()` gives the trace, `store()` writes its
        entry."""
        from tracelens._cache.traces import begin_load

        if self.enabled and not self.swept:
            self.sweep_leftovers()
        return begin_load(self, Path(path), progress, workers)

    def load_trace(self, path: str | Path, progress: Progress | None = None, workers: int | None = None) -> Trace:
        """`tracelens.loader.load_trace(path)`, served from the cache when the same content was loaded before
        (and stored there when it was not): `begin_load`, `finish` and `store` at once."""
        with self.begin_load(path, progress, workers) as load:
            trace = load.finish()
        load.store()
        return trace

    def lookup_result(self, kind: str, inputs: Sequence[Path], options: Mapping[str, object]) -> ResultSlot:
        """The slot of a command's result for these inputs, options and code, with the entry found there if any
        (`tracelens._cache.results.lookup_result`)."""
        from tracelens._cache.results import lookup_result

        if self.enabled and not self.swept:
            self.sweep_leftovers()
        return lookup_result(self, kind, inputs, options)

    def store_result(self, slot: ResultSlot, result: object, record_type: type[Any]) -> bool:
        """Store a computed result in its slot (`tracelens._cache.results.store_result`); whether it was."""
        from tracelens._cache.results import store_result

        return store_result(slot, result, record_type)

    # ------------------------------------------------------------ content keys of input files

    def known_content_key(self, path: Path, identity: str | None = None) -> str | None:
        """The content key of `path` if this cache remembers it for the file's identity (`identity`: taken
        already); None when the file must be hashed (or cannot be stat'ed)."""
        try:
            identity = identity or file_identity(path)
        except OSError:
            return None
        return self._remembered(identity)

    def content_key(self, path: Path, identity: str | None = None) -> str | None:
        """The content key of `path` (remembered, or hashed and then remembered); None if it cannot be read.
        `identity`: the file's identity taken before (the key is remembered only if it has not changed)."""
        try:
            identity = identity or file_identity(path)
            key = self._remembered(identity)
            if key is not None:
                return key
            key = hash_file(path)
            if file_identity(path) == identity:
                self.write(f"paths/{identity}", {"content_key": key}, [])
            return key
        except OSError:
            return None

    def _remembered(self, identity: str) -> str | None:
        entry = self.read(f"paths/{identity}")
        if entry is None:
            return None
        key = entry[0].get("content_key")
        if isinstance(key, str) and is_content_key(key):
            return key
        self.discard(self.folder / "paths" / identity, "no content key in it")
        return None

    # ------------------------------------------------------------ entries

    def read(self, relative: str) -> tuple[dict[str, Any], list[memoryview]] | None:
        """The header and blobs of the entry at `relative`, verified; None when there is none, it cannot be
        read, or it is damaged (then it is deleted, with a warning). A hit marks the entry used."""
        path = self.folder / relative
        try:
            data = read_file(path)
            header, blobs = unpack(path.name, data)  # names include the code fingerprint, the digest the name
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            self.warn(f"cache entry {path} cannot be read ({exc.strerror or exc}); ignored")
            return None
        except BadEntry as exc:
            self.discard(path, str(exc))
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used goes first
        return header, blobs

    def discard(self, path: Path, reason: str) -> None:
        """Delete the damaged entry at `path`, whatever it is (a file, a link, a FIFO, a directory tree), saying
        so on stderr; when it cannot be deleted, say that instead (the result is then computed every time)."""
        try:
            remove_entry(path)
        except OSError as exc:
            self.warn(
                f"cache entry {path} is damaged ({reason}) and cannot be deleted ({exc.strerror or exc}); "
                "recomputing without the cache"
            )
            return
        self.warn(f"cache entry {path} is damaged ({reason}): deleted, recomputing")

    def write(self, relative: str, header: dict[str, Any], blobs: list[Buffer]) -> bool:
        """Store an entry atomically and fsync'd, then evict least recently used entries over `max_bytes`.
        Returns whether it was stored (a cache that cannot be written is ignored)."""
        path = self.folder / relative
        try:
            data = pack(path.name, {**header, "fingerprint": code_fingerprint()}, blobs)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, typing.cast(bytes, data))  # any buffer does: no copy of a big entry
            del data
            self.evict(self.max_bytes, keep=path)
        except (OSError, ValueError):
            return False
        return True

    # ------------------------------------------------------------ size

    def entry_files(self) -> list[tuple[int, int, Path]]:
        """(mtime in ns, size, path) of everything in the cache named like ours: entries, leftovers of killed
        writers, entries of earlier versions, and whatever else took an entry's name (a directory, a link, a
        FIFO: size 0, deleted first by `evict`). Files not named like ours are not counted and never deleted."""
        found: list[tuple[int, int, Path]] = []
        for folder, names in self._listing():
            for name in names:
                path = folder / name
                with contextlib.suppress(OSError):
                    status = path.lstat()
                    regular = stat.S_ISREG(status.st_mode)
                    found.append((status.st_mtime_ns if regular else 0, status.st_size if regular else 0, path))
        return found

    def _listing(self) -> list[tuple[Path, list[str]]]:
        listing = []
        try:
            top = os.listdir(self.folder)
        except OSError:
            return []
        listing.append((self.folder, [n for n in top if _ours(n) or _LEGACY_NAME.match(n)]))
        for sub in top:
            if not sub.isidentifier() or not (self.folder / sub).is_dir():
                continue
            with contextlib.suppress(OSError):
                names = os.listdir(self.folder / sub)
                listing.append((self.folder / sub, [n for n in names if _ours(n) or _ENTRY_NAME.match(n)]))
        return listing

    def evict(self, max_bytes: int, keep: Path | None = None, junk: bool = False) -> tuple[int, int]:
        """Delete least recently used entries until the cache takes at most `max_bytes` (`keep` stays); with
        `junk`, first whatever took an entry's name without being a file (`entry_files`: mtime 0). Returns
        (files deleted, bytes freed); entries that could not be deleted are counted in `undeleted`."""
        files = self.entry_files()
        total = sum(size for _, size, _ in files)
        removed = freed = 0
        for mtime_ns, size, path in sorted(files):
            if total <= max_bytes and not (junk and mtime_ns == 0):
                break
            if path == keep:
                continue
            try:
                remove_entry(path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self.undeleted += 1
                self.undeleted_reason = self.undeleted_reason or (exc.strerror or type(exc).__name__)
                continue  # still there: still counted
            else:
                removed, freed = removed + 1, freed + size
            total -= size
        return removed, freed

    def prune(self, max_bytes: int | None = None) -> tuple[int, int]:
        """Delete leftovers of killed writers, then least recently used entries down to `max_bytes` (default:
        this cache's cap). Returns (files deleted, bytes freed)."""
        self.sweep_leftovers()
        return self.evict(self.max_bytes if max_bytes is None else max_bytes, junk=True)

    def sweep_leftovers(self) -> int:
        """Delete the temporary files of writers killed before they finished (SIGKILL, a crash), in every folder
        of the cache: those whose process is gone, and those untouched for `STALE_TEMP_S` (their pid may have
        been reused). Done once per command, at its first use of the cache; returns how many were deleted."""
        self.swept = True
        removed = 0
        stale_ns = time.time_ns() - int(STALE_TEMP_S * 1e9)
        for folder, names in self._listing():
            removed += sweep_stale_temps(folder)
            for name in names:
                path = folder / name
                with contextlib.suppress(OSError):
                    if _ours(name) and path.lstat().st_mtime_ns < stale_ns:
                        path.unlink()
                        removed += 1
        return removed

    def info(self) -> CacheInfo:
        """Where the cache is and what it holds, per subfolder."""
        use: dict[str, list[int]] = {}
        for _, size, path in self.entry_files():
            name = "(earlier versions)" if path.parent == self.folder else path.parent.name
            counts = use.setdefault(name, [0, 0])
            counts[0] += 1
            counts[1] += size
        folders = tuple(FolderUse(name, n, size) for name, (n, size) in sorted(use.items()))
        entries, size = sum(f.entries for f in folders), sum(f.bytes for f in folders)
        return CacheInfo(self.folder, self.enabled, self.max_bytes, folders, entries, size)
