"""`tracelens analyze`'s record in the results cache (`tracelens.results_cache`): the finished `AnalysisReport`
and the trace's load warnings, so analyzing the same file with the same options again neither loads nor
analyzes. Entries live under `<cache dir>/analyses/`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tracelens.analyses import AnalysisReport
from tracelens.results_cache import cached


@dataclass(frozen=True)
class CachedAnalysis:
    """What `tracelens analyze` prints: the report and the warnings the load gave."""

    report: AnalysisReport
    warnings: tuple[str, ...]


def analyze_cached(
    path: Path, options: Mapping[str, object], compute: Callable[[], CachedAnalysis], use_cache: bool = True
) -> CachedAnalysis:
    """`compute()`, or its stored result for this file content, code, path and `options` (JSON-able).

    A cache that cannot be read or written is ignored: analyzing never fails because of it.
    """
    return cached("analyses", [path], options, CachedAnalysis, compute, use_cache)
