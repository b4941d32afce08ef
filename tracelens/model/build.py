"""A `Trace` from its columns: links (nesting, launches, ops), steps and the warnings about what the trace
lacks. The loader hands over columns and the facts of reading (size, truncation, its notes); everything derived
from the columns is built here, so a cached table rebuilds the same trace."""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from tracelens.model.cuda_graphs import attribute_replays
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, I32, I64, EventTable, Kind, kind_mask
from tracelens.model.linking import link
from tracelens.model.memory import CounterTable, MemoryTable, enclosing_ops
from tracelens.model.nesting import clip_unreturned_frames, nest_ordered
from tracelens.model.steps import (
    assign_steps,
    autotune_rows,
    empty_steps,
    exclude_lossy_steps,
    find_steps,
    oversized_step_names,
)
from tracelens.model.trace import WHOLE_TRACE_SOURCE, Links, Trace, TraceMeta, TrackTable, Truncation
from tracelens.records import replace
from tracelens.units import bytes_text


class Columns(msgspec.Struct, frozen=True):
    """What the loader read: the event table (canonical row order) and its tracks, the time origin (µs in the
    file's clock), `source_rows` (row i is the source_rows[i]-th complete event of the file, which has
    `source_events`), the text's size and truncation, and the loader's notes for the warnings."""

    path: Path | None
    events: EventTable
    tracks: TrackTable
    meta: TraceMeta
    origin_us: float
    uncompressed_bytes: int
    truncation: Truncation
    source_rows: I64 | None
    source_events: int
    notes: list[str] = msgspec.field(default_factory=list)
    memory: MemoryTable = msgspec.field(default_factory=MemoryTable.empty)  # `op` not yet set
    counters: CounterTable = msgspec.field(default_factory=CounterTable.empty)


def build_trace(columns: Columns) -> Trace:
    """Link, find steps and warn: the whole model of one trace from its columns."""
    table, truncated = columns.events, columns.truncation.truncated
    notes = list(columns.notes)
    dur_ns, clipped = clip_unreturned_frames(table)
    if clipped:
        table = replace(table, dur_ns=dur_ns)
        notes.append(
            f"{clipped:,} Python frames outlived the frame that called them (they had not returned when the "
            "profiler stopped, which closes them at the end of the recording); they end with their caller here"
        )
    parent, depth, cpu_order = nest_ordered(table)
    launch, op, by_id, by_time = link(table, parent)
    op, graph_notes = attribute_replays(table, launch, op)
    notes += graph_notes
    steps = find_steps(table, truncated)
    empty = empty_steps(table)
    if empty:
        notes.append(f"{empty:,} ProfilerStep range(s) of zero length were left out of the steps (they hold no work)")
    step = assign_steps(table, steps, launch)
    autotune = autotune_rows(table, parent, launch)
    if autotune.any():  # Inductor's autotuning is compile cost: no step owns it (analyses/autotune.py shows it)
        step = np.where(autotune, -1, step).astype(np.int32)
    if truncated and columns.source_rows is not None:
        gpu_run = columns.meta.raw.get("deviceProperties") != []  # kineto writes [] on CPU-only runs
        steps = exclude_lossy_steps(table, steps, step, launch, op, columns.source_rows, expect_gpu=gpu_run)
    trace = Trace(
        path=columns.path,
        events=table,
        tracks=columns.tracks,
        meta=columns.meta,
        links=Links(parent, depth, launch, op, step, by_id, by_time),
        steps=steps,
        origin_us=columns.origin_us,
        uncompressed_bytes=columns.uncompressed_bytes,
        truncation=columns.truncation,
        warnings=(),
        source_rows=columns.source_rows,
        source_events=columns.source_events,
        memory=_with_ops(columns.memory, table, parent, depth, cpu_order),
        counters=columns.counters,
    )
    return replace(trace, warnings=tuple(trace_warnings(trace, notes)))


