"""Order statistics on numpy arrays without `np.median`'s costs (it imports `numpy.ma` on first use, which
lengthens start-up, and partitions twice)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def median(values: np.ndarray | Sequence[float]) -> float:
    """`float(np.median(values))`, bit for bit: the middle value, or the mean of the two middle values; NaN when
    `values` is empty or holds a NaN."""
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0 or np.isnan(array).any():
        return math.nan
    half = array.size // 2
    parted = np.partition(array, half)
    upper = float(parted[half])
    if array.size % 2:
        return upper
    return (float(parted[:half].max()) + upper) / 2


def distinct_ints(values: np.ndarray) -> np.ndarray:
    """`np.unique(values)` for an integer array, as int64: by counting when the values are small and
    non-negative (codes, devices, lengths), by sorting otherwise; never through the plain `np.unique` path,
    which imports `numpy.ma` on first use."""
    flat = np.asarray(values).ravel()
    if flat.size == 0:
        return np.zeros(0, dtype=np.int64)
    if int(flat.min()) >= 0 and int(flat.max()) <= 4 * flat.size + 65536:
        return np.flatnonzero(np.bincount(flat)).astype(np.int64)
    return np.unique(flat, return_counts=True)[0].astype(np.int64)


def percentiles(values: np.ndarray, percents: Sequence[float]) -> list[float]:
    """`np.percentile(values, percents)` (its default linear method) bit for bit, as floats; NaN when `values`
    is empty or holds a NaN. Avoids `np.percentile`'s import of `numpy.ma`."""
    array = np.asarray(values, dtype=np.float64).ravel()
    count = array.size
    if count == 0 or np.isnan(array).any():
        return [math.nan] * len(percents)
    virtual = (count - 1) * (np.asarray(percents, dtype=np.float64) / 100)
    lower = np.clip(np.floor(virtual), 0, count - 1).astype(np.int64)
    upper = np.minimum(lower + 1, count - 1)
    parted = np.partition(array, distinct_ints(np.concatenate((lower, upper))))
    below, above = parted[lower], parted[upper]
    gamma = virtual - lower
    difference = above - below
    blended = np.where(gamma >= 0.5, above - difference * (1 - gamma), below + difference * gamma)
    return [float(v) for v in blended]
