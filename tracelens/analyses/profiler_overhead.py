"""What the profiler added to the step: the profiler-free step time, measured or estimated (docs/profiler_overhead.md).

Contract: `profiler_free(trace, step_us, gpu_busy_us, window) -> ProfilerFree`; pure, no I/O. `step_us` and
`gpu_busy_us` are the summary's median step figures, `window` the analyzed step indices.

- **measured**: the trace carries step times taken without the profiler (`trace.meta.profiler_free`, from
  `tracelens_record`: docs/record.md#metadata); they win over the estimate.
- **estimated** (the model, calibrated in docs/profiler_overhead.md):
  `free_us = max(gpu_busy_us + LEAD_SHARE × lead_us, step_us − launch_us × (FIXED + PER_EVENT × events +
  PER_REGION × regions))`. The profiler's cost is counted in units of the trace's own median kernel-launch call
  (`launch_us`), so that it follows the host's speed during the recording (on a slow host every recorded event
  costs more, and so does every launch call): `events` are the recorded CPU ops and CUDA runtime calls per step,
  `regions` the `Torch-Compiled Region` calls per step (Dynamo's and Inductor's profiler ranges cost more than
  one event each). The profiler's CPU cost only lengthens the step where the CPU limits it, so the floor is the
  GPU's busy time plus the share of the step's lead (its start to its first GPU activity) that dispatch takes
  without the profiler. Calibrated on traces recorded with `record_shapes=True` and without `with_stack` /
  `profile_memory`; a trace recorded with those gets the same estimate and a note that its overhead is larger
  than the model knows.
- **none** (`source` None): no analyzed step, or no step time.
"""

from __future__ import annotations

import msgspec
import numpy as np
import numpy.typing as npt

from tracelens.analyses.activity import step_windows
from tracelens.model.cuda_graphs import KERNEL_LAUNCH_NAMES
from tracelens.model.events import API_KINDS, Kind, codes_mask, kind_mask
from tracelens.model.memo import per_trace
from tracelens.model.steps import REGION_CALL
from tracelens.model.trace import Trace

# The model's constants, fitted on the calibration traces with CUDA-event timings (docs/profiler_overhead.md;
# tests/test_profiler_overhead.py refits them from the raw events and the timings files). FIXED, PER_EVENT and
# PER_REGION are in units of the trace's median kernel-launch call (`launch_us`).
FIXED = 8.0  # per step: prof.step(), the ProfilerStep range, the trace buffers' bookkeeping
PER_EVENT = 0.35  # per recorded CPU op or CUDA runtime call (record_shapes=True)
PER_REGION = 16.0  # per Torch-Compiled Region call: Dynamo's and Inductor's ranges and their bookkeeping
LEAD_SHARE = 0.7  # the share of the step's lead to its first GPU activity that remains without the profiler
# The unit where the steps launch GPU work but make no kernel-launch call (CUDA-graph replays): the median of the
# calibration traces' launch units (tests/test_profiler_overhead.py recomputes it), a typical host's
STAND_IN_LAUNCH_US = 7.127
COUNTED_KINDS = (Kind.CPU_OP, Kind.RUNTIME)
# The estimate's stated range: the CUDA-event step ÷ the estimate over the calibration traces, rounded outward,
# apart for steps whose GPU is busy >= 1 / GPU_LIMITED_RATIO of the profiled step (smallest to largest)
# and those the CPU limits, whose length follows the host's speed, which moves up to 2× within seconds (the
# central 95 %: docs/profiler_overhead.md#the-range; the test refits them).
GPU_LIMITED_RATIO = 1.5
RANGE_GPU = (0.92, 1.13)  # profiled step <= GPU_LIMITED_RATIO × GPU busy: every calibration trace
RANGE_CPU = (0.63, 1.28)  # the others: the central 95 % (single disturbed recordings set the extremes)
BUSY_FLOOR = 0.95  # the range's low end is at least this × the GPU's busy time (the CUDA-event step ÷ busy >= 0.966)


class HostFeatures(msgspec.Struct, frozen=True):
    """The model's inputs besides the step time and GPU busy, over the analyzed steps: `events` per step, the median
    kernel-launch call (`launch_us`; None where the window launched nothing), `regions` per step and the median
    `lead_us` from a step's start to its first GPU activity (None where no step launched GPU work)."""

    events: float
    launch_us: float | None
    regions: float
    lead_us: float | None