def _with_ops(memory: MemoryTable, table: EventTable, parent: I32, depth: I32, cpu_order: I64) -> MemoryTable:
    """`memory` with each event's enclosing CPU op (`model.memory.enclosing_ops`; `cpu_order` from `nest_ordered`)."""
    if not len(memory):
        return memory
    return replace(memory, op=enclosing_ops(table, parent, depth, memory.ts_ns, memory.track, cpu_order))


def trace_warnings(trace: Trace, notes: list[str]) -> list[str]:
    """The loader's notes, then what the model sees missing or odd, in a fixed order."""
    warnings = list(notes)
    kind = trace.events.kind
    gpu = kind_mask(kind, GPU_ACTIVITY_KINDS)
    n_gpu = int(gpu.sum())
    warnings += _metadata_warnings(trace.meta)
    if trace.truncation.truncated:
        warnings.append(_truncation_warning(trace))
    if n_gpu == 0:
        n_api = int(kind_mask(kind, API_KINDS).sum())
        warnings.append(
            "no GPU activity (kernels, memcpy, memset) in the trace"
            + (f" although it has {n_api:,} runtime/driver calls" if n_api else "")
            + ": only the CPU side is analyzed"
        )
    else:
        orphans = int((gpu & (trace.links.launch < 0)).sum())
        if orphans:
            warnings.append(
                f"{orphans:,} of {n_gpu:,} GPU activities have no launch in the trace (enqueued before the "
                "profiling window or launch records missing); they count in no step"
            )
    if trace.meta.schema_version not in (None, 1):
        warnings.append(f"unknown schemaVersion {trace.meta.schema_version}; read as version 1")
    oversized = oversized_step_names(trace.events.names)
    if oversized:
        warnings.append(
            f"{len(oversized):,} ProfilerStep annotation name{'s' if len(oversized) > 1 else ''} with a step "
            f"number too large to be one (e.g. {oversized[0][:60]}) "
            f"{'are' if len(oversized) > 1 else 'is'} not taken for steps"
        )
    if trace.steps.source == WHOLE_TRACE_SOURCE:
        if not trace.truncation.truncated:  # else the truncation warning says it
            warnings.append("no ProfilerStep annotations: the whole trace is analyzed as one window")
    elif not trace.steps.complete.any():
        what = "ProfilerStep" if trace.steps.source == "ProfilerStep" else f"step ({trace.steps.label})"
        warnings.append(f"no complete {what}: per-step figures are empty")
    if kind.size and not (kind == Kind.CPU_OP).any():
        warnings.append("no CPU ops in the trace: launches cannot be attributed to ops")
    return warnings


def _metadata_warnings(meta: TraceMeta) -> list[str]:
    """Top-level values that are present but unusable (they read as unknown)."""
    dist = meta.raw.get("distributedInfo")
    warnings = []
    if isinstance(dist, dict):
        for key, value in (("rank", meta.rank), ("world_size", meta.world_size)):
            if dist.get(key) is not None and value is None:
                shown = str(dist[key])
                shown = shown if len(shown) <= 40 else shown[:37] + "..."
                warnings.append(f"distributedInfo.{key} {shown} is not a usable number; the {key} is unknown")
    return warnings


def _truncation_warning(trace: Trace) -> str:
    """Says where the file was cut, and how much that cost in steps (what followed the cut is unknown)."""
    steps = trace.steps
    text = (
        f"the trace was cut off mid-write after {bytes_text(trace.uncompressed_bytes)} of JSON (the closing of "
        f"the file and everything written after the cut are lost; the incomplete last event, "
        f"{trace.truncation.dropped_tail_bytes:,} bytes, was dropped)"
    )
    if not steps.per_step:
        return (
            text + "; without ProfilerStep annotations the events before the cut form one incomplete window, so "
            "per-step figures are empty"
        )
    lost = steps.number[~steps.complete]
    kept = steps.number[steps.complete]
    listed = ", ".join(str(n) for n in kept[:8]) + (", ..." if kept.size > 8 else "")
    return (
        text
        + f"; {lost.size} of {len(steps)} steps lost events and are excluded"
        + (f", per-step figures use step{'s' if kept.size > 1 else ''} {listed}" if kept.size else "")
    )
