"""tracelens: fast, correct answers from PyTorch profiler (Kineto) traces.

>>> import tracelens
>>> trace = tracelens.load("traces/h200/eager_mlp.json.gz")
>>> report = tracelens.analyze(trace)
>>> report.summary.per_step.kernels
"""

from __future__ import annotations

__version__ = "0.1.0"

from tracelens.analyses import AnalysisReport, analyze
from tracelens.errors import TracelensError, UnusableTraceError
from tracelens.load import load_trace as load
from tracelens.model.trace import Trace

__all__ = [
    "AnalysisReport",
    "Trace",
    "TracelensError",
    "UnusableTraceError",
    "__version__",
    "analyze",
    "load",
]
