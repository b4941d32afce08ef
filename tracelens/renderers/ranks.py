"""The cross-rank view: a rich table for people and the versioned `tracelens.ranks/1` JSON for programs."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from tracelens import __version__
from tracelens.analyses.ranks import RanksResults
from tracelens.renderers.jsonout import _clean, dumps, plain
from tracelens.renderers.tables import droppable
from tracelens.renderers.text import make_console, print_parts, render_to_string
from tracelens.renderers.textsafe import safe_text
from tracelens.units import ms_text, rate_text

RANKS_SCHEMA = "tracelens.ranks/1"


def ranks_dict(results: RanksResults) -> dict[str, Any]:
    """The `tracelens.ranks/1` document (field names are stable: add, never rename)."""
    document = {
        "schema": RANKS_SCHEMA,
        "tool": {"name": "tracelens", "version": __version__},
        **plain(results),
    }
    return dict(_clean(document))


def ranks_table(results: RanksResults) -> Table:
    """One row per trace: for ranks of one run, the rank first and its skew figures; for separate traces (no rank,
    no waiting), the file first, never dropped at any width."""
    if not results.one_run:
        return _separate_table(results)
    table = Table(title=f"Ranks of {results.source} (medians per step)", title_justify="left")
    table.add_column("rank", justify="right")
    table.add_column("steps total", justify="right")
    for column in ("step", "compute", "collectives", "waiting", "transfer"):
        table.add_column(f"{column} ms/step", justify="right")
    table.add_column("collective calls/step", justify="right")
    table.add_column("")
    table.add_column("file")
    droppable(table, "transfer ms/step", "steps total", "file")
    for row in results.rows:
        flags = []
        if row.straggler:
            flags.append("straggler")
        if row.rank is not None and row.rank == results.slowest_rank:
            flags.append("slowest")
        table.add_row(
            "?" if row.rank is None else str(row.rank),
            str(row.steps),
            ms_text(row.step_us),
            ms_text(row.compute_us),
            ms_text(row.collective_us),
            ms_text(row.waiting_us),
            ms_text(row.transfer_us),
            rate_text(row.collective_calls),
            ", ".join(flags),
            row.path,
        )
    return table


def _separate_table(results: RanksResults) -> Table:
    """Separate traces: the file, its steps and per-step medians (no rank, no waiting: they are not one run)."""
    table = Table(
        title=f"Separate traces (not ranks of one run) in {results.source} (medians per step)", title_justify="left"
    )
    table.add_column("file")
    table.add_column("steps total", justify="right")
    for column in ("step", "compute", "collectives", "transfer"):
        table.add_column(f"{column} ms/step", justify="right")
    droppable(table, "transfer ms/step", "collectives ms/step", "steps total")
    for row in results.rows:
        table.add_row(
            row.path,
            str(row.steps),
            ms_text(row.step_us),
            ms_text(row.compute_us),
            ms_text(row.collective_us),
            ms_text(row.transfer_us),
        )
    return table


def summary_lines(results: RanksResults) -> list[str]:
    world = f" of world size {results.world_size}" if results.world_size is not None else ""
    if results.one_run:
        lines = [f"{len(results.ranks_found)} rank(s){world}: {_ranges(results.ranks_found) or 'none'}"]
    else:
        lines = [
            f"not ranks of one run: {results.separate_reason}; each trace is analyzed on its own "
            "(no skew, waiting, straggler or slowest rank)"
        ]
    if results.missing_ranks and results.one_run:
        lines.append(f"missing ranks: {_ranges(results.missing_ranks)}")
    if results.duplicate_ranks and results.one_run:
        lines.append(f"ranks with more than one trace: {_ranges(results.duplicate_ranks)}")
    if results.unranked_files and results.one_run:
        lines.append(f"traces without distributedInfo.rank: {', '.join(results.unranked_files)}")
    for failure in results.failed_files:
        lines.append(f"unusable: {failure}")
    if results.step_us_median == results.step_us_median:
        lines.append(
            f"step time: median {ms_text(results.step_us_median)} ms, fastest {ms_text(results.step_us_min)} ms "
            f"(rank {results.fastest_rank}), slowest {ms_text(results.step_us_max)} ms (rank {results.slowest_rank}); "
            f"skew {results.skew_pct:.1f} % of the median"
        )
    if results.matched_collectives:
        lines.append(
            f"waiting = time in a collective kernel beyond the fastest rank's duration of the same call "
            f"({results.matched_collectives} calls matched per rank)"
        )
    if results.one_run:
        lines.append(
            f"stragglers (ranks the others wait for): {_ranges(results.stragglers)}"
            if results.stragglers
            else "stragglers: none found"
        )
    return lines + results.notes


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    spans: list[list[int]] = []
    for number in sorted(set(numbers)):
        if spans and spans[-1][1] == number - 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


class RanksTextRenderer:
    def __init__(self, color: bool = False, width: int | None = None) -> None:
        self.color = color
        self.width = width

    def render(self, result: RanksResults) -> str:
        console = make_console(self.color, self.width)
        print_parts(console, [ranks_table(result)])
        for line in summary_lines(result):
            console.print(safe_text(line))
        return render_to_string(console)


class RanksJsonRenderer:
    def render(self, result: RanksResults) -> str:
        return dumps(ranks_dict(result))
