"""`tracelens cache info`: what the cache holds, as text for people (80 columns) or versioned JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracelens._cache import CacheInfo

JSON_VERSION = 1


def size_text(n_bytes: int) -> str:
    """A size on disk in binary units with one decimal (`19.3 KiB`, `2.0 GiB`; bytes as a whole number)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} B"


class CacheInfoTextRenderer:
    def render(self, info: CacheInfo) -> str:
        state = "on" if info.enabled else "off (TRACELENS_NO_CACHE)"
        lines = [
            f"cache folder: {info.folder} ({state})",
            f"size cap:     {size_text(info.max_bytes)} (TRACELENS_CACHE_MAX_SIZE)",
        ]
        lines.append(f"{'kind':<20} {'entries':>9} {'size':>12}")
        for use in info.folders:
            lines.append(f"{use.name:<20} {use.entries:>9,} {size_text(use.bytes):>12}")
        lines.append(f"{'total':<20} {info.entries:>9,} {size_text(info.bytes):>12}")
        return "\n".join(lines) + "\n"


class CacheInfoJsonRenderer:
    def render(self, info: CacheInfo) -> str:
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
