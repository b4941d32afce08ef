"""Guess → verify → correct: hypotheses about traces (TOML), checked against analyze documents.

`parse.py` reads and validates the file, `document.py` builds what is checked, `evaluate.py` gives verdicts,
`tracelens.renderers.check` prints them. `check(traces, hypotheses)` ties them together for notebooks and the CLI.
`tracelens.hypotheses.evaluate` is that module (its function `evaluate` is `verdicts_for` here, so that no
function shadows the module's name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracelens.hypotheses.document import TraceDocument, check_document, document_from
from tracelens.hypotheses.evaluate import Verdict
from tracelens.hypotheses.evaluate import evaluate as verdicts_for
from tracelens.hypotheses.parse import Hypothesis, HypothesisError, load_hypotheses, parse_hypotheses
from tracelens.model.trace import Trace

HypothesesLike = str | Path | Sequence[Hypothesis] | Sequence[Mapping[str, Any]] | Mapping[str, Any]
TracesLike = Trace | str | Path | Sequence[Trace | str | Path]


def as_hypotheses(hypotheses: HypothesesLike) -> list[Hypothesis]:
    """A TOML file path, decoded TOML (`{"hypothesis": [...]}`), a list of tables, or Hypothesis objects."""
    if isinstance(hypotheses, str | Path):
        return load_hypotheses(hypotheses)
    if isinstance(hypotheses, Mapping):
        return parse_hypotheses(hypotheses)
    items = list(hypotheses)
    if items and all(isinstance(item, Hypothesis) for item in items):
        return [item for item in items if isinstance(item, Hypothesis)]
    return parse_hypotheses({"hypothesis": [dict(item) for item in items if isinstance(item, Mapping)]})


def as_documents(traces: TracesLike) -> list[TraceDocument]:
    """Analyze each trace (loading paths first) into the documents hypotheses are checked against."""
    from tracelens.loader import load_trace

    items: Sequence[Trace | str | Path] = [traces] if isinstance(traces, Trace | str | Path) else traces
    return [check_document(item if isinstance(item, Trace) else load_trace(item)) for item in items]


def check(traces: TracesLike, hypotheses: HypothesesLike) -> list[Verdict]:
    """Check hypotheses against traces (Trace objects or paths); one Verdict per hypothesis and trace."""
    return verdicts_for(as_hypotheses(hypotheses), as_documents(traces))


__all__ = [
    "Hypothesis",
    "HypothesisError",
    "TraceDocument",
    "Verdict",
    "as_documents",
    "as_hypotheses",
    "check",
    "check_document",
    "document_from",
    "load_hypotheses",
    "parse_hypotheses",
    "verdicts_for",
]
