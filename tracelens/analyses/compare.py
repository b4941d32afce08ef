"""Variants side by side: the study's table, and which eager ops each variant fused into one kernel.

Contract: `compare_variants([(name, trace, results), ...]) -> Comparison`; pure. A fused kernel (Inductor
`triton_*_fused_*`, Liger / hand-written Triton) is credited with the eager kernels it replaced in this place
of the program, placed by dataflow and position (analyses/fused_credit.py, docs/fusion.md), never by op names;
`fusion_balance` says how the rows add up to the realized drop.
Each variant's kernels are also grouped by transformer-block component (analyses/components.py); on shape-sweep
traces each variant has its per-shape figures and the comparison the break-even of compiling
(analyses/shapes_sweep.py).
"""

from __future__ import annotations

import msgspec
import numpy as np

from tracelens.analyses import AnalysisResults
from tracelens.analyses.actions import PredictionCheck, PredictionSkip, prediction_checks, program_of
from tracelens.analyses.compiled import steady_steps
from tracelens.analyses.components import ComponentRow, block_components
from tracelens.analyses.fused_credit import Credit, Slots, Unit, credit, kernel_slots
from tracelens.analyses.graph_removal import GraphRemoval, graph_removals, graph_side, removal_sentence
from tracelens.analyses.shapes_sweep import SWEEP, BreakEven, ShapeRow, break_even, step_shapes
from tracelens.analyses.summary import KernelRow, OpRow, StepFigures
from tracelens.analyses.window import select_window
from tracelens.model.events import Kind
from tracelens.model.kernel_names import short_name
from tracelens.model.op_names import METADATA_OPS
from tracelens.model.trace import WHOLE_TRACE_SOURCE, Trace
from tracelens.naming import NAMELESS, trace_stem
from tracelens.variants import DRIFT_MAX_PCT, DRIFT_PCT, ProgramShape, other_program

MEMORY_BOUND = ("elementwise", "norm", "reduction", "copy")


class FusedKernel(msgspec.Struct, frozen=True):
    """A fused kernel of one variant and the eager ops (from the baseline variant) it covers."""

    variant: str
    kernel: str
    launched_by: str
    ops: list[str]
    kernel_us_per_step: float
    baseline_variant: str
    baseline_kernels: list[str]
    baseline_us_per_step: float | None  # None: the eager side could not be placed (`note` says why)
    absorbed_gemm_calls_per_step: float = 0.0  # baseline GEMM calls the variant no longer has (in baseline µs)
    direction: str = "forward"  # or "backward": it replaced ops of this direction only
    instances_per_step: float = 1.0  # launches of this kernel per step
    note: str = ""
    # of `baseline_us_per_step`: eager µs another fused kernel ranked as well, won by the tie rule (it runs first)
    tied_us_per_step: float = 0.0


class FusionBalance(msgspec.Struct, frozen=True):
    """Per variant against the baseline, in µs per step: the realized drop in non-anchor (not GEMM, not
    attention) kernel time, split into what the fused rows saved, the change in kernels both run, the baseline
    kernels placed nowhere and the variant's non-fused kernels the baseline does not have; the rows' saving counts
    the baseline GEMMs a fused kernel absorbed (anchor time), which the drop does not. realized = credited
    - absorbed_gemm + kept_change + unplaced_baseline - unmatched_variant, exactly."""

    variant: str
    baseline_variant: str
    realized_saving_us_per_step: float
    credited_saving_us_per_step: float
    kept_change_us_per_step: float
    unplaced_baseline_us_per_step: float
    unplaced_ops: list[str]
    unmatched_variant_us_per_step: float
    absorbed_gemm_us_per_step: float = 0.0  # baseline GEMM time the fused rows absorbed (in their saving)


# component times closer than this are not called fastest and slowest: the same program's steps move by a few
# percent between recordings (docs/actions.md#repeat-recordings: GPU-bound twins repeat within 4.3 %)
SAME_WITHIN_PCT = 2.0


