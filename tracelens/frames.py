"""pandas DataFrames of a loaded trace, for notebooks: one row per kernel, op, launch or step.

Times are µs relative to the trace's first event (`*_us`), step numbers are `ProfilerStep#N` numbers, and
`op` is the CPU op that launched the work (Inductor wrappers named like the kernel are skipped, as in
`tracelens analyze`). Building a frame is vectorised; nothing is cached.

pandas conventions: a missing value is `pd.NA` (a kernel without a launching op, a step outside any
ProfilerStep, an op without recorded shapes; never `""` or `-1`), integer columns are nullable integers
(`Int64`), optional times are `Float64`, strings are `string` dtype, and `input_dims` holds tuples
(`((16384, 2048), (2048,))`), not JSON text.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from tracelens.analyses.compiled import steady_steps
from tracelens.analyses.summary import STEP_FIGURE_KEYS, gpu_activity_frame, summary_of
from tracelens.analyses.window import select_window
from tracelens.model.events import API_KINDS, Kind, kind_mask
from tracelens.model.kernel_names import short_name
from tracelens.model.trace import Trace
from tracelens.units import NS_PER_US

__all__ = ["kernels_frame", "launches_frame", "ops_frame", "steps_frame"]


def _step_numbers(trace: Trace, step_index: np.ndarray) -> pd.array:
    """Step indices (-1 = none) → nullable ProfilerStep numbers."""
    numbers = np.where(step_index >= 0, trace.steps.number[np.maximum(step_index, 0)], 0)
    return pd.array(np.where(step_index >= 0, numbers, pd.NA), dtype="Int64")


def _us(values_ns: np.ndarray) -> np.ndarray:
    return np.asarray(values_ns, dtype=np.float64) / NS_PER_US


def _kind_names(kinds: np.ndarray) -> list[str]:
    return [Kind(int(k)).name.lower() for k in kinds]


def _text(values: Any) -> pd.array:
    """Strings with `""` (no name recorded) as `pd.NA`, dtype `string`."""
    array = pd.array(np.asarray(values, dtype=object), dtype="string")
    array[array == ""] = pd.NA
    return array


def _ints(values: Any, missing_below: int | None = None) -> pd.array:
    """Nullable integers (`Int64`); values below `missing_below` (e.g. -1 = not recorded) become `pd.NA`."""
    numbers = np.asarray(values, dtype=np.int64)
    array = pd.array(numbers, dtype="Int64")
    if missing_below is not None:
        array[numbers < missing_below] = pd.NA
    return array


def _floats(values: np.ndarray) -> pd.array:
    """Optional times: `Float64` with NaN (not measured) as `pd.NA`."""
    values = np.asarray(values, dtype=np.float64)
    array = pd.array(values, dtype="Float64")
    array[np.isnan(values)] = pd.NA
    return array


def _dims(raw: bytes | None) -> tuple[Any, ...] | Any:
    """`Input Dims` JSON (`[[16384, 2048], [2048]]`) → nested tuples; none recorded → `pd.NA`."""
    if not raw:
        return pd.NA
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return pd.NA
    return _tuples(value)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def kernels_frame(trace: Trace) -> pd.DataFrame:
    """One row per GPU activity (kernels, memcpy, memset), in time order.

    Columns: step, name, short_name, kind, category, op, launch_api, start_us, dur_us, end_us,
    launch_start_us, queue_us (kernel start − launch start; NaN without a launch), device, stream,
    grid_blocks, block_threads.
    """
    gpu = gpu_activity_frame(trace)
    ev = trace.events
    rows = gpu["row"].to_numpy()
    launch = gpu["launch"].to_numpy()
    start = _us(gpu["ts_ns"].to_numpy())
    dur = _us(gpu["dur_ns"].to_numpy())
    launch_start = np.where(launch >= 0, _us(ev.ts_ns[np.maximum(launch, 0)]), np.nan)
    names = gpu["name"].tolist()
    frame = pd.DataFrame(
        {
            "step": _step_numbers(trace, gpu["step"].to_numpy()),
            "name": _text(names),
            "short_name": _text([short_name(n) for n in names]),
            "kind": _text(_kind_names(gpu["kind"].to_numpy())),
            "category": _text(gpu["category"].to_numpy()),
            "op": _text(gpu["op"].to_numpy()),
            "launch_api": _text(gpu["launch_api"].to_numpy()),
            "start_us": start,
            "dur_us": dur,
            "end_us": start + dur,
            "launch_start_us": _floats(launch_start),
            "queue_us": _floats(start - launch_start),
            "device": _ints(gpu["device"].to_numpy(), missing_below=0),
            "stream": _ints(gpu["stream"].to_numpy(), missing_below=0),
            "grid_blocks": _ints(ev.grid_blocks[rows], missing_below=0),
            "block_threads": _ints(ev.block_threads[rows], missing_below=0),
        }
    )
    return frame.sort_values("start_us", kind="stable").reset_index(drop=True)


def ops_frame(trace: Trace) -> pd.DataFrame:
    """One row per CPU op (`cpu_op` events), in time order.

    Columns: step, name, parent (enclosing CPU event), depth, thread, start_us, dur_us, end_us,
    kernels (GPU activities it launched directly), gpu_us (their summed duration), input_dims (a tuple per
    input, e.g. `((16384, 2048), (2048,))`; `pd.NA` when shapes were not recorded).
    """
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(ev.kind == Kind.CPU_OP)
    launched, gpu_ns = _launched_by_op(trace, ev.kind.size)
    start = _us(ev.ts_ns[rows])
    dur = _us(ev.dur_ns[rows])
    frame = pd.DataFrame(
        {
            "step": _step_numbers(trace, links.step[rows]),
            "name": _text(ev.names_at(rows)),
            "parent": _text(ev.names_at(links.parent[rows])),
            "depth": _ints(links.depth[rows]),
            "thread": _text(_track_labels(trace)[ev.track[rows]].tolist()),
            "start_us": start,
            "dur_us": dur,
            "end_us": start + dur,
            "kernels": _ints(launched[rows]),
            "gpu_us": _us(gpu_ns[rows]),
            "input_dims": pd.Series([_dims(raw) for raw in ev.input_dims[rows]], dtype=object),
        }
    )
    return frame.sort_values("start_us", kind="stable").reset_index(drop=True)


def _launched_by_op(trace: Trace, n: int) -> tuple[np.ndarray, np.ndarray]:
    gpu = gpu_activity_frame(trace)
    op = gpu["op_row"].to_numpy()
    has = op >= 0
    counts = np.bincount(op[has], minlength=n)
    dur = np.bincount(op[has], weights=gpu["dur_ns"].to_numpy()[has].astype(np.float64), minlength=n)
    return counts, dur


def launches_frame(trace: Trace) -> pd.DataFrame:
    """One row per CUDA/HIP runtime or driver call (launches, syncs, occupancy queries, ...), in time order.

    Columns: step, name, api ("runtime"/"driver"), op (innermost CPU op around it), start_us, dur_us,
    kernels (GPU activities it launched), kernel (the first one's name; `pd.NA` if none), kernel_start_us,
    launch_to_start_us (kernel start − call start; `pd.NA` without a kernel).
    """
    ev, links = trace.events, trace.links
    rows = np.flatnonzero(kind_mask(ev.kind, API_KINDS))
    gpu_rows = np.flatnonzero(links.launch >= 0)
    order = np.lexsort((ev.ts_ns[gpu_rows], links.launch[gpu_rows]))
    gpu_rows = gpu_rows[order]
    launchers = links.launch[gpu_rows]
    counts = np.bincount(launchers, minlength=ev.kind.size)
    first = np.full(ev.kind.size, -1, dtype=np.int64)
    first_of_group = np.ones(launchers.size, dtype=bool)
    first_of_group[1:] = launchers[1:] != launchers[:-1]
    first[launchers[first_of_group]] = gpu_rows[first_of_group]
    kernel = first[rows]
    start = _us(ev.ts_ns[rows])
    kernel_start = np.where(kernel >= 0, _us(ev.ts_ns[np.maximum(kernel, 0)]), np.nan)
    frame = pd.DataFrame(
        {
            "step": _step_numbers(trace, links.step[rows]),
            "name": _text(ev.names_at(rows)),
            "api": _text(["driver" if k == Kind.DRIVER else "runtime" for k in ev.kind[rows]]),
            "op": _text(ev.names_at(links.op[rows])),
            "start_us": start,
            "dur_us": _us(ev.dur_ns[rows]),
            "kernels": _ints(counts[rows]),
            "kernel": _text(ev.names_at(kernel)),
            "kernel_start_us": _floats(kernel_start),
            "launch_to_start_us": _floats(kernel_start - start),
        }
    )
    return frame.sort_values("start_us", kind="stable").reset_index(drop=True)


def steps_frame(trace: Trace) -> pd.DataFrame:
    """One row per step (`complete` says which are whole), with the per-step figures of `tracelens analyze`.

    Columns: step, start_us, kernels, memcpy, memset, launches, cpu_ops, cpu_us, gpu_busy_us, gpu_kernel_us,
    step_us (step start → its last GPU end), complete, analyzed (the step is among those `analyze`'s per-step
    medians are over: complete, not compiling or capturing a CUDA graph; the medians of the analyzed rows are
    `analyze`'s `per_step`).
    """
    summary = summary_of(trace)
    analyzed = set(steady_steps(trace, select_window(trace)).step_numbers)
    index = {int(n): i for i, n in enumerate(trace.steps.number)}
    table = summary.step_table
    starts = [_us(trace.steps.start_ns[index[row.number]]) if row.number in index else np.nan for row in table]
    return pd.DataFrame(
        {
            "step": pd.array([row.number for row in table], dtype="Int64"),
            "start_us": _floats(np.asarray(starts, dtype=np.float64)),
            **{key: _figure_column(key, [getattr(row, key) for row in table]) for key in STEP_FIGURE_KEYS},
            "complete": np.asarray([row.complete for row in table], dtype=bool),
            "analyzed": np.asarray([row.number in analyzed for row in table], dtype=bool),
        }
    )


COUNT_KEYS = ("kernels", "memcpy", "memset", "launches", "cpu_ops")


def _figure_column(key: str, values: list[float]) -> pd.array | np.ndarray:
    """A per-step figure: a count as `Int64` (a step's counts are whole numbers), a time as float64."""
    if key in COUNT_KEYS:
        return pd.array([round(v) for v in values], dtype="Int64")
    return np.asarray(values, dtype=np.float64)


def _track_labels(trace: Trace) -> np.ndarray:
    """Each track's label (`TrackTable.label`: the thread's name where the trace gives one), by track index."""
    return np.array([trace.tracks.label(t) for t in range(len(trace.tracks))] or [""], dtype=object)
