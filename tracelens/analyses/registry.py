"""The registry of analyses: ONE list, `ANALYSES`, drives the pipeline (`analyze`), the `tracelens.analyze/1`
JSON document and its description in docs/json.md, the `analyze` text output and the HTML report.

Each entry (`Analysis`) names:
- `name`: the analysis' attribute of `AnalysisResults` and, unless `json` says otherwise, its top-level JSON key;
- `run`: the analysis, `run(ctx: AnalysisContext) -> result` (see `tracelens.analyses.context`);
- `result`: the result type, a frozen `msgspec.Struct` that round-trips through msgspec (the results cache stores it;
  tests/test_registry.py checks every entry);
- `text`: its section of `tracelens analyze` (`"module:function"`, in `tracelens.renderers.analyses.<name>`:
  `function(result, results) -> list of rich renderables`, None entries skipped), printed in `text_order`;
- `panels`: its panels of the HTML report (`"module:function"`, in the same module, `function(result | None,
  results) -> AnalysisPanels`; None = not run: say so);
- `json`: its top-level keys of the JSON document (`"module:function"`, `function(result, results) -> dict`);
  None: `{name: result as plain data}`;
- `doc`: what each of those keys holds (`KeyDoc` rows, Markdown), the rows of docs/json.md's table of the
  `tracelens.analyze/1` keys (a hook of the docs build, scripts/mkdocs_hooks.py, writes them there;
  tests/test_docs.py checks that every key of the document has one);
Renderers are named by import path so that running the analyses never imports rich or plotly.

Order of `ANALYSES` = order of the JSON keys and the report's panels; an analysis may ask for another's result
in any order (`ctx.result(Type)`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import msgspec

from tracelens.analyses.actions import Actions, analyze_actions
from tracelens.analyses.bound import Bound, analyze_bound
from tracelens.analyses.comm_overlap import CommOverlap, analyze_comm_overlap
from tracelens.analyses.compiled import Compiled, analyze_compiled
from tracelens.analyses.critical_path import CriticalPath, analyze_critical_path
from tracelens.analyses.dispatch import Dispatch, analyze_dispatch
from tracelens.analyses.fusion import Fusion, FusionOpportunity, analyze_fusion
from tracelens.analyses.memory import Memory, analyze_memory
from tracelens.analyses.roofline import Roofline, analyze_roofline
from tracelens.analyses.stream_idle import StreamIdle, analyze_stream_idle
from tracelens.analyses.summary import Summary, analyze_summary

if TYPE_CHECKING:
    from tracelens.analyses.context import AnalysisContext

R = TypeVar("R")
SHOWN = "tracelens.renderers.analyses"  # the module that shows analysis x is f"{SHOWN}.x"
JSON = "tracelens.renderers.jsonout"


class KeyDoc(msgspec.Struct, frozen=True):
    """One row of docs/json.md's table of the `tracelens.analyze/1` keys: `keys`, a top-level key of the JSON
    document or several separated by ", "; `holds`, what they hold (Markdown; links relative to docs/)."""

    keys: str
    holds: str

    @property
    def names(self) -> tuple[str, ...]:
        """The keys of the row, one by one."""
        return tuple(self.keys.split(", "))


class Analysis(msgspec.Struct, Generic[R], frozen=True):
    """One registered analysis (see the module docstring)."""

    name: str
    run: Callable[[AnalysisContext], R]
    result: type[R]
    text: str | None = None
    panels: str | None = None
    json: str | None = None
    text_order: int = 50  # text sections print by this, then in registry order
    doc: tuple[KeyDoc, ...] = ()


ANALYSES: tuple[Analysis[Any], ...] = (
    # the head of every output (trace facts, per-step figures, kernels, ops); the report draws its overview,
    # timeline and breakdown charts from it (tracelens.renderers.page), so it has no `panels`
    Analysis(
        "summary",
        analyze_summary,
        Summary,
        text="tracelens.renderers.text:summary_parts",
        json=f"{JSON}:summary_json",
        text_order=0,
        doc=(
            KeyDoc(
                "trace",
                "facts about the file: path, format, GPUs, CUDA/HIP runtime and driver, torch version, the "
                "recorded `run` metadata, rank and world size, events (total and by kind), span, uncompressed "
                'bytes, steps in the trace and where they came from (`step_source`: `"ProfilerStep"`, '
                '`"inferred"` with `steps_inferred_from` and `steps_are_calls` — each step one call, or '
                'periods of loop markers —, or `"whole_trace"`; '
                "[definitions](definitions.md#inferred-steps)), whether it was cut off, GPU activities without "
                "a launch, launches linked by External id / by time containment",
            ),
            KeyDoc(
                "steps, step_numbers",
                "how many steps are analyzed (complete steps, minus those torch.compile figures exclude) and "
                "their `ProfilerStep` numbers",
            ),
            KeyDoc(
                "per_step",
                "medians over the analyzed steps: `kernels`, `memcpy`, `memset`, `launches`, `cpu_ops`, "
                "`cpu_us`, `gpu_busy_us`, `gpu_kernel_us`, `step_us`, `queue_backlog_us`, `gpu_window_us` "
                "([definitions](definitions.md)); and `profiler_free_step_us`, the step time without the "
                'profiler, with `profiler_free_source`: `"measured"` (timed without the profiler by the '
                'recording: [`tracelens_record`](record.md#metadata)), `"estimated"` (the [profiler-overhead '
                "model](profiler_overhead.md)) or `null` (no step time)",
            ),
            KeyDoc(
                "profiler_free",
                "the same figure with its evidence: `source`, `step_us`, `profiled_step_us` (= "
                "`per_step.step_us`), `inflation_pct` ((profiled / profiler-free − 1) × 100), `method` (in "
                "words), `events_per_step` (CPU ops + CUDA runtime calls per step, the mean over the analyzed steps), "
                "`launch_us` (the median kernel-launch call in the steps; `null` where they make none), `unit_us` "
                "(the model's unit of the host's speed: `launch_us`, or the stand-in 7.127 µs where it is `null`: "
                "CUDA-graph replays), `regions_per_step` (Torch-Compiled "
                "Region calls per step), `lead_us` (median step start → first GPU activity): the model's inputs, "
                "`estimated_step_us` (the model's figure, also where a measurement wins), `estimate_low_us` / "
                "`estimate_high_us` (the estimate's stated range, [the range](profiler_overhead.md#the-range); "
                "`null` without an estimate), `note` (uncalibrated profiler options, a partial recording, why "
                'there is none), `verdict_without_profiler` (`"gpu"` where the bound verdict, `cpu` or '
                "`mixed`, would read gpu without the profiler: GPU busy ≥ 85 % of the profiler-free step; else "
                "`null`); `null` when the summary has none ([profiler overhead](profiler_overhead.md))",
            ),
            KeyDoc(
                "per_step_note",
                "why per-step figures are `null` when they are (e.g. no complete step); else `null`",
            ),
            KeyDoc(
                "step_table",
                "the same figures for every step, with `number` (its `ProfilerStep` number; an inferred step's "
                "position from 1; `-1` for the one window of a trace without steps, `step_source` "
                '`"whole_trace"`: shown as "trace") and `complete`',
            ),
            KeyDoc(
                "kernels",
                "the kernel table: `name`, `short_name`, `category` ([categories](categories.md)), `calls`, "
                "`calls_per_step`, `total_us`, `mean_us`, launching `op`; with a roofline model also "
                "`pct_of_peak`, `model_note`, `achieved_tflops`, `achieved_tbps`, `limit`, `model` "
                "([roofline](roofline.md))",
            ),
            KeyDoc(
                "ops",
                "op → kernels: `name`, `calls_per_step`, `kernels_per_step`, `gpu_us_per_step`, the kernels it "
                "launched, `replayed_kernels_per_step` (of them, replayed by a CUDA graph)",
            ),
            KeyDoc(
                "warnings",
                "the load and analysis warnings, as printed on stderr",
            ),
        ),
    ),
    Analysis(
        "dispatch",
        analyze_dispatch,
        Dispatch,
        text=f"{SHOWN}.dispatch:dispatch_parts",
        panels=f"{SHOWN}.dispatch:dispatch_panels",
        doc=(
            KeyDoc(
                "dispatch",
                "CPU self time per step by layer and by op name (`ops`: the 15 with the most), runtime queries "
                "and syncs with the op that issued them, launch → GPU-start latency, per-step layers",
            ),
        ),
    ),
    # the verdict: in the text, first after the compile note
    Analysis(
        "bound",
        analyze_bound,
        Bound,
        text=f"{SHOWN}.bound:bound_parts",
        panels=f"{SHOWN}.bound:bound_panels",
        json=f"{JSON}:bound_json",
        text_order=20,
        doc=(
            KeyDoc(
                "bound",
                'the verdict: `"cpu"`, `"gpu"`, `"mixed"` or `"unknown"`; decided by the critical '
                "path's what-ifs over the same steps where they replay (`bound_breakdown.verdict_basis: "
                '"what-if"`, `idle_verdict`: the idle thresholds\' verdict, `verdict_note`: why they differ; '
                '`verdict_without_profiler`: `"gpu"` where a cpu or mixed verdict would likely read gpu without '
                "the profiler, with `busy_pct_without_profiler`, the GPU's busy share of the profiler-free step; "
                "else both `null`)",
            ),
            KeyDoc(
                "bound_breakdown",
                "the verdict's figures: busy and idle buckets per step (launch wait, sync wait, queued, other, "
                "compile), exposed dispatch, thresholds, reason; its `*_per_step` figures are **means** over "
                "the analyzed steps (they add up: busy + buckets = window), unlike `per_step`'s medians; "
                "`steps` has each step's own ([definitions](definitions.md))",
            ),
        ),
    ),
    Analysis(
        "fusion",
        analyze_fusion,
        Fusion,
        text=f"{SHOWN}.fusion:fusion_parts",
        panels=f"{SHOWN}.fusion:fusion_panels",
        json=f"{JSON}:fusion_json",
        doc=(
            KeyDoc(
                "fusion_opportunities",
                "one row per group of kernels a fuser could merge: ops, kernels, calls and kernel µs per step, "
                'bytes now and fused, estimated saving, stream, `kind` (`"chain"` or `"gemm_epilogue"`), '
                "evidence, `across_sync` and `note` (linked across a host sync, by tensor ids only) "
                "([fusion](fusion.md))",
            ),
            KeyDoc(
                "fusion",
                "totals: whether shapes were recorded, estimated saving per step, GEMM-epilogue saving per "
                "step, evidence used",
            ),
        ),
    ),
    Analysis(
        "roofline",
        analyze_roofline,
        Roofline,
        text=f"{SHOWN}.roofline:roofline_parts",
        panels=f"{SHOWN}.roofline:roofline_panels",
        doc=(
            KeyDoc(
                "roofline",
                "device, peaks (TFLOP/s by dtype, TB/s) and their source, share of kernel time modelled, one "
                "row per modelled kernel (`peak_dtype`: the dtype whose peak bounds it), `unmodelled`: the rest "
                "of the kernel time by `reason` with `pct_of_kernel_time` and the `ops` without a model "
                "([roofline](roofline.md))",
            ),
        ),
    ),
    # its note says which steps the other analyses left out, so it comes first in the text
    Analysis(
        "compiled",
        analyze_compiled,
        Compiled,
        text=f"{SHOWN}.compiled:compiled_parts",
        panels=f"{SHOWN}.compiled:compiled_panels",
        text_order=10,
        doc=(
            KeyDoc(
                "compiled",
                "torch.compile: regions, frames, graph breaks, recompiles, cache-lookup (all, and "
                "`cache_lookup_outside_us_per_step` outside every region) and overhead µs per step, compilation "
                "inside the window (`compiles: [{id, ms, step}]`), excluded steps, CUDA-graph replays "
                "(`kernels_per_replay`: kernels only; `activities_per_replay`: with copies and memsets; "
                "`gpu_us_per_replay`: all of them), `steady_steps`, `note`, `autotune` (Inductor's autotuning "
                "in the whole trace, compile cost in no step: `kernels`, `l2_flush_fills`, "
                "`other_gpu_activities`, `gpu_us`, `l2_flush_gpu_us`, `ranges`; `null` when the trace has none; "
                "[definitions](definitions.md#autotuning))",
            ),
        ),
    ),
    Analysis(
        "critical_path",
        analyze_critical_path,
        CriticalPath,
        text=f"{SHOWN}.critical_path:critical_path_parts",
        panels=f"{SHOWN}.critical_path:critical_path_panels",
        json=f"{JSON}:critical_path_json",
        text_order=30,
        doc=(
            KeyDoc(
                "critical_path",
                "the critical path over every analyzed step but a first step of warm-up (`steps[].in_means` false: its "
                "span over 1.5× the median, docs/critical_path.md): composition, top kernels and ops and what-ifs as "
                "**means per step** (`what_if[].saved_us_min`/`saved_us_max`: the spread, `steps`: how many), "
                "`steps_analyzed`, `step_us_min`/`step_us_max`, `limit` and `limit_note` (what the what-ifs say "
                "limits the steps), `steps` (per step: `number`, `span_us`, `limit`, `cpu_2x_saved_us`, "
                "`gpu_2x_saved_us`, `queued_pct`: the share of the time from its CPU start to its end before its "
                "span starts, `unrepresentative`: why, or `null`, `queued_us`: that time, `in_means`), "
                "`queued_us` (the mean time from a step's CPU "
                "start to its span's start: it began before earlier steps' GPU work ended) and `queued_pct` (its share "
                "of the mean time from a step's CPU start to its end), `step` (the "
                "median-length step whose path the report draws), replay error (max over steps), note "
                "([critical path](critical_path.md))",
            ),
        ),
    ),
    Analysis(
        "actions",
        analyze_actions,
        Actions,
        text=f"{SHOWN}.actions:actions_parts",
        panels=f"{SHOWN}.actions:actions_panels",
        text_order=-10,  # "what to do next" is the first thing `analyze` prints
        doc=(
            KeyDoc(
                "actions",
                "what to do next: `summary` (`step_us`, `profiler_free_step_us`, `limit`, `steps`) and "
                "`actions` (`action`: `compile`, `cuda_graphs`, `fuse` or `gemm_epilogue`; `targets`, "
                "`predicted_step_us`, `saved_us`, `low`, `high`, `basis`, `predicted_profiler_free_step_us`, "
                "`limited_by`: `gpu`, `cpu`, `mixed` or `unknown`, by the what-ifs of the changed step), `note` "
                "([actions](actions.md))",
            ),
        ),
    ),
    Analysis(
        "comm_overlap",
        analyze_comm_overlap,
        CommOverlap,
        text=f"{SHOWN}.comm_overlap:comm_overlap_parts",
        panels=f"{SHOWN}.comm_overlap:comm_overlap_panels",
        doc=(
            KeyDoc(
                "comm_overlap",
                "communication kernels: µs per step, overlapped and exposed µs, overlap %, note (`null` figures "
                "without communication)",
            ),
        ),
    ),
    Analysis(
        "stream_idle",
        analyze_stream_idle,
        StreamIdle,
        text=f"{SHOWN}.stream_idle:stream_idle_parts",
        panels=f"{SHOWN}.stream_idle:stream_idle_panels",
        doc=(
            KeyDoc(
                "stream_idle",
                "idle time per GPU stream per step, with the kernel-wait threshold, a note and `window` (the "
                "steps the figures are over: the summary's, warm-up steps left out, e.g. `\"steps 3-6 (2 warm-up "
                'steps left out: compiling or capturing)"`)',
            ),
        ),
    ),
    Analysis(
        "memory",
        analyze_memory,
        Memory,
        text=f"{SHOWN}.memory:memory_parts",
        panels=f"{SHOWN}.memory:memory_panels",
        json=f"{JSON}:memory_json",
        doc=(
            KeyDoc(
                "memory",
                "allocator events (`profile_memory=True`): per step peak allocated and reserved bytes "
                "(medians), allocations by op, allocations that outlive the step, per device; `null` figures "
                "with the reason in `note` when the trace has none",
            ),
        ),
    ),
)


REQUIRED = ("summary",)  # every AnalysisResults has these; the other analyses may be absent (None)


class ResultsBase(msgspec.Struct, frozen=True):
    """The methods of every `AnalysisResults` type (the attributes are its analyses' results)."""

    analyses: ClassVar[tuple[Analysis[Any], ...]] = ()

    def __getitem__(self, name: str) -> Any:
        """The result of the analysis called `name` (None if it did not run)."""
        if all(entry.name != name for entry in self.analyses):
            raise KeyError(name)
        return getattr(self, name, None)

    def get(self, kind: type[R]) -> R | None:
        """The result of type `kind`, or None when its analysis did not run."""
        for entry in self.analyses:
            value = getattr(self, entry.name, None)
            if isinstance(value, kind):
                return value
        return None

    def results(self) -> list[tuple[Analysis[Any], Any]]:
        """(entry, result) of every analysis that ran, in registry order."""
        pairs = [(entry, getattr(self, entry.name, None)) for entry in self.analyses]
        return [(entry, value) for entry, value in pairs if value is not None]

    @property
    def fusion_opportunities(self) -> list[FusionOpportunity]:
        fusion = self.get(Fusion)
        return fusion.opportunities if fusion else []


class AnalysisResults(ResultsBase, frozen=True):
    """Everything `tracelens analyze` reports about one trace: one attribute per entry of `ANALYSES`, named as
    the entry, of its result type (None = not run), in registry order after `REQUIRED`; `results[name]`;
    `results.get(ResultType)`. Adding an analysis adds its line here too (tests/test_registry.py checks that
    the two agree)."""

    summary: Summary
    dispatch: Dispatch | None = None
    bound: Bound | None = None
    fusion: Fusion | None = None
    roofline: Roofline | None = None
    compiled: Compiled | None = None
    critical_path: CriticalPath | None = None
    actions: Actions | None = None
    comm_overlap: CommOverlap | None = None
    stream_idle: StreamIdle | None = None
    memory: Memory | None = None


AnalysisResults.analyses = ANALYSES
