"""torch.compile shown: its section of `tracelens analyze` (`compiled_parts`: the note on excluded steps,
autotuning, the compiled regions and CUDA-graph replays per step) and its panel of the report
(`compiled_panels`: regions, graph breaks and recompiles, in "Findings"). The contract:
`tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from tracelens.analyses.compiled import Compiled
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import count as _count
from tracelens.renderers.textsafe import safe_text
from tracelens.units import us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


def _nested_lookups(compiled: Compiled) -> str:
    nested = compiled.cache_lookup_us_per_step - compiled.cache_lookup_outside_us_per_step
    return f" (and {us_text(nested)} µs/step inside regions: nested compiled calls)" if nested >= 0.05 else ""


def compiled_parts(compiled: Compiled, results: AnalysisResults) -> Parts:
    parts: Parts = []
    if compiled.note:
        head = "torch.compile" if compiled.regions or compiled.compile_in_window else "Warm-up"  # a capture alone
        parts.append(safe_text(f"{head}: {compiled.note}", style="yellow"))
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


def compiled_panels(compiled: Any, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    return page.AnalysisPanels(findings=(compiled_panel(results),))


def compiled_panel(results: AnalysisResults) -> page.Panel:
    """torch.compile regions, graph breaks and recompiles."""
    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding, format_value

    panel_id, title = "compiled", "torch.compile"
    compiled = finding(results, "compiled")
    if compiled is None:
        return page.unavailable(panel_id, title, MISSING)
    regions = list(getattr(compiled, "regions", None) or [])
    note = str(getattr(compiled, "note", "") or "")
    if not regions:
        return page.Panel(id=panel_id, title=title, note=note or "No torch.compile region in the trace.")
    rows = tuple(
        (
            str(r.name),
            format_value(float(r.calls_per_step)),
            format_value(float(r.us_per_step)),
            format_value(float(r.overhead_us_per_step)),
        )
        for r in regions
    )
    columns = ("region", "calls/step", "µs/step", "wrapper overhead µs/step")
    breaks = getattr(compiled, "graph_breaks", None)
    head = f"Graph breaks: {format_value(breaks)}. " if breaks is not None else ""
    return page.Panel(id=panel_id, title=title, table=page.Table(columns, rows), note=head + note)
