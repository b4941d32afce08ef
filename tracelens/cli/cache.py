"""`tracelens cache info` and `tracelens cache prune [--max-size SIZE]`: what the cache holds, and shrinking it."""

from __future__ import annotations

import argparse
import sys

from tracelens._cache import Cache, CacheInfo
from tracelens.errors import TracelensError
from tracelens.settings import parse_size

JSON_VERSION = 1


def _size(n_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} B"


def render_info(info: CacheInfo) -> str:
    """The text of `tracelens cache info` (80 columns)."""
    state = "on" if info.enabled else "off (TRACELENS_NO_CACHE)"
    lines = [
        f"cache folder: {info.folder} ({state})",
        f"size cap:     {_size(info.max_bytes)} (TRACELENS_CACHE_MAX_SIZE)",
    ]
    lines.append(f"{'kind':<20} {'entries':>9} {'size':>12}")
    for use in info.folders:
        lines.append(f"{use.name:<20} {use.entries:>9,} {_size(use.bytes):>12}")
    lines.append(f"{'total':<20} {info.entries:>9,} {_size(info.bytes):>12}")
    return "\n".join(lines) + "\n"


def info_json(info: CacheInfo) -> str:

    import json  # only for `cache info --format json`: other commands never import it

    document = {
        "version": JSON_VERSION,
        "folder": str(info.folder),
        "enabled": info.enabled,
        "max_bytes": info.max_bytes,
        "entries": info.entries,
        "bytes": info.bytes,
        "kinds": [{"name": u.name, "entries": u.entries, "bytes": u.bytes} for u in info.folders],
    }
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"


class CacheCommand:
    """Show or shrink the cache of loaded traces and finished results (deleting any of it is always safe)."""

    name = "cache"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        info = actions.add_parser("info", help="where the cache is, its entries and their size")
        info.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
        prune = actions.add_parser(
            "prune", help="delete least recently used entries down to a size (default: the cache's size cap)"
        )
        prune.add_argument(
            "--max-size",
            metavar="SIZE",
            help="keep at most this much, e.g. 500M or 2G (0 empties the cache; default: "
            "$TRACELENS_CACHE_MAX_SIZE or 2G)",
        )

    def run(self, args: argparse.Namespace) -> int:
        cache: Cache = args.cache
        if args.action == "info":
            info = cache.info()
            sys.stdout.write(info_json(info) if args.format == "json" else render_info(info))
            return 0
        try:
            max_bytes = None if args.max_size is None else parse_size(args.max_size)
        except ValueError as exc:
            raise TracelensError(f"--max-size: {exc}") from None
        removed, freed = cache.prune(max_bytes)
        left = cache.info()
        if cache.undeleted:  # a read-only cache (or folder): the size asked for is not reached
            raise TracelensError(
                f"could not delete {cache.undeleted:,} cache files in {cache.folder} ({cache.undeleted_reason}); "
                f"deleted {removed:,} ({_size(freed)}), {left.entries:,} left ({_size(left.bytes)})"
            )
        print(
            f"Deleted {removed:,} cache files ({_size(freed)}); {left.entries:,} left ({_size(left.bytes)}) "
            f"in {cache.folder}",
            file=sys.stderr,
        )
        return 0
