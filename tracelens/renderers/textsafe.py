"""Names from a trace are data, never terminal commands: the one escaping helper of every text output.

`escape_controls("a\\x1b]0;x\\x07b")` → `a\\x1b]0;x\\x07b` written out as visible backslash escapes: C0
control characters (including newline and tab, so an error line stays one line; rich text output keeps those
two), DEL, C1 controls (U+0080-U+009F, e.g. the CSI U+009B some terminals obey), the bidirectional overrides
that can reorder what a terminal shows, and lone surrogates (which cannot be encoded) each become `\\xNN` or
`\\uNNNN`. Everything else passes unchanged; a string without such characters is returned as is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported by text output only, not by an error line
    from rich.text import Text

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control characters, bidi overrides and lone surrogates written as backslash escapes;
    `keep_newlines` leaves newline and tab alone (for multi-line table cells: they move no cursor)."""
    pattern = _UNSAFE_IN_BLOCK if keep_newlines else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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

    if isinstance(part, Text) and _UNSAFE_IN_BLOCK.search(part.plain) is not None:
        escaped = escape_controls(part.plain, keep_newlines=True)
        return Text(escaped, style=part.style, justify=part.justify, overflow=part.overflow, no_wrap=part.no_wrap)
    return part
