"""Bounded regular expressions for `re:REGEX` subjects (docs/check.md, "Patterns").

Python's `re` backtracks: a pattern with a quantified group that itself contains a quantifier (`(.*)*x`,
`(a+)+$`, `(\\w+\\s?)*:`) can take time exponential in the subject's length. Such a pattern is refused when
the hypotheses file is read (`unsafe_reason`), and every subject is cut to `MAX_SUBJECT_CHARS` characters
before it is searched (`subject`), so that the time of one search is bounded by the pattern and that cap.
"""

from __future__ import annotations

import re
from re import _parser  # type: ignore[attr-defined]  # the stdlib's own parser of the pattern syntax
from typing import Any

MAX_SUBJECT_CHARS = 4096  # a name is searched in its first this many characters
_REPEATS = {_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", _parser.MAX_REPEAT)}


def unsafe_reason(pattern: str) -> str | None:
    """Why `pattern` (without the `re:` prefix) could backtrack catastrophically, or None when it cannot by
    the rule "no quantifier inside a quantified group". Raises `re.error` for a pattern that does not parse."""
    re.compile(pattern)
    return _nested(_parser.parse(pattern), inside_repeat=False)


def subject(name: str) -> str:
    """`name` cut to what a pattern is searched in (see the module docstring)."""
    return name[:MAX_SUBJECT_CHARS]


def _nested(items: Any, inside_repeat: bool) -> str | None:
    for op, argument in items:
        if op in _REPEATS:
            _low, high, body = argument
            repeats = high is _parser.MAXREPEAT or high > 1
            if inside_repeat and repeats:
                return "a quantifier inside a quantified group (nested quantifiers backtrack exponentially)"
            found = _nested(body, inside_repeat or repeats)
            if found:
                return found
        elif op is _parser.SUBPATTERN:
            found = _nested(argument[-1], inside_repeat)
            if found:
                return found
        elif op is _parser.BRANCH:
            for branch in argument[1]:
                found = _nested(branch, inside_repeat)
                if found:
                    return found
        elif op in (_parser.ASSERT, _parser.ASSERT_NOT):
            found = _nested(argument[1], inside_repeat)
            if found:
                return found
    return None
