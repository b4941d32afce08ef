"""`tracelens annotate TRACE -o OUT.json.gz`: the trace written back with the findings added, for Perfetto."""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from tracelens.cli.common import add_cache_argument, command_inputs, load_with_feedback
from tracelens.cli.output import check_writable, is_stdout, status, write_output
from tracelens.naming import trace_stem

SUFFIX = ".tracelens.json.gz"


def default_output(trace: Path) -> Path:
    """`x.json.gz` → `./x.tracelens.json.gz` in the current directory (`tracelens.naming.trace_stem`)."""
    return Path(trace_stem(trace) + SUFFIX)


class AnnotateCommand:
    """Write the trace back with findings added, to open in Perfetto UI or chrome://tracing: exposed GPU idle
    gaps (by cause) and fusion opportunities on tracks of their own, the launching op, category and roofline
    figures in each kernel's args."""

    name = "annotate"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("trace", type=Path, help="a Kineto/Chrome trace (.json or .json.gz)")
        parser.add_argument(
            "-o",
            "--output",
            type=Path,
            help=f"the trace to write, - for stdout; gzip when it ends in .gz (default: ./<trace name>{SUFFIX})",
        )
        parser.add_argument("--force", action="store_true", help="overwrite an existing regular output file")
        add_cache_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracelens.analyses import analyze
        from tracelens.loader.rewrite import rewrite_trace
        from tracelens.renderers.perfetto import trace_additions

        output = args.output if args.output is not None else default_output(args.trace)
        inputs = command_inputs(args)
        check_writable(output, args.force, inputs)
        trace = load_with_feedback(args.trace, args.cache)
        additions = trace_additions(trace, analyze(trace))
        data = rewrite_trace(trace, additions)
        if output.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6, mtime=0)
        write_output(output, data, args.force, inputs)
        if not is_stdout(output):
            slices, annotated = len(additions.slices), len(additions.row_args)
            status(f"Wrote {output} ({slices:,} finding slices, {annotated:,} events annotated)")
        return 0
