"""The renderer functions the analysis registry names (`Analysis.text`, `.panels`, `.json`: "module:function"
strings, so that running the analyses never imports rich or plotly), imported here, on the renderers' side,
when an output first needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tracelens.analyses.registry import Analysis


def renderer_of(entry: Analysis[Any], kind: str) -> Callable[..., Any] | None:
    """The `text`, `panels` or `json` function of `entry`, imported on first use (None if it has none)."""
    ref = getattr(entry, kind)
    return None if ref is None else load(ref)


def load(ref: str) -> Callable[..., Any]:
    """The function `"package.module:function"` names."""
    module, _, attribute = ref.partition(":")
    function: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
    return function
