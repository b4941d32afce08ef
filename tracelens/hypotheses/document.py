"""The document hypotheses are checked against: the `tracelens.analyze/1` document of one trace, plus
`cpu_ops` and `api_calls` sections (per-name calls and times in the analyzed steps) when it has none.

Contract: `check_document(trace, step=None) -> TraceDocument`; pure apart from running the analyses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from tracelens.model.events import API_KINDS, Kind, kind_mask
from tracelens.model.trace import Trace
from tracelens.naming import trace_stem
from tracelens.units import NS_PER_US


class TraceDocument(msgspec.Struct, frozen=True):
    """One trace as hypotheses see it: a label, the names it answers to, and its analyze document."""

    label: str
    aliases: tuple[str, ...]  # file stem and tracelens_run.variant
    path: str
    document: dict[str, Any]

    def answers_to(self, name: str) -> bool:
        return name == self.label or name in self.aliases


class CachedDocument(msgspec.Struct, frozen=True):
    """What `tracelens check` keeps of one trace (`tracelens._cache.results`): its document and load warnings."""

    document: TraceDocument
    warnings: tuple[str, ...]


def document_from(path: str | Path, document: dict[str, Any]) -> TraceDocument:
    """Wrap an analyze document; its label is the variant recorded in the trace, else the file stem."""
    stem = trace_stem(path)
    run = document.get("trace", {}).get("run") or {}
    variant = run.get("variant") if isinstance(run, dict) else None
    aliases = tuple(dict.fromkeys(a for a in (stem, variant) if isinstance(a, str) and a))
    return TraceDocument(label=aliases[0] if aliases else stem, aliases=aliases, path=str(path), document=document)


def check_document(trace: Trace, step: int | None = None) -> TraceDocument:
    """Analyze `trace` and add the sections hypotheses about CPU ops and API calls need."""
    from tracelens.analyses import analyze  # here: documents served from the results cache need no analyses
    from tracelens.analyses.window import select_window
    from tracelens.renderers.jsonout import analyze_dict

    document = analyze_dict(analyze(trace, step))
    window = select_window(trace, step)
    n_steps = max(window.n_steps, 1)
    kind = trace.events.kind
    document.setdefault("cpu_ops", _calls_by_name(trace, window.in_window & (kind == Kind.CPU_OP), n_steps))
    api = kind_mask(kind, API_KINDS)
    document.setdefault("api_calls", _calls_by_name(trace, window.in_window & api, n_steps))
    return document_from(trace.path or "trace", document)


def _calls_by_name(trace: Trace, mask: np.ndarray, n_steps: int) -> list[dict[str, Any]]:
    """Per name: calls, calls per step, total and mean duration (µs) of the events in `mask`."""
    import pandas as pd  # only on a miss of `tracelens check`'s cache

    rows = np.flatnonzero(mask)
    if rows.size == 0:
        return []
    frame = pd.DataFrame({"name": trace.events.names_at(rows), "dur_ns": trace.events.dur_ns[rows]})
    grouped = frame.groupby("name", sort=False)["dur_ns"].agg(["size", "sum"])
    grouped = grouped.sort_values(["sum", "size"], ascending=[False, False], kind="stable")
    return [
        {
            "name": str(name),
            "calls": int(row["size"]),
            "calls_per_step": round(float(row["size"]) / n_steps, 3),
            "total_us": round(float(row["sum"]) / NS_PER_US, 3),
            "mean_us": round(float(row["sum"]) / NS_PER_US / float(row["size"]), 3),
        }
        for name, row in grouped.iterrows()
    ]
