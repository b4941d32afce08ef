"""Renderers turn results into output: text for people (rich tables: `text`, `compare_out`, `ranks`,
`check`), versioned JSON for programs (`jsonout`, ...), and the HTML report (`page` assembles the page data of
`tracelens.report`, `html` writes it); each analysis' text section and page panels are its module of `analyses`.
Every renderer has `render(result) -> str` (`base.Renderer`)."""

from __future__ import annotations

from tracelens.renderers.base import Renderer

__all__ = ["Renderer"]