class Variant(msgspec.Struct, frozen=True):
    name: str
    path: str
    run: dict[str, object]
    steps: int
    per_step: StepFigures
    metadata_ops_per_step: float
    dispatch_us_per_step: float | None  # host work issuing GPU work (no Python, no sync waits)
    exposed_dispatch_us_per_step: float | None  # of it, what the GPU waited for
    bound: str | None
    kernels_by_category: dict[str, float]  # kernels per step
    kernels: list[KernelRow]
    components: list[ComponentRow]  # kernels per block component (analyses/components.py)
    shapes: list[ShapeRow] = msgspec.field(default_factory=list)  # per input shape, where steps have two or more
    # "inferred" (steps from repeated calls, model.steps.infer_steps) or "whole_trace" (no steps: no per-step
    # claims, docs/shapes.md)
    step_source: str = "ProfilerStep"
    # the step without the profiler, as `analyze` gives it (`per_step.profiler_free_step_us`, its source:
    # "measured", "estimated" or None)
    profiler_free_step_us: float | None = None
    profiler_free_source: str | None = None
    # what the shapes are (`shapes_sweep.StepShapes.pattern`): "sweep", "first_gemm_varies" (no per-shape claims,
    # no break-even) or None (fewer than two shapes)
    shape_pattern: str | None = None


class ClockDrift(msgspec.Struct, frozen=True):
    """The same GEMM kernels (by name, run as often per step) taking another time in a later variant than in the
    first: the GPU's clock or power moved between the recordings, and that much of the difference is not the
    variant's. Said where it is at least `DRIFT_PCT` % (and at most `DRIFT_MAX_PCT` %: beyond, other work) and those
    kernels are at least `DRIFT_SHARE` of the first variant's GPU busy time, between variants of one program."""

    variant: str
    baseline_variant: str
    kernels: int  # GEMM kernel names both run, as many times per step
    baseline_us_per_step: float
    variant_us_per_step: float
    change_pct: float


DRIFT_SHARE = 0.10
SAME_CALLS = 0.01  # calls per step within this fraction: "as often"


class Comparison(msgspec.Struct, frozen=True):
    variants: list[Variant]
    fusions: list[FusedKernel]
    fusion_balance: list[FusionBalance] = msgspec.field(default_factory=list)  # per variant (FusionBalance)
    break_even: list[BreakEven] = msgspec.field(default_factory=list)  # compiled sweeps against uncompiled ones
    verdicts: list[str] = msgspec.field(default_factory=list)  # what the figures say, in sentences (`_verdicts`)
    # eager baseline against each CUDA-graph variant (analyses/graph_removal.py)
    graph_removed: list[GraphRemoval] = msgspec.field(default_factory=list)
    # the first variant's predictions each later one checks, and the later ones that check none, with why
    # (`actions.prediction_checks`)
    predictions_checked: list[PredictionCheck] = msgspec.field(default_factory=list)
    predictions_skipped: list[PredictionSkip] = msgspec.field(default_factory=list)
    clock_drift: list[ClockDrift] = msgspec.field(default_factory=list)  # later variants against the first


def clock_drift(variants: list[Variant]) -> list[ClockDrift]:
    """`ClockDrift` of each later variant against the first, where it is to be said: between stepped variants only
    (a whole trace's GEMM time is not a step's)."""
    if len(variants) < 2 or not variants[0].steps or variants[0].step_source == WHOLE_TRACE_SOURCE:
        return []
    first = variants[0]
    base = {k.name: k for k in first.kernels if k.category == "gemm"}
    busy = first.per_step.gpu_busy_us or 0.0
    found = []
    for variant in variants[1:]:
        if not variant.steps or variant.step_source == WHOLE_TRACE_SOURCE:
            continue
        same = [
            (base[k.name], k)
            for k in variant.kernels
            if k.category == "gemm"
            and k.name in base
            and abs(k.calls_per_step - base[k.name].calls_per_step) <= SAME_CALLS * base[k.name].calls_per_step
        ]
        before = sum(a.total_us for a, _ in same) / first.steps
        after = sum(b.total_us for _, b in same) / variant.steps
        if not same or before <= 0 or before < DRIFT_SHARE * busy:
            continue
        change = 100.0 * (after / before - 1)
        if DRIFT_PCT <= abs(change) <= DRIFT_MAX_PCT:
            found.append(
                ClockDrift(variant.name, first.name, len(same), round(before, 3), round(after, 3), round(change, 1))
            )
    return found


