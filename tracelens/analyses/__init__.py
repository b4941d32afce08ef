"""Analyses: pure functions `analyze_x(ctx: AnalysisContext) -> X` (frozen msgspec Structs), no I/O, no plotting.
`registry.ANALYSES` lists them (with their text, JSON and report renderers); `analyze(trace)` runs them all.

Public names are imported on first use (PEP 562): importing one analysis module (e.g. `devices`) does not
import the others, so a command can import them while worker processes decode a trace.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracelens.analyses.bound import Bound, analyze_bound
    from tracelens.analyses.compiled import Compiled, analyze_compiled
    from tracelens.analyses.context import AnalysisContext
    from tracelens.analyses.devices import PeakOverride
    from tracelens.analyses.dispatch import Dispatch, analyze_dispatch
    from tracelens.analyses.fusion import Fusion, FusionOpportunity, analyze_fusion
    from tracelens.analyses.pipeline import analyze
    from tracelens.analyses.registry import ANALYSES, Analysis, AnalysisResults
    from tracelens.analyses.roofline import Roofline, analyze_roofline
    from tracelens.analyses.summary import Summary, analyze_summary

_LAZY = {
    "ANALYSES": "registry",
    "Analysis": "registry",
    "AnalysisContext": "context",
    "AnalysisResults": "registry",
    "Bound": "bound",
    "Compiled": "compiled",
    "Dispatch": "dispatch",
    "Fusion": "fusion",
    "FusionOpportunity": "fusion",
    "PeakOverride": "devices",
    "Roofline": "roofline",
    "Summary": "summary",
    "analyze": "pipeline",
    "analyze_bound": "bound",
    "analyze_compiled": "compiled",
    "analyze_dispatch": "dispatch",
    "analyze_fusion": "fusion",
    "analyze_roofline": "roofline",
    "analyze_summary": "summary",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access and keep it as a package attribute."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tracelens.analyses' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tracelens.analyses.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisContext",
    "AnalysisResults",
    "Bound",
    "Compiled",
    "Dispatch",
    "Fusion",
    "FusionOpportunity",
    "PeakOverride",
    "Roofline",
    "Summary",
    "analyze",
    "analyze_bound",
    "analyze_compiled",
    "analyze_dispatch",
    "analyze_fusion",
    "analyze_roofline",
    "analyze_summary",
]
