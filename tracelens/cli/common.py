"""Pieces shared by subcommands: loading with progress and warnings, common arguments."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracelens.cli.progress import LoadProgress
from tracelens.load import load_trace
from tracelens.model.trace import Trace


def add_format_argument(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument("--format", choices=choices, default="text", help="output format (default: text)")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")


def load_with_feedback(path: Path, quiet: bool = False) -> Trace:
    """Load one trace with a progress bar (terminal only) and print its warnings on stderr."""
    with LoadProgress(f"loading {path.name}") as progress:
        trace = load_trace(path, progress)
    if not quiet:
        for warning in trace.warnings:
            print(f"tracelens: warning: {path.name}: {warning}", file=sys.stderr)
    return trace


def use_color() -> bool:
    return sys.stdout.isatty()