def drift_sentence(drift: ClockDrift) -> str:
    faster = "less" if drift.change_pct < 0 else "more"
    names = f"{drift.kernels} name{'s' if drift.kernels != 1 else ''}"
    return (
        f"{drift.variant}: the same GEMM kernels as {drift.baseline_variant} ({names}, as many calls per step) took "
        f"{abs(drift.change_pct):.1f} % {faster} time ({drift.baseline_us_per_step:,.1f} → "
        f"{drift.variant_us_per_step:,.1f} µs/step): doing the same work, they ran at another clock or power, and "
        f"{abs(drift.variant_us_per_step - drift.baseline_us_per_step):,.1f} µs/step of the difference is not the "
        "variant's change (unless its inputs to them changed)"
    )


def variant_name(trace: Trace) -> str:
    """`tracelens_run.variant` when the workload wrote it, else the file stem (`tracelens.naming.trace_stem`)."""
    run_variant = trace.meta.run.get("variant")
    if isinstance(run_variant, str) and run_variant:
        return run_variant
    return trace_stem(trace.path) if trace.path is not None else NAMELESS


def compare_variants(items: list[tuple[str, Trace, AnalysisResults]]) -> Comparison:
    components = block_components([trace for _, trace, _ in items])
    variants = [
        _variant(name, trace, results, rows) for (name, trace, results), rows in zip(items, components, strict=True)
    ]
    shapes = {name: program_of(results) for name, _, results in items}
    fusions, balance, uncredited = _fusions(items, shapes)
    removed = graph_removals(  # each graph variant against the first eager variant of its program
        [graph_side(name, trace, results) for name, trace, results in items],
        lambda before, after: _other_program(shapes, before, after) is None,
    )
    checks = prediction_checks([(name, results) for name, _, results in items], shapes)
    others = [
        f"{name} is another program than {items[0][0]} ({why}): not a variant of it"
        for name, _, _ in items[1:]
        if (why := _other_program(shapes, items[0][0], name)) is not None
    ]
    drifts = [  # another program's kernels do other work: no drift is read from them
        d for d in clock_drift(variants) if _other_program(shapes, items[0][0], d.variant) is None
    ]
    return Comparison(
        variants=variants,
        fusions=fusions,
        fusion_balance=balance,
        break_even=break_even([(v.name, v.shapes) for v in variants if v.shape_pattern == SWEEP]),
        verdicts=[
            *others,
            *uncredited,
            *_verdicts(variants, [results for _, _, results in items]),
            *map(removal_sentence, removed),
            *map(drift_sentence, drifts),
        ],
        graph_removed=removed,
        predictions_checked=[c for c in checks if isinstance(c, PredictionCheck)],
        predictions_skipped=[c for c in checks if isinstance(c, PredictionSkip)],
        clock_drift=drifts,
    )


def _other_program(shapes: dict[str, ProgramShape | None], before: str, after: str) -> str | None:
    """`other_program` of two variants by name; None where either is not known."""
    first, second = shapes.get(before), shapes.get(after)
    return None if first is None or second is None else other_program(first, second, before)


