"""The options of `tracelens record` (argparse only: every command builds the CLI's parser, so this stays light;
the launcher, `tracelens.record.launcher`, is imported only when `record` runs)."""

from __future__ import annotations

import argparse

DEFAULT_SKIP = 3
DEFAULT_STEPS = 5
DESCRIPTION = """\
Run a PyTorch program unmodified under torch.profiler and write a trace of
`--steps` steps, with the same number of steps timed without the profiler just
before the window (docs/record.md).

Examples:
  tracelens record -- python examples/train_tiny.py
  tracelens record --step-on forward --steps 8 -- python infer.py --batch 4
  tracelens record -o runs/ddp -- torchrun --nproc-per-node 2 train.py
"""


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options of `tracelens record` (on `parser` when given: the CLI's subparser)."""
    parser = parser or argparse.ArgumentParser(
        prog="tracelens record", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "-o",
        "--output-dir",
        dest="out_dir",
        default="traces/record",
        metavar="DIR",
        help="folder for the trace(s) (default: traces/record); nothing is written outside it",
    )
    add("--name", default=None, help="trace file name without .json.gz (default: the script or module name)")
    add(
        "--step-on",
        default="optimizer",
        metavar="WHAT",
        help="what ends a step: optimizer (default: every optimizer.step()), forward (every outermost "
        "nn.Module call: inference and generate() loops), or a function pkg.mod:func / pkg.mod.func",
    )
    add(
        "--skip",
        type=int,
        default=DEFAULT_SKIP,
        metavar="N",
        help=f"steps run before anything is timed (warm-up; default {DEFAULT_SKIP})",
    )
    add(
        "--steps",
        type=int,
        default=DEFAULT_STEPS,
        metavar="N",
        help=f"steps timed without the profiler, then profiled (default {DEFAULT_STEPS})",
    )
    add("--memory", action="store_true", help="record allocations (profile_memory=True)")
    add("--stack", action="store_true", help="record Python stacks (with_stack=True)")
    add(
        "--shapes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="record input shapes (record_shapes; default on)",
    )
    add("--et", action="store_true", help="also write an execution trace NAME.et.gz beside the trace")
    add("--stop-after", action="store_true", help="end the program (exit 0) right after the window")
    add("--no-analyze", dest="analyze", action="store_false", help="do not print tracelens analyze's summary")
    add("--force", action="store_true", help="replace trace files of the same name in DIR")
    add("-m", dest="module", default=None, metavar="MODULE", help="run a module (python -m MODULE ARGS)")
    add("program", nargs=argparse.REMAINDER, help="-- python SCRIPT.py ARGS (or -- SCRIPT.py ARGS)")
    return parser  # fmt: skip
