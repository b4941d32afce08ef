"""Trace data in rich text output: `safe_text` and `safe_renderable`, which escape with `tracelens.escapes`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelens.escapes import escape_controls

if TYPE_CHECKING:  # rich is imported by text output only, not by an error line
    from rich.text import Text


def safe_text(text: str, style: str = "") -> Text:
    """`rich.text.Text(text, style)` with control characters escaped, for strings that carry trace data."""
    from rich.text import Text

    return Text(escape_controls(text), style=style)


def safe_renderable(part: object) -> object:
    """`part` itself, or — a rich `Text` whose characters include controls — a copy with them escaped (its
    overall style kept; spans inside it are dropped, as their offsets no longer hold). Strings are escaped by
    the console itself (`SafeConsole.render_str`); a `Text` built from trace data bypasses that, so every
    table cell and printed part goes through here (`tables.fit`)."""
    from rich.text import Text

    escaped = escape_controls(part.plain, keep_newlines=True) if isinstance(part, Text) else None
    if isinstance(part, Text) and escaped is not None and escaped != part.plain:
        return Text(escaped, style=part.style, justify=part.justify, overflow=part.overflow, no_wrap=part.no_wrap)
    return part