def _verdicts(variants: list[Variant], reports: list[AnalysisResults]) -> list[str]:
    """Sentences read off the figures: the fastest step and GPU time, where each variant's kernels win or lose
    per block component against the fastest there, its CPU dispatch, and the fusion left in each variant."""
    if len(variants) < 2:
        return []
    out = []
    whole = sorted(v.name for v in variants if v.step_source == WHOLE_TRACE_SOURCE)
    if whole:
        out.append(
            f"no ProfilerStep in {', '.join(whole)}: whole-trace figures, left out of every "
            "per-step comparison below (docs/shapes.md)"
        )
    stepped = [v for v in variants if v.step_source != WHOLE_TRACE_SOURCE]
    reports = [r for v, r in zip(variants, reports, strict=True) if v.step_source != WHOLE_TRACE_SOURCE]
    variants = stepped
    if len(variants) < 2:
        return out
    timed = [(v.per_step.step_us, v.name) for v in variants if v.per_step.step_us is not None]
    if timed:
        best_us, best = min(timed)
        others = ", ".join(f"{name} {us:,.1f}" for us, name in sorted(timed) if name != best)
        if len({f"{us:,.1f}" for us, _ in timed}) == 1:  # no fastest where the shown figures are equal
            out.append(f"step: the same in every variant ({best_us:,.1f} µs/step)")
        else:
            out.append(f"fastest step: {best} ({best_us:,.1f} µs/step; {others})")
    kernel = [(v.per_step.gpu_kernel_us, v.name) for v in variants if v.per_step.gpu_kernel_us is not None]
    if kernel:
        best_us, best = min(kernel)
        if len(kernel) > 1 and len({f"{us:,.1f}" for us, _ in kernel}) == 1:  # no least among equal figures
            out.append(f"GPU kernel time: the same in every variant ({best_us:,.1f} µs/step)")
        else:
            out.append(f"least GPU kernel time: {best} ({best_us:,.1f} µs/step)")
    names = [c.name for c in variants[0].components if c.name != "other"]
    for index, component in enumerate(names):
        rows = [v.components[index] for v in variants if index < len(v.components)]
        if len(rows) < 2 or max(row.attributed_us_per_step for row in rows) <= 0:
            continue
        placed = [
            (row.us_per_step, v.name)
            for row, v in zip(rows, variants, strict=False)
            if row.us_per_step is not None and not _gemms_elsewhere(component, row, v)
        ]
        unplaced = sorted(v.name for row, v in zip(rows, variants, strict=False) if row.us_per_step is None)
        caveat = f" ({', '.join(unplaced)}: not placed, not compared)" if unplaced else ""
        if len(placed) < 2:
            if unplaced:
                out.append(f"{component}: not compared — not placed in {', '.join(unplaced)} (docs/components.md)")
            continue
        best_us, best = min(placed)
        worst_us, worst = max(placed)
        if f"{best_us:,.1f}" == f"{worst_us:,.1f}":  # no fastest where the shown figures are equal
            out.append(f"{component}: the same in every variant placed ({best_us:,.1f} µs/step){caveat}")
            continue
        if worst_us <= best_us * (1 + SAME_WITHIN_PCT / 100):  # within run-to-run noise: no fastest either
            out.append(
                f"{component}: about the same in every variant placed ({best_us:,.1f}–{worst_us:,.1f} µs/step, "
                f"within {SAME_WITHIN_PCT:g} %){caveat}"
            )
            continue
        out.append(f"{component}: {best} fastest ({best_us:,.1f} µs/step), {worst} slowest ({worst_us:,.1f}){caveat}")
    dispatch = [(v.dispatch_us_per_step, v.name) for v in variants if v.dispatch_us_per_step is not None]
    if dispatch:
        text = ", ".join(f"{name} {us:,.1f}" for us, name in sorted(dispatch))
        out.append(f"CPU dispatch µs/step: {text}")
    left = []
    for v, results in zip(variants, reports, strict=True):
        if results.fusion is not None and results.fusion.est_saving_us_per_step:
            count = len(results.fusion.opportunities)
            left.append(f"{v.name} {results.fusion.est_saving_us_per_step:,.1f} µs/step ({count})")
    if left:
        out.append("fusion left (est. saving, opportunities): " + ", ".join(left))
    return out


