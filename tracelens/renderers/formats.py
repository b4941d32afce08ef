"""The output formats of the commands that print results (`analyze`, `compare`, `check`, `cache info`): ONE list,
`FORMATS`, chosen by name with `--format NAME`.

Each entry (`OutputFormat`) names the format, its module and the kinds of result it renders (`analyze`, `ranks`,
`compare`, `check`, `cache`). The module holds `RENDERERS`: for each of those kinds, the renderer class
(`"module:Class"`, its `render(result) -> str`) and which `RenderOptions` it takes as keyword arguments.
Adding a format is one module and one line here. A renderer's module is imported only when a command renders
with it, so JSON output never imports rich.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from tracelens.renderers.base import Renderer

KINDS = ("analyze", "ranks", "compare", "check", "cache")
SUMMARY_SECTION = "@summary"  # `analyze --summary` among the sections: the first part of the `actions` section only


class RenderOptions(msgspec.Struct, frozen=True):
    """How a command wants its result rendered: colour (a terminal), the width to lay text out for (None: the
    terminal's), and `check -v`'s evidence of every verdict."""

    color: bool = False
    width: int | None = None
    verbose: bool = False
    sections: tuple[str, ...] | None = None  # `analyze --section/--summary`: only these (`SUMMARY_SECTION`)


# a format module's RENDERERS: kind of result -> ("module:Class", the RenderOptions fields the class takes)
RendererTable = Mapping[str, tuple[str, tuple[str, ...]]]


class OutputFormat(msgspec.Struct, frozen=True):
    """One output format (see the module docstring)."""

    name: str
    module: str
    kinds: tuple[str, ...]
    help: str

    def renderers(self) -> RendererTable:
        """The module's `RENDERERS` (imported on first use)."""
        table: RendererTable = importlib.import_module(self.module).RENDERERS
        return table


FORMATS: tuple[OutputFormat, ...] = (
    OutputFormat("text", "tracelens.renderers.text_format", KINDS, "tables for people"),
    OutputFormat("json", "tracelens.renderers.json_format", KINDS, "versioned JSON for programs (docs/json.md)"),
)


def format_names(kind: str) -> tuple[str, ...]:
    """The names of the formats that render results of `kind`, in registry order."""
    return tuple(entry.name for entry in FORMATS if kind in entry.kinds)


def output_format(name: str) -> OutputFormat:
    """The format called `name`; KeyError if there is none."""
    for entry in FORMATS:
        if entry.name == name:
            return entry
    raise KeyError(name)


def renderer_for(name: str, kind: str, options: RenderOptions) -> Renderer[Any]:
    """The renderer of format `name` for results of `kind`, made with the options it takes."""
    ref, takes = output_format(name).renderers()[kind]
    module, _, attribute = ref.partition(":")
    cls: Callable[..., Renderer[Any]] = getattr(importlib.import_module(module), attribute)
    return cls(**{option: getattr(options, option) for option in takes})
