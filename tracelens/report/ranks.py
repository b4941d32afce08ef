"""The ranks page of a run's report: step time, compute, transfer and waiting per rank, and which rank the rest
of the page shows in full.

Contract: `ranks_section(results, focus_rank, why) -> Section`; pure. Every figure comes from
`analyses.ranks.RanksResults` (the view `tracelens analyze RUN` prints); no figure is computed here.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from tracelens.analyses.ranks import RankRow, RanksResults
from tracelens.report.document import Panel, Section, Table
from tracelens.report.palette import category_color
from tracelens.units import ms_text, pct_text, rate_text

RANKS_COLUMNS = (
    "rank",
    "steps",
    "step ms (median)",
    "compute ms per step",
    "collectives ms per step",
    "waiting ms per step",
    "transfer ms per step",
    "collective calls per step",
    "",
    "file",
)
FOCUS_COLOR = "#d62728"
RANK_COLOR = "#4c78a8"


def ranks_section(results: RanksResults, focus_rank: int, why: str) -> Section:
    """The first section of a run's report."""
    panels = (step_chart(results, focus_rank), time_chart(results), ranks_table(results, focus_rank))
    notes = (
        f"The rest of this page is the full report of rank {focus_rank}: {why}. "
        "Pick another with tracelens report RUN --rank N.",
        _summary(results),
    )
    return Section(id="ranks", title=f"Ranks of {results.source}", panels=panels, notes=notes)


def step_chart(results: RanksResults, focus_rank: int) -> Panel:
    """One bar per rank: its median step time (ms); the rank shown in full in red, the median as a line."""
    rows = _ranked(results)
    fig = go.Figure(
        go.Bar(
            x=[f"rank {row.rank}" for row in rows],
            y=[row.step_us / 1000 for row in rows],
            marker_color=[FOCUS_COLOR if row.rank == focus_rank else RANK_COLOR for row in rows],
            hovertemplate="%{x}<br>step: %{y:,.3f} ms (median)<extra></extra>",
        )
    )
    if math.isfinite(results.step_us_median):
        fig.add_hline(
            y=results.step_us_median / 1000,
            line_dash="dot",
            annotation_text=f"median {results.step_us_median / 1000:,.3f} ms",
        )
    fig.update_layout(template="plotly_white", height=340, yaxis_title="step time, ms (median step)", margin={"t": 30})
    return Panel(
        id="ranks-steps", title=f"Step time per rank (skew {pct_text(results.skew_pct)} of the median)", figure=fig
    )


def time_chart(results: RanksResults) -> Panel:
    """Stacked bars per rank: compute, collective transfer and collective waiting, ms per step."""
    rows = _ranked(results)
    parts = (
        ("compute", [row.compute_us for row in rows], category_color("gemm")),
        ("collective transfer", [row.transfer_us for row in rows], category_color("communication")),
        ("waiting in collectives", [row.waiting_us for row in rows], "#7f7f7f"),
    )
    fig = go.Figure()
    for name, values_us, color in parts:
        if all(math.isnan(v) for v in values_us):
            continue
        fig.add_trace(
            go.Bar(
                x=[f"rank {row.rank}" for row in rows],
                y=[None if math.isnan(v) else v / 1000 for v in values_us],
                name=name,
                marker_color=color,
                hovertemplate=f"%{{x}}<br>{name}: %{{y:,.3f}} ms per step<extra></extra>",
            )
        )
    fig.update_layout(template="plotly_white", barmode="stack", height=340, yaxis_title="GPU ms per step")
    title = "GPU kernel time per rank: compute, transfer and waiting"
    if not results.matched_collectives:
        return Panel(id="ranks-wait", title=title + " (no collectives matched: waiting unknown)", figure=fig)
    return Panel(id="ranks-wait", title=title, figure=fig)


def ranks_table(results: RanksResults, focus_rank: int) -> Panel:
    rows = tuple(
        (
            str(row.rank),
            str(row.steps),
            ms_text(row.step_us),
            ms_text(row.compute_us),
            ms_text(row.collective_us),
            ms_text(row.waiting_us),
            ms_text(row.transfer_us),
            rate_text(row.collective_calls),
            ", ".join(_flags(results, row, focus_rank)),
            row.path,
        )
        for row in _ranked(results)
    )
    return Panel(id="ranks-table", title="Ranks (per step)", table=Table(RANKS_COLUMNS, rows))


def _flags(results: RanksResults, row: RankRow, focus_rank: int) -> list[str]:
    flags = []
    if row.straggler:
        flags.append("straggler")
    if row.rank == results.slowest_rank:
        flags.append("slowest")
    if row.rank == focus_rank:
        flags.append("shown below")
    return flags


def _summary(results: RanksResults) -> str:
    world = f" of world size {results.world_size}" if results.world_size is not None else ""
    parts = [f"{len(results.ranks_found)} rank(s){world}"]
    if results.missing_ranks:
        parts.append(f"missing ranks {', '.join(map(str, results.missing_ranks))}")
    if math.isfinite(results.step_us_median):
        parts.append(
            f"step time median {ms_text(results.step_us_median)} ms, fastest {ms_text(results.step_us_min)} ms "
            f"(rank {results.fastest_rank}), slowest {ms_text(results.step_us_max)} ms (rank {results.slowest_rank})"
        )
    if results.matched_collectives:
        parts.append(
            "waiting = time in a collective kernel beyond the fastest rank's duration of the same call "
            f"({results.matched_collectives} calls matched per rank)"
        )
    stragglers = ", ".join(map(str, results.stragglers)) or "none found"
    parts.append(f"stragglers (ranks the others wait for): {stragglers}")
    return "; ".join(parts) + "."


def _ranked(results: RanksResults) -> list[RankRow]:
    return [row for row in results.rows if row.rank is not None]