def _gemms_elsewhere(component: str, row: ComponentRow, variant: Variant) -> bool:
    """Whether `row` is a `gemm` row of 0 while the variant runs GEMM kernels: its scopes hold them (the rows
    above it), so it ranks nothing."""
    return component == "gemm" and row.attributed_kernels == 0 and variant.kernels_by_category.get("gemm", 0) > 0


def _variant(name: str, trace: Trace, results: AnalysisResults, components: list[ComponentRow]) -> Variant:
    summary = results.summary
    shapes = step_shapes(trace, results.compiled.compiles if results.compiled else [])
    by_category: dict[str, float] = {}
    for row in summary.kernels:
        by_category[row.category] = round(by_category.get(row.category, 0.0) + row.calls_per_step, 3)
    return Variant(
        name=name,
        path=summary.facts.path,
        run=summary.facts.run,
        steps=summary.steps,
        per_step=summary.per_step,
        metadata_ops_per_step=_metadata_ops_per_step(trace),
        dispatch_us_per_step=results.dispatch.dispatch_us_per_step if results.dispatch else None,
        exposed_dispatch_us_per_step=results.bound.exposed_dispatch_us_per_step if results.bound else None,
        bound=results.bound.bound if results.bound else None,
        kernels_by_category=dict(sorted(by_category.items())),
        kernels=summary.kernels,
        components=components,
        shapes=shapes.rows,
        step_source=trace.steps.source,
        profiler_free_step_us=summary.profiler_free.step_us if summary.profiler_free is not None else None,
        profiler_free_source=summary.profiler_free.source if summary.profiler_free is not None else None,
        shape_pattern=shapes.pattern,
    )


def _metadata_ops_per_step(trace: Trace) -> float:
    """The median over the summary's steps (complete, less warm-up: `compiled.steady_steps`) of the metadata ops
    (`METADATA_OPS`, a nest such as aten::t → transpose → as_strided counted once) by the step they belong to:
    the same steps and statistic as the variants table's other per-step columns."""
    ev = trace.events
    window = steady_steps(trace, select_window(trace))
    if not window.n_steps:
        return 0.0
    codes = np.array([c for c, name in enumerate(ev.names) if name in METADATA_OPS], dtype=np.int32)
    metadata = (ev.kind == Kind.CPU_OP) & np.isin(ev.name, codes)
    parent = trace.links.parent
    nested = metadata & (parent >= 0) & metadata[np.maximum(parent, 0)]  # aten::t → transpose → as_strided is one
    counted = trace.links.step[window.in_window & metadata & ~nested]
    per_step = np.bincount(counted, minlength=len(trace.steps.number))[window.step_indices]
    return round(float(np.median(per_step)), 3)


def _fusions(
    items: list[tuple[str, Trace, AnalysisResults]], shapes: dict[str, ProgramShape | None]
) -> tuple[list[FusedKernel], list[FusionBalance], list[str]]:
    """For every fused kernel of every variant, the baseline kernels it replaced in this place of the program
    (analyses/fused_credit.py), per variant the balance of credited, kept and unplaced time, and a sentence for
    each variant left out because it is another program than the baseline (`other_program`: its kernels
    replaced none of the baseline's).

    The baseline is the first variant given that has memory-bound kernels from unfused ops; where it or a variant
    has no steps (one whole-trace window), that variant is not credited and a sentence says so."""
    baseline = next(
        (item for item in items if _unfused_ops(item[2].summary.ops, item[2].summary.kernels)),
        None,
    )
    if baseline is None:
        return [], [], []
    base_name, base_trace, base_report = baseline
    base_slots = kernel_slots(base_trace, _categories(base_report))
    fusions: list[FusedKernel] = []
    balances: list[FusionBalance] = []
    uncredited: list[str] = []
    for name, trace, results in items:
        if name == base_name:
            continue
        whole = [
            n
            for n, r in ((base_name, base_report), (name, results))
            if r.summary.facts.step_source == WHOLE_TRACE_SOURCE
        ]
        if whole:  # a whole trace's kernels are not a step's: per-step credit would mix the two
            uncredited.append(
                f"{name}'s fused kernels are not credited with {base_name}'s ops: no ProfilerStep in "
                f"{' and '.join(whole)} (a whole trace's kernels are not a step's)"
            )
            continue
        if (why := _other_program(shapes, base_name, name)) is not None:  # said in full where items[0] is the base
            said = base_name == items[0][0]
            uncredited.append(
                f"{name}'s fused kernels are not credited with {base_name}'s ops: not a variant of it"
                + ("" if said else f" ({why})")
            )
            continue
        rows, balance = _variant_fusions(name, trace, results, base_name, base_report, base_slots)
        if rows:
            fusions += rows
            balances.append(balance)
    return fusions, balances, uncredited


