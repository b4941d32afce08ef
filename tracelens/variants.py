"""Which action a variant of a program took, and how far a prediction for it was off: one rule for `compare` and
`check`.

Contract: pure. `ProgramShape` is what a program's trace runs that the actions change (compiled regions, CUDA-graph
replays, launches per step); `possible_actions(before, after)` names the actions `after` may have taken relative to
`before`, `taken_action` the one where there is one (None otherwise); `taken_note` says so in words;
`error_pct(predicted, measured)` is (predicted ÷ measured − 1) × 100. `compare BEFORE AFTER` reads the shapes
from the analyses' `Compiled` results, `check AFTER --expect FILE` from a hypothesis' `before` table and AFTER's
analyze document (docs/actions.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

ACTIONS = (
    "compile",
    "cuda_graphs",
    "compile_reduce_overhead",
    "fuse",
    "gemm_epilogue",
)  # the actions `analyze` predicts (docs/actions.md)


class ProgramShape(msgspec.Struct, frozen=True):
    """What a trace's analyzed steps run that tells its program's variants apart: `compiled_regions`, the rows of
    `compiled.regions` (one per compiled region: frame and recompile), `graph_replays`, the rows of
    `compiled.graph_replays` (CUDA-graph launches, grouped by launch API, op and region) in `analyze --format
    json`, and `launches_per_step` (`per_step.launches`; None where not known). The rules read whether the first
    two are 0, and whether the launches fell; `device` and `gemm_gflop_per_step` tell another program
    (`other_program`)."""

    compiled_regions: int = 0
    graph_replays: int = 0
    launches_per_step: float | None = None
    # which program it is, where known (`program_fingerprint`): the GPU's name, and the GEMM and attention work per
    # step (GFLOP, from the roofline's models), which no action changes
    device: str | None = None
    gemm_gflop_per_step: float | None = None
    # the distinct GFLOP per call of its GEMMs (batched attention GEMMs aside), which no action changes either: two
    # programs of like GEMM work per step (a block and an MLP) differ here
    gemm_gflop_per_call: tuple[float, ...] | None = None
    # the GEMM kernels' time per step (µs; `gemm_kernel_us`): which program it is where the GFLOP are not known
    gemm_us_per_step: float | None = None
    # every analyzed step compiles or captures a CUDA graph (`compiled.warmup_only`): its span is warm-up, not the
    # program's steady step
    warmup_only: bool = False
    # calls per step of kernels Inductor generated (`model.kernel_names.is_inductor_kernel`; None where not
    # known): compiled code inside a program's own CUDA graphs runs no compiled region, only these
    inductor_calls_per_step: float | None = None
    # kernels per step (`per_step.kernels`; None where not known): where both sides replay CUDA graphs, a kernel
    # fused inside a graph leaves the launches (one graph launch) as they were, not the kernels
    kernels_per_step: float | None = None
    # the distinct names of its GEMM kernels (`gemm_kernel_names`; None where it runs none): the library picks
    # them by shape, so they tell another program where the GFLOP are not known (a replay without its capture)
    gemm_kernels: tuple[str, ...] | None = None
    # no ProfilerStep: its one window is the whole trace (`trace.step_source == "whole_trace"`), whose length is
    # not a step time
    whole_trace: bool = False

    def as_before(self) -> dict[str, Any]:
        """The fields a prediction records of the program it was predicted from (`before` in `--predict` files
        and `check`'s JSON): all but `warmup_only` and `whole_trace`, which `check` reads of the trace checked
        (no prediction is written from a whole trace)."""
        fields = {name: getattr(self, name) for name in self.__struct_fields__}
        del fields["warmup_only"], fields["whole_trace"]
        return fields

    def describe(self) -> str:
        """Which of the two it runs, e.g. "compiled regions, no CUDA-graph replays"."""
        regions, replays = self.compiled_regions > 0, self.graph_replays > 0
        if regions and replays:
            return "compiled regions and CUDA-graph replays"
        if regions:
            return "compiled regions, no CUDA-graph replays"
        if replays and self.replays_inductor():
            return "CUDA-graph replays of Inductor's kernels, no compiled regions"
        if replays:
            return "CUDA-graph replays, no compiled regions"
        return "no compiled regions or CUDA-graph replays"

    def replays_inductor(self) -> bool:
        """Whether its CUDA graphs replay compiled code: it replays graphs, runs no compiled region, and runs
        Inductor's kernels (torch.compile's code captured by the program's own `torch.cuda.graph`)."""
        inductor = self.inductor_calls_per_step
        return self.graph_replays > 0 and self.compiled_regions == 0 and inductor is not None and inductor > 0


MODELLED_PCT_FOR_FINGERPRINT = 75.0  # below it, GEMMs may be among the unmodelled kernels (a hand-written one)
GFLOP_ROUNDING = 0.001  # per-call GFLOP are rounded to this: two values one step apart may be one GEMM (decode's)
# a GEMM's GFLOP per call of two variants of one program: its op's work is shared among its kernels differently
# when graph-replayed, so looser than per step; a block's GEMMs and an MLP's of like work per step stay apart
# (docs/check.md#another-program)
SAME_CALL = 0.25
SAME_WORK = 0.10  # GEMM and attention GFLOP per step of two variants of one program: within ±10 % (equal on twins)


BATCHED_GEMMS = ("aten::bmm", "aten::baddbmm")  # attention written out: compile may make them one kernel
# a GEMM of less work a call needs no counterpart on the other side: too small to tell programs apart, and a
# compile may lower a batched one to a plain one (Hugging Face Llama's rotary table, 0.00013 GFLOP: aten::bmm in
# eager, aten::mm compiled); the figures keep it (a counterpart of the other side's may still be needed)
MIN_GFLOP_PER_CALL = 0.002


# where each step's CPU starts this share (%) of its time before earlier steps' GPU work ends (it runs ahead or waits;
# `critical_path.queued_pct`), `analyze`, `check` and `compare` say how far, beside the step's period
QUEUED_NOTE_PCT = 25.0

LAUNCH_MATCH = 0.5  # launches per step within which two counts are the same (an action's is a mean)


def program_fingerprint(
    device: str | None, rows: list[tuple[str, str, int, float]], steps: int, modelled_pct: float | None
) -> tuple[str | None, float | None, tuple[float, ...] | None]:
    """(`device`, GEMM and attention GFLOP per step, the distinct GFLOP per call of its GEMMs) from a roofline:
    the rows' (model, op, calls, GFLOP per call) over `steps` steps; the figures None where the models cover less
    than `MODELLED_PCT_FOR_FINGERPRINT` % of the kernel time, no such work is modelled, or no step was analyzed.
    Batched GEMMs (`BATCHED_GEMMS`) are left out of the per-call figures: compile may replace them."""
    gflop = sum(calls * per_call for model, _, calls, per_call in rows if model in ("gemm", "attention"))
    known = steps > 0 and gflop > 0 and modelled_pct is not None and modelled_pct >= MODELLED_PCT_FOR_FINGERPRINT
    per_call = sorted({round(g, 3) for model, op, _, g in rows if model == "gemm" and op not in BATCHED_GEMMS})
    return (
        (device or None),
        (round(gflop / steps, 3) if known else None),
        (tuple(per_call) if known and per_call else None),
    )


GEMM_TIME_APART = 1.25  # GEMM kernel µs per step this many times apart: another program (twins: docs/check.md)


def gemm_kernel_us(rows: Iterable[tuple[str, float]], steps: int) -> float | None:
    """The GEMM kernels' time per step (µs) from kernel rows' (category, total µs) over `steps` steps; None
    without a step or a kernel."""
    rows = list(rows)
    if steps <= 0 or not rows:
        return None
    return round(sum(total for category, total in rows if category == "gemm") / steps, 3)


# The same GEMM kernels' time per step moved by this much between two recordings of one program (and no more:
# beyond, other work under the same names): another clock or power cap, not the change (compare's `clock_drift`,
# check's `gemm_drift_us`; docs/json.md)
DRIFT_PCT = 5.0
DRIFT_MAX_PCT = 40.0


def gemm_drift_us(before: ProgramShape, after: ProgramShape) -> float | None:
    """How much longer (µs per step; negative: shorter) `after`'s GEMM kernels ran than `before`'s where both run
    the same GEMM kernel names and their time per step moved `DRIFT_PCT` to `DRIFT_MAX_PCT` %: no action changes
    the GEMMs' kernels (the library picks them by shape), so the difference is the GPU's clock; else None."""
    mine, theirs = before.gemm_us_per_step, after.gemm_us_per_step
    names = (before.gemm_kernels, after.gemm_kernels)
    if not mine or theirs is None or not names[0] or not names[1] or set(names[0]) != set(names[1]):
        return None
    change_pct = 100.0 * (theirs / mine - 1)
    return round(theirs - mine, 3) if DRIFT_PCT <= abs(change_pct) <= DRIFT_MAX_PCT else None


WHOLE_TRACE = "whole trace"
WARMUP_ONLY = "warm-up only"
ANOTHER_PROGRAM = "another program"
CAPTURED_COMPILED = "captured compiled code"  # `took`: its own CUDA graphs replay the compiled code it ran


def not_checked(before: ProgramShape, after: ProgramShape) -> tuple[str, str] | None:
    """Why no prediction about `before`'s program is checked on `after`, the first that applies, as (what `after`
    took, why): `WHOLE_TRACE` (either side has no ProfilerStep: a whole trace's length is not a step time), then
    `WARMUP_ONLY` (`warmup_only`: its span is not the changed program's step), then `ANOTHER_PROGRAM`
    (`other_program`: no action's prediction is about it); None where none does (which action it took is
    `taken_action`'s to say). The one order `check` and `compare` follow."""
    if before.whole_trace or after.whole_trace:
        named = (("the prediction's trace", before), ("this trace", after))
        sides = " and ".join(name for name, shape in named if shape.whole_trace)
        return WHOLE_TRACE, f"no ProfilerStep in {sides}: a whole trace's length is not a step time, nothing to check"
    warmup = warmup_only(after)
    if warmup is not None:
        return WARMUP_ONLY, warmup
    other = other_program(before, after)
    if other is not None:
        return ANOTHER_PROGRAM, f"another program than the prediction's ({other})"
    return None


def warmup_only(after: ProgramShape) -> str | None:
    """Why no prediction is checked on `after`'s span: every step it analyzes is warm-up (compiling or capturing
    a CUDA graph, `ProgramShape.warmup_only`); None otherwise."""
    if after.warmup_only:
        return "every step it analyzes is warm-up (compiling or capturing a CUDA graph), not a steady step"
    return None


def other_program(before: ProgramShape, after: ProgramShape, before_name: str = "the prediction") -> str | None:
    """Why `after` is not a variant of `before`'s program (another GPU, or GEMM and attention work per step more
    than `SAME_WORK` apart: no action changes either; where a side that replays CUDA graphs has no known work, GEMM
    kernel time per step more than `GEMM_TIME_APART` times apart, or other GEMM kernels: the library picks them by
    shape, and no action changes the shapes), or None where nothing says so; where a side has no steps
    (`whole_trace`), only the GPU and the GFLOP per call are compared; `before_name` names `before` in the
    reason."""
    if before.device and after.device and before.device != after.device:
        return f"recorded on {after.device}, {before_name} on {before.device}"
    # a whole trace's work is not a step's: only what holds per call is compared where a side has no steps
    per_step = not (before.whole_trace or after.whole_trace)
    work = (before.gemm_gflop_per_step, after.gemm_gflop_per_step) if per_step else (None, None)
    if work[0] is not None and work[1] is not None and abs(work[1] - work[0]) > SAME_WORK * work[0]:
        return f"GEMM and attention work {work[1]:,.1f} GFLOP per step, {before_name}'s program {work[0]:,.1f}"
    mine, theirs = before.gemm_gflop_per_call, after.gemm_gflop_per_call
    if mine and theirs and not (_covers(mine, theirs) and _covers(theirs, mine)):
        shown = [", ".join(_gflop_text(g) for g in c) for c in (theirs, mine)]
        return f"GEMMs of {shown[0]} GFLOP per call, {before_name}'s program {shown[1]}"
    # a side's GFLOP not known because it replays CUDA graphs (their capture, with the ops, not in the trace); not
    # where a hand-written GEMM is not modelled: its kernel is not a `gemm` one, so the times would differ
    unknown_replays = (work[0] is None and before.graph_replays > 0) or (work[1] is None and after.graph_replays > 0)
    if unknown_replays and per_step:
        mine_us, theirs_us = before.gemm_us_per_step, after.gemm_us_per_step
        known = mine_us is not None and theirs_us is not None
        if known and max(mine_us or 0.0, theirs_us or 0.0) > GEMM_TIME_APART * min(mine_us or 0.0, theirs_us or 0.0):
            return f"GEMM kernels {theirs_us:,.1f} µs per step, {before_name}'s program {mine_us:,.1f}"
        kernels = (before.gemm_kernels, after.gemm_kernels)
        if kernels[0] and kernels[1] and set(kernels[0]) != set(kernels[1]):
            return _gemm_kernel_difference(kernels[0], kernels[1], before_name)
    return None


def _gemm_kernel_difference(before: tuple[str, ...], after: tuple[str, ...], before_name: str) -> str:
    """The first GEMM kernel `after` runs that `before` does not, else the reverse, in words (its name cut to
    40 characters)."""
    mine = next((n for n in after if n not in before), None)
    name = mine or next(n for n in before if n not in after)
    shown = name if len(name) <= 40 else name[:39] + "…"
    return f"GEMM kernel {shown} not in {before_name}'s program" if mine else f"no {shown}, which {before_name}'s runs"


def gemm_kernel_names(rows: Iterable[tuple[str, str]]) -> tuple[str, ...] | None:
    """`ProgramShape.gemm_kernels` from kernel rows' (category, name): the distinct names of the GEMM ones,
    sorted; None where there is none."""
    names = sorted({name for category, name in rows if category == "gemm"})
    return tuple(names) if names else None


def _covers(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Whether every value of `a` of at least `MIN_GFLOP_PER_CALL` has one in `b` within `SAME_CALL` (a GEMM's
    GFLOP per call moves with how its op's work is shared among its kernels) or one step of their rounding
    (`GFLOP_ROUNDING`: a decode step's smallest GEMMs read 0.0 in one trace and 0.001 in its twin)."""
    close = SAME_CALL, GFLOP_ROUNDING
    return all(x < MIN_GFLOP_PER_CALL or any(abs(x - y) <= close[0] * max(x, y) + close[1] for y in b) for x in a)


def _gflop_text(gflop: float) -> str:
    """A GFLOP per call as said in a reason: one decimal, three significant digits under 0.1 (not 0.0 for 0.001)."""
    return f"{gflop:,.1f}" if gflop >= 0.1 else f"{gflop:.3g}"


LAUNCH_TOLD = ("fuse", "gemm_epilogue")  # actions that leave no mark but the launches they leave
Launches = Mapping[str, tuple[float, ...]]  # per action, the kernel launches per step each of its predictions leaves


def launch_table(predictions: Iterable[tuple[str | None, float | None]]) -> dict[str, tuple[float, ...]]:
    """`Launches` from (action, launches per step) pairs, one per prediction: every prediction of `fuse` and
    `gemm_epilogue` (`LAUNCH_TOLD`) kept, those without a count left out."""
    table: dict[str, tuple[float, ...]] = {}
    for action, launches in predictions:
        if action in LAUNCH_TOLD and launches is not None:
            table[action] = (*table.get(action, ()), launches)
    return table


def possible_actions(before: ProgramShape, after: ProgramShape, launches: Launches | None = None) -> tuple[str, ...]:
    """The actions `after` may have taken relative to `before`, each of which removes launches: ("cuda_graphs",)
    when only `after` replays CUDA graphs `before` did not, ("compile",) when only `after` runs compiled regions
    `before` did not, or when both replay CUDA graphs and no compiled region and only `after`'s graphs replay
    Inductor's kernels (`ProgramShape.replays_inductor`: the compiled code captured by the program's own graphs),
    ("compile_reduce_overhead",) when `after` runs new compiled regions and replays CUDA graphs, new or not
    (torch.compile's `mode="reduce-overhead"`, in place of no graphs or of the program's own); else
    ("fuse", "gemm_epilogue") where `after` launches fewer kernels per step than `before` (or either count is not
    known): a hand-fused or Liger variant, which leaves no other mark, narrowed by `launches` to the one whose
    predicted launches are nearest `after`'s (`_nearest`), or, where both replay CUDA graphs (one launch runs
    many kernels), where `after` runs fewer kernels per step (`kernels_per_step`, where both are known: no
    prediction says how many, so both); and () where it does not (no action), or where `after`
    lost the compiled regions or CUDA-graph replays `before` ran (undoing an action is none of them), or its own
    graphs replay compiled code where `before` replayed none (`_compiled_and_captured`)."""
    if _lost(before, after) or _compiled_and_captured(before, after):
        return ()
    graphed_before = before.graph_replays > 0 and before.compiled_regions == 0 and before.inductor_calls_per_step == 0
    if graphed_before and after.replays_inductor():  # the program's own graphs now capture compiled code
        return ("compile",)
    new_regions = after.compiled_regions > 0 and before.compiled_regions == 0
    new_replays = after.graph_replays > 0 and before.graph_replays == 0
    if new_regions and after.graph_replays > 0:  # graphs new, or the program's own replaced by torch.compile's
        return ("compile_reduce_overhead",)
    if new_replays:
        return ("cuda_graphs",)
    if new_regions:
        return ("compile",)
    kernels = _graph_run_kernels(before, after)
    if kernels is not None:
        return LAUNCH_TOLD if kernels[1] < kernels[0] else ()
    counts = (before.launches_per_step, after.launches_per_step)
    if counts[0] is None or counts[1] is None or counts[1] < counts[0]:
        return _nearest(after.launches_per_step, launches)
    return ()


def _graph_run_kernels(before: ProgramShape, after: ProgramShape) -> tuple[float, float] | None:
    """(before's, after's) kernels per step where both replay CUDA graphs, run no compiled region and launch as
    many times per step (a kernel fused inside the program's own graphs changes the kernels, not the launches),
    and both counts are known; None otherwise (the launches tell)."""
    kernels, launches = (
        (before.kernels_per_step, after.kernels_per_step),
        (before.launches_per_step, after.launches_per_step),
    )
    graphed = all(s.graph_replays > 0 and s.compiled_regions == 0 for s in (before, after))
    if not graphed or None in kernels or None in launches:
        return None
    if abs((launches[0] or 0.0) - (launches[1] or 0.0)) >= LAUNCH_MATCH:
        return None
    return kernels[0] or 0.0, kernels[1] or 0.0


def _nearest(after_launches: float | None, launches: Launches | None) -> tuple[str, ...]:
    """Of `LAUNCH_TOLD`, the one action with a prediction whose launches per step (`launches`) lie nearest
    `after_launches` (within 0.5 of the nearest); both where that is not one action or nothing is known."""
    if after_launches is None:
        return LAUNCH_TOLD
    told = {
        action: min(abs(after_launches - n) for n in counts)
        for action, counts in (launches or {}).items()
        if action in LAUNCH_TOLD and counts
    }
    if not told:
        return LAUNCH_TOLD
    chosen = tuple(sorted(a for a, d in told.items() if d <= min(told.values()) + LAUNCH_MATCH))
    return chosen if len(chosen) == 1 else LAUNCH_TOLD


def taken_action(before: ProgramShape, after: ProgramShape, launches: Launches | None = None) -> str | None:
    """The one action `after` took relative to `before` (`possible_actions`), or None where that is not one."""
    possible = possible_actions(before, after, launches)
    return possible[0] if len(possible) == 1 else None


def taken_words(before: ProgramShape, after: ProgramShape, launches: Launches | None = None) -> str:
    """What `after` took relative to `before`, in a few words: "compile", "fuse or gemm_epilogue", "no action"
    (`possible_actions`), or where its own graphs now replay compiled code "compile and cuda_graphs" (from an
    eager program) or "captured compiled code" (from a compiled one: `_compiled_and_captured`)."""
    possible = possible_actions(before, after, launches)
    if possible:
        return " or ".join(possible)
    captured = _compiled_and_captured(before, after)
    if captured:
        return "compile and cuda_graphs" if before.compiled_regions == 0 else CAPTURED_COMPILED
    return "no action"


def taken_note(label: str, before: ProgramShape, after: ProgramShape, launches: Launches | None = None) -> str:
    """`possible_actions` in words, about the trace `label`: "compiled_mlp took compile (compiled regions, no
    CUDA-graph replays; before: neither)", "liger_mlp took fuse (no new compiled regions or CUDA-graph replays;
    launches 7 → 6 per step); nearest the launches fuse predicts (6)"."""
    shown_before = "neither" if before.describe() == ProgramShape().describe() else before.describe()
    lost = _lost(before, after)
    if lost:  # undoing an action is none of them
        return f"{label} took no action (it lost the {lost} of the prediction's program)"
    captured = _compiled_and_captured(before, after)
    if captured:
        return f"{label} {captured} ({after.describe()}; before: {shown_before}): no action predicts it"
    took = taken_words(before, after, launches)
    if took in ACTIONS and took not in LAUNCH_TOLD:
        return f"{label} took {took} ({after.describe()}; before: {shown_before})"
    counts = (before.launches_per_step, after.launches_per_step)
    fell = "launches per step not known" if None in counts else f"launches {counts[0]:g} → {counts[1]:g} per step"
    kernels = _graph_run_kernels(before, after)
    if kernels is not None:  # the launches are the graphs'
        fell = f"kernels {kernels[0]:g} → {kernels[1]:g} per step inside its CUDA graphs"
    why = ""
    if took in LAUNCH_TOLD and after.launches_per_step is not None and kernels is None:
        nearest = min((launches or {})[took], key=lambda n: abs(n - (after.launches_per_step or 0.0)))
        why = f"; nearest the launches {took} predicts ({nearest:g})"
        if after.launches_per_step < min((launches or {})[took]) - LAUNCH_MATCH:  # below every one prediction's
            why += ", more than any one prediction removes: it made several such changes"
    return f"{label} took {took} (no new compiled regions or CUDA-graph replays; {fell}){why}"


def _lost(before: ProgramShape, after: ProgramShape) -> str:
    """What `after` no longer runs of `before`'s: "compiled regions", "CUDA-graph replays", both, or "" (compiled
    regions are not lost where `after`'s own graphs replay the compiled code: `replays_inductor`)."""
    lost = [
        what
        for what, was, now in (
            ("compiled regions", before.compiled_regions, 1 if after.replays_inductor() else after.compiled_regions),
            ("CUDA-graph replays", before.graph_replays, after.graph_replays),
        )
        if was > 0 and now == 0
    ]
    return " and ".join(lost)


def _compiled_and_captured(before: ProgramShape, after: ProgramShape) -> str:
    """What `after` did where its own CUDA graphs replay compiled code (`replays_inductor`) and `before` replayed
    no graph, in words ("" otherwise): from an eager `before` (no compiled region, no Inductor kernel) it "took
    compile and cuda_graphs at once"; from a compiled one, it captured its compiled code, not torch.compile's graphs
    (which `cuda_graphs` on a compiled program predicts: the compiled wrapper before each launch). No action's
    prediction is about either."""
    if before.graph_replays > 0 or not after.replays_inductor():
        return ""
    if before.compiled_regions > 0:
        return "captured its compiled code in its own CUDA graphs, not torch.compile's"
    if before.inductor_calls_per_step == 0:
        return "took compile and cuda_graphs at once"
    return ""


def error_pct(predicted: float, measured: float) -> float | None:
    """How far `predicted` is off `measured`: (predicted ÷ measured − 1) × 100, rounded to 3 decimals; None where
    `measured` is 0 or the ratio is not a finite number."""
    try:
        error = 100 * (float(predicted) / float(measured) - 1)
    except (ZeroDivisionError, OverflowError):  # measured 0; an int too large for a float
        return None
    return round(error, 3) if math.isfinite(error) else None
