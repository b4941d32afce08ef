"""`tracelens analyze TRACE`: trace facts, per-step figures, kernels and the ops that launched them.

Given a directory or a tar archive of rank traces, the ranks are analyzed in parallel and compared instead.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracelens.cli.common import (
    add_cache_argument,
    add_capture_argument,
    add_format_argument,
    add_output_arguments,
    emit_result,
    print_warnings,
    with_capture,
)
from tracelens.cli.runs import add_rank_argument
from tracelens.errors import TracelensError
from tracelens.loader.source import is_trace_name
from tracelens.progress import LoadProgress
from tracelens.records import shallow_dict
from tracelens.renderers.formats import SUMMARY_SECTION
from tracelens.renderers.formats import output_format as output_format_of

if TYPE_CHECKING:  # the analyses are imported when a command runs them: `check` or `report` served from the
    # results cache never does
    from tracelens._cache.results import ResultSlot
    from tracelens._cache.traces import TraceLoad
    from tracelens.analyses.devices import PeakOverride
    from tracelens.analyses.record import CachedAnalysis
    from tracelens.loader.et import ExecutionTrace
    from tracelens.model.trace import Trace


def peak_override(tflops: str | None, tbps: float | None) -> PeakOverride:
    """Peaks from TRACELENS_PEAKS, overridden by the command-line options; every figure must be a finite
    number > 0 (a peak of 0, a negative or NaN one would give impossible percentages of peak)."""
    from tracelens.analyses.devices import PeakOverride, merge_overrides, override_from_env, parse_tflops

    try:
        from_env = override_from_env()
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise TracelensError(
            f'bad peak figures in TRACELENS_PEAKS ({exc}); use e.g. {{"bf16": 989, "hbm_tbps": 4.8}}'
        ) from None
    _check_peaks(from_env, "TRACELENS_PEAKS", "TRACELENS_PEAKS")
    try:
        from_cli = PeakOverride(parse_tflops(tflops) if tflops is not None else {}, tbps)
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        raise TracelensError(
            f"bad peak figures in --peak-tflops ({exc}); use e.g. --peak-tflops bf16=989,fp32=67"
        ) from None
    _check_peaks(from_cli, "--peak-tflops", "--peak-tbps")
    return merge_overrides(from_env, from_cli)


def _check_peaks(peaks: PeakOverride, compute_source: str, memory_source: str) -> None:
    figures = [
        (compute_source, f"{dtype} TFLOP/s" if dtype != "*" else "TFLOP/s", value)
        for dtype, value in peaks.tflops.items()
    ]
    if peaks.hbm_tbps is not None:
        figures.append((memory_source, "TB/s", peaks.hbm_tbps))
    for source, unit, value in figures:
        if not math.isfinite(value) or value <= 0:
            raise TracelensError(f"{source}: a peak must be a finite number > 0, not {value:g} {unit}")


FIGURES_HELP = (
    "Per-step figures (docs/definitions.md): step µs = one step's period, GPU end to GPU end where the "
    "previous step's GPU work ran past this step's CPU start, else CPU start to next CPU start (not the Limit "
    "verdict; the trace's first step: its GPU window, from the end of work launched before the recording if "
    "that ran into it); backlog µs = how far GPU work trails the CPU at the "
    "step's CPU end; GPU busy µs = union of all GPU activity inside the step's GPU window (from its CPU start, or "
    "the previous step's GPU end if later, to its last GPU end or CPU end), whoever launched it; busy + idle "
    "buckets = the window. Bound: cpu when launch waits >= busy, gpu when busy >= 85 % of the window and launch "
    "waits <= 10 %, else mixed. A figure that cannot be computed prints as — (null in JSON), with the reason."
)


class AnalyzeCommand:
    """Analyze one trace: kernels per step and who launched them, CPU and GPU time. Given a directory or a
    tar archive of rank traces: every rank in parallel, and a cross-rank view (--rank N: that rank in full);
    traces that are not ranks of one run are listed as separate traces, without cross-rank figures."""

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = FIGURES_HELP
        parser.add_argument(
            "trace", type=Path, help="a Kineto/Chrome trace (.json or .json.gz), or a directory / tar of rank traces"
        )
        parser.add_argument("--step", type=int, help="analyze only ProfilerStep#N")
        parser.add_argument(
            "--peak-tflops",
            metavar="TFLOPS",
            help="roofline compute peak: one figure for every dtype (989) or per dtype (bf16=989,fp32=67); "
            "overrides the device table and TRACELENS_PEAKS",
        )
        parser.add_argument("--peak-tbps", type=float, metavar="TBPS", help="roofline memory peak in TB/s")
        parser.add_argument(
            "--et",
            type=Path,
            metavar="FILE",
            help="a PyTorch execution trace (ExecutionTraceObserver JSON) taken with TRACE: fusion links ops by "
            "tensor identity instead of shape and dtype",
        )
        add_capture_argument(parser)
        add_format_argument(parser, "analyze")
        add_output_arguments(parser)
        add_cache_argument(parser)
        parser.add_argument(
            "--workers",
            type=int,
            metavar="N",
            help="ranks: processes analyzing ranks (default: one per CPU); with --scheduler local, Dask workers",
        )
        parser.add_argument(
            "--scheduler",
            metavar="ADDRESS",
            help="ranks: run per-rank work on Dask: 'local' (a LocalCluster of --workers processes) or "
            "tcp://host:port of a running scheduler whose workers can read the traces",
        )
        add_rank_argument(parser, "ranks: analyze only rank N of the run folder or archive, in full")
        parser.add_argument(
            "--section",
            action="append",
            metavar="NAME",
            help="text output: print only this section (repeatable, or several joined by commas): an analysis' "
            "name, e.g. actions (what to do "
            "next and every action), summary (the trace, per-step figures, kernels and ops), bound, critical_path, "
            "fusion, roofline, dispatch, compiled, stream_idle, memory",
        )
        parser.add_argument(
            "--summary",
            action="store_true",
            help="text output: print only the summary at the top (what to do next: the step, its limit, the top "
            "actions); not --section summary",
        )
        parser.add_argument(
            "--predict",
            type=Path,
            metavar="FILE",
            help="also write each action's predicted step time as a `check` hypothesis file (TOML; --force "
            "replaces an existing file): `tracelens check AFTER --expect FILE` says which held",
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.trace.is_dir() or _is_archive(args.trace):
            return _run_ranks(args)
        if args.rank is not None:
            raise TracelensError("--rank picks a rank of a run folder or tar archive, not of one trace")
        return _run_one(args)


def _run_one(args: argparse.Namespace) -> int:
    """One trace, top to bottom: look the result up in the cache; when it is not there, start the load, import
    what comes next while worker processes decode, finish the load, analyze; print; store what was computed."""
    sections = _sections(args)  # before any work: a wrong name or format ends the command at once
    peaks = peak_override(args.peak_tflops, args.peak_tbps)
    execution_trace = _load_et(args.et) if args.et is not None else None
    options: dict[str, object] = {"step": args.step, "peaks": shallow_dict(peaks)}
    inputs = [args.trace, *(p for p in (args.et, args.capture) if p is not None)]  # their content is in the key
    options["capture"] = args.capture is not None  # a capture file is never taken for an execution trace
    slot = args.cache.lookup_result("analyses", inputs, options)
    load: TraceLoad | None = None
    trace: Trace | None = None
    result = _cached(slot)
    if result is None:
        with (
            LoadProgress(f"loading {args.trace.name}") as progress,
            args.cache.begin_load(args.trace, progress) as load,
        ):
            _import_for(args.format)  # while the worker processes decode
            trace = load.finish()
        trace = with_capture(trace, args.capture, args.cache)
        result = _analyze(trace, args.step, peaks, execution_trace)
    print_warnings(args.trace, _stderr_warnings(args, result))
    if args.predict is not None:
        from tracelens.cli.output import write_output
        from tracelens.renderers.predictions import predictions_toml

        write_output(args.predict, predictions_toml(result.report, args.trace.name), args.force, [args.trace])
    emit_result(args, "analyze", result.report, sections=sections)
    if load is not None:  # computed here: stored after the output, which never waits for the cache
        from tracelens.analyses.record import CachedAnalysis

        args.cache.store_result(slot, result, CachedAnalysis)
        load.store()
    if args.kept is not None:  # the process ends without freeing them
        args.kept.append((load, trace, result))
    return 0


def _stderr_warnings(args: argparse.Namespace, result: CachedAnalysis) -> tuple[str, ...]:
    """The warnings for stderr: all of them, but those the text output on a terminal ends with anyway (shown
    once: a log, a pipe or a file still gets each on stderr)."""
    on_screen = (
        args.format == "text"
        and args.output is None
        and all(stream is not None and stream.isatty() for stream in (sys.stdout, sys.stderr))
    )  # both on the terminal: `2>run.log` still gets every warning
    if not on_screen:
        return tuple(result.warnings)
    shown = set(result.report.summary.warnings)
    return tuple(w for w in result.warnings if w not in shown)


def _sections(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The text sections `--section`/`--summary` ask for (None: all); an unknown name is an error."""
    asked = [name.strip() for value in args.section or () for name in value.split(",") if name.strip()]
    names = (*asked, *((SUMMARY_SECTION,) if args.summary else ()))
    if not names:
        return None
    if args.format != "text":  # never silently ignored
        raise TracelensError(
            f"--summary and --section pick sections of the text output; --format {args.format} writes every section"
        )
    from tracelens.renderers.text import check_sections  # rich: only when sections are asked for

    return check_sections(names)


