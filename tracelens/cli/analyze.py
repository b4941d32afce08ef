"""`tracelens analyze TRACE`: trace facts, per-step figures, kernels and the ops that launched them."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracelens.analyses import analyze
from tracelens.analyses.devices import PeakOverride, merge_overrides, override_from_env, parse_tflops
from tracelens.cli.common import add_format_argument, add_output_arguments, load_with_feedback, use_color
from tracelens.cli.output import check_writable, emit
from tracelens.errors import TracelensError
from tracelens.renderers.jsonout import AnalyzeJsonRenderer
from tracelens.renderers.text import AnalyzeTextRenderer


def peak_override(tflops: str | None, tbps: float | None) -> PeakOverride:
    """Peaks from TRACELENS_PEAKS, overridden by the command-line options."""
    try:
        from_env = override_from_env()
        from_cli = PeakOverride(parse_tflops(tflops) if tflops else {}, tbps)
    except (ValueError, TypeError, AttributeError) as exc:
        raise TracelensError(f"bad peak figures ({exc}); use e.g. --peak-tflops bf16=989,fp32=67") from None
    return merge_overrides(from_env, from_cli)


class AnalyzeCommand:
    """Analyze one trace: kernels per step and who launched them, CPU and GPU time."""

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", type=Path, help="a Kineto/Chrome trace (.json or .json.gz)")
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

    def run(self, args: argparse.Namespace) -> int:
        if args.output is not None:
            check_writable(args.output, args.force)
        trace = load_with_feedback(args.trace)
        report = analyze(trace, step=args.step, peaks=peak_override(args.peak_tflops, args.peak_tbps))
        if args.format == "json":
            text = AnalyzeJsonRenderer().render(report)
        else:
            text = AnalyzeTextRenderer(color=use_color() and args.output is None).render(report)
        emit(text, args.output, args.force)
        return 0
