"""What entries are keyed by: the one code fingerprint, and the content key of an input file.

- `code_fingerprint()`: a hash of every module of the installed `tracelens` package (the C accelerator's source
  and build included), the numpy version and `FORMAT`. Any change to the code is a miss everywhere.
- `content_key(path)`: the SHA-256 of the file's bytes (40 hex digits). Hashing a big file costs time, so the
  cache remembers it per *file identity*: resolved path, device, inode, size, mtime and ctime, both in
  nanoseconds (`file_identity`). An in-place edit that keeps size and mtime still changes ctime (any write,
  `utime` or rename does), a file moved over the path has another inode: either way the identity is new and the
  file is hashed again.
"""

from __future__ import annotations

import functools
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np

from tracelens import __version__

FORMAT = 3  # bump when entries or keys change meaning (also changes the fingerprint)
CONTENT_KEY_CHARS = 40
_HASH_BLOCK = 8 << 20


@functools.cache
def code_fingerprint() -> str:
    """The hash of the package's code (see the module docstring), computed once per process."""
    import hashlib  # imported where used: a run with the cache off never imports it (`entry._digest`)

    digest = hashlib.blake2b(f"{FORMAT}\0{__version__}\0{np.__version__}".encode(), digest_size=16)
    root = Path(__file__).resolve().parents[1]
    for source in sorted([*root.rglob("*.py"), *root.rglob("_native*")]):
        if source.is_file():
            digest.update(str(source.relative_to(root)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()


def file_identity(path: Path) -> str:
    """What identifies the content of `path` without reading it (see the module docstring); `OSError` if it
    cannot be stat'ed."""
    import hashlib  # see `code_fingerprint`

    stat = path.stat()
    described = (
        f"{FORMAT}\0{os.fsencode(path.resolve())!r}\0{stat.st_dev}\0{stat.st_ino}\0{stat.st_size}\0"
        f"{stat.st_mtime_ns}\0{stat.st_ctime_ns}"
    )
    return hashlib.blake2b(described.encode(), digest_size=16).hexdigest()


def hash_file(path: Path) -> str:
    """The content key of `path`: SHA-256 of its bytes (hardware-accelerated on current CPUs), read through a
    memory map (no copy), or block by block where it cannot be mapped."""
    import hashlib  # see `code_fingerprint`

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                digest.update(mapped)
                return digest.hexdigest()[:CONTENT_KEY_CHARS]
        except (OSError, ValueError):
            handle.seek(0)
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()[:CONTENT_KEY_CHARS]


def entry_name(*parts: Any) -> str:
    """A file name (hex digits) for an entry described by `parts` under the current code."""
    import hashlib  # see `code_fingerprint`

    digest = hashlib.blake2b(code_fingerprint().encode(), digest_size=20)
    for part in parts:
        digest.update(b"\0")
        digest.update(str(part).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def is_content_key(text: str) -> bool:
    return len(text) == CONTENT_KEY_CHARS and all(c in "0123456789abcdef" for c in text)
