"""Which steps an analysis covers, and per-event masks for them. Shared by every analysis."""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.errors import TracelensError
from tracelens.model.events import I32, Bool
from tracelens.model.trace import Trace


class Window(msgspec.Struct, frozen=True):
    """The analyzed steps: indices into `trace.steps`, their numbers, and a mask over all events."""

    step_indices: I32
    step_numbers: tuple[int, ...]
    in_window: Bool  # events attributed to one of the analyzed steps

    @property
    def n_steps(self) -> int:
        return len(self.step_numbers)


def select_window(trace: Trace, step: int | None = None) -> Window:
    """Complete steps by default; `step` picks one step number (ProfilerStep or inferred; error if absent)."""
    steps = trace.steps
    if step is not None:
        index = trace.step_index(step)
        if index is None or not steps.per_step:
            available = (
                f"steps ({steps.label}) are {int(steps.number.min())}..{int(steps.number.max())}"
                if steps.per_step
                else "the trace has no ProfilerStep annotations and no repeated calls to infer steps from"
            )
            raise TracelensError(f"no step {step} in {trace.path}; {available}")
        chosen = np.array([index], dtype=np.int32)
    else:
        chosen = np.flatnonzero(steps.complete).astype(np.int32)
    mask = step_mask(trace.links.step, chosen)
    return Window(chosen, tuple(int(n) for n in steps.number[chosen]), mask)


def step_mask(step_of_rows: np.ndarray, step_indices: np.ndarray) -> Bool:
    """`np.isin(step_of_rows, step_indices)` for step indices (-1 = none), by table look-up."""
    if step_of_rows.size == 0:
        return np.zeros(0, dtype=bool)
    table = np.zeros(max(int(step_of_rows.max()), int(step_indices.max(initial=0))) + 2, dtype=bool)
    table[step_indices] = True  # -1 reads the last entry, which no step index reaches
    return np.take(table, step_of_rows)


def per_step_counts(step_of_rows: np.ndarray, window: Window, n_steps_total: int) -> np.ndarray:
    """Counts of rows per analyzed step (rows given by their step index), in window order."""
    counts = np.bincount(step_of_rows[step_of_rows >= 0], minlength=n_steps_total)
    return counts[window.step_indices]


def per_step_sums(step_of_rows: np.ndarray, values: np.ndarray, window: Window, n_steps_total: int) -> np.ndarray:
    keep = step_of_rows >= 0
    sums = np.bincount(step_of_rows[keep], weights=values[keep], minlength=n_steps_total)
    return sums[window.step_indices]


def interval_union_per_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> np.ndarray:
    """Total length covered by the union of [start, end) intervals within each group id (0..n_groups-1)."""
    out = np.zeros(n_groups, dtype=np.float64)
    if group.size == 0:
        return out
    order = np.lexsort((start, group))
    g = group[order].astype(np.int64)
    s, e = start[order].astype(np.int64), end[order].astype(np.int64)
    offset = g * (2 * (int(e.max()) - int(s.min()) + 1))  # later groups exceed earlier: one running max
    running = np.maximum.accumulate(e + offset) - offset
    previous = np.empty_like(running)
    previous[1:] = running[:-1]
    first_of_group = np.ones(g.size, dtype=bool)
    first_of_group[1:] = g[1:] != g[:-1]
    previous[first_of_group] = np.iinfo(np.int64).min // 2
    covered = np.maximum(0, e - np.maximum(s, previous))
    np.add.at(out, g, covered.astype(np.float64))
    return out


def merge_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Union of [start, end) intervals as sorted, disjoint rows of a (k, 2) int64 array."""
    if start_ns.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(start_ns, kind="stable")
    start, end = start_ns[order], end_ns[order]
    running = np.maximum.accumulate(end)
    new = np.ones(start.size, dtype=bool)
    new[1:] = start[1:] > running[:-1]
    if bool(np.all(end >= start)):  # each run's running max is its own max (earlier runs end before it starts)
        last = np.flatnonzero(np.append(new[1:], True))
        merged_end = np.maximum(running[last], 0).astype(np.int64)  # as the zero-filled maximum.at below
    else:
        merged_end = np.zeros(int(new.sum()), dtype=np.int64)
        np.maximum.at(merged_end, np.cumsum(new) - 1, end)
    return np.stack([start[new], merged_end], axis=1)


def covered_ns(intervals: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Length of each [start, end) covered by sorted, disjoint `intervals` (k, 2), as float64 ns."""
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    if intervals.shape[0] == 0 or start.size == 0:
        return np.zeros(start.size, dtype=np.float64)
    lengths = intervals[:, 1] - intervals[:, 0]
    cumulative = np.concatenate(([0], np.cumsum(lengths)))

    def covered_before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(intervals[:, 0], t, side="right")  # intervals starting at or before t
        last = np.maximum(i - 1, 0)
        inside = np.clip(t - intervals[last, 0], 0, lengths[last])
        return cumulative[last] + np.where(i > 0, inside, 0)

    return np.maximum(covered_before(end) - covered_before(start), 0).astype(np.float64)
