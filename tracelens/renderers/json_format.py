"""The `json` output format: versioned JSON documents for programs (docs/json.md; see
`tracelens.renderers.formats`)."""

from __future__ import annotations

from tracelens.renderers.formats import RendererTable

RENDERERS: RendererTable = {
    "analyze": ("tracelens.renderers.jsonout:AnalyzeJsonRenderer", ()),
    "ranks": ("tracelens.renderers.ranks:RanksJsonRenderer", ()),
    "compare": ("tracelens.renderers.compare_out:CompareJsonRenderer", ()),
    "check": ("tracelens.renderers.check:CheckJsonRenderer", ()),
    "cache": ("tracelens.renderers.cache_info:CacheInfoJsonRenderer", ()),
}
