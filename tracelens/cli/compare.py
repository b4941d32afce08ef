"""`tracelens compare TRACE...`: variants side by side, and what each fused."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from tracelens.cli.analyze import FIGURES_HELP
from tracelens.cli.common import (
    add_cache_argument,
    add_capture_argument,
    add_format_argument,
    add_output_arguments,
    emit_result,
    load_with_feedback,
    print_warnings,
)
from tracelens.cli.runs import add_rank_argument, expand_inputs
from tracelens.errors import TracelensError
from tracelens.model.trace import Trace
from tracelens.naming import unique_labels

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults


class CompareCommand:
    """Compare variants (e.g. eager vs torch.compile vs Liger): kernels, times, and fused ops, per step. A run
    folder or tar archive of rank traces compares its ranks (rank0, rank1, ...)."""

    name = "compare"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = FIGURES_HELP
        parser.add_argument(
            "traces",
            type=Path,
            nargs="+",
            help="two or more traces in the order to show, or a run folder / tar archive (its ranks as variants)",
        )
        add_rank_argument(parser, "of a run folder or tar archive: only rank N")
        parser.add_argument(
            "--name",
            action="append",
            default=[],
            help="name for the next trace (repeatable; default: the recorded variant or file stem)",
        )
        add_capture_argument(parser)
        add_format_argument(parser, "compare")
        add_output_arguments(parser)
        add_cache_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracelens.analyses import analyze
        from tracelens.analyses.compare import compare_variants, variant_name

        names: list[str] = []
        analyzed: list[tuple[Trace, AnalysisResults]] = []
        with ExitStack() as stack:
            inputs = expand_inputs(stack, args.traces, args.rank, args.cache)
            if len(args.name) > len(inputs):
                raise TracelensError(f"{len(args.name)} --name values for {len(inputs)} traces")
            _warn_about_inputs([item.path for item in inputs])
            for index, item in enumerate(inputs):
                trace = load_with_feedback(item.path, args.cache, capture=args.capture)
                if index < len(args.name):
                    names.append(args.name[index])
                else:
                    names.append(item.label if item.label is not None else variant_name(trace))
                analyzed.append((trace, analyze(trace)))
        labels = unique_labels(names)
        comparison = compare_variants([(label, *pair) for label, pair in zip(labels, analyzed, strict=True)])
        emit_result(args, "compare", comparison)
        return 0


def _warn_about_inputs(paths: list[Path]) -> None:
    """A warning (never silence) where the comparison cannot compare: one trace, or one file given twice."""
    if len(paths) == 1:
        print_warnings(paths[0], ["one trace, nothing to compare it with (analyze shows one trace)"])
    seen: dict[Path, Path] = {}
    for path in paths:
        key = path.resolve()
        if key in seen:
            print_warnings(path, ["the same file is given twice; its two columns are one trace"])
        seen.setdefault(key, path)
