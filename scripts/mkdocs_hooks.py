"""MkDocs hooks (mkdocs.yml `hooks:`), run by `mkdocs build` and `mkdocs serve`.

docs/json.md's table of the `tracelens.analyze/1` keys takes its rows, after the first, from the analysis
registry: each analysis describes its keys in its entry (`Analysis.doc`, tracelens/analyses/registry.py), the
page holds `MARKER` where those rows go, and `on_page_markdown` puts them there in registry order (the order of
the JSON document). The registry read is the one of the checkout this file is in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = "json.md"
MARKER = "<!-- the other rows: each analysis' `doc` in tracelens/analyses/registry.py (scripts/mkdocs_hooks.py) -->"


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """The page's Markdown, with the registry's rows in place of `MARKER` on docs/json.md."""
    return with_key_rows(markdown) if page.file.src_uri == PAGE else markdown


def with_key_rows(markdown: str) -> str:
    """`markdown` with its one `MARKER` line replaced by the registry's rows; a page without it fails the build."""
    lines = markdown.split("\n")
    if lines.count(MARKER) != 1:
        raise ValueError(f"docs/{PAGE} must hold the line {MARKER!r} once, where the registry's rows go")
    at = lines.index(MARKER)
    return "\n".join([*lines[:at], *key_rows(), *lines[at + 1 :]])


def key_rows() -> list[str]:
    """One table row per `KeyDoc` of the registry, in its order: "| `key`, `key` | what they hold |"."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tracelens.analyses.registry import ANALYSES

    return [f"| {', '.join(f'`{k}`' for k in doc.names)} | {doc.holds} |" for entry in ANALYSES for doc in entry.doc]
