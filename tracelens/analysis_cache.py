"""`tracelens analyze`'s record in the results cache (`tracelens.results_cache`): the finished `AnalysisReport`
and the trace's load warnings (`tracelens.analyses.record.CachedAnalysis`), so analyzing the same file with the
same options again neither loads nor analyzes. Entries live under `<cache dir>/analyses/`.

This module does not import the analyses: they are imported when an entry is read or written, or by
`compute`, so a miss can import them while worker processes decode the trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tracelens.results_cache import cached

if TYPE_CHECKING:
    from tracelens.analyses.record import CachedAnalysis


def analyze_cached(
    path: Path, options: Mapping[str, object], compute: Callable[[], CachedAnalysis], use_cache: bool = True
) -> CachedAnalysis:
    """`compute()`, or its stored result for this file content, code, path and `options` (JSON-able).

    A cache that cannot be read or written is ignored: analyzing never fails because of it.
    """
    return cached("analyses", [path], options, _record_type, compute, use_cache)


def _record_type() -> type[CachedAnalysis]:
    from tracelens.analyses.record import CachedAnalysis

    return CachedAnalysis
