"""The renderer contract: one kind of result in, the text of one output format out."""

from __future__ import annotations

from typing import Protocol, TypeVar

ResultT_contra = TypeVar("ResultT_contra", contravariant=True)


class Renderer(Protocol[ResultT_contra]):
    """Turns one kind of result into the text of one output format (rich text or versioned JSON)."""

    def render(self, result: ResultT_contra) -> str: ...
