"""`tracelens report TRACE...`: one self-contained interactive HTML page (a comparison with several traces)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tracelens._cache import Cache
from tracelens.cli.common import (
    add_cache_argument,
    add_capture_argument,
    command_inputs,
    load_with_feedback,
    print_warnings,
)
from tracelens.cli.output import check_writable, is_stdout, status, write_output
from tracelens.cli.runs import add_rank_argument, is_run_source, open_run, run_stem
from tracelens.errors import TracelensError
from tracelens.naming import trace_stem
from tracelens.records import replace

if TYPE_CHECKING:
    from tracelens.analyses.ranks import RanksResults
    from tracelens.loader.et import ExecutionTrace

SUFFIX = ".tracelens.html"


def default_output(traces: list[Path]) -> Path:
    """`x.json.gz` → `./x.tracelens.html` (in the current directory: inputs may sit in read-only folders);
    several traces → `./x-vs-y[-and-N-more].tracelens.html`."""
    stems = [trace_stem(path) for path in traces]
    if len(stems) == 1:
        name = stems[0]
    elif len(stems) == 2:
        name = f"{stems[0]}-vs-{stems[1]}"
    else:
        name = f"{stems[0]}-vs-{stems[1]}-and-{len(stems) - 2}-more"
    return Path(name + SUFFIX)


class CachedPage(msgspec.Struct, frozen=True):
    """What `tracelens report` writes (`tracelens._cache.results`): the page and each input's load warnings."""

    page: bytes  # UTF-8 HTML
    warnings: tuple[tuple[str, ...], ...]  # one tuple per input, in the order given


