"""Many ranks: per-rank figures (computed where the trace is, in parallel) and the cross-rank reduction.

Contract:
- `rank_figures(trace) -> RankFigures`: small and picklable; the only thing that travels back from a worker.
- `analyze_ranks(figures, sources) -> RanksResults`: pure; groups by `distributedInfo.rank`, states missing,
  duplicate and unranked files, and compares ranks.

Definitions (per step = total over the analyzed steps / their number; analyzed steps = complete steps):
- step time: median `ProfilerStep` duration; skew = (slowest − fastest) / median of the per-rank step times.
- collectives: GPU kernels of category "communication" (NCCL/RCCL). Their duration is transfer plus waiting
  for the peers to arrive. Clocks of different hosts are not comparable, so waiting is estimated without
  them: the k-th call of a collective kernel (same name, same order in the analyzed steps) is matched across
  ranks; the shortest of its durations is the transfer, each rank's excess over it is waiting.
- one run: the traces are ranks of one job only when every trace has `distributedInfo.rank`, they agree on
  `world_size` (and on `tracelens_run.run_id` where the recording wrote one), no rank appears twice and every
  rank is below the world size. Otherwise (`separate_reason`) each trace is its own: no skew, no waiting, no
  stragglers, no slowest rank.
- straggler: a rank the others wait for. With collectives: waits per step below half the median
  wait while the median wait is at least 10 % of the median collective time. Without collectives: step time
  over 110 % of the median.
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.analyses.activity import gpu_activity, step_windows
from tracelens.analyses.compiled import steady_steps
from tracelens.analyses.summary import summary_of
from tracelens.analyses.window import select_window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import CATEGORIES
from tracelens.model.stats import median
from tracelens.model.trace import Trace

COMMUNICATION = "communication"
STRAGGLER_WAIT_FRACTION = 0.5
MIN_WAIT_SHARE = 0.10
SLOW_STEP_FACTOR = 1.10


class RankFigures(msgspec.Struct, frozen=True):
    """What one rank contributes to the cross-rank view (per-step figures are means over analyzed steps)."""

    rank: int | None
    world_size: int | None
    path: str
    events: int
    steps: int
    step_numbers: list[int]
    step_us: float  # median step time
    step_us_by_step: list[float]
    gpu_kernel_us: float  # per step, every kernel
    compute_us: float  # per step, kernels that are not collectives
    collective_us: float  # per step
    collective_calls: float  # per step
    collectives: list[tuple[str, float]]  # (kernel name, µs) in order, for matching
    warnings: list[str] = msgspec.field(default_factory=list)
    run_id: str | None = None  # `tracelens_run.run_id` when the recording wrote one


class RankRow(msgspec.Struct, frozen=True):
    """One rank in the cross-rank table."""

    rank: int | None
    path: str
    steps: int
    step_numbers: list[int]
    step_us_by_step: list[float]
    step_us: float  # median
    compute_us: float
    collective_us: float
    waiting_us: float  # per step, estimated (see module docstring)
    transfer_us: float  # per step = collective_us - waiting_us
    collective_calls: float
    straggler: bool


class RanksResults(msgspec.Struct, frozen=True):
    """The cross-rank view of one directory or archive of rank traces."""

    source: str
    world_size: int | None
    ranks_found: list[int]
    missing_ranks: list[int]
    duplicate_ranks: list[int]
    unranked_files: list[str]
    failed_files: list[str]  # "path: error"
    rows: list[RankRow]
    step_us_median: float
    step_us_min: float
    step_us_max: float
    skew_pct: float
    slowest_rank: int | None
    fastest_rank: int | None
    stragglers: list[int]
    matched_collectives: int  # collective calls matched across all ranks (per rank)
    notes: list[str]
    one_run: bool = True  # the traces are ranks of one job (see the module docstring)
    separate_reason: str | None = None  # why not, when they are analyzed as separate traces


def rank_figures(trace: Trace) -> RankFigures:
    """Per-rank figures of one loaded trace."""
    window = steady_steps(trace, select_window(trace))  # the steps `analyze` of this trace is over
    summary = summary_of(trace, window=window)
    gpu = gpu_activity(trace).in_steps(window.step_indices)
    kernels = gpu.subset(gpu.kind == Kind.KERNEL)
    order = np.lexsort((kernels.row, kernels.ts_ns))
    n = max(window.n_steps, 1)
    is_comm = kernels.category[order] == CATEGORIES.index(COMMUNICATION)
    dur_us = kernels.dur_ns[order] / 1000.0
    names = np.asarray(trace.events.names, dtype=object)[kernels.name[order][is_comm]]
    durations = step_windows(trace).period_ns[window.step_indices] / 1000.0  # per-step step time (period)
    unknown = float("nan")  # no analyzed step (every step cut off): per-step figures are unknown, not 0
    return RankFigures(
        rank=trace.meta.rank,
        world_size=trace.meta.world_size,
        path=str(trace.path),
        events=trace.n_events,
        steps=window.n_steps,
        step_numbers=list(window.step_numbers),
        step_us=float("nan") if summary.per_step.step_us is None else float(summary.per_step.step_us),
        step_us_by_step=[float(d) for d in durations],
        gpu_kernel_us=float(dur_us.sum() / n) if window.n_steps else unknown,
        compute_us=float(dur_us[~is_comm].sum() / n) if window.n_steps else unknown,
        collective_us=float(dur_us[is_comm].sum() / n) if window.n_steps else unknown,
        collective_calls=float(is_comm.sum() / n) if window.n_steps else unknown,
        collectives=[(str(name), float(d)) for name, d in zip(names, dur_us[is_comm], strict=True)],
        warnings=list(trace.warnings),
        run_id=_run_id(trace.meta.run),
    )


def _run_id(run: dict[str, object]) -> str | None:
    value = run.get("run_id")
    return None if value is None else str(value)


def separate_reason(figures: list[RankFigures]) -> str | None:
    """Why these traces are not the ranks of one run, every reason found ("; "-joined), or None when they are;
    pure."""
    reasons: list[str] = []
    unranked = [f.path for f in figures if f.rank is None]
    if unranked:
        shown = ", ".join(unranked[:3]) + (f" and {len(unranked) - 3} more" if len(unranked) > 3 else "")
        reasons.append(f"{len(unranked)} of {len(figures)} traces have no distributedInfo.rank ({shown})")
    sizes = sorted({f.world_size for f in figures if f.world_size is not None})
    unsized = any(f.world_size is None for f in figures if f.rank is not None)
    if len(sizes) > 1 or (sizes and unsized):
        shown = ", ".join([str(size) for size in sizes] + (["unknown"] if unsized else []))
        reasons.append(f"the traces disagree on world_size ({shown})")
    run_ids = sorted({str(f.run_id) for f in figures})
    if len(run_ids) > 1:
        reasons.append(f"the traces come from different runs (tracelens_run.run_id {', '.join(run_ids)})")
    by_rank: dict[int, list[str]] = {}
    for f in figures:
        if f.rank is not None:
            by_rank.setdefault(f.rank, []).append(f.path)
    duplicated = {rank: paths for rank, paths in sorted(by_rank.items()) if len(paths) > 1}
    if duplicated:
        reasons.append(
            "ranks in more than one trace: "
            + ", ".join(f"{rank} ({', '.join(sorted(paths))})" for rank, paths in duplicated.items())
        )
    if len(sizes) == 1 and by_rank and max(by_rank) >= sizes[0]:
        reasons.append(f"rank {max(by_rank)} is outside world_size {sizes[0]}")
    return "; ".join(reasons) if reasons else None


def analyze_ranks(
    figures: list[RankFigures], source: str, failed: list[str] | None = None, notes: list[str] | None = None
) -> RanksResults:
    """Reduce per-rank figures to the cross-rank view (pure)."""
    notes = list(notes or [])
    # each trace's own load warnings (GPU activity without a launch, a cut-off file …): said once per trace
    notes += [f"{f.path.rsplit('/', 1)[-1]}: {warning}" for f in figures for warning in f.warnings]
    reason = separate_reason(figures) if figures else None
    ranked = sorted((f for f in figures if f.rank is not None), key=lambda f: (f.rank, f.path))
    unranked = sorted(f.path for f in figures if f.rank is None)
    counts: dict[int, int] = {}
    for f in ranked:
        assert f.rank is not None
        counts[f.rank] = counts.get(f.rank, 0) + 1
    duplicates = sorted(r for r, c in counts.items() if c > 1)
    sizes = {f.world_size for f in ranked if f.world_size is not None}
    world_size = max(sizes) if sizes else None
    if len(sizes) > 1 and reason is None:
        notes.append(f"ranks disagree on world_size: {sorted(sizes)}; using {world_size}")
    found = sorted(counts)
    expected = range(world_size) if world_size is not None else range(max(found) + 1 if found else 0)
    missing = [r for r in expected if r not in counts]
    everyone = ranked + [f for f in figures if f.rank is None]
    step_lists = {tuple(f.step_numbers) for f in everyone if f.steps > 0}
    if len(step_lists) > 1 and reason is None:  # a rank compiled or captured in other steps than the rest
        notes.append(
            "the ranks' analyzed steps differ (each leaves out its own compiling or graph-capturing steps): "
            "collectives are matched by their order within those steps, which may pair calls of different steps"
        )
    waits = _waiting_us(everyone) if reason is None else {}
    matched = waits.pop(-1, 0.0)
    step_times = np.array([f.step_us for f in everyone if f.steps > 0 and reason is None], dtype=float)
    median_step_us = median(step_times) if step_times.size else float("nan")
    stragglers = _stragglers(everyone, waits, median_step_us) if reason is None else set()
    rows = [
        RankRow(
            rank=f.rank,
            path=f.path,
            steps=f.steps,
            step_numbers=f.step_numbers,
            step_us_by_step=f.step_us_by_step,
            step_us=f.step_us,
            compute_us=f.compute_us,
            collective_us=f.collective_us,
            waiting_us=waits.get(index, float("nan")),
            transfer_us=f.collective_us - waits.get(index, float("nan")),
            collective_calls=f.collective_calls,
            straggler=index in stragglers,
        )
        for index, f in enumerate(everyone)
    ]
    timed = [(f.step_us, f.rank) for f in everyone if f.steps > 0 and f.rank is not None and reason is None]
    return RanksResults(
        source=source,
        world_size=world_size,
        ranks_found=found,
        missing_ranks=missing,
        duplicate_ranks=duplicates,
        unranked_files=unranked,
        failed_files=list(failed or []),
        rows=rows,
        step_us_median=median_step_us,
        step_us_min=float(step_times.min()) if step_times.size else float("nan"),
        step_us_max=float(step_times.max()) if step_times.size else float("nan"),
        skew_pct=float((step_times.max() - step_times.min()) / median_step_us * 100)
        if step_times.size
        else float("nan"),
        slowest_rank=max(timed)[1] if timed else None,
        fastest_rank=min(timed)[1] if timed else None,
        stragglers=sorted(r for i, f in enumerate(everyone) if i in stragglers and (r := f.rank) is not None),
        matched_collectives=int(matched),
        notes=notes,
        one_run=reason is None,
        separate_reason=reason,
    )


def _waiting_us(figures: list[RankFigures]) -> dict[int, float]:
    """Per-step waiting of each figure (by index); key -1 holds the number of matched calls per rank."""
    if len(figures) < 2 or not all(f.collectives for f in figures):
        return {}
    by_name: list[dict[str, list[float]]] = []
    for f in figures:
        groups: dict[str, list[float]] = {}
        for name, duration in f.collectives:
            groups.setdefault(name, []).append(duration)
        by_name.append(groups)
    common = set(by_name[0]).intersection(*by_name[1:])
    wait = np.zeros(len(figures))
    matched = 0
    for name in sorted(common):
        k = min(len(groups[name]) for groups in by_name)
        matrix = np.array([groups[name][:k] for groups in by_name])  # ranks x calls
        wait += (matrix - matrix.min(axis=0)).sum(axis=1)
        matched += k
    result = {i: float(wait[i] / max(f.steps, 1)) for i, f in enumerate(figures)}
    result[-1] = float(matched)
    return result


def _stragglers(figures: list[RankFigures], waits: dict[int, float], median_step_us: float) -> set[int]:
    if len(figures) < 2:
        return set()
    if waits:
        wait = np.array([waits[i] for i in range(len(figures))])
        collective = median([f.collective_us for f in figures])
        median_wait = median(wait)
        if collective > 0 and median_wait >= MIN_WAIT_SHARE * collective:
            return {i for i in range(len(figures)) if wait[i] < STRAGGLER_WAIT_FRACTION * median_wait}
        return set()
    return {i for i, f in enumerate(figures) if f.steps and f.step_us > SLOW_STEP_FACTOR * median_step_us}
