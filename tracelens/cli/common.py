"""Pieces shared by subcommands: loading with progress and warnings, common arguments."""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tracelens._cache import Cache
from tracelens.cli.output import describe_os_error, emit, is_stdout
from tracelens.errors import TracelensError, warn
from tracelens.model.trace import Trace
from tracelens.progress import LoadProgress
from tracelens.renderers.formats import RenderOptions, format_names, output_format, renderer_for

INPUT_ARGUMENTS = ("trace", "traces", "expect", "et", "capture")  # argparse destinations that name input files


def add_format_argument(parser: argparse.ArgumentParser, kind: str) -> None:
    """`--format NAME` (the formats of `tracelens.renderers.formats` that render results of `kind`) and
    `--width`."""
    names = format_names(kind)
    described = "; ".join(f"{name}: {output_format(name).help}" for name in names)
    parser.add_argument(
        "--format", choices=names, default=names[0], help=f"output format (default: {names[0]}; {described})"
    )
    parser.add_argument(
        "--width",
        type=_width,
        metavar="N",
        help="text output: lay tables out for N columns (default: the terminal's width; when piped, $COLUMNS "
        "or 140); numbers are never cut, columns are left out instead",
    )


def _width(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of columns") from None
    if value < 40:
        raise argparse.ArgumentTypeError(f"{value} is too narrow: at least 40 columns")
    return value


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout (- for stdout)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing regular output file")


def add_cache_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        dest="use_cache",
        action="store_false",
        help="decode the trace even if it is in the cache ($TRACELENS_CACHE_DIR or ~/.cache/tracelens)",
    )


def add_capture_argument(parser: argparse.ArgumentParser) -> None:
    """`--capture FILE`: a second trace whose CUDA-graph captures explain the replays of the trace(s)."""
    parser.add_argument(
        "--capture",
        type=Path,
        metavar="FILE",
        help="a trace that recorded the CUDA-graph capture (cudaStreamBeginCapture ... EndCapture) of the "
        "graphs the trace(s) replay: each replayed kernel gets the op of its captured launch "
        "(docs/cuda_graphs.md)",
    )


def with_capture(trace: Trace, capture: Path | None, cache: Cache) -> Trace:
    """`trace` with the replays no capture in it explains matched to the captures of the trace at `capture`
    (`model.cuda_graphs.graft_capture`; its warnings join the trace's); `trace` itself without `capture`. An
    unusable capture file is a `TracelensError` naming it."""
    if capture is None:
        return trace
    from tracelens.model.cuda_graphs import graft_capture

    if capture.is_dir():
        raise TracelensError(f"{capture}: --capture takes one trace file, not a directory")
    try:
        captured = cache.load_trace(capture)
    except TracelensError as exc:
        raise TracelensError(f"--capture {exc}") from None
    return graft_capture(trace, captured, capture.name)[0]


def load_with_feedback(
    path: Path, cache: Cache, quiet: bool = False, imports: Sequence[str] = (), capture: Path | None = None
) -> Trace:
    """Load one trace (from `cache` when possible, storing it there when worth it) with a progress bar
    (terminal only) and print its warnings on stderr unless `quiet`. `imports`: modules the command needs next,
    imported here while worker processes decode. `capture`: see `with_capture`."""
    with LoadProgress(f"loading {path.name}") as progress, cache.begin_load(path, progress) as load:
        for module in imports:
            importlib.import_module(module)
        trace = load.finish()
    load.store()
    trace = with_capture(trace, capture, cache)
    if not quiet:
        print_warnings(path, trace.warnings)
    return trace


def print_warnings(path: Path, warnings: Sequence[str]) -> None:
    """Each of `warnings` about the trace at `path` on stderr (`errors.warn`: control characters escaped, wrapped
    on a terminal, one line into a pipe)."""
    for warning in warnings:
        warn(f"{path.name}: {warning}")


def use_color() -> bool:
    return sys.stdout is not None and sys.stdout.isatty()


def command_inputs(args: argparse.Namespace) -> list[Path]:
    """Every input file a command's arguments name (traces, hypotheses file, ...): never written over."""
    inputs: list[Path] = []
    for name in INPUT_ARGUMENTS:
        value = getattr(args, name, None)
        if isinstance(value, Path):
            inputs.append(value)
        elif isinstance(value, list):
            inputs += [v for v in value if isinstance(v, Path)]
    return inputs


def check_inputs(paths: Sequence[Path]) -> None:
    """Refuse, with one line, an input path that cannot even be looked up (a symlink loop, a name too long,
    no permission); a missing file is left to the loader, whose message says what to pass instead."""
    for path in paths:
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise TracelensError(f"{path}: {describe_os_error(exc)}") from None
        except ValueError as exc:  # an embedded NUL byte
            raise TracelensError(f"{path!r}: not a usable path ({exc})") from None


def emit_result(
    args: argparse.Namespace,
    kind: str,
    result: object,
    verbose: bool = False,
    sections: tuple[str, ...] | None = None,
) -> None:
    """Render `result` (a result of `kind`) in the `--format` chosen (colour only on a terminal, `--width`
    columns; the other options go to the renderers that take them) and write it to stdout or `-o`."""
    output: Path | None = args.output
    color = use_color() and is_stdout(output)
    options = RenderOptions(color, getattr(args, "width", None), verbose, sections)
    renderer = renderer_for(args.format, kind, options)
    emit(renderer.render(result), output, args.force, command_inputs(args))
