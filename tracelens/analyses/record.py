"""`tracelens analyze`'s record in the results cache (`tracelens._cache.results`)."""

from __future__ import annotations

import msgspec

from tracelens.analyses import AnalysisResults


class CachedAnalysis(msgspec.Struct, frozen=True):
    """What `tracelens analyze` prints: the report and the warnings the load gave."""

    report: AnalysisResults
    warnings: tuple[str, ...]
