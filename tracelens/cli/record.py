"""`tracelens record -- python train.py`: the launcher (`tracelens.record.launcher`) as a subcommand."""

from __future__ import annotations

import argparse


class RecordCommand:
    """Run a PyTorch program unmodified under torch.profiler and write a trace of `--steps` steps, with the same
    number of steps timed without the profiler just before the window (docs/record.md)."""

    name = "record"

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from tracelens.record.options import build_parser

        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        build_parser(parser)

    def run(self, args: argparse.Namespace) -> int:
        from tracelens.record.launcher import run

        return run(args)
