"""`tracelens analyze`'s record in the results cache (`tracelens._cache.results`)."""

from __future__ import annotations

from dataclasses import dataclass

from tracelens.analyses import AnalysisReport


@dataclass(frozen=True)
class CachedAnalysis:
    """What `tracelens analyze` prints: the report and the warnings the load gave."""

    report: AnalysisReport
    warnings: tuple[str, ...]
