"""The report page assembled: the page data (`tracelens.report`) of a loaded `Trace` and its `AnalysisResults`,
with each analysis' panels from its registry entry; `tracelens.renderers.html` writes it as HTML.

Contract: `build_report([(trace, results), ...], max_slices=...) -> ReportDocument`; pure, deterministic (the same
input gives the same figures, panels in a fixed order with fixed ids). With several traces a comparison section
comes first and the timeline budget `max_slices` is shared between them. Per trace: overview and timeline (from
the summary), "Where the time goes" (the summary's charts, every analysis' `breakdowns` panels in registry
order, the kernel table) and "Findings" (every analysis' `findings` panels).
"""

from __future__ import annotations

from collections.abc import Sequence

from tracelens.analyses import AnalysisResults
from tracelens.analyses.compare import variant_name
from tracelens.analyses.critical_path import CriticalPath
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.model.trace import Trace
from tracelens.naming import unique_labels
from tracelens.records import replace
from tracelens.renderers.sections import renderer_of
from tracelens.report import breakdowns
from tracelens.report.compare import comparison_section
from tracelens.report.document import AnalysisPanels, Panel, ReportDocument, Section, Table
from tracelens.report.overview import facts_panel, per_step_panel
from tracelens.report.timeline import MAX_SLICES, finding_links, findings_by_row, timeline_panel

__all__ = ["MAX_SLICES", "Panel", "ReportDocument", "Section", "Table", "build_report"]

Input = tuple[Trace, AnalysisResults]


def build_report(
    inputs: Sequence[Input], max_slices: int = MAX_SLICES, focus_step: int | None = None
) -> ReportDocument:
    """The report of one trace, or of several with a comparison first."""
    if not inputs:
        raise ValueError("build_report needs at least one trace")
    labels = unique_labels([variant_name(trace) for trace, _ in inputs])
    several = len(inputs) > 1
    sections: list[Section] = []
    if several:
        sections.append(comparison_section([(label, t, r) for label, (t, r) in zip(labels, inputs, strict=True)]))
    budget = max(0, max_slices) // len(inputs)
    for index, ((trace, results), label) in enumerate(zip(inputs, labels, strict=True)):
        prefix = f"t{index}-" if several else ""
        sections += trace_sections(trace, results, prefix, label if several else "", budget, focus_step)
    warnings = tuple(
        f"{label}: {w}" if several else w
        for (_, r), label in zip(inputs, labels, strict=True)
        for w in r.summary.warnings
    )
    title = "tracelens report: " + (", ".join(labels) if several else labels[0])
    paths = ", ".join(trace.path.name if trace.path else "?" for trace, _ in inputs)
    return ReportDocument(title=title, subtitle=paths, sections=tuple(sections), warnings=warnings)


def trace_sections(
    trace: Trace, results: AnalysisResults, prefix: str, label: str, max_slices: int, focus_step: int | None = None
) -> list[Section]:
    """Overview, timeline, breakdowns and findings of one trace; ids start with `prefix`."""
    summary = results.summary
    head = f"{label}: " if label else ""
    path = results.get(CriticalPath)
    gpu = gpu_activity_frame(trace)
    timeline = timeline_panel(
        trace,
        gpu,
        max_slices,
        focus_step,
        panel_id=f"{prefix}timeline",
        highlight_rows=path.path_rows if path is not None else None,
        row_notes=findings_by_row(gpu, results),
    )
    if timeline.figure is not None:
        timeline = replace(timeline, links=tuple(finding_links(trace, gpu, results, focus_step)))
    panels = analysis_panels(results)
    return [
        # the first screen: what to do next, the trace facts (folded), then the timeline (the per-step table follows it)
        Section(
            f"{prefix}overview",
            f"{head}Overview",
            _ids(prefix, *(q for p in panels for q in p.overview), facts_panel(summary)),
        ),
        Section(f"{prefix}timeline-section", f"{head}Timeline", (timeline,)),
        Section(
            f"{prefix}breakdowns",
            f"{head}Where the time goes",
            _ids(
                prefix,
                per_step_panel(summary),
                breakdowns.gpu_time_by_category(summary),
                breakdowns.gpu_time_by_op(summary),
                breakdowns.step_times(summary),
                *(panel for p in panels for panel in p.breakdowns),
                breakdowns.kernel_table(summary),
            ),
        ),
        Section(
            f"{prefix}findings",
            f"{head}Findings",
            _ids(prefix, *(panel for p in panels for panel in p.findings)),
        ),
    ]


def analysis_panels(results: AnalysisResults) -> list[AnalysisPanels]:
    """Every registered analysis' panels, in registry order; an analysis that did not run gets its panels'
    "not available" notes (its `panels` renderer is given None)."""
    out = []
    for entry in results.analyses:
        render = renderer_of(entry, "panels")
        if render is not None:
            out.append(render(getattr(results, entry.name, None), results))
    return out


def _ids(prefix: str, *panels: Panel) -> tuple[Panel, ...]:
    if not prefix:
        return panels
    return tuple(replace(p, id=prefix + p.id) for p in panels)
