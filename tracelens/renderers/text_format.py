"""The `text` output format: rich tables for people, laid out for the terminal's width or `--width` (see
`tracelens.renderers.formats`)."""

from __future__ import annotations

from tracelens.renderers.formats import RendererTable

RENDERERS: RendererTable = {
    "analyze": ("tracelens.renderers.text:AnalyzeTextRenderer", ("color", "width", "sections")),
    "ranks": ("tracelens.renderers.ranks:RanksTextRenderer", ("color", "width")),
    "compare": ("tracelens.renderers.compare_out:CompareTextRenderer", ("color", "width")),
    "check": ("tracelens.renderers.check:CheckTextRenderer", ("color", "width", "verbose")),
    "cache": ("tracelens.renderers.cache_info:CacheInfoTextRenderer", ()),
}