class ReportCommand:
    """Write an interactive HTML report (timeline, breakdowns, findings) that works offline. Given a run folder
    or tar archive of rank traces: a ranks page (step time, compute and waiting per rank), then the full report
    of the straggler (else the slowest rank) or of --rank N."""

    name = "report"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "traces",
            type=Path,
            nargs="+",
            metavar="TRACE",
            help="one or more traces, or one run folder / tar archive of rank traces",
        )
        parser.add_argument(
            "-o", "--output", type=Path, help=f"the HTML file to write, - for stdout (default: ./<trace name>{SUFFIX})"
        )
        parser.add_argument("--force", action="store_true", help="overwrite an existing regular output file")
        parser.add_argument("--step", type=int, help="analyze only ProfilerStep#N and draw it in full")
        parser.add_argument(
            "--max-slices",
            type=int,
            default=None,
            help="timeline slices drawn one by one before merging the rest (default: 40,000)",
        )
        parser.add_argument(
            "--et",
            type=Path,
            action="append",
            metavar="FILE",
            help="a PyTorch execution trace taken with a TRACE (give one per TRACE, in order): fusion links ops "
            "by tensor identity",
        )
        add_capture_argument(parser)
        add_cache_argument(parser)
        add_rank_argument(
            parser,
            "of a run folder or tar archive: show rank N in full (default: the straggler, else the slowest rank)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from tracelens._cache.results import library_versions

        if any(is_run_source(path) for path in args.traces):
            return _report_run(args)
        if args.rank is not None:
            raise TracelensError("--rank picks a rank of a run folder or tar archive, not of trace files")

        max_slices = None if args.max_slices is None else max(args.max_slices, 0)
        output = args.output if args.output is not None else default_output(args.traces)
        inputs = command_inputs(args)
        check_writable(output, args.force, inputs)
        started = time.perf_counter()
        execution_traces = _load_ets(args.et or [], len(args.traces))
        options = {"step": args.step, "max_slices": max_slices, **library_versions("plotly", "pandas")}
        options["capture"] = args.capture is not None  # keyed: the capture file is among the inputs
        capture = [args.capture] if args.capture is not None else []
        slot = args.cache.lookup_result("pages", [*args.traces, *(args.et or []), *capture], options)
        result = slot.value(CachedPage)
        if result is not None:  # a computed page's warnings are printed as each trace loads
            for path, warnings in zip(args.traces, result.warnings, strict=True):
                print_warnings(path, warnings)
        else:
            result = _build_page(
                args.traces, args.step, max_slices, args.cache, execution_traces=execution_traces, capture=args.capture
            )
            args.cache.store_result(slot, result, CachedPage)
        write_output(output, result.page, args.force, inputs)
        elapsed = time.perf_counter() - started
        if not is_stdout(output):
            status(f"Wrote {output} ({len(result.page) / 1e6:.1f} MB in {elapsed:.1f} s)")
        return 0


def _load_ets(paths: list[Path], traces: int) -> list[ExecutionTrace]:
    from tracelens.loader.et import load_execution_trace

    if len(paths) > traces:
        raise TracelensError(f"{len(paths)} --et files for {traces} trace(s): give at most one per TRACE, in order")
    return [load_execution_trace(path) for path in paths]


def _build_page(
    paths: list[Path],
    step: int | None,
    max_slices: int | None,
    cache: Cache,
    ranks: tuple[RanksResults, int, str] | None = None,
    execution_traces: list[ExecutionTrace] | None = None,
    capture: Path | None = None,
) -> CachedPage:
    """Load and analyze every trace (printing load warnings as it goes) and render the page; `ranks`: the
    cross-rank report, the rank shown and why, for a ranks page first; the i-th execution trace is paired with
    the i-th trace."""
    inputs = []
    for index, path in enumerate(paths):
        trace = load_with_feedback(path, cache, imports=REPORT_MODULES, capture=capture)
        from tracelens.analyses import analyze

        if execution_traces and index < len(execution_traces):
            from tracelens.loader.et import attach

            attach(trace, execution_traces[index])

        inputs.append((trace, analyze(trace, step=step)))
    from tracelens.renderers.html import HtmlReportRenderer
    from tracelens.renderers.page import MAX_SLICES, build_report

    document = build_report(inputs, max_slices=MAX_SLICES if max_slices is None else max_slices, focus_step=step)
    if ranks is not None:
        from tracelens.report.ranks import ranks_section

        results, rank, why = ranks
        document = replace(
            document,
            title=f"tracelens report: {results.source}, rank {rank} in full",
            sections=(ranks_section(results, rank, why), *document.sections),
        )
    page = HtmlReportRenderer().render(document).encode("utf-8", errors="backslashreplace")  # lone surrogates
    return CachedPage(page, tuple(trace.warnings for trace, _ in inputs))


REPORT_MODULES = ("tracelens.analyses.pipeline", "tracelens.renderers.html", "tracelens.renderers.page")


def _report_run(args: argparse.Namespace) -> int:
    """The report of a run folder or archive: its ranks page, then one rank in full (not cached as a page: the
    rank traces are, by the trace cache)."""
    if len(args.traces) > 1:
        raise TracelensError("report takes one run folder or tar archive of ranks, or trace files, not both")
    source = args.traces[0]
    max_slices = None if args.max_slices is None else max(args.max_slices, 0)
    suffix = f".rank{args.rank}" if args.rank is not None else ""
    output = args.output if args.output is not None else Path(run_stem(source) + suffix + SUFFIX)
    inputs = command_inputs(args)
    check_writable(output, args.force, inputs)
    started = time.perf_counter()
    with open_run(source, args.cache) as run:
        if args.rank is not None:
            member, why = run.pick(args.rank), "picked with --rank"
        else:
            member, why = run.focus()
        lead = (run.report, member.rank, why) if run.one_run and member.rank is not None else None
        page = _build_page([member.path], args.step, max_slices, args.cache, lead, capture=args.capture)
    write_output(output, page.page, args.force, inputs)
    if not is_stdout(output):
        status(
            f"Wrote {output} ({member.label}: {why}; {len(page.page) / 1e6:.1f} MB in "
            f"{time.perf_counter() - started:.1f} s)"
        )
    return 0
