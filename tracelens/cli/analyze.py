"""`tracelens analyze TRACE`: trace facts, per-step figures, kernels and the ops that launched them."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracelens.analyses import analyze
from tracelens.cli.common import add_format_argument, add_output_arguments, load_with_feedback, use_color
from tracelens.cli.output import check_writable, emit
from tracelens.renderers.jsonout import AnalyzeJsonRenderer
from tracelens.renderers.text import AnalyzeTextRenderer


class AnalyzeCommand:
    """Analyze one trace: kernels per step and who launched them, CPU and GPU time."""

    name = "analyze"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", type=Path, help="a Kineto/Chrome trace (.json or .json.gz)")
        parser.add_argument("--step", type=int, help="analyze only ProfilerStep#N")
        add_format_argument(parser)
        add_output_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        if args.output is not None:
            check_writable(args.output, args.force)
        trace = load_with_feedback(args.trace)
        report = analyze(trace, step=args.step)
        if args.format == "json":
            text = AnalyzeJsonRenderer().render(report)
        else:
            text = AnalyzeTextRenderer(color=use_color() and args.output is None).render(report)
        emit(text, args.output, args.force)
        return 0
