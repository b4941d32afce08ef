"""Load a Kineto / Chrome trace file into a linked `Trace`. Raw JSON never leaves this package."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tracelens.errors import UnusableTraceError
from tracelens.loader.columns import ChunkColumns, build_meta, columnize, complete_events, merge_columns_full
from tracelens.loader.decode import Decoded, decode_trace
from tracelens.loader.source import check_readable, read_trace_bytes
from tracelens.loader.stream import NotStreamable, auto_workers, stream_columns
from tracelens.model.events import API_KINDS, GPU_ACTIVITY_KINDS, Kind, kind_mask
from tracelens.model.linking import link_launches, link_ops
from tracelens.model.nesting import nest
from tracelens.model.steps import assign_steps, exclude_lossy_steps, find_steps
from tracelens.model.trace import Links, Trace, Truncation

Progress = Callable[[str, float], None]  # (phase, fraction done in [0, 1])

__all__ = ["Progress", "load_trace"]


def load_trace(
    path: str | Path,
    progress: Progress | None = None,
    workers: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Trace:
    """Read, decode, columnise and link one trace file.

    Raises `UnusableTraceError` for input that is not a trace; odd-but-usable input loads with `warnings`.
    `workers`: processes that decode chunks of a big file (default: `auto_workers()`); same result for any value.
    `meanwhile`: work for this process while worker processes decode (typically importing what the caller needs
    next); called at most once, and not at all when no worker process is used.
    """
    path = Path(path)
    report = progress or (lambda phase, fraction: None)
    check_readable(path)
    try:
        streamed = stream_columns(
            path,
            lambda done, total: report("reading and decoding", done / max(total, 1)),
            workers=auto_workers() if workers is None else workers,
            meanwhile=meanwhile,
        )
        decoded = Decoded([], streamed.metadata, False)
        chunks, size = streamed.chunks, streamed.uncompressed_bytes
        del streamed
    except NotStreamable:
        decoded, chunks, size = _decode_whole(path, report)
    report("building columns", 0.0)
    if not sum(len(chunk) for chunk in chunks):
        raise UnusableTraceError(f"{path}: a trace with no events with a duration; nothing to analyze")
    merged = merge_columns_full(chunks)
    n_complete = sum(len(chunk) for chunk in chunks)
    del chunks
    table, tracks, origin_us, categories = merged.table, merged.tracks, merged.origin_us, merged.categories
    decoded.notes.extend(merged.notes)
    if not len(table):
        raise UnusableTraceError(f"{path}: a trace with no events with a usable time; nothing to analyze")
    meta = build_meta(decoded.metadata, categories, decoded.bare_array)
    report("linking", 0.0)
    truncated = decoded.truncated
    parent, depth = nest(table)
    launch = link_launches(table)
    op, by_id, by_time = link_ops(table, parent, launch)
    steps = find_steps(table, truncated)
    step = assign_steps(table, steps, launch)
    if truncated:
        gpu_run = decoded.metadata.get("deviceProperties") != []  # kineto writes [] on CPU-only runs
        steps = exclude_lossy_steps(table, steps, step, launch, op, merged.source_rows, expect_gpu=gpu_run)
    links = Links(parent, depth, launch, op, step, by_id, by_time)
    trace = Trace(
        path=path,
        events=table,
        tracks=tracks,
        meta=meta,
        links=links,
        steps=steps,
        origin_us=origin_us,
        uncompressed_bytes=size,
        truncation=Truncation(truncated, decoded.dropped_tail_bytes),
        warnings=(),
        source_rows=merged.source_rows,
        source_events=n_complete,
    )
    report("done", 1.0)
    return _with_warnings(trace, decoded.notes)


def _decode_whole(path: Path, report: Progress) -> tuple[Decoded, list[ChunkColumns], int]:
    """The whole-file path: every lenient repair (odd types, invalid JSON, cut-off files, bare arrays)."""
    raw = read_trace_bytes(path, lambda done, total: report("reading", done / max(total, 1)))
    report("decoding JSON", 0.0)
    decoded = decode_trace(raw.data, str(path))
    size = len(raw.data)
    if raw.gzip_truncated and not decoded.truncated:
        decoded.notes.append("the gzip stream ends early, but after the end of the JSON: nothing was lost")
    del raw
    chunks = [columnize(complete_events(decoded.events))]
    decoded.events = []
    return decoded, chunks, size


def _truncation_warning(trace: Trace) -> str:
    """Says where the file was cut, and how much that cost in steps (what followed the cut is unknown)."""
    steps = trace.steps
    text = (
        f"the trace was cut off mid-write after {trace.uncompressed_bytes / 1e6:,.1f} MB of JSON (the closing of "
        f"the file and everything written after the cut are lost; the incomplete last event, "
        f"{trace.truncation.dropped_tail_bytes:,} bytes, was dropped)"
    )
    if steps.source != "ProfilerStep":
        return text + "; the events before the cut are analyzed as one window"
    lost = steps.number[~steps.complete]
    kept = steps.number[steps.complete]
    listed = ", ".join(str(n) for n in kept[:8]) + (", ..." if kept.size > 8 else "")
    return (
        text
        + f"; {lost.size} of {len(steps)} steps lost events and are excluded"
        + (f", per-step figures use step{'s' if kept.size > 1 else ''} {listed}" if kept.size else "")
    )


def _with_warnings(trace: Trace, notes: list[str]) -> Trace:
    from dataclasses import replace

    warnings = [f"{note}" for note in notes]
    kind = trace.events.kind
    gpu = kind_mask(kind, GPU_ACTIVITY_KINDS)
    n_gpu = int(gpu.sum())
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
    if trace.steps.source == "whole_trace":
        warnings.append("no ProfilerStep annotations: the whole trace is analyzed as one window")
    elif not trace.steps.complete.any():
        warnings.append("no complete ProfilerStep: per-step figures are empty")
    if trace.events.kind.size and not (kind == Kind.CPU_OP).any():
        warnings.append("no CPU ops in the trace: launches cannot be attributed to ops")
    return replace(trace, warnings=tuple(warnings))