def _cached(slot: ResultSlot) -> CachedAnalysis | None:
    """The stored result in `slot`, if one was found (the analyses are imported only then)."""
    if not slot.found:
        return None
    from tracelens.analyses.record import CachedAnalysis

    cached: CachedAnalysis | None = slot.value(CachedAnalysis)
    return cached


def _analyze(
    trace: Trace, step: int | None, peaks: PeakOverride, execution_trace: ExecutionTrace | None
) -> CachedAnalysis:
    """Every analysis of `trace`, with the load's warnings (and the execution trace's, when one is paired)."""
    from tracelens.analyses import analyze
    from tracelens.analyses.record import CachedAnalysis

    warnings = trace.warnings
    if execution_trace is not None:
        warnings = (*warnings, *_attach_et(trace, execution_trace))
    return CachedAnalysis(analyze(trace, step=step, peaks=peaks), warnings)


def _load_et(path: Path) -> ExecutionTrace:
    from tracelens.loader.et import load_execution_trace

    if path.is_dir():
        raise TracelensError(f"{path}: --et takes an execution trace file, not a directory")
    return load_execution_trace(path)


def _attach_et(trace: Trace, execution_trace: ExecutionTrace) -> tuple[str, ...]:
    """Pair the execution trace with the trace; a warning when no op matched."""
    from tracelens.loader.et import attach

    matched = attach(trace, execution_trace)
    if matched == 0:
        return (
            f"execution trace {execution_trace.path}: none of its ops matched this trace's ops (same ProfilerStep "
            "numbers and op names expected); fusion links by shape and dtype",
        )
    return ()


def _import_for(output_format: str) -> None:
    """Import the analyses and the renderer of `output_format` (done while worker processes decode the trace) with
    the garbage collector off, then out of its reach (`gc.freeze`), as the command's own imports
    (`tracelens.__main__`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        import tracelens.analyses.record  # noqa: F401

        ref = output_format_of(output_format).renderers()["analyze"][0]
        importlib.import_module(ref.partition(":")[0])
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _is_archive(path: Path) -> bool:
    if is_trace_name(path.name):  # the common case: no need to import the rank machinery
        return False
    from tracelens.parallel import is_archive

    return is_archive(path)


def _run_ranks(args: argparse.Namespace) -> int:
    from tracelens.cli.runs import open_run

    if args.step is not None and args.rank is None:
        raise TracelensError("--step applies to one trace, not to a directory or archive of ranks (add --rank N)")
    with open_run(args.trace, args.cache, args.workers, args.scheduler) as run:
        if args.rank is not None:  # one rank in full, as for a single trace
            member = run.pick(args.rank)
            return _run_one(argparse.Namespace(**{**vars(args), "trace": member.path}))
    emit_result(args, "ranks", run.report)
    return 0
