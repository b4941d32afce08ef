"""Names from a trace are data, never terminal commands: the one escaping helper of every text output, the
warnings on stderr and the error line included (a base module: `errors.warn` escapes with it).

`escape_controls("a\\x1b]0;x\\x07b")` → `a\\x1b]0;x\\x07b` written out as visible backslash escapes: C0
control characters (including newline and tab, so an error line stays one line; rich text output keeps those
two), DEL, C1 controls (U+0080-U+009F, e.g. the CSI U+009B some terminals obey), the bidirectional overrides
that can reorder what a terminal shows, and lone surrogates (which cannot be encoded) each become `\\xNN` or
`\\uNNNN`. Everything else passes unchanged; a string without such characters is returned as is.
"""

from __future__ import annotations

import re

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
