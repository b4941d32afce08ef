"""Fusion opportunities shown: their section of `tracelens analyze` (`fusion_parts`: a table of the groups of
kernels a fuser could merge) and their panel of the report (`fusion_panels`: the same, in "Findings").
The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from tracelens.analyses.fusion import Fusion
from tracelens.analyses.roofline import Roofline
from tracelens.renderers.analyses import Parts
from tracelens.renderers.tables import count as _count
from tracelens.renderers.tables import droppable
from tracelens.units import us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


MAX_FUSION_ROWS = 10
UNSEEN_PCT = 75.0  # below this share of modelled kernel time, "none found" says how much fusion could see


def fusion_parts(fusion: Fusion, results: AnalysisResults) -> Parts:
    if results.summary.empty_reason:
        return [Text(f"Fusion opportunities: — ({results.summary.empty_reason})")]
    roofline = results.get(Roofline)
    modelled = roofline.modelled_kernel_time_pct if roofline is not None else None
    return [fusion_table(fusion, modelled)]


def fusion_table(fusion: Fusion, modelled_pct: float | None = None) -> Table | Text:
    """The opportunities; where there are none, why that may be (`modelled_pct`: the share of kernel time the
    roofline models, the kernels fusion can link)."""
    if not fusion.opportunities:
        reason = "" if fusion.shapes_recorded else " (the trace has no Input Dims: record with record_shapes=True)"
        if fusion.shapes_recorded and modelled_pct is not None and modelled_pct < UNSEEN_PCT:
            reason = (
                f" among the kernels with a model ({modelled_pct:.1f} % of kernel time; the others, without "
                "recorded shapes, cannot be linked: docs/roofline.md)"
            )
        return Text(f"Fusion opportunities: none found{reason}")
    epilogue = (
        f"; GEMM epilogues {us_text(fusion.gemm_epilogue_saving_us_per_step)} µs"
        if fusion.gemm_epilogue_saving_us_per_step
        else ""
    )
    table = Table(
        title=(
            f"Fusion opportunities (est. saving {us_text(fusion.est_saving_us_per_step)} µs per step{epilogue})"
            if any(o.kind == "chain" for o in fusion.opportunities)
            else f"Fusion opportunities (no chain{epilogue})"
        ),
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


MAX_PANEL_ROWS = 20


def fusion_panels(fusion: Any, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    return page.AnalysisPanels(findings=(fusion_panel(results),))


def fusion_panel(results: AnalysisResults) -> page.Panel:
    """Runs of kernels that could be one kernel, with the estimated saving per step."""
    from tracelens.report import document as page
    from tracelens.report.generic import MISSING, finding, format_value

    panel_id, title = "fusion", "Fusion opportunities"
    fusion = finding(results, "fusion")
    if fusion is None:
        return page.unavailable(panel_id, title, MISSING)
    opportunities = list(getattr(fusion, "opportunities", None) or [])
    if not opportunities:
        return page.Panel(id=panel_id, title=title, note="No fusion opportunity found in the analyzed steps.")
    rows = tuple(
        (
            ("GEMM epilogue: " if getattr(o, "kind", "chain") == "gemm_epilogue" else "")
            + " → ".join(str(k) for k in o.kernels),
            " → ".join(dict.fromkeys(str(op) for op in o.ops)),
            format_value(float(o.calls_per_step)),
            format_value(float(o.kernel_us_per_step)),
            format_value(float(o.est_saving_us)),
        )
        for o in opportunities[:MAX_PANEL_ROWS]
    )
    columns = ("kernels (stream order)", "ops", "runs/step", "kernel µs/step", "est. saving µs/step")
    saving = getattr(fusion, "est_saving_us_per_step", None)
    epilogues = sum(getattr(o, "kind", "chain") == "gemm_epilogue" for o in opportunities)
    chains = len(opportunities) - epilogues
    note = f"{chains} chain{'s' if chains != 1 else ''}: estimated saving {format_value(saving)} µs per step."
    epilogue = getattr(fusion, "gemm_epilogue_saving_us_per_step", 0.0)
    if epilogues:
        overlap = f" (overlapping {'those chains' if chains != 1 else 'that chain'})" if chains else ""
        note += (
            f" {epilogues} GEMM epilogue{'s' if epilogues != 1 else ''}{overlap}: {format_value(epilogue)} µs per step."
        )
    if getattr(fusion, "shapes_recorded", True) is False:
        note += " Shapes were not recorded (record_shapes=False): savings are rough."
    return page.Panel(id=panel_id, title=title, table=page.Table(columns, rows), note=note)