def _categories(results: AnalysisResults) -> dict[str, str]:
    return {row.name: row.category for row in results.summary.kernels}


def _variant_fusions(
    name: str, trace: Trace, results: AnalysisResults, base_name: str, base_report: AnalysisResults, base: Slots
) -> tuple[list[FusedKernel], FusionBalance]:
    variant = kernel_slots(trace, _categories(results))
    placed = credit(base, variant)
    b_steps, v_steps = base.n_steps, variant.n_steps
    groups: dict[tuple[str, str, bool], list[Unit]] = {}
    for unit in placed.units:
        groups.setdefault(_row_of(unit), []).append(unit)
    missing = _missing_gemms(base_report.summary.kernels, results.summary.kernels)
    absorbed_us = 0.0
    absorbing: set[tuple[str, str, bool]] = set()  # the rows that absorbed them
    launcher = {row.name: row.op for row in results.summary.kernels}  # as `analyze` names it
    fusions = []
    for (kernel, op, backward), units in groups.items():
        kernel_us = sum(u.us for u in units) / v_steps
        credited = [s for u in units for s in u.credited]
        covered_us = sum(s.us for s in credited) / b_steps
        kernels = list(dict.fromkeys(s.name for s in credited))
        tied_us = sum(s.us for u in units for s in u.by_tie) / b_steps
        lost: dict[str, float] = {}
        for u in units:
            for winner, us in u.lost_to.items():
                lost[winner] = lost.get(winner, 0.0) + us / b_steps
        absorbed_calls = 0.0
        if kernel_us > covered_us and missing:  # slower than what it covers: it also does GEMM work
            kernels += [k for k, _, _ in missing]
            covered_us += sum(us for _, _, us in missing)
            absorbed_us += sum(us for _, _, us in missing)
            absorbed_calls = sum(calls for _, calls, _ in missing)
            absorbing.add((kernel, op, backward))
            missing = []  # each missing GEMM is credited once
        fusions.append(
            FusedKernel(
                variant=name,
                kernel=kernel,
                launched_by=launcher.get(kernel, op),
                ops=list(dict.fromkeys(s.label for s in credited if s.label)),
                kernel_us_per_step=round(kernel_us, 3),
                baseline_variant=base_name,
                baseline_kernels=kernels,
                baseline_us_per_step=round(covered_us, 3) if credited or absorbed_calls else None,
                absorbed_gemm_calls_per_step=absorbed_calls,
                direction="backward" if backward else "forward",
                instances_per_step=round(sum(len(u.head.positions) for u in units) / v_steps, 3),
                note="" if credited or absorbed_calls else _lost_note(lost) or _UNPLACED_NOTE,
                tied_us_per_step=round(tied_us, 3),
            )
        )
    fusions.sort(key=lambda f: (f.direction, -(f.baseline_us_per_step or 0.0)))
    return fusions, _balance(name, base_name, placed, b_steps, v_steps, absorbed_us, absorbing)


