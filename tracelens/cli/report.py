"""`tracelens report TRACE...`: one self-contained interactive HTML page (a comparison with several traces)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tracelens.cli.common import load_with_feedback
from tracelens.cli.output import check_writable, write_atomic

SUFFIX = ".tracelens.html"


def default_output(traces: list[Path]) -> Path:
    """`x.json.gz` → `./x.tracelens.html` (in the current directory: inputs may sit in read-only folders);
    several traces → `./x-vs-y[-and-N-more].tracelens.html`."""
    stems = [_stem(path) for path in traces]
    if len(stems) == 1:
        name = stems[0]
    elif len(stems) == 2:
        name = f"{stems[0]}-vs-{stems[1]}"
    else:
        name = f"{stems[0]}-vs-{stems[1]}-and-{len(stems) - 2}-more"
    return Path(name + SUFFIX)


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name or "trace"


class ReportCommand:
    """Write an interactive HTML report (timeline, breakdowns, findings) that works offline."""

    name = "report"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("traces", type=Path, nargs="+", metavar="TRACE", help="one or more traces to report on")
        parser.add_argument(
            "-o", "--output", type=Path, help=f"the HTML file to write (default: ./<trace name>{SUFFIX})"
        )
        parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
        parser.add_argument("--step", type=int, help="analyze only ProfilerStep#N and draw it in full")
        parser.add_argument(
            "--max-slices",
            type=int,
            default=None,
            help="timeline slices drawn one by one before merging the rest (default: 40,000)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from tracelens.analyses import analyze
        from tracelens.renderers.html import HtmlReportRenderer
        from tracelens.report import MAX_SLICES, build_report

        max_slices = MAX_SLICES if args.max_slices is None else max(args.max_slices, 0)
        output = args.output if args.output is not None else default_output(args.traces)
        check_writable(output, args.force, args.traces)
        started = time.perf_counter()
        inputs = []
        for path in args.traces:
            trace = load_with_feedback(path)
            inputs.append((trace, analyze(trace, step=args.step)))
        document = build_report(inputs, max_slices=max_slices, focus_step=args.step)
        page = HtmlReportRenderer().render(document)
        write_atomic(output, page, args.force)
        elapsed = time.perf_counter() - started
        print(f"Wrote {output} ({len(page.encode()) / 1e6:.1f} MB in {elapsed:.1f} s)")
        return 0
