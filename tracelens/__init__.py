"""tracelens: fast, correct answers from PyTorch profiler (Kineto) traces.

>>> import tracelens
>>> trace = tracelens.load("traces/h200/eager_mlp.json.gz")
>>> report = tracelens.analyze(trace)
>>> report.summary.per_step.kernels
>>> tracelens.kernels_frame(trace)          # one row per kernel: step, op, dur_us, ...
>>> tracelens.check([trace], "notebooks/study_hypotheses.toml")   # [Verdict(held=..., measured=...), ...]
"""

from __future__ import annotations

__version__ = "0.1.0"

from tracelens.analyses import AnalysisReport, analyze
from tracelens.errors import TracelensError, UnusableTraceError
from tracelens.frames import kernels_frame, launches_frame, ops_frame, steps_frame
from tracelens.hypotheses import Hypothesis, HypothesisError, Verdict, check
from tracelens.load import load_trace as load
from tracelens.model.trace import Trace

__all__ = [
    "AnalysisReport",
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
    "steps_frame",
]
