"""What the profiler added to the step: the profiler-free step time, measured or estimated (docs/profiler_overhead.md).

Contract: `profiler_free(trace, per_step) -> ProfilerFree`; pure, no I/O. `per_step` is the summary's median
step (`summary.StepFigures`).

- **measured**: the trace carries step times taken without the profiler (`trace.meta.profiler_free`, from
  `tracelens_record`: docs/record.md#metadata); they win over the estimate.
- **estimated** (the model, calibrated in docs/profiler_overhead.md):
  `free_us = max(gpu_busy_us, step_us - FIXED_US - PER_EVENT_US × events)`, where `step_us` and `gpu_busy_us`
  are the profiled step's median figures and `events` the recorded CPU ops and CUDA runtime calls per step (the
  events the profiler pays for on the CPU). The profiler's CPU cost only lengthens the step where the CPU
  limits it, so the GPU's busy time is the floor. Calibrated on traces recorded with `record_shapes=True`
  and without `with_stack` / `profile_memory`; a trace recorded with those gets the same estimate and a note
  that its overhead is larger than the model knows.
- **none** (`source` None): no analyzed step, or no step time.
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.model.events import Kind
from tracelens.model.trace import Trace

# The model's constants, fitted on the committed H200 traces with CUDA-event timings (docs/profiler_overhead.md;
# tests/test_profiler_overhead.py refits them from the raw events and the timings files).
FIXED_US = 60.0  # per step: prof.step(), the ProfilerStep range, the trace buffers' bookkeeping
PER_EVENT_US = 3.2  # per recorded CPU op or CUDA runtime call (record_shapes=True)
COUNTED_KINDS = (Kind.CPU_OP, Kind.RUNTIME)
# The estimate's stated range: the CUDA-event step ÷ the estimate, smallest and largest over the calibration
# traces (rounded outward), apart for steps the GPU limits in the trace (profiled step <= GPU_LIMITED_RATIO × GPU
# busy) and those the CPU limits, whose length follows the host's speed, which moves up to 2× between runs of one
# program (docs/profiler_overhead.md#the-range; the test refits them).
GPU_LIMITED_RATIO = 1.5
RANGE_GPU = (0.91, 1.17)  # profiled step <= GPU_LIMITED_RATIO × GPU busy
RANGE_CPU = (0.50, 2.02)  # the others
BUSY_FLOOR = 0.95  # the range's low end is at least this × the GPU's busy time (the CUDA-event step ÷ busy >= 0.99)


class ProfilerFree(msgspec.Struct, frozen=True):
    """The profiler-free step time beside the profiled one. `source`: "measured" (the trace's own profiler-free
    timings), "estimated" (the model), or None with `note` saying why there is none."""

    source: str | None
    step_us: float | None  # profiler-free step time (µs)
    profiled_step_us: float | None  # the profiled median step (summary `per_step.step_us`)
    inflation_pct: float | None  # (profiled / profiler-free - 1) × 100
    method: str  # how it was measured or estimated, in words
    events_per_step: float | None = None  # CPU ops + CUDA runtime calls per step (the model's input)
    estimated_step_us: float | None = None  # the model's estimate, also where a measurement wins (to compare)
    estimate_low_us: float | None = None  # the estimate's stated range (`estimate_range_us`), None without one
    estimate_high_us: float | None = None
    note: str | None = None  # caveats (uncalibrated options, a partial recording), else None

    def source_words(self) -> str:
        """Where the step time comes from, for a sentence: "measured", or "estimated, likely L-H µs" (the stated
        range) where the model gave one."""
        if self.source == "estimated" and self.estimate_low_us is not None and self.estimate_high_us is not None:
            return f"estimated, likely {self.estimate_low_us:,.0f}-{self.estimate_high_us:,.0f} µs"
        return str(self.source)


def profiler_free(trace: Trace, step_us: float | None, gpu_busy_us: float | None, window: list[int]) -> ProfilerFree:
    """See the module docstring. `window`: the analyzed step indices (into `trace.steps`)."""
    events = events_per_step(trace, window)
    estimate = estimate_step_us(step_us, gpu_busy_us, events)
    low_us, high_us = estimate_range_us(step_us, gpu_busy_us, estimate)
    measured = trace.meta.profiler_free
    notes = []
    if measured is not None:
        clock = "CUDA events" if measured.clock == "cuda_events" else "wall clock"
        if measured.partial_reason:
            notes.append(f"the recording was cut short: {measured.partial_reason}")
        return ProfilerFree(
            source="measured",
            step_us=round(measured.step_us, 3),
            profiled_step_us=step_us,
            inflation_pct=_inflation(step_us, measured.step_us),
            method=f"median of {measured.steps} steps timed without the profiler ({clock}, {measured.key})",
            events_per_step=events,
            estimated_step_us=estimate,
            estimate_low_us=low_us,
            estimate_high_us=high_us,
            note="; ".join(notes) or None,
        )
    if trace.steps.source != "ProfilerStep":
        estimate = None
        reason = (
            f"steps {trace.steps.label}, not ProfilerStep: the model is calibrated on ProfilerSteps, so there is no "
            "estimate"
            if trace.steps.per_step
            else "no ProfilerStep in the trace: the model is per step, so there is no estimate"
        )
    else:
        reason = "no analyzed step with a step time"
    if estimate is None:
        return ProfilerFree(
            source=None,
            step_us=None,
            profiled_step_us=step_us,
            inflation_pct=None,
            method="",
            events_per_step=events,
            note=reason,
        )
    meta = trace.meta
    uncalibrated = [
        name for name, on in (("with_stack", meta.with_stack), ("profile_memory", meta.profile_memory)) if on
    ]
    if uncalibrated:
        notes.append(
            f"recorded with {' and '.join(uncalibrated)}, which the model is not calibrated for: the profiler "
            "likely added more than estimated"
        )
    if meta.record_shapes is False:
        notes.append("recorded without record_shapes: the model (calibrated with shapes) may overestimate the cost")
    if not trace.gpu_mask().any():
        notes.append("no GPU activity: the model was calibrated on GPU traces only")
    assert low_us is not None and high_us is not None and step_us is not None
    return ProfilerFree(
        source="estimated",
        step_us=estimate,
        profiled_step_us=step_us,
        inflation_pct=_inflation(step_us, estimate),
        method=(
            f"max(GPU busy, step − {FIXED_US:g} µs − {PER_EVENT_US:g} µs × {events:,.1f} CPU ops and "
            f"runtime calls); likely {low_us:,.0f}-{high_us:,.0f} µs, the calibration's spread for steps the "
            f"{'GPU' if gpu_limited(step_us, gpu_busy_us) else 'CPU'} limits (docs/profiler_overhead.md)"
        ),
        events_per_step=events,
        estimated_step_us=estimate,
        estimate_low_us=low_us,
        estimate_high_us=high_us,
        note="; ".join(notes) or None,
    )


GPU_BOUND_BUSY_SHARE = 0.85  # analyses/bound.py's verdict: gpu when busy >= 85 % of the window


def verdict_without_profiler(bound: str, gpu_busy_us: float | None, free_step_us: float | None) -> str | None:
    """ "gpu" where the profiled verdict is cpu or mixed but the GPU's busy time is at least 85 % of the
    profiler-free step (the verdict's own threshold), else None: removing the profiler only shortens the CPU side,
    so a gpu verdict never flips the other way, and cpu / mixed stay as they are below the threshold."""
    if bound not in ("cpu", "mixed") or gpu_busy_us is None or free_step_us is None or free_step_us <= 0:
        return None
    return "gpu" if gpu_busy_us / free_step_us >= GPU_BOUND_BUSY_SHARE else None


def estimate_step_us(step_us: float | None, gpu_busy_us: float | None, events: float | None) -> float | None:
    """The model: `max(gpu_busy_us, step_us - FIXED_US - PER_EVENT_US × events)`, never below 0; None without a
    step time or an event count."""
    if step_us is None or events is None:
        return None
    floor = gpu_busy_us if gpu_busy_us is not None else 0.0
    return round(max(floor, step_us - FIXED_US - PER_EVENT_US * events, 0.0), 3)


def estimate_range_us(
    step_us: float | None, gpu_busy_us: float | None, estimate_us: float | None
) -> tuple[float | None, float | None]:
    """(low, high): the estimate × RANGE_GPU where the GPU limits the profiled step (`gpu_limited`), else ×
    RANGE_CPU, the low end never below BUSY_FLOOR × the GPU's busy time (removing the profiler barely shortens the
    GPU's work); (None, None) without an estimate."""
    if step_us is None or estimate_us is None:
        return None, None
    low, high = RANGE_GPU if gpu_limited(step_us, gpu_busy_us) else RANGE_CPU
    floor = BUSY_FLOOR * min(gpu_busy_us or 0.0, estimate_us)
    return round(max(estimate_us * low, floor), 3), round(estimate_us * high, 3)


def gpu_limited(step_us: float, gpu_busy_us: float | None) -> bool:
    """Whether the GPU limits the profiled step: its busy time is at least 1 / GPU_LIMITED_RATIO of the step."""
    return gpu_busy_us is not None and step_us <= GPU_LIMITED_RATIO * gpu_busy_us


def events_per_step(trace: Trace, window: list[int]) -> float | None:
    """Recorded CPU ops and CUDA runtime calls per analyzed step (by their step: `links.step`)."""
    if not window:
        return None
    kinds = trace.events.kind
    counted = np.zeros(len(kinds), dtype=bool)
    for kind in COUNTED_KINDS:
        counted |= kinds == kind
    in_window = np.isin(trace.links.step, np.asarray(window, dtype=np.int64))
    return round(float(np.count_nonzero(counted & in_window)) / len(window), 3)


def _inflation(profiled_us: float | None, free_us: float) -> float | None:
    if profiled_us is None or free_us <= 0:
        return None
    return round(100.0 * (profiled_us / free_us - 1.0), 1)
