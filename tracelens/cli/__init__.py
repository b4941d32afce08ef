"""The `tracelens` command: one entry point, thin subcommands registered in `COMMANDS`."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Protocol

from tracelens import __version__
from tracelens._cache import Cache
from tracelens.cli.analyze import AnalyzeCommand
from tracelens.cli.annotate import AnnotateCommand
from tracelens.cli.cache import CacheCommand
from tracelens.cli.check import CheckCommand
from tracelens.cli.compare import CompareCommand
from tracelens.cli.report import ReportCommand
from tracelens.errors import TracelensError

DESCRIPTION = """\
Fast, correct answers from PyTorch profiler (Kineto) traces.

  tracelens analyze traces/h200/eager_mlp.json.gz
  tracelens analyze traces/h200/eager_mlp.json.gz --format json
  tracelens compare traces/h200/eager_mlp.json.gz traces/h200/compiled_mlp.json.gz traces/h200/liger_mlp.json.gz
  tracelens check traces/h200/*.json.gz --expect notebooks/study_hypotheses.toml
  tracelens report traces/h200/eager_mlp.json.gz
  tracelens annotate traces/h200/eager_mlp.json.gz -o eager_mlp.annotated.json.gz
"""


class Command(Protocol):
    """A subcommand: its name, its help (the class docstring), its arguments and what it runs."""

    name: str

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


COMMANDS: list[Command] = [
    AnalyzeCommand(),
    CompareCommand(),
    CheckCommand(),
    ReportCommand(),
    AnnotateCommand(),
    CacheCommand(),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TracelensError(f"{message} (see tracelens {self.prog.split()[-1]} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tracelens", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tracelens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        doc = (type(command).__doc__ or "").strip()
        child = sub.add_parser(command.name, help=_first_sentence(doc), description=doc)
        command.prepare_parser(child)
        child.set_defaults(handler=command)
    return parser


def _first_sentence(doc: str) -> str:
    """The summary `tracelens --help` lists: the docstring's first sentence, never cut at a line break."""
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def main(argv: Sequence[str] | None = None, cache: Cache | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 a failed check, 2 unusable input or usage). `cache`: the
    cache commands use (default: `Cache.from_environment()`), as `args.cache`; `--no-cache` turns it off."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        args.cache = cache if cache is not None else Cache.from_environment()
        if not getattr(args, "use_cache", True):
            args.cache = args.cache.disabled()
        return int(args.handler.run(args))
    except TracelensError as exc:
        print(f"tracelens: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracelens: error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError:
        print("tracelens: error: out of memory while analyzing; try a smaller trace", file=sys.stderr)
        return 2


def run() -> None:
    """The console entry point: `main()`, then the process ends without tearing the interpreter down.

    Freeing a big trace's objects and the final garbage collection only delay the exit (~50 ms on a 72 MB
    trace); stdout and stderr are flushed first, and every file we write is complete (atomic) before `main`
    returns, except a big trace's cache entry, which a forked child writes while the analyses run (waited for
    here, after the output). In-process callers (tests, notebooks) use `main`, which returns normally and
    writes cache entries itself.
    """
    signal.signal(signal.SIGTERM, _terminated)  # run `finally` blocks: decoding children and scratch folders
    cache = Cache.from_environment(background_writes=True)  # a big trace's entry is written while analyses run
    status = main(cache=cache)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (| head) or stream
            stream.flush()
    cache.finish_writes()
    os._exit(status)


def _terminated(signal_number: int, frame: object) -> None:
    raise SystemExit(128 + signal_number)


if __name__ == "__main__":
    run()
