"""`tracelens cache info` and `tracelens cache prune [--max-size SIZE]`: what the cache holds, and shrinking it."""

from __future__ import annotations

import argparse
import sys

from tracelens._cache import Cache
from tracelens.errors import TracelensError
from tracelens.renderers.cache_info import size_text
from tracelens.renderers.formats import RenderOptions, format_names, renderer_for
from tracelens.settings import parse_size


class CacheCommand:
    """Show or shrink the cache of loaded traces and finished results (deleting any of it is always safe)."""

    name = "cache"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        info = actions.add_parser("info", help="where the cache is, its entries and their size")
        info.add_argument(
            "--format", choices=format_names("cache"), default="text", help="output format (default: text)"
        )
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
            sys.stdout.write(renderer_for(args.format, "cache", RenderOptions()).render(cache.info()))
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
                f"deleted {removed:,} ({size_text(freed)}), {left.entries:,} left ({size_text(left.bytes)})"
            )
        print(
            f"Deleted {removed:,} cache files ({size_text(freed)}); {left.entries:,} left ({size_text(left.bytes)}) "
            f"in {cache.folder}",
            file=sys.stderr,
        )
        return 0
