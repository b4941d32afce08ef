"""Plotly figures of a trace for notebooks: the HTML report's own figures, built by the report's builders.

>>> import tracelens
>>> trace = tracelens.load("traces/h200/eager_mlp.json.gz")
>>> tracelens.plot.gpu_time_by_category(trace)     # renders inline in Jupyter
>>> tracelens.plot.timeline(trace)
>>> tracelens.plot.compare({"eager": eager, "compiled": compiled})

Every function returns a new `plotly.graph_objects.Figure`: the figure of the report panel of the same name
(`tracelens report` draws the same one, from the same builder), with the panel's title as the figure's title.
A figure whose data the trace does not have (no GPU activity, no FLOP model for any kernel, ...) raises
`TracelensError` saying why, as the report's panel says "not available". Analysis figures take a `Trace`
(analyzed here) or an `AnalysisResults` (`tracelens.analyze(trace)`, to analyze once for several figures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import plotly.graph_objects as go

from tracelens.analyses import analyze
from tracelens.analyses.compare import compare_variants, variant_name
from tracelens.analyses.critical_path import CriticalPath
from tracelens.analyses.summary import gpu_activity_frame
from tracelens.errors import TracelensError
from tracelens.model.trace import Trace
from tracelens.renderers.analyses.dispatch import dispatch_panel
from tracelens.renderers.analyses.roofline import roofline_panel
from tracelens.report import breakdowns
from tracelens.report import compare as charts
from tracelens.report.timeline import MAX_SLICES, bake_page_hovers, findings_by_row, timeline_panel

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report.document import Panel

__all__ = [
    "compare",
    "dispatch_layers",
    "gpu_time_by_category",
    "gpu_time_by_op",
    "roofline",
    "step_times",
    "timeline",
]


def timeline(trace: Trace, max_slices: int | None = None, focus_step: int | None = None) -> go.Figure:
    """The report's timeline: one lane per CPU thread and GPU stream, slices of the focus step (default: the
    median-length step; `focus_step` = a ProfilerStep number), busy bands elsewhere, GPU utilization strips, the
    critical path as a red line."""
    budget = MAX_SLICES if max_slices is None else max_slices
    results = analyze(trace, step=focus_step)
    path = results.get(CriticalPath)
    rows = path.path_rows if path is not None else None
    gpu = gpu_activity_frame(trace)
    notes = findings_by_row(gpu, results)
    return bake_page_hovers(
        _figure(timeline_panel(trace, gpu, budget, focus_step, highlight_rows=rows, row_notes=notes))
    )


def gpu_time_by_category(source: Trace | AnalysisResults) -> go.Figure:
    """GPU time per step (µs) by kernel category."""
    return _figure(breakdowns.gpu_time_by_category(_report(source).summary))


def gpu_time_by_op(source: Trace | AnalysisResults) -> go.Figure:
    """GPU kernel time per step by the op that launched it (top 15)."""
    return _figure(breakdowns.gpu_time_by_op(_report(source).summary))


def step_times(source: Trace | AnalysisResults) -> go.Figure:
    """Per analyzed step: step, CPU and GPU busy µs."""
    return _figure(breakdowns.step_times(_report(source).summary))


def dispatch_layers(source: Trace | AnalysisResults) -> go.Figure:
    """CPU time per step by dispatch layer (Python, aten ops, launches, syncs, torch.compile wrappers, ...)."""
    return _figure(dispatch_panel(_report(source)))


def roofline(source: Trace | AnalysisResults) -> go.Figure:
    """Achieved TFLOP/s against arithmetic intensity per kernel, under the device's roofs."""
    return _figure(roofline_panel(_report(source)))


def compare(
    variants: Mapping[str, Trace] | Sequence[Trace], kind: Literal["gpu_time", "kernels", "steps"] = "gpu_time"
) -> go.Figure:
    """Several traces side by side, as the report of several traces shows them: `kind="gpu_time"` GPU µs per
    step by kernel category, `"kernels"` kernels per step by category, `"steps"` the median step's times.
    `variants`: name → trace, or traces (named by their recorded variant or file stem)."""
    pairs = list(variants.items()) if isinstance(variants, Mapping) else [(variant_name(t), t) for t in variants]
    if len(pairs) < 2:
        raise TracelensError("compare needs at least two traces")
    items = [(name, trace, analyze(trace)) for name, trace in pairs]
    if kind == "gpu_time":
        return _figure(charts.gpu_category_chart(items))
    if kind == "kernels":
        return _figure(charts.kernel_count_chart(compare_variants(items)))
    if kind == "steps":
        return _figure(charts.step_chart(items))
    raise TracelensError(f'unknown kind {kind!r}: use "gpu_time", "kernels" or "steps"')


def _report(source: Trace | AnalysisResults) -> AnalysisResults:
    if isinstance(source, Trace):
        return analyze(source)
    return source


def _figure(panel: Panel) -> go.Figure:
    """The panel's figure (a copy, titled with the panel's title), or why there is none."""
    if panel.figure is None:
        raise TracelensError(f"{panel.title}: {panel.note or 'not available'}")
    figure = go.Figure(panel.figure)
    figure.update_layout(title={"text": panel.title})
    return figure
