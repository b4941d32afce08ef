"""The renderer contract: an object whose `render(result)` gives the text a command prints or writes."""

from __future__ import annotations

from typing import Protocol, TypeVar

ResultT_contra = TypeVar("ResultT_contra", contravariant=True)


class Renderer(Protocol[ResultT_contra]):
    """Turns one kind of result into a string (text for people, JSON for programs, an HTML page)."""

    def render(self, result: ResultT_contra) -> str: ...
