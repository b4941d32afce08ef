"""Communication/computation overlap shown: its section of `tracelens analyze` (`comm_overlap_parts`: one
line) and its panel of the report (`comm_overlap_panels`: overlapped and exposed collective time per
step, in "Findings"). The contract: `tracelens.renderers.analyses`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tracelens.analyses.comm_overlap import CommOverlap
from tracelens.renderers.analyses import Parts
from tracelens.units import pct_text, us_text

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults
    from tracelens.report import document as page


def comm_overlap_parts(result: CommOverlap, results: AnalysisResults) -> Parts:
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


def comm_overlap_panels(result: CommOverlap | None, results: AnalysisResults) -> page.AnalysisPanels:
    from tracelens.report import document as page

    panel_id, title = "comm-overlap", "Communication/computation overlap"
    if result is None or result.comm_kernels == 0:
        return page.AnalysisPanels(
            findings=(page.unavailable(panel_id, title, "no communication kernels" if result else "not run"),)
        )
    rows = tuple(
        (str(s.number), us_text(s.comm_us), us_text(s.overlapped_us), us_text(s.exposed_us), pct_text(s.overlap_pct))
        for s in result.steps
    )
    table = page.Table(columns=("step", "collectives µs", "overlapped µs", "exposed µs", "overlap"), rows=rows)
    note = f"{pct_text(result.overlap_pct)} of collective time overlapped by compute kernels ({result.note})."
    return page.AnalysisPanels(findings=(page.Panel(id=panel_id, title=title, table=table, note=note),))
