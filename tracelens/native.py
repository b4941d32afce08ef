"""The optional C extension `tracelens._native` (source: `tracelens/_native.c`, built by `setup.py` where a C
compiler exists). Its functions compute exactly what the Python code beside each caller computes, faster; callers
use `module()` and fall back to Python when it is None (not built, or `TRACELENS_NO_NATIVE=1`)."""

from __future__ import annotations

import importlib
import os
import types

_module: types.ModuleType | None = None
if os.environ.get("TRACELENS_NO_NATIVE", "").strip() in ("", "0"):
    try:
        _module = importlib.import_module("tracelens._native")
    except ImportError:  # not compiled: the Python paths give the same results
        _module = None


def module() -> types.ModuleType | None:
    """The extension module, or None."""
    return _module
