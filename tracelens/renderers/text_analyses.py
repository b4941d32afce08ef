"""The text sections of `tracelens analyze` for every analysis but the summary (`text.summary_parts`): what to do
next, bound, CPU dispatch, fusion, roofline, torch.compile, the critical path with its what-ifs,
communication/computation overlap, idle time per stream and memory. The registry names each analysis' section
function, `x_parts(result, report) -> list of renderables (None: skipped)`."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from tracelens.analyses.actions import Action, Actions, range_notes
from tracelens.analyses.bound import Bound
from tracelens.analyses.comm_overlap import CommOverlap
from tracelens.analyses.compiled import Compiled
from tracelens.analyses.critical_path import CriticalPath, part_label
from tracelens.analyses.dispatch import Dispatch
from tracelens.analyses.fusion import Fusion
from tracelens.analyses.memory import Memory
from tracelens.analyses.roofline import Roofline
from tracelens.analyses.stream_idle import STREAMS_SHOWN, StreamIdle
from tracelens.renderers.tables import count as _count
from tracelens.renderers.tables import display_name, droppable
from tracelens.renderers.textsafe import escape_controls, safe_text
from tracelens.units import bytes_text, pct_text, us_text, whole_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults

Parts = list[RenderableType | None]

MAX_API_ROWS = 12
MAX_FUSION_ROWS = 10
MAX_ROOFLINE_ROWS = 15
VERDICT = {
    "cpu": "CPU-bound: the GPU waits for launches at least as long as it works",
    "gpu": "GPU-bound: the GPU is busy nearly all of each step and rarely waits for launches",
    "mixed": "mixed: neither side dominates (the GPU works most of the step but also waits)",
    "unknown": "unknown: no GPU activity in the window",
}


def bound_parts(bound: Bound, report: AnalysisResults) -> Parts:
    return [bound_text(bound), bound_steps_table(bound)]


def dispatch_parts(dispatch: Dispatch, report: AnalysisResults) -> Parts:
    return [dispatch_table(dispatch), api_table(dispatch)]


def fusion_parts(fusion: Fusion, report: AnalysisResults) -> Parts:
    if report.summary.empty_reason:
        return [Text(f"Fusion opportunities: — ({report.summary.empty_reason})")]
    return [fusion_table(fusion)]


def roofline_parts(roofline: Roofline, report: AnalysisResults) -> Parts:
    if report.summary.empty_reason:
        return [Text(f"Roofline: — ({report.summary.empty_reason})")]
    return [roofline_table(roofline)]


def bound_text(bound: Bound) -> Text:
    text = Text()
    text.append(f"Bound: {bound.bound}", style="bold")
    if bound.bound == "unknown" and bound.reason:
        text.append(f" — cannot be judged: {bound.reason}\n")
    else:
        text.append(f" — {VERDICT.get(bound.bound, bound.bound)}\n")
    if bound.bound == "unknown" or bound.exposed_dispatch_us_per_step is None:
        reason = bound.reason or "no GPU activity in the window"
        text.append(
            f"Exposed dispatch: — ({reason}: nothing to wait or hide behind); CPU dispatch per step "
            f"{us_text(bound.dispatch_us_per_step)} µs.\n"
        )
        return text
    if bound.verdict_basis == "what-if":
        text.append("(by the critical path's what-ifs over the same steps: CPU vs GPU work 2× faster)\n", style="dim")
    if bound.verdict_note:
        text.append(f"Note: {bound.verdict_note}.\n")
    text.append(f"(idle thresholds: {bound.thresholds})\n", style="dim")
    pct = f" ({bound.exposed_dispatch_pct:.0f} %)" if bound.exposed_dispatch_pct is not None else ""
    of_gpu = (
        f", {bound.exposed_dispatch_pct_of_gpu:.1f} % of the GPU window"
        if bound.exposed_dispatch_pct_of_gpu is not None
        else ""
    )
    text.append(
        f"Exposed dispatch: {us_text(bound.exposed_dispatch_us_per_step)} µs of "
        f"{us_text(bound.dispatch_us_per_step)} µs "
        f"CPU dispatch self time per step{pct} ran while the GPU waited for a launch{of_gpu}.\n"
    )
    text.append(
        f"GPU per step (mean of {len(bound.steps)}): window {us_text(bound.gpu_window_us_per_step)} µs = busy "
        f"{us_text(bound.gpu_busy_us_per_step)} µs "
        f"+ idle waiting for launches {us_text(bound.launch_wait_us_per_step)} µs, on syncs/host copies "
        f"{us_text(bound.sync_wait_us_per_step)} µs, with work already queued "
        f"{us_text(bound.queued_idle_us_per_step)} µs, other {us_text(bound.other_idle_us_per_step)} µs"
        + (
            f", during compilation {us_text(bound.compile_idle_us_per_step)} µs"
            if bound.compile_idle_us_per_step
            else ""
        )
    )
    return text


def bound_steps_table(bound: Bound) -> Table | None:
    if not 1 < len(bound.steps) <= 12:
        return None
    table = Table(title="GPU window by bucket, one row per step (µs in the step)", title_justify="left")
    for column in ("step", "window µs", "busy µs", "launch wait µs", "sync wait µs", "queued µs", "other µs", "bound"):
        table.add_column(column, justify="right" if column != "bound" else "left")
    for s in bound.steps:
        table.add_row(
            str(s.number),
            us_text(s.gpu_window_us),
            us_text(s.gpu_busy_us),
            us_text(s.launch_wait_us),
            us_text(s.sync_wait_us),
            us_text(s.queued_idle_us),
            us_text(s.other_idle_us + s.compile_idle_us),
            s.bound,
        )
    return table


def dispatch_table(dispatch: Dispatch) -> Table | Text:
    if dispatch.steps == 0:
        return Text("CPU time per step by layer: — (no analyzed step)")
    table = Table(
        title=f"CPU time per step by layer (self time, all threads): {us_text(dispatch.cpu_us_per_step)} µs",
        title_justify="left",
    )
    table.add_column("layer")
    table.add_column("calls/step", justify="right")
    table.add_column("µs/step", justify="right")
    table.add_column("what", overflow="fold")
    droppable(table, "what")
    for layer in dispatch.layers:
        if layer.calls_per_step or layer.us_per_step:
            table.add_row(layer.name, _count(layer.calls_per_step), us_text(layer.us_per_step), layer.description)
    if dispatch.launch_latency:
        latency = dispatch.launch_latency[0]
        table.caption = (
            f"launch → GPU start over {latency.launches:,} launches: p50 {us_text(latency.p50_us)} µs, "
            f"p90 {us_text(latency.p90_us)} µs, max {us_text(latency.max_us)} µs"
        )
    return table


def api_table(dispatch: Dispatch) -> Table | None:
    rows = [a for a in dispatch.api_calls if a.layer in ("query", "sync", "other_api")][:MAX_API_ROWS]
    if not rows:
        return None
    table = Table(title="Runtime queries and syncs per step, by the op that issued them", title_justify="left")
    for column in ("API", "layer", "issued by", "calls/step", "µs/step"):
        table.add_column(column, justify="right" if column in ("calls/step", "µs/step") else "left")
    droppable(table, "layer")
    for a in rows:
        table.add_row(a.name, a.layer, a.issued_by, _count(a.calls_per_step), us_text(a.us_per_step))
    return table


def fusion_table(fusion: Fusion) -> Table | Text:
    if not fusion.opportunities:
        reason = "" if fusion.shapes_recorded else " (the trace has no Input Dims: record with record_shapes=True)"
        return Text(f"Fusion opportunities: none found{reason}")
    epilogue = (
        f"; GEMM epilogues {us_text(fusion.gemm_epilogue_saving_us_per_step)} µs"
        if fusion.gemm_epilogue_saving_us_per_step
        else ""
    )
    table = Table(
        title=f"Fusion opportunities (est. saving {us_text(fusion.est_saving_us_per_step)} µs per step{epilogue})",
        title_justify="left",
    )
    table.caption = (
        f"linked by {fusion.evidence} (docs/fusion.md); GEMM epilogue: MB now → after counts the GEMM outputs' "
        "writes; its saving overlaps the chains it contains"
    )
    numeric = ("calls/step", "kernel µs/step", "saving µs/step")
    for column in ("ops", "kernels", *numeric[:2], "MB/step now → fused", numeric[2]):
        table.add_column(column, justify="right" if column in numeric else "left")
    droppable(table, "kernels", "MB/step now → fused", "calls/step")
    for o in fusion.opportunities[:MAX_FUSION_ROWS]:
        chain = " → ".join(op.removeprefix("aten::") for op in o.ops)
        table.add_row(
            f"GEMM epilogue: {len(o.gemm_kernels)} GEMM → {chain}" if o.kind == "gemm_epilogue" else chain,
            ", ".join(o.kernels[:3]) + (f", +{len(o.kernels) - 3}" if len(o.kernels) > 3 else ""),
            _count(o.calls_per_step),
            us_text(o.kernel_us_per_step),
            f"{o.bytes_now / 1e6:,.2f} → {o.bytes_fused / 1e6:,.2f}",
            us_text(o.est_saving_us),
        )
    return table


def roofline_table(roofline: Roofline) -> Table | Text:
    if not roofline.rows:
        return Text("Roofline: no kernel has a FLOP/byte model" + (unmodelled_text(roofline) or " (no kernels)"))
    shown = {"bf16", "fp16", "fp32", "fp8"} | {r.peak_dtype for r in roofline.rows[:MAX_ROOFLINE_ROWS] if r.peak_dtype}
    peaks = ", ".join(f"{k} {v:g}" for k, v in roofline.peaks_tflops.items() if k in shown)
    table = Table(
        title=f"Roofline on {roofline.device} ({roofline.modelled_kernel_time_pct:g} % of kernel time modelled)",
        title_justify="left",
    )
    for column in (
        "kernel",
        "op",
        "dtype",
        "calls total",
        "GFLOP/call",
        "MB/call",
        "TFLOP/s",
        "TB/s",
        "limit",
        "% peak",
    ):
        table.add_column(column, justify="left" if column in ("kernel", "op", "dtype", "limit") else "right")
    droppable(table, "dtype", "calls total", "op", "MB/call", "GFLOP/call", "TB/s", "TFLOP/s")
    for r in roofline.rows[:MAX_ROOFLINE_ROWS]:
        table.add_row(
            display_name(r.kernel),
            r.ops or r.op.removeprefix("aten::"),
            r.dtype,
            f"{r.calls:,}",
            f"{r.gflop_per_call:,.3f}",
            f"{r.mb_per_call:,.2f}",
            f"{r.achieved_tflops:,.1f}",
            f"{r.achieved_tbps:,.2f}",
            r.limit,
            f"{r.pct_of_peak:,.1f}" if r.pct_of_peak is not None else "—",
        )
    if roofline.peak_tbps is None and not roofline.peaks_tflops:
        table.caption = "unknown GPU: pass --peak-tflops / --peak-tbps (or TRACELENS_PEAKS) for % of peak"
    else:
        table.caption = f"peaks: TFLOP/s {peaks or 'n/a'}; {roofline.peak_tbps or 'n/a'} TB/s — {roofline.peaks_source}"
    misfits = [r for r in roofline.rows[:MAX_ROOFLINE_ROWS] if r.model_note]
    if misfits:
        table.caption += "".join(f"\n— {r.short_name}: {r.model_note}" for r in misfits)
    table.caption += unmodelled_text(roofline)
    return table


def unmodelled_text(roofline: Roofline) -> str:
    """Why the kernel time outside the table has no model (empty when everything is modelled)."""
    parts = []
    for u in roofline.unmodelled:
        names = (escape_controls(op.removeprefix("aten::")) for op in u.ops)  # trace data: no terminal codes
        ops = f" ({', '.join(names)})" if u.ops else ""
        parts.append(f"{u.pct_of_kernel_time:g} %: {u.reason}{ops}")
    return "\nnot modelled: " + "; ".join(parts) if parts else ""


def _nested_lookups(compiled: Compiled) -> str:
    nested = compiled.cache_lookup_us_per_step - compiled.cache_lookup_outside_us_per_step
    return f" (and {us_text(nested)} µs/step inside regions: nested compiled calls)" if nested >= 0.05 else ""


def compiled_parts(compiled: Compiled, report: AnalysisResults) -> Parts:
    parts: Parts = []
    if compiled.note:
        parts.append(safe_text(f"torch.compile: {compiled.note}", style="yellow"))
    if compiled.autotune is not None:
        a = compiled.autotune
        parts.append(
            safe_text(
                f"Autotuning (compile cost, in no step): {a.kernels:,} benchmark kernels, of which "
                f"{a.l2_flush_fills:,} L2-flush fills; {us_text(a.gpu_us)} GPU µs in all "
                f"({us_text(a.l2_flush_gpu_us)} fills)"
            )
        )
    if compiled.regions:
        inside = sum(r.overhead_us_per_step for r in compiled.regions)
        outside = compiled.overhead_us_per_step - inside
        table = Table(
            title=f"Compiled regions per step (torch.compile wrappers' self time, all: "
            f"{us_text(compiled.overhead_us_per_step)} µs/step)",
            title_justify="left",
            caption=f"wrapper µs/step: self time of the wrappers inside the region (guards, AOT wrappers, the "
            f"region op); outside any region: {us_text(outside)} µs/step, of which TorchDynamo Cache Lookup "
            f"{us_text(compiled.cache_lookup_outside_us_per_step)} µs/step" + _nested_lookups(compiled),
            caption_justify="left",
        )
        for column in ("region", "calls/step", "µs/step inside", "wrapper µs/step"):
            table.add_column(column, justify="left" if column == "region" else "right")
        for r in compiled.regions:
            table.add_row(r.name, _count(r.calls_per_step), us_text(r.us_per_step), us_text(r.overhead_us_per_step))
        parts.append(table)
    if compiled.graph_replays:
        table = Table(title="CUDA-graph replays per step", title_justify="left")
        for column in ("launch", "issued by", "region", "replays/step", "kernels/replay", "GPU µs/replay"):
            table.add_column(column, justify="left" if column in ("launch", "issued by", "region") else "right")
        for g in compiled.graph_replays:
            table.add_row(
                g.launch_api,
                g.op,
                g.region,
                _count(g.replays_per_step),
                _count(g.kernels_per_replay),
                us_text(g.gpu_us_per_replay),
            )
        parts.append(table)
    return parts


# ---------------------------------------------------------------- what to do next, the critical path, streams, memory


def critical_path_parts(result: CriticalPath, report: AnalysisResults) -> Parts:
    if result.step is None:
        return [Text(f"Critical path: — ({result.note})")]
    n = result.steps_analyzed
    head = Text()
    head.append("Critical path", style="bold")
    head.append(
        f" over {n} step{'s' if n != 1 else ''}: span {us_text(result.step_us)} µs per step "
        f"(min {us_text(result.step_us_min)}, "
        f"max {us_text(result.step_us_max)}) from each step's CPU start to its last CPU or GPU end ({result.note})"
    )
    if result.limit_note:
        head.append(f"\nLimit: {result.limit_note}.")
    odd = [s for s in result.steps if s.unrepresentative]
    for s in odd:
        head.append(f"\nStep {s.number} is unrepresentative: {s.unrepresentative}.")
    parts = Table(title=None, show_edge=False)
    parts.add_column("on the path")
    parts.add_column("µs per step", justify="right")
    parts.add_column("% of path", justify="right")
    for part in result.composition:
        parts.add_row(part_label(part.part), us_text(part.us), f"{part.pct:.1f}")
    what_if = Table(show_edge=False)
    what_if.add_column(f"what if (mean of {n} steps)")
    what_if.add_column("step µs", justify="right")
    what_if.add_column("saves µs", justify="right")
    what_if.add_column("min–max µs", justify="right")
    for row in result.what_if:
        what_if.add_row(
            row.change,
            us_text(row.predicted_step_us),
            us_text(row.saved_us),
            f"{us_text(row.saved_us_min)}–{us_text(row.saved_us_max)}",
        )
    return [head, parts, what_if]


def comm_overlap_parts(result: CommOverlap, report: AnalysisResults) -> Parts:
    if result.comm_kernels == 0:
        return [Text(f"Communication/computation overlap: — ({result.note})")]
    text = Text()
    text.append("Communication", style="bold")
    text.append(
        f": {us_text(result.comm_us_per_step)} µs of collectives per step, "
        f"{pct_text(result.overlap_pct)} overlapped by "
        f"compute; exposed {us_text(result.exposed_us_per_step)} µs per step ({result.note})"
    )
    return [text]


def stream_idle_parts(result: StreamIdle, report: AnalysisResults) -> Parts:
    if not result.streams:
        return [Text(f"Idle time per stream: — ({result.note})")]
    table = Table(
        title=f"Idle time per GPU stream, µs per step (kernel wait: gaps < {result.kernel_wait_threshold_us:g} µs)"
        + (f", {result.window}" if result.window else "")
    )
    for column in ("stream", "busy", "idle", "host wait", "kernel wait", "other", "busy %"):
        table.add_column(
            column if column in ("stream", "busy %") else f"{column} µs/step",
            justify="left" if column == "stream" else "right",
        )
    droppable(table, "other µs/step", "kernel wait µs/step")
    for row in result.streams[:STREAMS_SHOWN]:
        table.add_row(
            f"GPU {row.device} stream {row.stream}",
            us_text(row.busy_us_per_step),
            us_text(row.idle_us_per_step),
            us_text(row.host_wait_us_per_step),
            us_text(row.kernel_wait_us_per_step),
            us_text(row.other_us_per_step),
            pct_text(row.busy_pct),
        )
    return [table]


TOP_ACTIONS = 3


def actions_parts(result: Actions, report: AnalysisResults) -> Parts:
    """The summary at the top of `analyze` (at most 15 lines at 80 columns): what the step costs, what limits
    it, the top actions with predicted step time and saving and one line of evidence each, where to read more."""
    head = Text()
    head.append("What to do next", style="bold")
    s = result.summary
    if s.step_us is None:
        head.append(f": — ({result.note})")
        return [head]
    free = report.summary.profiler_free
    source = free.source_words() if free is not None else None
    ranged = free is not None and free.source == "estimated" and free.estimate_low_us is not None
    head.append(f" — step {us_text(s.step_us)} µs profiled (mean span of {s.steps})")
    if s.profiler_free_step_us is not None:
        head.append(
            f"\nWithout the profiler: {us_text(s.profiler_free_step_us)} µs ({source}"
            + (")" if ranged else ", docs/profiler_overhead.md)")  # the range or the doc: 80 columns
        )
    path = report.get(CriticalPath)
    if path is not None and path.what_if:
        rows = {w.change: w.saved_us for w in path.what_if}
        cpu, gpu = rows.get("all CPU work 2× faster"), rows.get("all GPU work 2× faster")
        head.append(f"\nLimit: {s.limit} — CPU 2× faster saves {us_text(cpu)} µs, GPU 2× faster {us_text(gpu)} µs")
    else:
        head.append(f"\nLimit: {s.limit}")
    if s.data_loading_us is not None and s.data_loading_us > 0:
        share = f", {pct_text(100 * s.data_loading_us / s.step_us)} of the step" if s.step_us else ""
        head.append(f"\nDataLoader: next batch {us_text(s.data_loading_us)} µs/step{share} (actions keep it)")
    helpful = [a for a in result.actions if a.saved_us > 0]  # an action predicted to slow the step: JSON only
    if not helpful:
        head.append("\nNo modelled action shortens the step" + (f" ({result.note})" if result.note else ""))
    used = str(head).count("\n") + 2  # the lines so far and the closing "More:" line
    for rank, action in enumerate(helpful[:TOP_ACTIONS], 1):
        targets = " → ".join(action.targets) if action.action == "fuse" else ", ".join(action.targets)
        if len(targets) > 22:
            targets = targets[:21].rstrip(", →:0123456789") + "…"  # never a cut number before the ellipsis
        lines = _action_lines(rank, action, targets, s.step_us)
        if used + len(lines) > SUMMARY_LINES:
            if used < SUMMARY_LINES:
                head.append(f"\n({len(helpful) - rank + 1} more: --format json)", style="dim")
            break
        used += len(lines)
        head.append("\n" + lines[0])
        head.append("\n" + lines[1])
        for line in lines[2:]:
            head.append("\n" + line, style="dim")
    head.append("\nMore: --section bound, critical_path, fusion; models: docs/actions.md")
    return [head]


SUMMARY_COLUMNS = 80
SUMMARY_LINES = 15


def _action_lines(rank: int, action: Action, targets: str, step_us: float) -> list[str]:
    """One action's lines, each at most 80 columns: the saving; the step before → predicted with the stated
    range of the predicted step and its notes (`range_notes`); the evidence, wrapped under it."""
    notes = range_notes(action, step_us)
    stated = f"(range {action.low:,.0f}–{action.high:,.0f}" + (f"; {', '.join(notes)})" if notes else ")")
    second = f"   step {us_text(step_us)} → {us_text(action.predicted_step_us)} µs {stated}"
    if len(second) > SUMMARY_COLUMNS:  # the step before is on the first line of the summary
        second = f"   predicted {us_text(action.predicted_step_us)} µs {stated}"
    if len(second) > SUMMARY_COLUMNS:
        second = f"   predicted {us_text(action.predicted_step_us)} µs ({action.low:,.0f}–{action.high:,.0f})"
    evidence = textwrap.wrap(action.basis, SUMMARY_COLUMNS - 3, break_on_hyphens=False) or [""]
    return [
        f"{rank}. {action.action} ({targets}): saves {us_text(action.saved_us)} µs",
        second,
        *(f"   {line}" for line in evidence),
    ]


MAX_OPS_SHOWN = 8


def memory_parts(result: Memory, report: AnalysisResults) -> Parts:
    if result.allocations_per_step is None:
        return [Text(f"Memory: — ({result.note})")]
    head = Text(
        f"Memory ({result.note}): peak allocated {bytes_text(result.peak_allocated_bytes)}, peak reserved "
        f"{bytes_text(result.peak_reserved_bytes)} (medians over steps); "
        f"{result.allocations_per_step:,.0f} allocations, {bytes_text(result.allocated_bytes_per_step)} per step; "
        f"outliving the step: {whole_text(result.outliving_allocations_per_step)} allocations, "
        f"{bytes_text(result.outliving_bytes_per_step)}"
    )
    if not result.by_op:
        return [head]
    table = Table(title="Ops that allocate most (outermost CPU op), per step")
    for column in ("op", "allocs", "bytes", "share"):
        table.add_column(column, justify="left" if column == "op" else "right", overflow="fold")
    for row in result.by_op[:MAX_OPS_SHOWN]:
        table.add_row(
            row.op[:60],
            f"{row.allocations_per_step:,.0f}",
            bytes_text(row.bytes_per_step),
            f"{100 * row.share_of_bytes:.1f} %",
        )
    return [head, table]
