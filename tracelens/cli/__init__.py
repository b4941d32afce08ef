"""The `tracelens` command: one entry point, thin subcommands registered in `COMMANDS`."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Protocol

import tracelens._threads  # noqa: F401  (first: before anything imports numpy)
from tracelens import __version__
from tracelens._cache import Cache
from tracelens.cli.analyze import AnalyzeCommand, peak_override
from tracelens.cli.annotate import AnnotateCommand
from tracelens.cli.cache import CacheCommand
from tracelens.cli.check import CheckCommand
from tracelens.cli.common import check_inputs, command_inputs
from tracelens.cli.compare import CompareCommand
from tracelens.cli.output import check_writable
from tracelens.cli.record import RecordCommand
from tracelens.cli.report import ReportCommand
from tracelens.errors import TracelensError
from tracelens.escapes import escape_controls
from tracelens.settings import check_terminal_environment

PEAKS_ENV = "TRACELENS_PEAKS"  # tracelens.analyses.devices.PEAKS_ENV, named here to keep start-up light

DESCRIPTION = """\
Fast, correct answers from PyTorch profiler (Kineto) traces.

  tracelens record -- python examples/train_tiny.py
  tracelens analyze traces/h200/eager_mlp.json.gz
  tracelens analyze traces/h200/eager_mlp.json.gz --format json
  tracelens compare traces/h200/eager_mlp.json.gz \\
      traces/h200/compiled_mlp.json.gz traces/h200/liger_mlp.json.gz
  tracelens check traces/h200/*.json.gz --expect notebooks/study_hypotheses.toml
  tracelens report traces/h200/eager_mlp.json.gz
  tracelens annotate traces/h200/eager_mlp.json.gz \\
      -o eager_mlp.annotated.json.gz
"""


class Command(Protocol):
    """A subcommand: its name, its help (the class docstring), its arguments and what it runs."""

    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: list[Command] = [
    RecordCommand(),
    AnalyzeCommand(),
    CompareCommand(),
    CheckCommand(),
    ReportCommand(),
    AnnotateCommand(),
    CacheCommand(),
]


DEBUG_FLAG = "--debug"
INTERNAL_ERROR_EXIT = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TracelensError(f"{message} (see {self.prog} --help)")  # "tracelens" or "tracelens analyze"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With `only`, a command's name, the sub-parser of that command alone: arguments
    that start with that name parse as with every sub-parser (`main` passes the name it finds there)."""
    parser = _Parser(prog="tracelens", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tracelens {__version__}")
    _add_debug_argument(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS if only is None else [c for c in COMMANDS if c.name == only]:
        doc = (type(command).__doc__ or "").strip()
        child = sub.add_parser(command.name, help=_first_sentence(doc), description=doc)
        command.prepare_parser(child)
        _add_debug_argument(child)
        child.set_defaults(handler=command)
    return parser


def _named_command(arguments: Sequence[str]) -> str | None:
    """The command named by the first argument, or None when it names none (an option, a typo, nothing)."""
    first = arguments[0] if arguments else None
    return first if any(command.name == first for command in COMMANDS) else None


def _first_sentence(doc: str) -> str:
    """The summary `tracelens --help` lists: the docstring's first sentence, never cut at a line break."""
    text = " ".join(doc.split())
    found = re.search(r"(?<!\be\.g)(?<!\bi\.e)\. (?=[A-Z(`])", text)  # not "e.g. " or "i.e. "
    return text if found is None else text[: found.start() + 1]


def _add_debug_argument(parser: argparse.ArgumentParser) -> None:
    """`--debug`, before or after the command name (read from the raw arguments by `main`)."""
    parser.add_argument(
        DEBUG_FLAG, action="store_true", default=argparse.SUPPRESS, help="print the traceback of an internal error"
    )


def main(argv: Sequence[str] | None = None, cache: Cache | None = None, kept: list[object] | None = None) -> int:
    """Run the CLI; returns the exit status: 0 ok, 1 a failed check, 2 unusable input, usage or output,
    3 an internal error (a bug: one line, and the traceback only with --debug), 130 interrupted. `cache`: the
    cache commands use (default: `Cache.from_environment()`), as `args.cache`; `--no-cache` turns it off.
    `kept` (as `args.kept`): where a command leaves the trace and results it made when the caller ends the process
    without freeing them (`run`); None: they are freed as the command returns."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["record"]:  # its own parser: `-m MODULE ARGS` hands ARGS to the program
        from tracelens.record.launcher import main as record

        return record(arguments[1:])
    parser = build_parser(_named_command(arguments))
    try:
        return _run(parser, arguments, cache, kept)
    except TracelensError as exc:
        report_error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        report_error("interrupted")
        return 130
    except BrokenPipeError:  # `tracelens ... | head`: the reader has all it wanted
        return 0
    except MemoryError:
        report_error("out of memory while analyzing; try a smaller trace")
        return 2
    except RecursionError:
        report_error("input nested too deeply to analyze")
        return 2
    except Exception as exc:  # the guard: a bug, never a traceback unless asked for
        if DEBUG_FLAG in arguments:
            traceback.print_exc()
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        report_error(f"internal error ({_shorten(detail)}); please report it with {DEBUG_FLAG} output")
        return INTERNAL_ERROR_EXIT


def _run(parser: argparse.ArgumentParser, arguments: list[str], cache: Cache | None, kept: list[object] | None) -> int:
    if not arguments:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(parser.format_usage())
        names = ", ".join(command.name for command in COMMANDS)
        raise TracelensError(f"no command given; choose one of {names} (see tracelens --help)")
    check_terminal_environment()  # before argparse and rich read COLUMNS / LINES
    args = parser.parse_args(arguments)
    if args.command is None:
        raise TracelensError("no command given (see tracelens --help)")
    inputs = command_inputs(args)
    check_inputs(inputs)
    if getattr(args, "output", None) is not None:
        check_writable(args.output, args.force, inputs)  # before any work: the output can be written
    if os.environ.get(PEAKS_ENV, "").strip():
        peak_override(None, None)  # a bad TRACELENS_PEAKS is one error line in every command
    args.kept = kept
    args.cache = cache if cache is not None else Cache.from_environment()
    if not getattr(args, "use_cache", True):
        args.cache = args.cache.disabled()
    return int(args.handler.run(args))


def report_error(message: str) -> None:
    """`tracelens: error: MESSAGE` on stderr: one line, control characters escaped."""
    if sys.stderr is None:  # closed (2>&-): nowhere to say it (print would fall back to stdout)
        return
    with contextlib.suppress(OSError, ValueError):  # stderr full: nowhere to say it
        print(f"tracelens: error: {escape_controls(message)}", file=sys.stderr)


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run() -> None:
    """The console entry point: `main()`, then the process ends without tearing the interpreter down.

    Freeing a big trace's objects and the final garbage collection only delay the exit; stdout and stderr are
    flushed first, and every file we write is complete (atomic) before `main` returns. In-process callers
    (tests, notebooks) use `main`, which returns normally.
    """
    signal.signal(signal.SIGTERM, _terminated)  # run `finally` blocks: decoding children and scratch folders
    kept: list[object] = []  # what the command made: never freed (the process ends first)
    status = main(kept=kept)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a closed pipe (| head) or stream (None)
            stream.flush()
    os._exit(status)


def _terminated(signal_number: int, frame: object) -> None:
    raise SystemExit(128 + signal_number)


if __name__ == "__main__":
    run()
