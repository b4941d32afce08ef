"""`tracelens check TRACE... --expect HYPOTHESES.toml`: each guess HELD or WRONG, with what the trace says; a
prediction for an action the trace did not take N/A."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from tracelens.cli.common import (
    add_cache_argument,
    add_capture_argument,
    add_format_argument,
    add_output_arguments,
    emit_result,
    load_with_feedback,
    print_warnings,
)
from tracelens.cli.runs import Input, add_rank_argument, expand_inputs
from tracelens.errors import TracelensError
from tracelens.escapes import escape_controls
from tracelens.naming import unique_labels
from tracelens.records import replace

if TYPE_CHECKING:
    from tracelens._cache import Cache
    from tracelens.hypotheses.document import TraceDocument
    from tracelens.hypotheses.parse import HypothesisError

FILE_FORMAT = """\
hypotheses file: [[hypothesis]] tables with a name, optionally trace =
"eager_mlp" (file stem or recorded variant; without it, every trace), and
one subject:
  metric = "per_step.kernels"   dotted path into the analyze JSON
                                (kernels.name, step_table.0.step_us,
                                ops[aten::mm].calls_per_step)
  kernel | cpu_op | api_call = "name"
                                the exact name (case-insensitive); a glob
                                ("nvjet_*") or "re:REGEX" (searched in the
                                name) for a pattern; measure =
                                calls_per_step (default) | us_per_step |
                                mean_us | calls | total_us; with no op it
                                states that one exists
  fuses = ["gelu", "mul"]       one kernel covers all these ops: whole op
                                words, same direction ("batch_norm" never
                                matches batch_norm_backward), or "re:REGEX"
then op = "==" | "!=" | "<" | "<=" | ">" | ">=" | "contains" |
"not-contains" with value = ... or than = { trace = "eager_mlp", factor =
0.9 } (optionally another metric/kernel/cpu_op/api_call), and for == and !=
tolerance = 0.5 (absolute) | "5%" | { rel = 0.05, abs = 0.5 } |
{ below = 10, above = 20 } (from value - 10 to value + 20).
A prediction (analyze --predict writes them) adds action = "compile" |
"cuda_graphs" | "compile_reduce_overhead" | "fuse" | "gemm_epilogue" and
before = { compiled_regions = 0, graph_replays = 0 } (the program it was
made from): N/A (neither held nor wrong) on a trace that took another
action relative to that program.

  tracelens check traces/h200/*.json.gz \\
      --expect notebooks/study_hypotheses.toml
"""


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter (the description wrapped to the terminal), with the file format above kept as laid
    out (at most 79 columns)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text == FILE_FORMAT:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def trace_document(path: Path, step: int | None, cache: Cache, capture: Path | None = None) -> TraceDocument:
    """The document of the trace at `path` (cached by content, path, step, the `--capture` file and code), its
    load warnings printed. The hypotheses are not part of it: they are evaluated afresh every run."""
    from tracelens.hypotheses.document import CachedDocument, check_document

    slot = cache.lookup_result("documents", [path, *([capture] if capture else [])], {"step": step})
    result = slot.value(CachedDocument)
    if result is None:
        trace = load_with_feedback(path, cache, quiet=True, imports=DOCUMENT_MODULES, capture=capture)
        result = CachedDocument(check_document(trace, step), trace.warnings)
        cache.store_result(slot, result, CachedDocument)
    print_warnings(path, result.warnings)
    return result.document


class CheckCommand:
    """Check hypotheses (a TOML file) against traces: exit 0 all held, 1 any wrong or unknown, 2 malformed input. A run
    folder or tar archive of rank traces is checked rank by rank (labels rank0, rank1, ...; --rank N: one)."""

    name = "check"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = _HelpFormatter
        parser.epilog = FILE_FORMAT
        parser.add_argument(
            "traces",
            nargs="+",
            type=Path,
            metavar="TRACE",
            help="Kineto traces (.json/.json.gz), or run folders / tar archives of rank traces (labels rank0, ...)",
        )
        add_rank_argument(parser, "of a run folder or tar archive: check only rank N (default: every rank)")
        parser.add_argument(
            "--expect", required=True, type=Path, metavar="HYPOTHESES.toml", help="the hypotheses to check"
        )
        parser.add_argument("--step", type=int, help="check only ProfilerStep#N of every trace")
        parser.add_argument(
            "-v", "--verbose", action="store_true", help="text: the evidence of every verdict (default: WRONG ones)"
        )
        add_capture_argument(parser)
        add_format_argument(parser, "check")
        add_output_arguments(parser)
        add_cache_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracelens.hypotheses.evaluate import CheckResult, evaluate
        from tracelens.hypotheses.parse import HypothesisError, load_hypotheses

        try:
            hypotheses = load_hypotheses(args.expect)  # a malformed file fails before any trace is read
        except HypothesisError as exc:
            _report_problems(args.expect, exc)
        with ExitStack() as stack:
            inputs = expand_inputs(stack, args.traces, args.rank, args.cache)
            documents = _distinct_labels([_document(item, args.step, args.cache, args.capture) for item in inputs])
        try:
            verdicts = evaluate(hypotheses, documents)
        except HypothesisError as exc:
            _report_problems(args.expect, exc)
        result = CheckResult(str(args.expect), documents, verdicts)
        emit_result(args, "check", result, verbose=args.verbose)
        return 1 if result.wrong or result.unknown else 0  # an unknown verdict passes no gate


def _document(item: Input, step: int | None, cache: Cache, capture: Path | None) -> TraceDocument:
    """The document of one input; a rank of a run answers to its label (`rank3`) first, then to its file stem
    and variant, and shows its path inside the run."""
    document = trace_document(item.path, step, cache, capture)
    if item.label is None:
        return replace(document, path=item.shown)
    aliases = tuple(dict.fromkeys((item.label, *document.aliases)))
    return replace(document, label=item.label, aliases=aliases, path=item.shown)


def _report_problems(source: Path, error: HypothesisError) -> NoReturn:
    """Every problem of the hypotheses file, one `tracelens: error:` line each, then the exit-2 error."""
    if len(error.problems) < 2:
        raise error
    for problem in error.problems:
        print(f"tracelens: error: {escape_controls(problem)}", file=sys.stderr)
    raise TracelensError(f"{source}: {len(error.problems)} problems (above); nothing checked") from None


def _distinct_labels(documents: list[TraceDocument]) -> list[TraceDocument]:
    """Traces with the same label (same stem in two folders) told apart as every command does (`unique_labels`)."""
    labels = unique_labels([d.label for d in documents])
    return [d if d.label == label else replace(d, label=label) for d, label in zip(documents, labels, strict=True)]


DOCUMENT_MODULES = ("pandas", "tracelens.analyses.pipeline", "tracelens.renderers.jsonout")  # for check_document
