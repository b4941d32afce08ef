"""Shape sweeps: steps grouped by input shape, compiles per new shape, and the break-even of compiling.

Contract: `step_shapes(trace, compiles) -> StepShapes` (`rows`: one `ShapeRow` per shape, empty unless the
trace's complete steps have at least two distinct shapes; their `pattern`) and `break_even(variants) ->
list[BreakEven]` (of `SWEEP` variants only); pure. Definitions (docs/shapes.md):

- A step's **shape** is the `Input Dims` of the first input of two or more dimensions (the activation;
  `aten::addmm`'s first input is its bias), else of the first input, of the op that launched the step's first
  GEMM kernel (by launch time; failing a GEMM, its first kernel with a launching op that recorded `Input Dims`),
  written `1024×2048`; `tokens` is the product of all but its last dimension. This reads the trace only, so traces
  without `tracelens_run` metadata work; steps with no such op have no shape and are left out.
- A step's **kernel µs**: summed duration of the kernels it launched outside compilation (launch call not
  inside a compile-phase span, `compiled.compile_intervals`): Inductor's compile-time and autotuning kernels
  are left out, the compiled graph's own run is kept. A shape's `kernel_us` is the median over its steps.
- `step_us`: median period (`StepFigures.step_us`) of the shape's steps after its first that compiled nothing
  (None when the shape appeared only once: its only step paid its first-call costs); `first_step_us`: the
  period of its first step, with whatever that step paid (compilation, Triton JIT, cuDNN plan set-up).
- `compile_ms`: the compile time (`compiled.compiles`) of the compile ids that started in the shape's steps.
- **Pattern** of two or more distinct shapes: `SWEEP` ("shape sweep") where every shape has at least two
  dimensions and all share the last one, the feature size: one GEMM input at several token counts (whether a
  benchmark chose them or the data brought them, the trace does not say); else `FIRST_GEMM_VARIES`: the steps'
  first GEMMs are not one GEMM at several token counts (a 1-D input, or another feature size: another GEMM
  first, or one at another feature size), so nothing is compared per shape and no break-even is made.
- **Break-even** of a variant that compiled against one that did not, per shape both ran:
  `ceil(compile_ms / (baseline kernel_us − compiled kernel_us))` steps of that shape; 0 when nothing compiled
  for it; None ("never") when the compiled kernels are not faster.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.activity import gpu_activity, step_windows
from tracelens.analyses.compiled import compile_intervals, overlaps_intervals
from tracelens.analyses.window import Window, select_window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import CATEGORIES
from tracelens.units import NS_PER_US

if TYPE_CHECKING:
    from tracelens.analyses.compiled import CompileEvent
    from tracelens.model.trace import Trace

GEMM = CATEGORIES.index("gemm")


class ShapeRow(msgspec.Struct, frozen=True):
    """One input shape of a sweep trace (definitions in the module docstring)."""

    shape: str
    tokens: int
    steps: list[int]  # ProfilerStep numbers
    kernel_us: float  # median GPU kernel µs per step, compilation's kernels left out
    step_us: float | None  # median period of the repeat steps that compiled nothing; None: no such step
    first_step_us: float  # period of the shape's first step
    compile_ms: float
    compile_ids: list[str]


SWEEP = "sweep"
FIRST_GEMM_VARIES = "first_gemm_varies"


class StepShapes(msgspec.Struct, frozen=True):
    """The shapes of a trace's complete steps: `rows` (`step_shapes`) and their `pattern` (`SWEEP`,
    `FIRST_GEMM_VARIES`, or None with fewer than two shapes, when `rows` is empty)."""

    pattern: str | None
    rows: list[ShapeRow]


class BreakEven(msgspec.Struct, frozen=True):
    """Steps of `shape` after which `variant`'s compile time is paid back by its faster kernels."""

    variant: str
    baseline: str
    shape: str
    tokens: int
    compile_ms: float
    saving_us_per_step: float  # baseline kernel_us - variant kernel_us (negative: the compiled one is slower)
    steps: int | None  # None: never (not faster)


def step_shapes(trace: Trace, compiles: list[CompileEvent]) -> StepShapes:
    """The shapes of the complete steps, in order of first appearance ([] when there are fewer than two), and
    their pattern (module docstring)."""
    window = select_window(trace)
    keys = _step_shapes(trace, window.step_indices)
    distinct = {k for k in keys if k is not None}
    if len(distinct) < 2:
        return StepShapes(None, [])
    return StepShapes(shape_pattern(distinct), _rows(trace, compiles, window, keys))


def shape_pattern(shapes: set[tuple[int, ...]]) -> str:
    """`SWEEP` where every shape has two or more dimensions and all share the last, else `FIRST_GEMM_VARIES`."""
    one_feature_size = len({s[-1] for s in shapes}) == 1
    return SWEEP if one_feature_size and all(len(s) >= 2 for s in shapes) else FIRST_GEMM_VARIES


