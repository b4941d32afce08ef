"""tracelens: fast, correct answers from PyTorch profiler (Kineto) traces.

>>> import tracelens
>>> trace = tracelens.load("traces/h200/eager_mlp.json.gz")
>>> results = tracelens.analyze(trace)      # AnalysisResults
>>> results.summary.per_step.kernels
>>> tracelens.kernels_frame(trace)          # one row per kernel: step, op, dur_us, ...
>>> tracelens.plot.timeline(trace)          # the report's Plotly figures, inline in Jupyter
>>> tracelens.check([trace], "notebooks/study_hypotheses.toml")   # [Verdict(held=..., measured=...), ...]

Public names are imported on first use, so `import tracelens` (and the `tracelens analyze` command) does not
pay for modules it does not need (pandas, plotly), and imports numpy only when a name needs it (the command
sets up numpy's threads before that: `tracelens.cli`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from tracelens.errors import TracelensError, UnusableTraceError

if TYPE_CHECKING:
    from tracelens import plot
    from tracelens.analyses import AnalysisResults, analyze
    from tracelens.frames import kernels_frame, launches_frame, ops_frame, steps_frame
    from tracelens.hypotheses import Hypothesis, HypothesisError, Verdict, check
    from tracelens.loader import load_trace as load
    from tracelens.model.trace import Trace

# public names imported on first use: name -> (module, attribute)
_LAZY = {
    "AnalysisResults": ("tracelens.analyses", "AnalysisResults"),
    "Hypothesis": ("tracelens.hypotheses", "Hypothesis"),
    "HypothesisError": ("tracelens.hypotheses", "HypothesisError"),
    "Trace": ("tracelens.model.trace", "Trace"),
    "Verdict": ("tracelens.hypotheses", "Verdict"),
    "analyze": ("tracelens.analyses", "analyze"),
    "check": ("tracelens.hypotheses", "check"),
    "kernels_frame": ("tracelens.frames", "kernels_frame"),
    "launches_frame": ("tracelens.frames", "launches_frame"),
    "load": ("tracelens.loader", "load_trace"),  # the function; the package is `tracelens.loader`
    "ops_frame": ("tracelens.frames", "ops_frame"),
    "plot": ("tracelens.plot", ""),
    "steps_frame": ("tracelens.frames", "steps_frame"),
}


def __getattr__(name: str) -> Any:
    """Import a public name on first access (PEP 562) and keep it as a module attribute."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tracelens' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    imported = importlib.import_module(module)
    value = getattr(imported, attribute) if attribute else imported  # "": the module itself
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AnalysisResults",
    "Hypothesis",
    "HypothesisError",
    "Trace",
    "TracelensError",
    "UnusableTraceError",
    "Verdict",
    "__version__",
    "analyze",
    "check",
    "kernels_frame",
    "launches_frame",
    "load",
    "ops_frame",
    "plot",
    "steps_frame",
]
