"""The renderer contract and the registry that picks one by `--format`."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from tracelens.errors import TracelensError

ResultT_contra = TypeVar("ResultT_contra", contravariant=True)


class Renderer(Protocol, Generic[ResultT_contra]):
    """Turns one kind of result into a string; `output_file_extension` names what it writes."""

    output_file_extension: str

    def render(self, result: ResultT_contra) -> str: ...


def renderer_for(registry: dict[str, type[Renderer[ResultT_contra]]], fmt: str) -> Renderer[ResultT_contra]:
    try:
        return registry[fmt]()
    except KeyError:
        raise TracelensError(f"unknown format {fmt!r}; choose one of {', '.join(sorted(registry))}") from None
