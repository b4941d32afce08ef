"""What to do next: actions with a model each, ranked by the step time they predict.

Contract: `analyze_actions(ctx) -> Actions`; pure. Each action changes the dependency graph of every analyzed
step (`critical_path.StepGraph`) and replays it (`critical_path.replay_calls`); `predicted_step_us` is the mean
replayed span over those steps, `saved_us` the mean observed span minus it, `low`/`high` the prediction ± the
largest |realized ÷ predicted − 1| that the action's calibration cells show (`HALF_WIDTH`, measured on the
repository's before/after twins and repeat recordings: docs/actions.md). Models
(docs/actions.md):

- `compile` (torch.compile of the step): each run of fusible kernels (elementwise, reduction, norm, copy, fused)
  between GEMMs, attention, convolutions and memsets on a stream becomes one kernel (the launches of the rest of
  the run removed, with their dispatch); every fusion chain fused (its kernels, matched as runs of consecutive
  activities on a stream, `_sequence_matches`, take its kernel time minus the fusion analysis' saving; all but
  the first launch of each run of chain kernels on a stream removed, with their dispatch); the CPU work between the
  launches that remain replaced by Inductor's wrapper: `WRAPPER_US` before the first, `LAUNCH_GAP_US` before each
  other; syncs and the step's tail keep their observed CPU work.
- `cuda_graphs` (capture the step's launches into one graph): GPU work unchanged; the first launch call's CPU
  work becomes the graph launch, `GRAPH_LAUNCH_US` + `GRAPH_KERNEL_US` per captured activity (its start-up and
  the replay's per-kernel gaps), every other launch call and the CPU work before it removed. A graph what-if of
  another analysis can replace this model: `GRAPH_MODELS`.
- `compile_reduce_overhead` (`torch.compile(mode="reduce-overhead")`: compiled, then replayed as one CUDA
  graph): `compile`'s kernels and launches; before the first launch that remains, Inductor's wrapper
  (`WRAPPER_US`) and `GRAPH_KERNEL_US` per launch that remains; every other launch and its CPU work removed. No
  constant of its own.
- `fuse` (one fusion chain, by its ops): that chain's kernels, matched as in `compile` (`_sequence_matches`),
  shortened as in `compile`, one launch kept per chain instance; CPU work otherwise as observed.
- `gemm_epilogue` (a GEMM epilogue opportunity): the pointwise kernels it absorbs take no time, their launches
  and dispatch removed.
Where the program's own CUDA graphs replay most of the steps' GPU work (`GRAPHED_SHARE`) and it runs no compiled
region, `compile` is torch.compile's code captured by those graphs: every chain fused and each written-out
attention one kernel, inside the graphs, the CPU work as observed (a replay runs no wrapper);
`compile_reduce_overhead` is those graphs replaced by torch.compile's (its model above: Inductor's wrapper before
the graph launch). Both are left out there where the graphs' capture is not in the trace (their ops, and what a
compile would fuse, unknown).
Actions the trace does not support (nothing to fuse, no launches) or already takes (`compile` where compiled
regions run or compilation is in the trace, `cuda_graphs` where graphs replay, `compile_reduce_overhead` where
`compile` is left out) are left out; `note` says which and why.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from tracelens.analyses.compiled import Compiled, program_shape
from tracelens.analyses.critical_path import (
    BOUND_LAUNCH,
    BOUND_STREAM,
    CriticalPath,
    StepGraph,
    _observed_step_ns,
    _previous_on_lane,
    _steps_with_gpu,
    _within_budget,
    backward_op_rows,
    gpu_lengths,
    limit_of,
    queued_pct,
    replay_calls,
    savings_of_calls,
    step_graph,
    steps_in_means,
    with_offsets,
)
from tracelens.analyses.fusion import Fusion, FusionOpportunity
from tracelens.analyses.profiler_overhead import host_features
from tracelens.analyses.roofline import Roofline
from tracelens.analyses.summary import Summary
from tracelens.model.cuda_graphs import graph_launch_name_mask, uncaptured_replays
from tracelens.model.events import I64, Bool, Kind, codes_mask
from tracelens.model.kernel_names import CATEGORIES, inductor_calls_per_step, short_name
from tracelens.model.memo import per_trace
from tracelens.model.stats import distinct_ints
from tracelens.model.steps import OPTIMIZER_RANGES, per_step, steps_words
from tracelens.model.trace import WHOLE_TRACE_SOURCE, Trace
from tracelens.units import NS_PER_US, count_text
from tracelens.variants import (
    ProgramShape,
    error_pct,
    gemm_kernel_names,
    gemm_kernel_us,
    launch_table,
    not_checked,
    program_fingerprint,
    taken_action,
    taken_note,
)

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.analyses.context import AnalysisContext

# calibration (docs/actions.md, tests/test_actions.py): medians over the compiled / CUDA-graph twins' steps
WRAPPER_US = 170.9  # compiled twins: CPU work from the step's start to its first launch (median of the medians)
LAUNCH_GAP_US = 23.7  # compiled twins: CPU work between two launches (median of the medians)
GRAPH_LAUNCH_US = 9.0  # pure graph replays (graphs/mlp_graph_replay, block_graph_replay): step start → launch
# per kernel in the graph, the replay's extra start-up and gaps (profiled): fitted on the two pure twins' spans
GRAPH_KERNEL_US = 1.7
# the fused kernel of `fuse`, written by hand in Triton and launched from Python (as Liger's ops are): the CPU work
# before its launch, in units of the trace's median kernel-launch call (`ProfilerFree.launch_us`): the median over
# the Liger GeGLU traces, 10.6-18.2 launch calls on the H200 and H100 recordings, 64-231 µs (docs/actions.md)
FUSED_LAUNCH_CALLS = 13.0
# attention twins (eager softmax(scale·QKᵀ)V → Inductor's one attention kernel): that kernel's time ÷ the two
# batched GEMM kernels it replaces; the midpoint of the fitted H100 twins' median (0.490) and the H200 one (0.645)
ATTENTION_GEMM_SHARE = 0.57
# CPU work that neither a compiled region nor a CUDA graph holds: ranges (name prefixes) whose time stays in the
# step under the compile and cuda_graphs actions (the next batch of a DataLoader is host work outside both)
HOST_ONLY = ("enumerate(DataLoader)#",)
# CPU work that `torch.compile(model)` does not hold: the optimizer's `step()` and `zero_grad()` (the ranges PyTorch
# records around them). Under `compile` and `compile_reduce_overhead` the launches made inside them keep their CPU
# work and their kernels as observed, and the time inside them before any other launch stays before it: on the
# training twins the compiled program launched the same optimizer kernels from the same ranges (4 and 40 a step)
OPTIMIZER = OPTIMIZER_RANGES
OPTIMIZER_NOTE = "; the optimizer kept eager"  # docs/actions.md#the-optimizer-stays-eager
# The range each prediction states (docs/actions.md#stated-ranges, recomputed by tests/test_actions_repeats.py):
# predicted × (1 ± h). Where the changed step is GPU-limited, h is the largest |realized ÷ predicted − 1| over the
# action's GPU-limited calibration cells (the twins of docs/actions.md and the repeat recordings), rounded up to
# 0.01 and never below `MIN_HALF_WIDTH` (about twice what the GPU-bound twins' realized step moves between
# recordings: a check compares two). Where it is CPU-limited, one h for every action, over every action's
# CPU-limited cells: there the host's speed, which moves between recordings whatever the action, dominates.
HALF_WIDTH: dict[str, float] = {
    "compile": 0.18,
    "compile_reduce_overhead": 0.19,
    "cuda_graphs": 0.16,
    "fuse": 0.12,
    "gemm_epilogue": 0.15,
}
CPU_LIMITED_HALF_WIDTH = 0.60
MIN_HALF_WIDTH = 0.10
# How many calibration cells each half-width rests on (the same cells; tests/test_actions_repeats.py counts them):
# a range from fewer than `FEW_CELLS` says so beside it
RANGE_CELLS: dict[str, int] = {
    "compile": 12,
    "compile_reduce_overhead": 1,
    "cuda_graphs": 4,
    "fuse": 1,
    "gemm_epilogue": 1,
}
CPU_LIMITED_CELLS = 30
# `compile` of a program that replays its own CUDA graphs (`_graphed_compile_plan`): the same rule over its 14
# twins (traces/h100/graphs_compiled: `*_graph` → `*_graph_compiled`, all GPU-limited;
# tests/test_actions_graphed_compile.py)
GRAPHED_COMPILE_HALF_WIDTH = 0.16
GRAPHED_COMPILE_CELLS = 14
FEW_CELLS = 3
MAX_ACTIONS = 8
GPU_SHARE = 0.5  # "gpu" only where the changed step's GPU work (2 × its GPU-2× saving) is at least this share of it
LIMIT_WORDS = {"cpu": "cpu-limited", "mixed": "cpu+gpu-limited", "unknown": "limit unknown"}  # not "gpu"


class Action(msgspec.Struct, frozen=True):
    """One action: `action` (compile, cuda_graphs, fuse, gemm_epilogue), what it changes (`targets`: kernels or
    ops), the predicted mean step span (µs) and saving over the analyzed steps, the range from the model's
    calibration error, `basis` (the model and its evidence in one line), and the profiler-free prediction when the
    summary knows a profiler-free step time (the same ratio applied), else None. `limited_by`: what limits the
    changed step, by the rule that decides the observed step's limit (`critical_path.limit_of` of the mean
    savings of the what-ifs that halve its CPU work and its GPU work, replayed on the changed steps): "gpu",
    "cpu", "mixed" or "unknown" (also where the GPU's work is under `GPU_SHARE` of the step); a "gpu" step's
    range is the action's own, the others' the CPU-limited one (`half_width_of`); `low` and `high` are never
    below the changed step's busiest stream's GPU work.
    `predicted_launches_per_step`: the kernel launch calls per step left after the change (mean over the steps;
    what `check` tells `fuse` and `gemm_epilogue` apart by); `range_cells`: how many calibration cells the range's
    half-width rests on."""

    action: str
    targets: list[str]
    predicted_step_us: float
    saved_us: float
    low: float
    high: float
    basis: str
    predicted_profiler_free_step_us: float | None = None
    limited_by: str = "gpu"
    predicted_launches_per_step: float | None = None  # kernel launches per step after the change (mean)
    range_cells: int | None = None  # the calibration cells its range's half-width rests on (`range_cells_of`)


def half_width_of(action: str, limited_by: str, graphed: bool = False) -> float:
    """The relative half-width of the range of `action`'s prediction for a changed step limited by `limited_by`:
    `HALF_WIDTH[action]` where the GPU limits it (`GRAPHED_COMPILE_HALF_WIDTH` for `compile` of a `graphed`
    program, `_graphed_compile_plan`), else (the host's speed counts) `CPU_LIMITED_HALF_WIDTH`."""
    if limited_by != "gpu":
        return CPU_LIMITED_HALF_WIDTH
    return GRAPHED_COMPILE_HALF_WIDTH if graphed and action == "compile" else HALF_WIDTH[action]


def range_cells_of(action: str, limited_by: str, graphed: bool = False) -> int:
    """How many calibration cells the half-width of `half_width_of(action, limited_by, graphed)` rests on."""
    if limited_by != "gpu":
        return CPU_LIMITED_CELLS
    return GRAPHED_COMPILE_CELLS if graphed and action == "compile" else RANGE_CELLS[action]


def range_notes(action: Action, step_us: float) -> list[str]:
    """What the text and the page say beside an action's range: what limits the changed step where the GPU
    alone does not (its range is the wider CPU-limited one: `LIMIT_WORDS`), `may not help` where the range
    reaches the current step (`predicted slower` where the prediction itself is above it), and how many twins it
    rests on where they are fewer than `FEW_CELLS`."""
    notes = [LIMIT_WORDS[action.limited_by]] if action.limited_by in LIMIT_WORDS else []
    if action.range_cells is not None and action.range_cells < FEW_CELLS:
        notes.append(f"from {twins_text(action.range_cells)}")
    if action.saved_us < 0:
        return [*notes, "predicted slower"]
    return notes + (["may not help"] if action.high >= step_us else [])


def helpful(actions: list[Action]) -> list[Action]:
    """The actions predicted to shorten the step (a saving above 0), in their order: what the summary and the
    report's findings name; one predicted to slow the step is in the table only, "predicted slower"."""
    return [a for a in actions if a.saved_us > 0]


def twins_text(cells: int) -> str:
    """How many calibration twins a range rests on, in words: "1 twin", "2 twins"."""
    return count_text(cells, "twin")


class ActionsSummary(msgspec.Struct, frozen=True):
    step_us: float | None  # mean observed span of the analyzed steps (the critical path's step_us)
    profiler_free_step_us: float | None  # from the summary analysis when it has one, else None
    limit: str  # the critical path's limit
    steps: int  # steps replayed
    # mean per replayed step: the time inside the DataLoader's next-batch ranges (`HOST_ONLY`, any thread, their
    # union) within the step's CPU range, which neither compile nor CUDA graphs remove; None where there are none
    data_loading_us: float | None = None


class Actions(msgspec.Struct, frozen=True):
    summary: ActionsSummary
    actions: list[Action]  # largest saving first
    note: str


class _Plan(msgspec.Struct, frozen=True):
    """Per step graph: CPU work and length per call (lists or int64 arrays), new GPU durations, and the step
    replayed (`graph`: the observed one where None; `with_offsets` of it where activities start after their
    constraints differently)."""

    work: list[int] | I64
    duration: list[int] | I64
    gpu_dur: dict[int, int]
    graph: StepGraph | None = None


Model = Callable[[Trace, StepGraph], _Plan]
GRAPH_MODELS: dict[str, Model] = {}  # "cuda_graphs" -> a model from another analysis replaces `_graphs_plan`


def analyze_actions(ctx: AnalysisContext) -> Actions:
    path = ctx.result(CriticalPath)
    fusion = ctx.result(Fusion)
    compiled = ctx.result(Compiled)
    free = _profiler_free_us(ctx.result(Summary))
    # its regions may all overlap compiling; its own CUDA graphs may replay compiled code (no region)
    uses_compile = bool(compiled.regions) or compiled.compile_in_window or _replays_inductor(ctx)
    done = (
        *(("compile",) if uses_compile else ()),
        *(("cuda_graphs",) if compiled.graph_replays else ()),
        *(("compile_reduce_overhead",) if uses_compile else ()),  # not where graphs alone run: see below
    )
    steps = steps_in_means(ctx.trace, _steps_with_gpu(ctx.trace, ctx.steady), path)
    if compiled.warmup_only:  # the steps are the warm-up's: what changes them says nothing of the steady step
        found = actions_of(ctx.trace, steps, fusion, path.limit, free, done, predict=False)
        return msgspec.structs.replace(found, note=WARMUP_NOTE)
    return actions_of(ctx.trace, steps, fusion, path.limit, free, done)


def _replays_inductor(ctx: AnalysisContext) -> bool:
    """`ProgramShape.replays_inductor` of the analyzed steps: CUDA-graph replays, no compiled region, and kernels
    Inductor generated."""
    return _compiled_shape(ctx.result(Compiled), ctx.result(Summary)).replays_inductor()


def _compiled_shape(compiled: Compiled, summary: Summary) -> ProgramShape:
    """The part of `program_of` that the actions' own choice reads: `program_shape` of the compiled analysis and
    the summary's Inductor calls per step."""
    return msgspec.structs.replace(program_shape(compiled), inductor_calls_per_step=_inductor_calls(summary))


def _inductor_calls(summary: Summary) -> float | None:
    """`ProgramShape.inductor_calls_per_step` of the summary's kernel rows."""
    return inductor_calls_per_step([(k.name, k.calls) for k in summary.kernels], summary.steps)


WARMUP_NOTE = (
    "every analyzed step is warm-up (compiling or capturing a CUDA graph), so no action is predicted from it: "
    "profile steps after the warm-up"
)


def _profiler_free_us(summary: Summary) -> float | None:
    """The summary's profiler-free step time (`per_step.profiler_free_step_us` in JSON: measured by `tracelens
    record`, else estimated, docs/profiler_overhead.md), or None where it is unknown."""
    free = summary.profiler_free
    return None if free is None else free.step_us


def actions_of(
    trace: Trace,
    indices: list[int],
    fusion: Fusion,
    limit: str = "unknown",
    profiler_free_us: float | None = None,
    done: tuple[str, ...] = (),
    predict: bool = True,
) -> Actions:
    """The actions over the steps at `indices` (see the module docstring); those in `done` (the program already
    runs compiled regions / CUDA-graph replays) are left out; with `predict` False, none is replayed (the summary
    only: the caller says why)."""
    indices, _ = _within_budget(trace, indices)  # the critical path's steps (their graphs are built once)
    graphs = [g for g in (step_graph(trace, i) for i in indices) if g is not None and g.gpu_start_ns]
    if not graphs:
        return Actions(ActionsSummary(None, profiler_free_us, limit, 0), [], "no analyzed step launched GPU work")
    fused_launch_us = _fused_launch_us(trace, indices)
    per = per_step(trace.steps.source)  # "/step", or "" over the whole trace
    observed = sum(_span(g) for g in graphs) / len(graphs)
    chains = [o for o in fusion.opportunities if o.kind == "chain"]
    epilogues = [o for o in fusion.opportunities if o.kind == "gemm_epilogue"]
    candidates: list[tuple[str, list[str], Model, str]] = []
    left_out: list[str] = []  # actions not modelled on this trace, each with why
    graphed = False  # the program replays its own CUDA graphs: `compile` is `_graphed_compile_plan`
    if predict and any(not s for g in graphs for s in g.call_is_sync):
        written_out = _math_attention(trace, indices)
        rewrites = {g.step_index: _attention_rewrite(trace, g) for g in graphs} if written_out else {}
        attention = any(rewrites.values())
        note = (ATTENTION_NOTE if attention else MATH_ATTENTION_NOTE) if written_out else ""
        note += OPTIMIZER_NOTE if any(_optimizer_calls(trace, g).any() for g in graphs) else ""
        compile_model = _per_step(
            functools.partial(_compile_plan, chains=chains, rewrites=rewrites if attention else {})
        )
        graphed = "compile" not in done and _replayed_share(trace, graphs) > GRAPHED_SHARE  # its own graphs
        uncaptured = graphed and _uncaptured_in(trace, indices)
        if uncaptured:
            left_out.append(UNCAPTURED_NOTE)
        elif graphed:
            in_graphs = functools.partial(_graphed_compile_plan, chains=chains, rewrites=rewrites if attention else {})
            candidates.append(("compile", ["the step"], in_graphs, f"{len(chains)} chain(s) fused" + GRAPHED_BASIS))
        else:
            candidates.append(
                (
                    "compile",
                    ["the step"],
                    compile_model,
                    f"{len(chains)} chain(s) fused; launches {{before}} → {{after}}{per}; CPU: Inductor wrapper model"
                    + note,
                )
            )
        if not uncaptured:
            candidates.append(
                (
                    "compile_reduce_overhead",
                    ["the step"],
                    functools.partial(_reduce_overhead_plan, compile_model=compile_model),
                    f"{len(chains)} chain(s) fused; launches {{before}} → {{graphs}}; CPU: compile's wrapper" + note,
                )
            )
        graph_model = GRAPH_MODELS.get("cuda_graphs", functools.partial(_graphs_plan, compiled="compile" in done))
        candidates.append(
            (
                "cuda_graphs",
                ["the step's launches"],
                graph_model,
                "launches {before} → {graphs}; GPU work unchanged",
            )
        )
    for chain in _by_kernels(chains)[:3] if predict else []:
        candidates.append(
            (
                "fuse",
                list(chain.ops),
                functools.partial(_chain_plan, chain=chain, launch_ns=round((fused_launch_us or 0.0) * NS_PER_US)),
                f"{len(chain.kernels)} kernels × {chain.calls_per_step:g}{per}, {chain.kernel_us_per_step:,.1f} "
                f"µs{per}; one kernel's memory traffic saves {chain.est_saving_us:,.1f} µs; "
                "launches {before} → {after}; " + _launch_words(fused_launch_us),
            )
        )
    for epilogue in _by_kernels(epilogues)[:2] if predict else []:
        candidates.append(
            (
                "gemm_epilogue",
                list(epilogue.ops),
                functools.partial(_epilogue_plan, epilogue=epilogue),
                f"{epilogue.kernel_us_per_step:,.1f} µs{per} of pointwise kernels into the GEMM epilogue; "
                "launches {before} → {after}",
            )
        )
    actions = [
        _predict(trace, graphs, observed, name, targets, model, basis, profiler_free_us, graphed)
        for name, targets, model, basis in candidates
        if name not in done
    ]
    actions.sort(key=lambda a: -a.saved_us)
    note = (
        f"each action replayed over {steps_words(len(graphs), trace.steps.source)}; ranges from the calibration "
        "on twins (docs/actions.md)"
    )
    if not actions:  # said first: why there is nothing to rank
        note = "no modelled action is left: " + "; ".join(
            [
                *(["the program already does " + _done_words(done)] if done else []),
                *left_out,
                "no fusion chain or epilogue found",
            ]
        )
    else:
        if not chains:
            note += "; no fusion chain found (fuse: none)"
        if done:
            note += f"; left out, the program already does it: {_done_words(done)}"
        note += "".join("; " + why for why in left_out)
    loading = _data_loading_us(trace, graphs)
    summary = ActionsSummary(_r(observed), profiler_free_us, limit, len(graphs), loading)
    return Actions(summary, actions[:MAX_ACTIONS], note)


def _done_words(done: tuple[str, ...]) -> str:
    """The actions in `done`, said as what the program does: `compile_reduce_overhead` of a program that compiles
    (with the default mode) is its CUDA graphs on top, which `cuda_graphs` models where it has none."""
    words = [name for name in done if name != "compile_reduce_overhead"]
    if "compile_reduce_overhead" in done:
        words.append(
            "compile_reduce_overhead (it compiles; its graphs: cuda_graphs)"
            if "cuda_graphs" not in done
            else "compile_reduce_overhead"
        )
    return ", ".join(words)


def _data_loading_us(trace: Trace, graphs: list[StepGraph]) -> float | None:
    """Mean over `graphs` of the ns inside the union of every thread's `HOST_ONLY` ranges within the step's CPU
    range ([start_ns, cpu_end_ns)), in µs; None where the trace has no such range."""
    ranges = _host_only_ranges(trace)
    if not ranges:
        return None
    merged = _merged(sorted(r for rows in ranges.values() for r in rows))
    total = 0
    for graph in graphs:
        start, end = graph.start_ns, graph.cpu_end_ns
        total += sum(max(0, min(hi, end) - max(lo, start)) for lo, hi in merged)
    return _r(total / len(graphs) / NS_PER_US)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted (start, end) ranges merged where they overlap."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _predict(
    trace: Trace,
    graphs: list[StepGraph],
    observed_us: float,
    name: str,
    targets: list[str],
    model: Model,
    basis: str,
    profiler_free_us: float | None,
    graphed: bool = False,
) -> Action:
    """Action `name` replayed by `model` over `graphs` (its range: `half_width_of(name, limit, graphed)`)."""
    spans = []
    busiest_lane_us = []
    before = after = eager = 0  # eager: launches kept outside the graphs (the optimizer's, reduce-overhead)
    cpu_saved_ns = gpu_saved_ns = 0
    for observed_graph in graphs:
        plan = model(trace, observed_graph)
        graph = plan.graph or observed_graph
        step_ns = replay_calls(graph, plan.work, plan.duration, plan.gpu_dur).step_ns
        spans.append(step_ns / NS_PER_US)
        cpu_ns, gpu_ns = savings_of_calls(graph, plan.work, plan.duration, plan.gpu_dur, step_ns)
        cpu_saved_ns += cpu_ns
        gpu_saved_ns += gpu_ns
        busiest_lane_us.append(_busiest_lane_ns(graph, plan.gpu_dur) / NS_PER_US)
        launches = ~graph.cpu_columns[2]
        before += int(launches.sum())
        kept = (np.asarray(plan.duration, dtype=np.int64) > 0) | (np.asarray(plan.work, dtype=np.int64) > 0)
        after += int((launches & kept).sum())
        if name == "compile_reduce_overhead":
            eager += int((launches & kept & _optimizer_calls(trace, observed_graph)).sum())
    predicted = sum(spans) / len(spans)
    n = len(graphs)
    per = per_step(trace.steps.source)
    graphs_words = f"1 graph launch{per}"  # a graph per run between host syncs (`_graph_segments`)
    if round((after - eager) / n) > 1:
        graphs_words = f"{(after - eager) / n:.0f} graph launches{per} (host syncs split it)"
    if round(eager / n):
        graphs_words += f" + {eager / n:.0f} optimizer launches"
    basis = basis.format(before=f"{before / n:.0f}", after=f"{after / n:.0f}", graphs=graphs_words)
    busiest_us = sum(busiest_lane_us) / n
    limited_by = limit_of(cpu_saved_ns / n / NS_PER_US, gpu_saved_ns / n / NS_PER_US)  # the Limit line's rule
    if limited_by == "gpu" and 2 * gpu_saved_ns / n / NS_PER_US < GPU_SHARE * predicted:
        limited_by = "unknown"  # the GPU's work is a small part of the step: neither side sets most of it
    half_width = half_width_of(name, limited_by, graphed)
    free = None
    if profiler_free_us is not None and observed_us > 0:
        # the profiler slows the host, not the kernels: no step is shorter than its busiest stream's GPU work; an
        # action that shortens the profiled step does not lengthen the program without the profiler
        free = max(profiler_free_us * predicted / observed_us, busiest_us)
        free = min(free, profiler_free_us) if predicted <= observed_us else free
        free = _r(min(free, predicted))  # and the profiler never makes a program faster: not above the profiled step
    return Action(
        action=name,
        targets=targets,
        predicted_step_us=_r(predicted),
        saved_us=_r(observed_us - predicted),
        low=_r(max(predicted * (1 - half_width), busiest_us)),  # no step is shorter than its busiest stream's work
        high=_r(max(predicted * (1 + half_width), busiest_us)),
        basis=basis,
        predicted_profiler_free_step_us=free,
        limited_by=limited_by,
        predicted_launches_per_step=round(after / n, 3),
        range_cells=range_cells_of(name, limited_by, graphed),
    )


def _busiest_lane_ns(graph: StepGraph, gpu_dur: dict[int, int]) -> int:
    """The GPU time of the step's busiest lane (stream) after the change: the activities of one lane run one
    after another, so the changed step lasts at least this long whatever the host does."""
    if not graph.activities.lane.size:
        return 0
    duration = gpu_lengths(graph, gpu_dur)
    lane = graph.gpu_columns.lane
    per_lane = np.zeros(int(lane.max()) + 1, dtype=np.int64)
    np.add.at(per_lane, lane, duration)
    return int(per_lane.max())


def _span(graph: StepGraph) -> float:
    return _observed_step_ns(graph) / NS_PER_US


def _matches(
    trace: Trace, graph: StepGraph, kernels: list[str], calls_per_step: float = 0.0, claimed: Bool | None = None
) -> list[bool]:
    """Which activities of the step run one of `kernels` (by short name), none of them `claimed`. With
    `calls_per_step`, each name matches at most (its count in `kernels`) × round(calls_per_step) activities, the
    first in stream order: a chain of one `mul` does not take every `mul` of the step. (Without `claimed`, two
    chains that share names may take each other's kernels: `_sequence_matches` passes it, where it falls back to
    names.)"""
    names = trace.events.names
    wanted = set(kernels)
    left = {name: kernels.count(name) * max(1, round(calls_per_step)) for name in wanted} if calls_per_step else None
    out = []
    for k, code in enumerate(graph.gpu_name):
        name = short_name(names[code])
        hit = name in wanted and not (claimed is not None and bool(claimed[k]))
        if hit and left is not None:
            hit = left[name] > 0
            left[name] -= 1
        out.append(hit)
    return out


def _sequence_matches(
    trace: Trace, graph: StepGraph, kernels: list[str], calls_per_step: float, claimed: Bool
) -> list[bool]:
    """Which activities of the step run the chain `kernels`: its occurrences as consecutive activities of one
    stream (by short name, in stream order), none of them `claimed` (by another chain of the same plan), at most
    round(`calls_per_step`) of them (all where 0); where fewer occur so (the chain's kernels interleaved with
    others), topped up by its occurrences among the stream's fusible kernels alone (`_fusible_mask`: a GEMM
    between silu and mul) up to that number; where it occurs nowhere either, `_matches` among the kernels not
    claimed."""
    names = _short_names(trace)[graph.gpu_columns.name]
    lane, chain = graph.gpu_columns.lane, tuple(kernels)
    found = _occurrences(names, lane, chain, calls_per_step, claimed)
    wanted = max(1, round(calls_per_step)) if calls_per_step else 0
    left = wanted - int(found.sum()) // len(chain) if wanted else (0 if found.any() else names.size)
    if left > 0:
        fusible = np.flatnonzero(_fusible_mask(trace, graph))
        taken = (claimed | found)[fusible]
        found[fusible[_occurrences(names[fusible], lane[fusible], chain, float(left), taken)]] = True
    if found.any():
        return found.tolist()  # type: ignore[no-any-return]
    return _matches(trace, graph, kernels, calls_per_step, claimed)


def _occurrences(names: np.ndarray, lane: I64, kernels: tuple[str, ...], calls_per_step: float, claimed: Bool) -> Bool:
    """The activities (in start order, their short `names` and stream `lane`) of the first occurrences of the
    sequence `kernels` as consecutive activities of one lane, none `claimed`, at most round(`calls_per_step`)
    (all where 0)."""
    out = np.zeros(names.size, dtype=bool)
    budget = max(1, round(calls_per_step)) if calls_per_step else names.size
    size = len(kernels)
    per_lane = [np.flatnonzero(lane == one) for one in distinct_ints(lane).tolist()]
    for on_lane in sorted(per_lane, key=lambda rows: int(rows[0])):
        starts = on_lane.size - size + 1
        if starts <= 0 or budget <= 0:
            continue
        seq = names[on_lane]
        whole = np.ones(starts, dtype=bool)  # where the sequence starts (all its names in place), vectorized
        for offset, name in enumerate(kernels):
            whole &= seq[offset : offset + starts] == name
        free_from = 0  # taken occurrences do not overlap: scanning in order, each taken one skips its length
        for i in np.flatnonzero(whole).tolist():
            if budget <= 0:
                break
            rows = on_lane[i : i + size]
            if i >= free_from and not claimed[rows].any():
                out[rows] = True
                budget -= 1
                free_from = i + size
    return out


@per_trace
def _short_names(trace: Trace) -> np.ndarray:
    """Per name code: its kernel's short name (`model.kernel_names.short_name`), as an object array."""
    return np.array([short_name(name) for name in trace.events.names], dtype=object)


def _fused_plan(
    trace: Trace,
    graph: StepGraph,
    chains: list[FusionOpportunity],
    per_instance: bool = False,
    head_work_ns: int | None = None,
) -> _Plan:
    """The chains' kernels (matched as sequences, `_sequence_matches`, each activity in one chain at most)
    shortened by their fused saving; the launches of all but the kernels named like each chain's first removed (no
    CPU work, no call time); with `per_instance` (`fuse`), of all but one per chain instance (`_heads`: a chain of
    one kernel name keeps one launch, not all); with `head_work_ns`, that CPU work before each launch kept (the
    fused kernel's). Until 2026-12-07 chains were matched by name, where the first activities of each name took
    other kernels of those names: fewer than half of the HF Llama chains' time."""
    work, duration = graph.calls.work_ns.copy(), graph.calls.dur_ns.copy()
    gpu_dur: dict[int, int] = {}
    claimed = np.zeros(len(graph.gpu_columns.name), dtype=bool)
    for chain in chains:
        match = _sequence_matches(trace, graph, chain.kernels, chain.calls_per_step, claimed)
        claimed |= np.asarray(match, dtype=bool)
        factor = max(0.0, 1.0 - chain.est_saving_us / chain.kernel_us_per_step) if chain.kernel_us_per_step else 1.0
        heads = _heads(trace, graph, chain, match, per_instance)
        for k, hit in enumerate(match):
            if not hit:
                continue
            gpu_dur[k] = round(graph.gpu_dur_ns[k] * factor)
            call = _own_launch(trace, graph, k)
            if call >= 0 and k not in heads:
                work[call], duration[call] = 0, 0
            elif call >= 0 and head_work_ns is not None:
                work[call] = head_work_ns
    return _Plan(work, duration, gpu_dur)


def _heads(
    trace: Trace, graph: StepGraph, chain: FusionOpportunity, match: list[bool], per_instance: bool = True
) -> set[int]:
    """The matched activities whose launch becomes the fused kernel's: those named like the chain's first kernel;
    with `per_instance`, only the first ones (in stream order), one per instance of the chain in the step (its
    calls per step, at least one), so a chain of one kernel name (copy_ → copy_) keeps one launch per instance."""
    names = trace.events.names
    budget = max(1, round(chain.calls_per_step)) if per_instance else len(match)
    heads: set[int] = set()
    for k, hit in enumerate(match):
        if hit and len(heads) < budget and short_name(names[graph.gpu_name[k]]) == chain.kernels[0]:
            heads.add(k)
    return heads


MATH_ATTENTION = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
SDPA = ("aten::scaled_dot_product_attention",)
ATTENTION_GEMMS = ("aten::bmm", "aten::baddbmm")
ATTENTION_BETWEEN = ("aten::mul", "aten::div", "aten::mul_", "aten::div_", *MATH_ATTENTION)
ATTENTION_NOTE = (
    "; softmax(QKᵀ)V written out: modelled as Inductor's one attention kernel "
    f"({ATTENTION_GEMM_SHARE:.2f}× its two GEMMs: docs/actions.md#attention-written-out)"
)
MATH_ATTENTION_NOTE = (
    "; attention written out with a mask, dropout, cast or other op: one attention kernel not modelled "
    "(docs/actions.md#attention-written-out)"
)


def _math_attention(trace: Trace, indices: list[int]) -> bool:
    """Whether the steps at `indices` run attention written out (a softmax op and batched GEMMs, no
    `scaled_dot_product_attention`): Inductor's pattern matcher can turn it into one fused attention kernel."""
    names = trace.events.names
    in_steps = codes_mask(trace.links.step, indices) & (trace.events.kind == Kind.CPU_OP)
    ops = {names[code] for code in distinct_ints(trace.events.name[in_steps]).tolist()}
    return bool(ops & set(MATH_ATTENTION)) and "aten::bmm" in ops and not ops & set(SDPA)


def _fused_launch_us(trace: Trace, indices: list[int]) -> float | None:
    """The CPU work before a fused kernel's launch under `fuse`: FUSED_LAUNCH_CALLS × the median kernel-launch call
    of the steps at `indices`; None where they launch no kernel of their own (CUDA-graph replays only: a fused
    kernel captured into the graph has no launch of its own)."""
    host = host_features(trace, indices)
    if host is None or host.launch_us is None:
        return None
    return FUSED_LAUNCH_CALLS * host.launch_us


def _launch_words(fused_launch_us: float | None) -> str:
    """How `fuse` models the fused kernel's launch, for its evidence line."""
    if fused_launch_us is None:
        return "the fused kernel inside the CUDA graph, no launch of its own"
    return f"a Triton kernel launched from Python (as Liger's), modelled at {fused_launch_us:,.1f} µs CPU"


def _chain_plan(trace: Trace, graph: StepGraph, chain: FusionOpportunity, launch_ns: int) -> _Plan:
    """`_fused_plan` of one chain, each fused kernel's launch preceded by `launch_ns` of CPU work (a Triton kernel
    launched from Python: `FUSED_LAUNCH_CALLS`) in place of the first op's observed dispatch."""
    return _fused_plan(trace, graph, [chain], per_instance=True, head_work_ns=launch_ns)


def _unclaimed(graph: StepGraph) -> Bool:
    """No activity of the step claimed (one chain matched alone)."""
    return np.zeros(len(graph.gpu_columns.name), dtype=bool)


def _own_launch(trace: Trace, graph: StepGraph, k: int) -> int:
    """The call that launched activity `k` alone, or -1: none, or a CUDA-graph launch, which replays more
    kernels than the one a fusion removes and stays (the fused kernel runs inside the graph)."""
    call = int(graph.gpu_launch_call[k])
    return -1 if call < 0 or _graph_launch_calls(trace, graph)[call] else call


def _graph_launch_calls(trace: Trace, graph: StepGraph) -> Bool:
    """Per call of the step: whether it is a CUDA-graph launch (`model.cuda_graphs.GRAPH_LAUNCH_NAMES`)."""
    return _graph_launch_names(trace)[trace.events.name[graph.calls.row]]


@per_trace
def _graph_launch_names(trace: Trace) -> Bool:
    """Per name code: whether it names a CUDA-graph launch (`model.cuda_graphs.graph_launch_name_mask`)."""
    return graph_launch_name_mask(trace.events)


FUSIBLE = frozenset(CATEGORIES.index(c) for c in ("elementwise", "reduction", "norm", "copy", "fused"))


def _fusible_runs(trace: Trace, graph: StepGraph) -> set[int]:
    """Calls Inductor would not make: the launches of fusible kernels (elementwise, reduction, norm, copy
    kernels, already-fused kernels) that directly follow another fusible kernel on their stream (each run of
    them between GEMMs, attention, convolutions and memsets becomes one kernel)."""
    return set(_fusible_run_calls(trace, graph).tolist())


def _fusible_run_calls(trace: Trace, graph: StepGraph, eager: Bool | None = None) -> I64:
    """`_fusible_runs` as an array of call indices (in activity order; a call may repeat); with `eager` (per call:
    launches the change leaves as they are), a kernel those launched neither joins nor continues a run."""
    columns = graph.gpu_columns
    fusible = _fusible_mask(trace, graph)
    call = columns.launch_call
    if eager is not None and eager.any():
        fusible = fusible & ~((call >= 0) & eager[np.maximum(call, 0)])
    previous = _previous_on_lane(columns.lane)  # on the same stream, -1 = none
    after_fusible = (previous >= 0) & fusible[np.maximum(previous, 0)]
    own = call >= 0
    graph_launch = own & _graph_launch_calls(trace, graph)[np.maximum(call, 0)]  # it replays the others too: stays
    return call[fusible & after_fusible & own & ~graph_launch]


def _fusible_mask(trace: Trace, graph: StepGraph) -> Bool:
    """Per activity of the step: whether its kernel is fusible (`FUSIBLE` categories; not a copy)."""
    columns = graph.gpu_columns
    return codes_mask(columns.category, sorted(FUSIBLE)) & ~_memcpy_names(trace)[columns.name]  # type: ignore[no-any-return]


@per_trace
def _memcpy_names(trace: Trace) -> Bool:
    """Per name code: whether the name is a copy's (`Memcpy...`)."""
    return np.array([name.startswith("Memcpy") for name in trace.events.names], dtype=bool)


def _by_kernels(opportunities: list[FusionOpportunity]) -> list[FusionOpportunity]:
    """One per distinct kernel sequence (the short names in stream order), in order: opportunities over the same
    sequence (one per layer, or per shape of a sweep) are one action, whose figures are their totals and whose
    plan matches as many instances per step as they run together (`_matches` takes `calls_per_step`)."""
    merged: dict[tuple[str, ...], FusionOpportunity] = {}
    for opportunity in opportunities:
        key = tuple(opportunity.kernels)
        first = merged.get(key)
        merged[key] = (
            opportunity
            if first is None
            else msgspec.structs.replace(
                first,
                calls_per_step=first.calls_per_step + opportunity.calls_per_step,
                kernel_us_per_step=first.kernel_us_per_step + opportunity.kernel_us_per_step,
                est_saving_us=first.est_saving_us + opportunity.est_saving_us,
            )
        )
    return list(merged.values())


def _compile_plan(
    trace: Trace,
    graph: StepGraph,
    chains: list[FusionOpportunity],
    rewrites: dict[int, list[tuple[int, list[int]]]] | None = None,
) -> _Plan:
    """`_fused_plan` of every chain, each run of fusible kernels one launch (`_fusible_runs`), each written-out
    attention in `rewrites` (per step index, `_attention_rewrite` of its graph, found once) one kernel; Inductor's
    wrapper in place of the CPU work before each launch that remains."""
    fused = _fused_plan(trace, graph, chains)
    work, duration = np.asarray(fused.work, dtype=np.int64), np.asarray(fused.duration, dtype=np.int64)  # its own
    runs = _fusible_run_calls(trace, graph, _optimizer_calls(trace, graph))
    work[runs], duration[runs] = 0, 0
    _rewrite_attention(trace, graph, (rewrites or {}).get(graph.step_index, []), _Plan(work, duration, fused.gpu_dur))
    host = _host_only_work_ns(trace, graph, with_optimizer=True)
    # the optimizer stays eager: its calls keep their length and, before them, the CPU work inside its ranges (not
    # the wait for the backward pass on another thread, which the compiled backward shortens), its kernels their
    # observed durations (no fusion, no run merged)
    eager = _optimizer_calls(trace, graph)
    work[eager], duration[eager] = host[eager], graph.cpu_columns[1][eager]
    call = graph.gpu_columns.launch_call
    for k in np.flatnonzero((call >= 0) & eager[np.maximum(call, 0)]).tolist():
        fused.gpu_dur.pop(k, None)
    kept = np.flatnonzero(~graph.cpu_columns[2] & (duration != 0) & ~eager)
    if kept.size:  # Inductor's wrapper before the first launch that remains, its launch gap before each other
        work[kept] = host[kept] + round(LAUNCH_GAP_US * NS_PER_US)
        work[kept[0]] = host[kept[0]] + round(WRAPPER_US * NS_PER_US)
    return _Plan(work, duration, fused.gpu_dur)


def _optimizer_calls(trace: Trace, graph: StepGraph) -> Bool:
    """Per call of the step: whether it starts inside an `OPTIMIZER` range on its own thread (made once per step:
    the models ask several times; a changed graph keeps its calls). Read-only."""
    memo = _optimizer_calls_memo(trace)
    if graph.step_index not in memo:
        memo[graph.step_index] = _optimizer_calls_of(trace, graph)
        memo[graph.step_index].setflags(write=False)
    return memo[graph.step_index]


@per_trace
def _optimizer_calls_memo(trace: Trace) -> dict[int, Bool]:
    """`_optimizer_calls` of each step made so far, by step index."""
    return {}


def _optimizer_calls_of(trace: Trace, graph: StepGraph) -> Bool:
    _, call_start, _, _ = graph.native_arrays[1]
    inside = np.zeros(len(call_start), dtype=bool)
    threads = graph.calls.thread.astype(np.int64)
    for thread, spans in _optimizer_ranges(trace).items():
        calls = np.flatnonzero(threads == thread)
        if not calls.size:
            continue
        begin, end = (np.asarray(column, dtype=np.int64) for column in zip(*spans, strict=True))  # merged, sorted
        at = call_start[calls]
        last = np.searchsorted(begin, at, side="right") - 1  # the last range starting at or before the call
        inside[calls] = (last >= 0) & (at < end[np.maximum(last, 0)])
    return inside


GRAPHED_SHARE = 0.5  # a program whose CUDA graphs replay more of the steps' GPU activities than this is "graphed"
GRAPHED_BASIS = (
    " inside the program's CUDA graphs (the compiled code captured: a replay runs no wrapper); CPU as observed"
)
UNCAPTURED_NOTE = (
    "compile, compile_reduce_overhead: no capture in the trace (or given with --capture) matches the CUDA graphs' "
    "kernels, so their ops and what compiling would fuse are unknown (record the capture: `tracelens record "
    "--skip 0`, or pass its trace with --capture)"
)


def _graphed_compile_plan(
    trace: Trace,
    graph: StepGraph,
    chains: list[FusionOpportunity],
    rewrites: dict[int, list[tuple[int, list[int]]]] | None = None,
) -> _Plan:
    """`compile` of a program whose kernels its own CUDA graphs replay (torch.cuda.graph around the compiled
    code): every chain's kernels shortened as in `_compile_plan` (matched as sequences: `_sequence_matches`) and
    each written-out attention in `rewrites` one kernel, inside the graphs; the CPU work as observed (a replay
    runs none of the compiled code's Python, and the graph launch stays); launches of their own (outside the
    graphs) follow `_fused_plan`. A fused chain keeps its kernels (shortened) and the written-out attention's
    removed kernels take no time; each run of fusible
    kernels in a graph (as `_fusible_runs`) and each removed kernel is taken out of the graph: it starts as its
    stream predecessor ends (its gap gone), and each graph's start-up (its launch to its first kernel) shrinks
    in proportion to the kernels it keeps (`_graph_start_ups`)."""
    fused = _fused_plan(trace, graph, chains)
    _rewrite_attention(trace, graph, (rewrites or {}).get(graph.step_index, []), fused)
    changed = _graph_start_ups(graph, _taken_out_of_graphs(trace, graph, fused.gpu_dur))
    return _Plan(fused.work, fused.duration, fused.gpu_dur, changed)


def _taken_out_of_graphs(trace: Trace, graph: StepGraph, gpu_dur: dict[int, int]) -> Bool:
    """Per activity of the step: whether compiling takes it out of the CUDA graph that replays it, merged into
    the kernel before it: a fusible kernel (`FUSIBLE`, not a copy) after a fusible one on its stream in the same
    replay, or one whose new length in `gpu_dur` is 0 (a written-out attention's removed GEMM or softmax)."""
    columns = graph.gpu_columns
    call = columns.launch_call
    in_graph = (call >= 0) & _graph_launch_calls(trace, graph)[np.maximum(call, 0)]
    fusible = _fusible_mask(trace, graph)
    previous = _previous_on_lane(columns.lane)
    before = np.maximum(previous, 0)
    run = (previous >= 0) & fusible & fusible[before] & (call[before] == call)
    gone = np.zeros(call.size, dtype=bool)
    gone[[k for k, ns in gpu_dur.items() if ns == 0]] = True
    return in_graph & (run | gone)  # type: ignore[no-any-return]


def _graph_start_ups(graph: StepGraph, taken: Bool) -> StepGraph:
    """`graph` (`with_offsets`) with the activities `taken` out of their CUDA graphs: each that starts after its
    stream predecessor starts as that one ends (0 ns); for each graph launch whose first activity (in start
    order) starts after the launch (its start-up, which grows with the graph's kernels on the block's twins),
    that activity after the start-up × the share of the launch's activities kept, and no activity of that launch
    held later by the old start-up; a launch whose first activity waits for something else keeps its start."""
    binding, offset = graph.constraints.binding, graph.constraints.offset
    offsets = {k: 0 for k in np.flatnonzero(taken).tolist() if binding[k] == BOUND_STREAM}
    floors: dict[int, int] = {}
    call = graph.gpu_columns.launch_call
    for launch in np.unique(call[taken]).tolist():
        replayed = np.flatnonzero(call == launch).tolist()
        kept_share = 1.0 - float(taken[replayed].sum()) / len(replayed)
        for k in replayed[:1] if binding[replayed[0]] == BOUND_LAUNCH else []:
            offsets[k] = round(offset[k] * kept_share)
            floors.update(dict.fromkeys(replayed, offsets[k]))
    return with_offsets(graph, offsets, floors)


def _rewrite_attention(trace: Trace, graph: StepGraph, matches: list[tuple[int, list[int]]], plan: _Plan) -> None:
    """Change `plan` in place: each written-out attention of `matches` (`_attention_rewrite` of `graph`) one
    kernel, its first GEMM's activity taking `ATTENTION_GEMM_SHARE` of the two GEMMs' time, the rest removed with
    the launches of their own (a CUDA-graph launch stays: it replays the rest of the graph)."""
    for first, removed in matches:
        plan.gpu_dur[first] = round(ATTENTION_GEMM_SHARE * (graph.gpu_dur_ns[first] + graph.gpu_dur_ns[removed[-1]]))
        for k in removed:
            plan.gpu_dur[k] = 0
            call = _own_launch(trace, graph, k)
            if call >= 0:
                plan.work[call], plan.duration[call] = 0, 0


def _replayed_share(trace: Trace, graphs: list[StepGraph]) -> float:
    """Of the GPU activities the steps' calls launched, the share that CUDA-graph launches replayed."""
    launched = replayed = 0
    for graph in graphs:
        call = graph.gpu_columns.launch_call
        own = call >= 0
        launched += int(own.sum())
        replayed += int(_graph_launch_calls(trace, graph)[call[own]].sum())
    return replayed / launched if launched else 0.0


@per_trace
def _uncaptured_rows(trace: Trace) -> np.ndarray:
    """The replayed kernels of the trace that no capture matched, in it or grafted from `--capture`
    (`model.cuda_graphs.uncaptured_replays`)."""
    return uncaptured_replays(trace.events, trace.links.launch, trace.links.op)


def _uncaptured_in(trace: Trace, indices: list[int]) -> bool:
    """Whether a kernel of the steps at `indices` is replayed by a CUDA graph whose capture is not in the trace."""
    rows = _uncaptured_rows(trace)
    return bool(rows.size) and bool(codes_mask(trace.links.step[rows], indices).any())


def _per_step(model: Model) -> Model:
    """`model`, each step graph's plan made once (by its step index; a plan is never changed by its users)."""
    plans: dict[int, _Plan] = {}

    def planned(trace: Trace, graph: StepGraph) -> _Plan:
        if graph.step_index not in plans:
            plans[graph.step_index] = model(trace, graph)
        return plans[graph.step_index]

    return planned


def _reduce_overhead_plan(trace: Trace, graph: StepGraph, compile_model: Model) -> _Plan:
    """`torch.compile(mode="reduce-overhead")`: the compile plan's kernels (`compile_model`, `_compile_plan`),
    replayed as one CUDA graph per run of launches between host syncs (a graph break: `_graph_segments`): Inductor's
    wrapper (`WRAPPER_US`) and `GRAPH_KERNEL_US` per launch that remains in it, before its first launch; every other
    launch and its wrapper gap removed (the CPU work a graph cannot hold, `HOST_ONLY`, stays). No constant of its
    own: both come from the compile and CUDA-graph fits."""
    compiled = compile_model(trace, graph)
    work, duration = np.array(compiled.work, dtype=np.int64), np.array(compiled.duration, dtype=np.int64)  # copies
    host = _host_only_work_ns(trace, graph, with_optimizer=True)
    kept = np.flatnonzero(~graph.cpu_columns[2] & (duration != 0) & ~_optimizer_calls(trace, graph))
    work[kept] = host[kept]
    for segment in _graph_segments(graph, kept):  # a graph per run between host syncs (a graph break)
        duration[segment[1:]] = 0
        work[segment[0]] += round((WRAPPER_US + GRAPH_KERNEL_US * segment.size) * NS_PER_US)
    return _Plan(work, duration, dict(compiled.gpu_dur))


def _attention_rewrite(trace: Trace, graph: StepGraph) -> list[tuple[int, list[int]]]:
    """Each attention of the step in the form Inductor's rewrite was seen to take on the twins, softmax(scale ·
    QKᵀ)V: on one stream, a kernel of a batched GEMM op (`ATTENTION_GEMMS`), then kernels of the scale and one
    forward softmax op only (`ATTENTION_BETWEEN`; the GEMMs' workspace memsets aside), then a batched GEMM's
    kernel. Per match (activity indices, in start order): the first GEMM, which becomes the attention kernel, and
    the activities the rewrite removes (the run and the second GEMM, last). A mask, dropout, a cast or a backward
    op between the GEMMs is no match (GPT-2's masked, dropped-out attention kept its GEMMs compiled)."""
    names = trace.events.names
    memset = CATEGORIES.index("memset")
    columns = graph.activities
    out: list[tuple[int, list[int]]] = []
    for lane in distinct_ints(columns.lane).tolist():
        first, run, softmaxes = -1, [], 0
        for k in np.flatnonzero(columns.lane == lane).tolist():
            op = names[int(columns.op[k])] if columns.op[k] >= 0 else ""
            if int(columns.category[k]) == memset:
                run.extend([k] if first >= 0 else [])
            elif op in ATTENTION_GEMMS:
                if first >= 0 and softmaxes == 1:
                    out.append((first, [*run, k]))
                    first = -1
                else:
                    first = k
                run, softmaxes = [], 0
            elif first >= 0 and op in ATTENTION_BETWEEN:
                run.append(k)
                softmaxes += op in MATH_ATTENTION
            else:
                first, run, softmaxes = -1, [], 0
    return out


def _graphs_plan(trace: Trace, graph: StepGraph, compiled: bool = False) -> _Plan:
    """One graph per run of launches between host syncs (`_graph_segments`: a capture cannot hold a sync; a
    compiled region breaks there): the first launch of each becomes its graph launch (`GRAPH_LAUNCH_US` +
    `GRAPH_KERNEL_US` per activity its launches ran), every other launch and its CPU work removed, except the CPU
    work a graph cannot hold (`HOST_ONLY`: the time inside those ranges before each launch stays before it). In a
    `compiled` program the graphs are torch.compile's (`mode="reduce-overhead"`), replayed by its wrapper: the CPU
    work before each graph's first launch stays as observed, and the graph's `GRAPH_KERNEL_US` per activity is
    added to it."""
    work, duration = graph.cpu_columns[0].copy(), graph.cpu_columns[1].copy()
    kept = _host_only_work_ns(trace, graph)
    launch_call = graph.gpu_columns.launch_call
    for segment in _graph_segments(graph):
        first, others = segment[0], segment[1:]
        captured = int(np.count_nonzero(np.isin(launch_call, segment)))
        before_ns = int(work[first]) if compiled else int(kept[first]) + round(GRAPH_LAUNCH_US * NS_PER_US)
        work[first] = before_ns + round(GRAPH_KERNEL_US * captured * NS_PER_US)
        work[others], duration[others] = kept[others], 0
    return _Plan(work, duration, {})


def _graph_segments(graph: StepGraph, calls: I64 | None = None) -> list[I64]:
    """The step's launch calls (or those of `calls`, call indices in order) split where a host sync lies between
    two of them: each run is what one CUDA graph can capture."""
    is_sync = graph.cpu_columns[2]
    launches = np.flatnonzero(~is_sync) if calls is None else np.asarray(calls, dtype=np.int64)
    if launches.size == 0:
        return []
    group = np.searchsorted(np.flatnonzero(is_sync), launches)
    return np.split(launches, np.flatnonzero(np.diff(group)) + 1)


@per_trace
def _host_only_ranges(trace: Trace) -> dict[int, list[tuple[int, int]]]:
    """Per CPU track: the (start, end) ns of its `HOST_ONLY` ranges."""
    return _annotation_ranges(trace, HOST_ONLY)


@per_trace
def _optimizer_ranges(trace: Trace) -> dict[int, list[tuple[int, int]]]:
    """Per CPU track: the (start, end) ns of its `OPTIMIZER` ranges (user annotations, or ops in traces that record
    them so), each from the end of the last backward op that ran inside it, on any thread (a closure passed to
    `optimizer.step(closure)` runs the forward and backward there: not the optimizer's own work), merged."""
    events = trace.events
    kinds = (Kind.USER_ANNOTATION, Kind.CPU_OP)
    raw = _annotation_ranges(trace, OPTIMIZER, kinds)
    if not raw:
        return raw
    rows = backward_op_rows(trace)
    if rows.size == 0:
        return raw
    order = np.argsort(events.ts_ns[rows], kind="stable")
    starts = events.ts_ns[rows][order].astype(np.int64)
    ends = np.maximum.accumulate((events.ts_ns[rows] + events.dur_ns[rows])[order].astype(np.int64))
    trimmed: dict[int, list[tuple[int, int]]] = {}
    for track, spans in raw.items():
        for begin, end in spans:
            last = int(np.searchsorted(starts, end, side="left")) - 1  # the last backward op starting before `end`
            if last >= 0 and ends[last] > begin:
                begin = max(begin, int(ends[last]))
            if begin < end:
                trimmed.setdefault(track, []).append((begin, end))
    return trimmed


@per_trace
def _host_or_optimizer_ranges(trace: Trace) -> dict[int, list[tuple[int, int]]]:
    """Per CPU track: its `HOST_ONLY` and `OPTIMIZER` ranges (`_optimizer_ranges`), merged."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for part in (_host_only_ranges(trace), _optimizer_ranges(trace)):
        for track, spans in part.items():
            ranges.setdefault(track, []).extend(spans)
    return {track: _merged(sorted(spans)) for track, spans in ranges.items()}


def _annotation_ranges(
    trace: Trace, prefixes: tuple[str, ...], kinds: tuple[Kind, ...] = (Kind.USER_ANNOTATION,)
) -> dict[int, list[tuple[int, int]]]:
    """Per CPU track: the (start, end) ns of its events of `kinds` (user annotations) whose names start with one
    of `prefixes`, merged where they overlap (nested ranges: one)."""
    events = trace.events
    codes = [c for c, name in enumerate(events.names) if name.startswith(prefixes)]
    ranges: dict[int, list[tuple[int, int]]] = {}
    if not codes:
        return ranges
    rows = np.flatnonzero(np.isin(events.kind, kinds) & np.isin(events.name, codes))
    for row in rows.tolist():
        start = int(events.ts_ns[row])
        ranges.setdefault(int(events.track[row]), []).append((start, start + int(events.dur_ns[row])))
    return {track: _merged(sorted(spans)) for track, spans in ranges.items()}


def _host_only_work_ns(trace: Trace, graph: StepGraph, with_optimizer: bool = False) -> I64:
    """Per call: how much of the CPU work before it (since its thread's previous call, or the step start) lies
    inside `HOST_ONLY` ranges on its thread (`with_optimizer`: or `OPTIMIZER` ranges; the compile models) (0 where
    there are none), as int64."""
    n_calls = len(graph.calls.start_ns)
    kept = np.zeros(n_calls, dtype=np.int64)
    _, call_start, call_dur, _ = graph.native_arrays[1]  # the calls' start and length ns
    last_ns = int(call_start.max()) if n_calls else graph.start_ns
    in_step = {  # each thread's ranges that overlap the step's calls' CPU work (most steps: none, or one)
        thread: [(begin, end) for begin, end in spans if end > graph.start_ns and begin < last_ns]
        for thread, spans in (_host_or_optimizer_ranges if with_optimizer else _host_only_ranges)(trace).items()
    }
    if not any(in_step.values()):
        return kept
    previous = np.maximum(graph.native_arrays[1][0], 0)  # each call's previous call on its thread (0: none)
    since = np.where(graph.native_arrays[1][0] >= 0, call_start[previous] + call_dur[previous], graph.start_ns)
    threads = graph.calls.thread.astype(np.int64)
    for thread, spans in in_step.items():
        calls = np.flatnonzero(threads == thread)
        if not spans or not calls.size:
            continue
        begin, end = (np.asarray(column, dtype=np.int64) for column in zip(*spans, strict=True))
        for chunk in np.array_split(calls, max(1, calls.size * begin.size // _MAX_OVERLAP_CELLS)):
            at, low = call_start[chunk, None], since[chunk, None]
            overlap = np.maximum(0, np.minimum(end[None, :], at) - np.maximum(begin[None, :], low)).sum(axis=1)
            kept[chunk] = np.minimum(overlap, graph.cpu_columns[0][chunk])
    return kept


_MAX_OVERLAP_CELLS = 1 << 20  # (call, range) pairs `_host_only_work_ns` compares at once


def _epilogue_plan(trace: Trace, graph: StepGraph, epilogue: FusionOpportunity) -> _Plan:
    work, duration = graph.calls.work_ns.copy(), graph.calls.dur_ns.copy()
    gpu_dur: dict[int, int] = {}
    match = _sequence_matches(trace, graph, epilogue.kernels, epilogue.calls_per_step, _unclaimed(graph))
    for k, hit in enumerate(match):
        if hit:
            gpu_dur[k] = 0
            call = _own_launch(trace, graph, k)
            if call >= 0:
                work[call], duration[call] = 0, 0
    return _Plan(work, duration, gpu_dur)


def _r(value: float) -> float:
    return round(float(value), 3)


class PredictionCheck(msgspec.Struct, frozen=True):
    """One action's prediction from `before` against the trace `after` of a program that took it: the measured
    mean step span (`critical_path.step_us`), the error (predicted / measured − 1, %) and whether the measured
    span lies in the prediction's range; `before_step_us`, the step before the change, and `no_change_holds`,
    whether it lies in the range too (then `held` cannot tell the action's effect from none: "weak")."""

    before: str
    after: str
    action: str
    targets: list[str]  # what the prediction changes (the action's targets): an action may have several
    predicted_step_us: float
    low: float
    high: float
    measured_step_us: float
    error_pct: float
    held: bool
    before_step_us: float | None = None
    no_change_holds: bool | None = None
    # where the after-trace's steps' CPU starts before earlier steps' GPU work ends by at least `QUEUED_NOTE_PCT` % of
    # their time (`critical_path.queued_pct`): that share and its step's period (`per_step.step_us`); else None
    queued_pct: float | None = None
    period_us: float | None = None

    @property
    def weak(self) -> bool:
        """Held, but no change would have held too."""
        return self.held and bool(self.no_change_holds)


def check_prediction(
    before: str, after: str, actions: Actions, action: str, measured_step_us: float | None
) -> list[PredictionCheck]:
    """Every prediction of `action` in `actions` checked against `measured_step_us` (as `check` checks each
    hypothesis of that action); none when either is missing."""
    if measured_step_us is None or measured_step_us <= 0:
        return []
    out = []
    before_us = actions.summary.step_us
    for found in (a for a in actions.actions if a.action == action):
        error = error_pct(found.predicted_step_us, measured_step_us)
        if error is None:
            continue
        out.append(
            PredictionCheck(
                before=before,
                after=after,
                action=action,
                targets=list(found.targets),
                predicted_step_us=found.predicted_step_us,
                low=found.low,
                high=found.high,
                measured_step_us=measured_step_us,
                error_pct=error,
                held=found.low <= measured_step_us <= found.high,
                before_step_us=before_us,
                no_change_holds=None if before_us is None else found.low <= before_us <= found.high,
            )
        )
    return out


def program_of(results: AnalysisResults) -> ProgramShape | None:
    """What the analyzed trace's program runs that an action changes, and which program it is
    (`tracelens.variants.ProgramShape`): the compiled regions and CUDA-graph replay rows, the launches per step
    (`per_step.launches`), the GPU and the GEMM and attention GFLOP per step (`program_fingerprint` of the
    roofline); None without the compiled analysis. The one place these are gathered from results (`analyze
    --predict` writes it as `before`; `compare` reads both sides with it)."""
    compiled = results.get(Compiled)
    if compiled is None:
        return None
    roofline = results.get(Roofline)
    steps = results.summary.steps
    device: str | None = None
    gflop: float | None = None
    per_call: tuple[float, ...] | None = None
    if roofline is not None:
        rows = [(r.model, r.op, r.calls, r.gflop_per_call) for r in roofline.rows]
        pct = roofline.modelled_kernel_time_pct
        device, gflop, per_call = program_fingerprint(roofline.device, rows, steps, pct)
    return msgspec.structs.replace(
        _compiled_shape(compiled, results.summary),
        launches_per_step=results.summary.per_step.launches,
        kernels_per_step=results.summary.per_step.kernels,
        device=device,
        gemm_gflop_per_step=gflop,
        gemm_gflop_per_call=per_call,
        gemm_us_per_step=gemm_kernel_us([(k.category, k.total_us) for k in results.summary.kernels], steps),
        gemm_kernels=gemm_kernel_names([(k.category, k.name) for k in results.summary.kernels]),
        whole_trace=results.summary.facts.step_source == WHOLE_TRACE_SOURCE,
    )


class PredictionSkip(msgspec.Struct, frozen=True):
    """A later trace of `compare` whose span checks none of the first trace's predictions, and why: another
    program, or no single action taken (`tracelens.variants.taken_note`)."""

    after: str
    reason: str


def prediction_checks(
    items: list[tuple[str, AnalysisResults]], shapes: Mapping[str, ProgramShape | None] | None = None
) -> list[PredictionCheck | PredictionSkip]:
    """For `compare`: the first item is the before-trace; each later one that is a variant of its program (not
    `other_program`) and took one action (`taken_action`: compile or CUDA graphs by new regions or replays, fuse or
    gemm_epilogue by the launches each prediction leaves, as `check` tells them) gets the before-trace's prediction
    for that action checked against its span; each other later one a `PredictionSkip` saying why not (none where
    the first trace has no actions). `shapes`: `program_of` of each item by label, where the caller has them."""
    if len(items) < 2:
        return []
    known = dict(shapes) if shapes is not None else {}
    shape_of = {label: known[label] if label in known else program_of(results) for label, results in items}
    before_label, before = items[0]
    actions, before_shape = before.get(Actions), shape_of[before_label]
    if actions is None or before_shape is None:
        return []
    launches = launch_table([(a.action, a.predicted_launches_per_step) for a in actions.actions])
    out: list[PredictionCheck | PredictionSkip] = []
    for label, after in items[1:]:
        after_shape, path = shape_of[label], after.get(CriticalPath)
        if after_shape is None or path is None:
            out.append(PredictionSkip(label, "what it runs or its step span is not known"))
            continue
        skipped = not_checked(before_shape, after_shape)
        if skipped is not None:
            out.append(PredictionSkip(label, skipped[1]))
            continue
        action = taken_action(before_shape, after_shape, launches)
        checked = [] if action is None else check_prediction(before_label, label, actions, action, path.step_us)
        queued = queued_pct(path)
        if queued is not None and checked:
            period = after.summary.per_step.step_us
            checked = [msgspec.structs.replace(c, queued_pct=queued, period_us=period) for c in checked]
        note = taken_note(label, before_shape, after_shape, launches).removeprefix(f"{label} ")  # "took …"
        out.extend(checked or [PredictionSkip(label, note)])
    return out
