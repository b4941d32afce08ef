"""Steps from `ProfilerStep#N` annotations, and assigning events to them.

A step owns the CPU events that start inside its CPU span (any thread) and the GPU activity whose launch
starts inside it. GPU activity without a launch in the trace belongs to no step. A trace without
ProfilerStep annotations is one whole-trace window.
"""

from __future__ import annotations

import re

import numpy as np

from tracelens.model.events import CPU_KINDS, I32, EventTable, Kind
from tracelens.model.trace import StepTable

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
WHOLE_TRACE = -1


def find_steps(events: EventTable, truncated: bool) -> StepTable:
    """Steps sorted by start. The last step of a truncated trace, or one running past the last CPU event,
    is marked incomplete."""
    step_codes = [code for code, name in enumerate(events.names) if STEP_NAME.match(name)]
    cpu = np.isin(events.kind, np.array(CPU_KINDS, np.int8))
    is_step = cpu & np.isin(events.name, np.array(step_codes, dtype=np.int32)) & (events.kind != Kind.RUNTIME)
    rows = np.flatnonzero(is_step)
    if rows.size == 0:
        return _whole_trace(events, cpu)
    numbers = np.array([int(STEP_NAME.match(events.names[c]).group(1)) for c in events.name[rows]])  # type: ignore[union-attr]
    unique, inverse = np.unique(numbers, return_inverse=True)
    start = np.full(unique.size, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(unique.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inverse, events.ts_ns[rows])
    np.maximum.at(end, inverse, events.ts_ns[rows] + events.dur_ns[rows])
    order = np.argsort(start, kind="stable")
    unique, start, end = unique[order], start[order], end[order]
    last_cpu_end = int((events.ts_ns[cpu] + events.dur_ns[cpu]).max())
    complete = end <= last_cpu_end
    if truncated:
        complete[-1] = False
    return StepTable(unique.astype(np.int64), start, end, complete, "ProfilerStep")


def _whole_trace(events: EventTable, cpu: np.ndarray) -> StepTable:
    scope = cpu if cpu.any() else np.ones(len(events), dtype=bool)
    if not scope.any():
        zero = np.zeros(1, dtype=np.int64)
        return StepTable(np.array([WHOLE_TRACE]), zero, zero, np.ones(1, bool), "whole_trace")
    start = int(events.ts_ns[scope].min())
    end = int((events.ts_ns[scope] + events.dur_ns[scope]).max())
    return StepTable(
        np.array([WHOLE_TRACE], dtype=np.int64),
        np.array([start], dtype=np.int64),
        np.array([end], dtype=np.int64),
        np.ones(1, dtype=bool),
        "whole_trace",
    )


def assign_steps(events: EventTable, steps: StepTable, launch: I32) -> I32:
    """Step index for CPU events (by start) and GPU activity (by its launch's start); -1 outside steps."""
    n = len(events)
    step = np.full(n, -1, dtype=np.int32)
    if len(steps) == 0:
        return step
    cpu = np.flatnonzero(np.isin(events.kind, np.array(CPU_KINDS, np.int8)))
    step[cpu] = _step_at(steps, events.ts_ns[cpu])
    gpu = np.flatnonzero(launch >= 0)
    step[gpu] = step[launch[gpu]]
    return step


def _step_at(steps: StepTable, times_ns: np.ndarray) -> I32:
    index = np.searchsorted(steps.start_ns, times_ns, side="right") - 1
    safe = np.maximum(index, 0)
    inside = (index >= 0) & (times_ns < steps.end_ns[safe])
    return np.where(inside, index, -1).astype(np.int32)