def _rows(
    trace: Trace, compiles: list[CompileEvent], window: Window, keys: list[tuple[int, ...] | None]
) -> list[ShapeRow]:
    """One row per distinct shape of `keys` (one key per step of `window`), in order of first appearance."""
    kernel_us = _kernel_us_outside_compilation(trace, window.step_indices)
    period_us = step_windows(trace).period_ns[window.step_indices] / NS_PER_US
    numbers = window.step_numbers
    compiled_steps = {c.step for c in compiles}
    rows: list[ShapeRow] = []
    for key in dict.fromkeys(k for k in keys if k is not None):
        at = [i for i, k in enumerate(keys) if k == key]
        steps = [numbers[i] for i in at]
        repeats = [float(period_us[i]) for i in at[1:] if numbers[i] not in compiled_steps]
        ids = [c for c in compiles if c.step in steps]
        rows.append(
            ShapeRow(
                shape="×".join(map(str, key)),
                tokens=math.prod(key[:-1]),
                steps=steps,
                kernel_us=round(float(np.median(kernel_us[at])), 3),
                step_us=round(float(np.median(repeats)), 3) if repeats else None,
                first_step_us=round(float(period_us[at[0]]), 3),
                compile_ms=round(sum(c.ms for c in ids), 3),
                compile_ids=[c.id or "?" for c in ids],
            )
        )
    return rows


def break_even(variants: list[tuple[str, list[ShapeRow]]]) -> list[BreakEven]:
    """Every variant that compiled in its sweep against every variant that compiled nothing, per shared shape."""
    compiled = [(n, rows) for n, rows in variants if rows and any(r.compile_ids for r in rows)]
    baselines = [(n, rows) for n, rows in variants if rows and not any(r.compile_ids for r in rows)]
    out: list[BreakEven] = []
    for name, rows in compiled:
        for base_name, base_rows in baselines:
            base = {r.shape: r for r in base_rows}
            for row in rows:
                if row.shape not in base:
                    continue
                saving = round(base[row.shape].kernel_us - row.kernel_us, 3)
                steps = _steps_to_pay_back(row.compile_ms, saving)
                out.append(BreakEven(name, base_name, row.shape, row.tokens, row.compile_ms, saving, steps))
    return out


def _steps_to_pay_back(compile_ms: float, saving_us: float) -> int | None:
    if compile_ms <= 0:
        return 0
    if saving_us <= 0:
        return None
    return math.ceil(compile_ms * 1000.0 / saving_us)


def _kernel_us_outside_compilation(trace: Trace, step_indices: np.ndarray) -> np.ndarray:
    """Per step (in `step_indices` order): summed kernel µs launched outside compile-phase spans."""
    gpu = gpu_activity(trace)
    keep = (gpu.kind == Kind.KERNEL) & (gpu.step >= 0) & ~_launched_in_compilation(trace)
    sums = np.bincount(gpu.step[keep], weights=gpu.dur_ns[keep] / NS_PER_US, minlength=len(trace.steps))
    return np.asarray(sums[step_indices], dtype=np.float64)


def _launched_in_compilation(trace: Trace) -> np.ndarray:
    gpu = gpu_activity(trace)
    launch_ns = np.where(gpu.launch >= 0, trace.events.ts_ns[np.maximum(gpu.launch, 0)], gpu.ts_ns)
    return overlaps_intervals(launch_ns, launch_ns, compile_intervals(trace))


def _step_shapes(trace: Trace, step_indices: np.ndarray) -> list[tuple[int, ...] | None]:
    """Per step: the first input's dims of the op that launched its first GEMM (else first kernel), or None."""
    gpu = gpu_activity(trace)
    ev = trace.events
    launch_ns = np.where(gpu.launch >= 0, ev.ts_ns[np.maximum(gpu.launch, 0)], gpu.ts_ns)
    has_dims = np.zeros(len(gpu), dtype=bool)
    with_op = np.flatnonzero(gpu.op_row >= 0)
    has_dims[with_op] = ev.input_dims[gpu.op_row[with_op]].astype(bool)  # None is false, raw JSON never empty
    rows = np.flatnonzero((gpu.kind == Kind.KERNEL) & has_dims & (gpu.step >= 0) & ~_launched_in_compilation(trace))
    # per step: GEMMs before other kernels, then by launch time; the first row of each step is its pick
    rows = rows[np.lexsort((launch_ns[rows], gpu.category[rows] != GEMM, gpu.step[rows]))]
    steps, first = np.unique(gpu.step[rows], return_index=True)
    picked = dict(zip(steps.tolist(), rows[first].tolist(), strict=True))
    return [
        _first_input(ev.input_dims[gpu.op_row[picked[index]]]) if index in picked else None
        for index in step_indices.tolist()
    ]


def _first_input(raw: object) -> tuple[int, ...] | None:
    """The step's shape from its op's raw `Input Dims`: the first input of two or more dimensions (the
    activation: `aten::addmm`'s first input is its bias), else the first input; None where unreadable."""
    if not isinstance(raw, (bytes, str)):
        return None
    try:
        dims = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(dims, list):
        return None
    inputs = [tuple(d) if isinstance(d, list) and d and all(_is_dim(x) for x in d) else None for d in dims]
    return next((i for i in inputs if i is not None and len(i) >= 2), inputs[0] if inputs else None)


def _is_dim(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