def _lost_note(lost: dict[str, float]) -> str:
    """Why a fused kernel that shares sizes with eager kernels was credited none: it tied with another ("" where
    it tied with none)."""
    if not lost:
        return ""
    winner, us = max(lost.items(), key=lambda item: item[1])
    return (
        f"credited nothing: it ranks as well as {short_name(winner)} for {us:,.1f} µs/step of eager kernels, and a "
        "tie goes to the kernel that runs first (docs/fusion.md)"
    )


_UNPLACED_NOTE = (
    "eager side not placed: no eager kernel of this direction within 2 GEMM/attention kernels shares a tensor "
    "size with it"
)


def _balance(
    name: str,
    base_name: str,
    placed: Credit,
    b_steps: int,
    v_steps: int,
    absorbed_us: float,
    absorbing: set[tuple[str, str, bool]],
) -> FusionBalance:
    credited = sum(s.us for u in placed.units for s in u.credited) / b_steps + absorbed_us
    # a row is a fused kernel (name, op, direction): its units, some of which may have been credited nothing; a row
    # that absorbed GEMMs shows a saving too
    rows_credited = {_row_of(u) for u in placed.units if u.credited} | absorbing
    fused = sum(u.us for u in placed.units if _row_of(u) in rows_credited) / v_steps  # the rows that show a saving
    kept_delta = sum(b.us for b, _ in placed.kept) / b_steps - sum(v.us for _, v in placed.kept) / v_steps
    unplaced = sum(s.us for s in placed.unplaced) / b_steps
    # the variant's time that replaced nothing placed: its unmatched plain kernels and fused rows without an eager side
    no_side = sum(u.us for u in placed.units if _row_of(u) not in rows_credited)
    unmatched = (sum(s.us for s in placed.unmatched) + no_side) / v_steps
    return FusionBalance(
        variant=name,
        baseline_variant=base_name,
        realized_saving_us_per_step=round(credited - absorbed_us - fused + kept_delta + unplaced - unmatched, 3),
        credited_saving_us_per_step=round(credited - fused, 3),
        kept_change_us_per_step=round(kept_delta, 3),
        unplaced_baseline_us_per_step=round(unplaced, 3),
        unplaced_ops=sorted({s.label for s in placed.unplaced if s.label}),
        unmatched_variant_us_per_step=round(unmatched, 3),
        absorbed_gemm_us_per_step=round(absorbed_us, 3),
    )


def _row_of(unit: Unit) -> tuple[str, str, bool]:
    """The row of `compare`'s fusions table a unit counts in: its fused kernel's name, op and direction."""
    return unit.head.name, unit.head.key[1], unit.head.backward


def _missing_gemms(baseline: list[KernelRow], variant: list[KernelRow]) -> list[tuple[str, float, float]]:
    """(kernel, calls per step, baseline µs per step) of the baseline's GEMM kernels the variant launches fewer
    times per step (by name: the same library kernels), in baseline order, less as many calls as the variant's GEMM
    kernels launch beyond the baseline's calls of their names (taken from the first): a GEMM that only changed
    kernel (the library chose another for the compiled program) was not absorbed by a fused kernel."""
    have = {row.name: row.calls_per_step for row in variant if row.category == "gemm"}
    had = {row.name: row.calls_per_step for row in baseline if row.category == "gemm"}
    extra = sum(max(0.0, calls - had.get(name, 0.0)) for name, calls in have.items())
    out = []
    for row in baseline:
        if row.category != "gemm":
            continue
        calls = row.calls_per_step - have.get(row.name, 0.0)
        replaced = min(max(calls, 0.0), extra)  # launched again under another kernel's name
        extra -= replaced
        calls -= replaced
        if calls > 1e-9:
            out.append((row.name, calls, calls * row.mean_us))
    return out


def _unfused_ops(ops: list[OpRow], kernels: list[KernelRow]) -> list[OpRow]:
    category = {row.name: row.category for row in kernels}
    return [op for op in ops if op.kernels and all(category.get(k.name) in MEMORY_BOUND for k in op.kernels)]
