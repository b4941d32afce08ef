"""`tracelens analyze TRACE`: trace facts, per-step figures, kernels and the ops that launched them.

Given a directory or a tar archive of rank traces, the ranks are analyzed in parallel and compared instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from tracelens.cli.common import (
    add_cache_argument,
    add_format_argument,
    add_output_arguments,
    emit_result,
    load_with_feedback,
    print_warnings,
)
from tracelens.cli.output import check_writable
from tracelens.errors import TracelensError
from tracelens.loader.source import is_trace_name

if TYPE_CHECKING:  # the analyses are imported when a command runs them: `check` or `report` served from the
    # results cache never does
    from tracelens.analyses.devices import PeakOverride
    from tracelens.analyses.ranks import RankFigures
    from tracelens.analyses.record import CachedAnalysis
    from tracelens.renderers.text import AnalyzeTextRenderer


def peak_override(tflops: str | None, tbps: float | None) -> PeakOverride:
    """Peaks from TRACELENS_PEAKS, overridden by the command-line options."""
    from tracelens.analyses.devices import PeakOverride, merge_overrides, override_from_env, parse_tflops

    try:
        from_env = override_from_env()
        from_cli = PeakOverride(parse_tflops(tflops) if tflops else {}, tbps)
    except (ValueError, TypeError, AttributeError) as exc:
        raise TracelensError(f"bad peak figures ({exc}); use e.g. --peak-tflops bf16=989,fp32=67") from None
    return merge_overrides(from_env, from_cli)


class AnalyzeCommand:
    """Analyze one trace: kernels per step and who launched them, CPU and GPU time. Given a directory or a
    tar archive of rank traces: every rank in parallel, and a cross-rank view."""

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
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
        add_format_argument(parser)
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

    def run(self, args: argparse.Namespace) -> int:
        if args.output is not None:
            check_writable(args.output, args.force, [args.trace])
        if args.trace.is_dir() or _is_archive(args.trace):
            return _run_ranks(args)
        peaks = peak_override(args.peak_tflops, args.peak_tbps)

        def compute() -> CachedAnalysis:
            trace = load_with_feedback(args.trace, args.cache, quiet=True, meanwhile=lambda: _import_for(args.format))
            from tracelens.analyses import analyze
            from tracelens.analyses.record import CachedAnalysis

            return CachedAnalysis(analyze(trace, step=args.step, peaks=peaks), trace.warnings)

        options = {"step": args.step, "peaks": dataclasses.asdict(peaks)}
        result = args.cache.result("analyses", [args.trace], options, _record_type, compute)
        print_warnings(args.trace, result.warnings)
        from tracelens.renderers.jsonout import AnalyzeJsonRenderer

        emit_result(args, result.report, AnalyzeJsonRenderer(), _text_renderer)
        return 0


def _record_type() -> type[CachedAnalysis]:
    from tracelens.analyses.record import CachedAnalysis

    return CachedAnalysis


def _import_for(output_format: str) -> None:
    """Import the analyses and the renderer (done while worker processes decode the trace)."""
    import tracelens.analyses.record
    import tracelens.renderers.jsonout

    if output_format == "text":
        import tracelens.renderers.text  # noqa: F401


def _text_renderer(color: bool, width: int | None) -> AnalyzeTextRenderer:
    from tracelens.renderers.text import AnalyzeTextRenderer  # rich: only for text output

    return AnalyzeTextRenderer(color=color, width=width)


def _is_archive(path: Path) -> bool:
    if is_trace_name(path.name):  # the common case: no need to import the rank machinery
        return False
    from tracelens.parallel import is_archive

    return is_archive(path)


def _run_ranks(args: argparse.Namespace) -> int:
    from tracelens.analyses.ranks import analyze_ranks
    from tracelens.parallel import rank_files, run_ranks
    from tracelens.renderers.ranks import RanksJsonRenderer, RanksTextRenderer

    if args.step is not None:
        raise TracelensError("--step applies to one trace, not to a directory or archive of ranks")
    if args.workers is not None and args.workers < 1:
        raise TracelensError("--workers must be at least 1")
    with tempfile.TemporaryDirectory(prefix="tracelens_ranks_") as scratch:
        paths = rank_files(args.trace, Path(scratch))
        labels = {str(p): _label(args.trace, p) for p in paths}
        print(f"tracelens: analyzing {len(paths)} rank trace(s) of {args.trace}", file=sys.stderr)
        figures, failed = run_ranks(paths, args.workers, args.scheduler, args.cache)
    figures = [_relabel(f, labels) for f in figures]
    if not figures:
        raise TracelensError(f"{args.trace}: none of its {len(paths)} traces is usable: {'; '.join(failed)}")
    report = analyze_ranks(figures, str(args.trace), failed)
    emit_result(args, report, RanksJsonRenderer(), lambda color, width: RanksTextRenderer(color, width))
    return 0


def _label(source: Path, path: Path) -> str:
    if source.is_dir():
        return str(path.relative_to(source))
    return path.name  # extracted from the archive: its member's file name


def _relabel(figures: RankFigures, labels: dict[str, str]) -> RankFigures:
    return dataclasses.replace(figures, path=labels.get(figures.path, figures.path))
