"""Interval arithmetic on numpy arrays (helpers shared by analyses; no analysis lives here).

All intervals are half-open [start, end) in integer nanoseconds; `window.covered_ns` measures how much of each
interval a union covers.
"""

from __future__ import annotations

import numpy as np

from tracelens.analyses.window import merge_intervals


def union(start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Sorted disjoint union of intervals (k×2 int64)."""
    return merge_intervals(np.asarray(start_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64))