class ProfilerFree(msgspec.Struct, frozen=True):
    """The profiler-free step time beside the profiled one. `source`: "measured" (the trace's own profiler-free
    timings), "estimated" (the model), or None with `note` saying why there is none."""

    source: str | None
    step_us: float | None  # profiler-free step time (µs)
    profiled_step_us: float | None  # the profiled median step (summary `per_step.step_us`)
    inflation_pct: float | None  # (profiled / profiler-free - 1) × 100
    method: str  # how it was measured or estimated, in words
    events_per_step: float | None = None  # CPU ops + CUDA runtime calls per step (the model's input)
    launch_us: float | None = None  # the median kernel-launch call (µs) in the steps; None where they made none
    unit_us: float | None = None  # the model's unit (`unit_us`): `launch_us`, or the stand-in where it is None
    regions_per_step: float | None = None  # Torch-Compiled Region calls per step (the model's input)
    lead_us: float | None = None  # median step start → first GPU activity (µs; the floor's input)
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
    host = host_features(trace, window)
    events = host.events if host is not None else None
    estimate = estimate_step_us(step_us, gpu_busy_us, host)
    low_us, high_us = estimate_range_us(step_us, gpu_busy_us, estimate)
    inputs = _inputs(host)
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
            **inputs,
            estimated_step_us=estimate,
            estimate_low_us=low_us,
            estimate_high_us=high_us,
            note="; ".join(notes) or None,
        )
    if trace.steps.source != "ProfilerStep":
        estimate = None
        reason = (
            f"steps {trace.steps.label}: the model is calibrated on ProfilerSteps, so there is no estimate"
            if trace.steps.per_step
            else "no ProfilerStep in the trace: the model is per step, so there is no estimate"
        )
    elif host is not None and host.lead_us is None and step_us is not None:
        reason = (
            "the steps launch no GPU work: the model's floor and unit are the GPU's work and the trace's launch "
            "calls (it is calibrated on GPU traces), so there is no estimate"
        )
    elif step_us is not None and host is not None:
        reason = "the profiler's estimated cost would take the whole step: there is no GPU work to floor it"
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
            **inputs,
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
    if host is not None and host.regions > 1:
        notes.append(
            f"{host.regions:g} compiled-region calls per step: the calibration traces have at most one, so the "
            "regions' cost is extrapolated"
        )
    assert low_us is not None and high_us is not None and step_us is not None
    if estimate >= step_us:
        notes.append("the profiler's estimated cost does not shorten this step (its GPU work and lead fill it)")
    return ProfilerFree(
        source="estimated",
        step_us=estimate,
        profiled_step_us=step_us,
        inflation_pct=_inflation(step_us, estimate),
        method=_method(host, gpu_limited(step_us, gpu_busy_us), low_us, high_us),
        events_per_step=events,
        **inputs,
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


def estimate_step_us(step_us: float | None, gpu_busy_us: float | None, host: HostFeatures | None) -> float | None:
    """The model of the module docstring, never above the profiled step (removing the profiler does not lengthen
    the program); where the window launched GPU work but no kernel-launch call (CUDA-graph replays: no unit of
    its own to count the profiler's cost in), `STAND_IN_LAUNCH_US`; None without a step time, without GPU work,
    or where the profiler's cost would take the whole step (no GPU floor: nothing the model can say)."""
    if step_us is None or host is None:
        return None
    unit = unit_us(host)
    if unit is None:
        return None
    estimate = min(max(_floor_us(gpu_busy_us, host), step_us - overhead_us(host, unit)), step_us)
    return round(estimate, 3) if estimate > 0 else None


def unit_us(host: HostFeatures) -> float | None:
    """The model's unit (µs): the trace's median kernel-launch call; where the steps launched GPU work but made no
    kernel-launch call (CUDA-graph replays), `STAND_IN_LAUNCH_US`, a typical host's; None where they launched
    no GPU work."""
    if host.launch_us is not None:
        return host.launch_us
    return STAND_IN_LAUNCH_US if host.lead_us is not None else None


def overhead_us(host: HostFeatures, launch_us: float) -> float:
    """What the profiler adds to a CPU-limited step: `launch_us × (FIXED + PER_EVENT × events + PER_REGION ×
    regions)`."""
    return launch_us * (FIXED + PER_EVENT * host.events + PER_REGION * host.regions)


def _floor_us(gpu_busy_us: float | None, host: HostFeatures) -> float:
    """No step is shorter than the GPU's busy time plus what remains of its lead without the profiler."""
    return (gpu_busy_us or 0.0) + LEAD_SHARE * (host.lead_us or 0.0)


def _inputs(host: HostFeatures | None) -> dict[str, float | None]:
    """The ProfilerFree fields that show the model's inputs besides the event count."""
    if host is None:
        return {}
    return {
        "launch_us": host.launch_us,
        "unit_us": unit_us(host),
        "regions_per_step": host.regions,
        "lead_us": host.lead_us,
    }


def _method(host: HostFeatures | None, gpu: bool, low_us: float | None, high_us: float | None) -> str:
    """The estimate's formula with this trace's inputs, in words."""
    assert host is not None and low_us is not None and high_us is not None
    likely = (
        f"likely {low_us:,.0f}-{high_us:,.0f} µs, the calibration's spread for steps whose GPU is busy "
        f"{'at least' if gpu else 'under'} {100 / GPU_LIMITED_RATIO:.1f} % of the step (docs/profiler_overhead.md)"
    )
    launch = (
        f"{host.launch_us:g}"
        if host.launch_us is not None
        else f"{STAND_IN_LAUNCH_US:g} (none in the steps, CUDA-graph replays: the calibration's median)"
    )
    regions = f" + {PER_REGION:g} × {host.regions:,.1f} compiled-region calls" if host.regions else ""
    return (
        f"max(GPU busy + {LEAD_SHARE:g} × lead {host.lead_us or 0:,.1f} µs, step − launch call {launch} µs × "
        f"({FIXED:g} + {PER_EVENT:g} × {host.events:,.1f} CPU ops and runtime calls{regions})); {likely}"
    )


def estimate_range_us(
    step_us: float | None, gpu_busy_us: float | None, estimate_us: float | None
) -> tuple[float | None, float | None]:
    """(low, high): the estimate × RANGE_GPU where the GPU limits the profiled step (`gpu_limited`), else ×
    RANGE_CPU, the low end never below BUSY_FLOOR × the GPU's busy time (removing the profiler barely shortens the
    GPU's work) nor above the profiled step; the high end may lie above the profiled step (the reference moves:
    docs/profiler_overhead.md#the-range); (None, None) without an estimate."""
    if step_us is None or estimate_us is None:
        return None, None
    low, high = RANGE_GPU if gpu_limited(step_us, gpu_busy_us) else RANGE_CPU
    floor = BUSY_FLOOR * min(gpu_busy_us or 0.0, estimate_us)
    return round(min(max(estimate_us * low, floor), step_us), 3), round(estimate_us * high, 3)


def gpu_limited(step_us: float, gpu_busy_us: float | None) -> bool:
    """The range's class of the profiled step: its GPU busy time is at least 1 / GPU_LIMITED_RATIO of the step.
    Not the verdict on what limits it (`critical_path.limit_of`, the `Limit:` line), which the what-ifs decide."""
    return gpu_busy_us is not None and step_us <= GPU_LIMITED_RATIO * gpu_busy_us


def host_features(trace: Trace, window: list[int]) -> HostFeatures | None:
    """The model's inputs over the analyzed steps `window` (indices into `trace.steps`), each event by its step
    (`links.step`: CPU events by their start, GPU activity by its launch); None without a step. Computed once per
    trace and window (the summary's estimate and the actions' fused launch read the same steps)."""
    known = _host_features_by_window(trace)
    key = tuple(int(index) for index in window)
    if key not in known:
        known[key] = _host_features(trace, window)
    return known[key]


@per_trace
def _host_features_by_window(trace: Trace) -> dict[tuple[int, ...], HostFeatures | None]:
    return {}


def _host_features(trace: Trace, window: list[int]) -> HostFeatures | None:
    if not window:
        return None
    events, step = trace.events, trace.links.step
    in_window = codes_mask(step, window)
    counted = in_window & kind_mask(events.kind, COUNTED_KINDS)
    launch_named = codes_mask(events.name, _codes(trace, KERNEL_LAUNCH_NAMES))
    launches = in_window & kind_mask(events.kind, API_KINDS) & launch_named
    regions = in_window & codes_mask(events.name, _codes(trace, _region_names(trace)))
    return HostFeatures(
        events=round(float(np.count_nonzero(counted)) / len(window), 3),
        launch_us=round(float(np.median(events.dur_ns[launches])) / 1e3, 3) if launches.any() else None,
        regions=round(float(np.count_nonzero(regions)) / len(window), 3),
        lead_us=_lead_us(trace, in_window, window),
    )


def _lead_us(trace: Trace, in_window: npt.NDArray[np.bool_], window: list[int]) -> float | None:
    """Median over the window's steps that launched GPU work of (its first GPU activity's start − the start of its
    GPU window: its CPU start, or the end of the previous step's GPU work where that ends later, so that a step
    queued behind earlier work leads by what its own dispatch took, `activity.StepWindows`)."""
    gpu = in_window & trace.gpu_mask()
    if not gpu.any():
        return None
    first = np.full(len(trace.steps.number), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, trace.links.step[gpu], trace.events.ts_ns[gpu])
    steps = np.asarray(window, dtype=np.int64)
    launched = steps[first[steps] != np.iinfo(np.int64).max]
    start = step_windows(trace).start_ns[launched]  # after the previous step's GPU work: no queue wait counted
    return round(float(np.median(np.maximum(first[launched] - start, 0))) / 1e3, 3)


def _codes(trace: Trace, names: tuple[str, ...] | list[str]) -> npt.NDArray[np.int64]:
    wanted = set(names)
    return np.array([code for code, name in enumerate(trace.events.names) if name in wanted], dtype=np.int64)


def _region_names(trace: Trace) -> list[str]:
    return [name for name in trace.events.names if REGION_CALL.match(name)]


def _inflation(profiled_us: float | None, free_us: float) -> float | None:
    if profiled_us is None or free_us <= 0:
        return None
    return round(100.0 * (profiled_us / free_us - 1.0), 1)
