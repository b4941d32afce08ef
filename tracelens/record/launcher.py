"""`tracelens record`'s launcher: starts the program in its own interpreter with the recorder loaded, waits, and
reports. Standard library only (no torch, no msgspec): `python -m tracelens record` works where only torch is
installed; the closing analysis needs tracelens' own dependencies and is skipped, with a warning, without them.

Contract: `main(argv) -> int` (argv: the arguments after `record`); the exit status is the program's where the
program failed, 2 for unusable input (one `tracelens: error:` line), 130 for Ctrl-C, else 0. Files are written
in `-o DIR` only. See docs/record.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from tracelens import __version__
from tracelens.errors import TracelensError, warn
from tracelens.record.options import build_parser
from tracelens.units import change_text

INJECT_DIR = Path(__file__).resolve().parent / "_inject"
STATUS_SUFFIX = ".record-status"  # bootstrap.STATUS_SUFFIX
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")
_DISTRIBUTED = ("torchrun",)
_DISTRIBUTED_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")
_PYTHON_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def main(argv: list[str]) -> int:
    """`tracelens record ARGS` without the rest of the CLI (see the module docstring)."""
    try:
        return run(parse(argv))
    except TracelensError as exc:
        _error(str(exc))
        return exc.exit_code


def parse(argv: list[str]) -> argparse.Namespace:
    """The options; everything after `--`, or after `-m MODULE`, is the program's own (`-m MODULE ARGS` passes
    ARGS on, options included, as `python -m MODULE ARGS` would)."""
    for i, argument in enumerate(argv):
        if argument == "--":
            break
        if argument == "-m" and i + 1 < len(argv):
            args = build_parser().parse_args([*argv[:i], "-m", argv[i + 1]])
            args.program = argv[i + 2 :]
            return args
    return build_parser().parse_args(argv)


def run(args: argparse.Namespace) -> int:
    """Record the program `args` name; the exit status (module docstring)."""
    command, script, distributed = program_command(args)
    _check_options(args)
    name = args.name or _default_name(script, args.module, command)
    if not _NAME.match(name):
        raise TracelensError(f"--name {name!r}: use letters, digits and . _ + - only")
    out_dir = Path(args.out_dir)
    _prepare_out(out_dir, name, args.force)
    config = {
        "skip": args.skip,
        "steps": args.steps,
        "step_on": args.step_on,
        "shapes": args.shapes,
        "stack": args.stack,
        "memory": args.memory,
        "et": args.et,
        "stop_after": args.stop_after,
        "name": name,
        "out_dir": str(out_dir.resolve()),
        "ranks_only": distributed,
        "command": command,
        "tool": f"tracelens {_version()}",
        "pythonpath": os.environ.get("PYTHONPATH"),
    }
    env = dict(os.environ)
    env["TRACELENS_RECORD_CONFIG"] = json.dumps(config)
    env["PYTHONPATH"] = os.pathsep.join([str(INJECT_DIR), *filter(None, [os.environ.get("PYTHONPATH")])])
    print(f"tracelens: recording {' '.join(command)}", file=sys.stderr, flush=True)
    returncode, interrupted = _run_program(command, env)
    statuses = _read_statuses(out_dir, name)
    return _report(args, name, out_dir, statuses, returncode, interrupted, script)


def program_command(args: argparse.Namespace) -> tuple[list[str], str | None, bool]:
    """The command to run, the script it runs (None for -m) and whether it is a distributed launcher."""
    program = list(args.program)
    if program[:1] == ["--"]:
        program = program[1:]
    if args.module is not None:
        distributed = args.module in _DISTRIBUTED_MODULES
        script = _script_of(program, skip_options=True) if distributed else None
        return [sys.executable, "-m", args.module, *program], script, distributed
    if not program:
        raise TracelensError("no program given: tracelens record [options] -- python SCRIPT.py ARGS")
    first = os.path.basename(program[0])
    if first in _DISTRIBUTED:
        script = _script_of(program[1:], skip_options=True)
        return program, script, True
    if _PYTHON.match(first):
        python = shutil.which(program[0]) or program[0]
        if not os.path.exists(python):
            raise TracelensError(f"{program[0]}: no such interpreter")
        rest = program[1:]
        module = _module_of(rest)
        if module is not None:
            distributed = module in _DISTRIBUTED_MODULES
            run_script = _script_of(rest[rest.index("-m") + 2 :], skip_options=True) if distributed else None
            return [python, *rest], run_script, distributed
        return [python, *rest], _script_of(rest, skip_options=False), False
    if program[0].endswith(".py"):
        return [sys.executable, *program], _script_of(program, skip_options=False), False
    raise TracelensError(
        f"{program[0]}: not a Python program; give -- python SCRIPT.py ARGS, -- SCRIPT.py ARGS or -m MODULE ARGS"
    )


def _module_of(arguments: list[str]) -> str | None:
    for i, argument in enumerate(arguments):
        if argument == "-m" and i + 1 < len(arguments):
            return arguments[i + 1]
        if not argument.startswith("-"):
            return None
    return None


def _script_of(arguments: list[str], skip_options: bool) -> str:
    """The script among an interpreter's (or torchrun's) arguments; it must exist."""
    for i, argument in enumerate(arguments):
        if argument.startswith("-"):
            if argument in ("-c",):
                raise TracelensError("python -c is not supported: put the program in a file")
            continue
        if not skip_options and i > 0 and arguments[i - 1] in _PYTHON_OPTIONS_WITH_VALUE:
            continue  # python -X dev / -W error
        option_value = i > 0 and arguments[i - 1].startswith("--") and "=" not in arguments[i - 1]
        if skip_options and option_value and not argument.endswith(".py"):
            continue  # the value of a torchrun option (--nproc-per-node 2)
        if not os.path.isfile(argument):
            raise TracelensError(f"{argument}: no such script")
        return argument
    raise TracelensError("no script given: tracelens record [options] -- python SCRIPT.py ARGS")


def _check_options(args: argparse.Namespace) -> None:
    if args.skip < 0:
        raise TracelensError("--skip must be 0 or more")
    if args.steps < 1:
        raise TracelensError("--steps must be at least 1")
    step_on = args.step_on
    if step_on not in ("optimizer", "forward") and not re.match(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$", step_on):
        raise TracelensError(f"--step-on {step_on!r}: use optimizer, forward or a function pkg.mod:func")
    if step_on not in ("optimizer", "forward") and ":" not in step_on and "." not in step_on:
        raise TracelensError(f"--step-on {step_on!r}: name the function with its module (pkg.mod:func)")


def _default_name(script: str | None, module: str | None, command: list[str]) -> str:
    if script is not None:
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", Path(script).stem)
    if module is not None:
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", module.rsplit(".", 1)[-1])
    return "trace"


def _prepare_out(out_dir: Path, name: str, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise TracelensError(f"{out_dir}: not a directory (-o takes a folder)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TracelensError(f"{out_dir}: cannot create it ({exc.strerror})") from None
    existing = [p for suffix in (".json.gz", ".et.gz") for p in _own_files(out_dir, name, suffix)]
    if existing and not force:
        raise TracelensError(f"{existing[0]} exists; pass --force to replace it or --name to pick another name")
    for path in existing + _own_files(out_dir, "." + name, STATUS_SUFFIX):
        if path.is_file():
            path.unlink()


def _own_files(out_dir: Path, name: str, suffix: str) -> list[Path]:
    """`NAME{suffix}` and `NAME.rank{R}{suffix}` in `out_dir` (never another name that starts with NAME)."""
    import glob  # here: every command builds this parser, only `record` runs it

    rank = re.compile(re.escape(name) + r"\.rank\d+" + re.escape(suffix))
    return sorted(
        p for p in out_dir.glob(f"{glob.escape(name)}*{suffix}") if p.name == name + suffix or rank.fullmatch(p.name)
    )


def _run_program(command: list[str], env: dict[str, str]) -> tuple[int, bool]:
    """Run it; Ctrl-C reaches the program (same process group), the launcher waits for it to write its trace;
    a SIGTERM to the launcher is passed on to the program (which ends as it would; the launcher then reports)."""
    import subprocess  # here: every command builds this parser, only `record` runs it

    try:
        process = subprocess.Popen(command, env=env)
    except OSError as exc:
        raise TracelensError(f"{command[0]}: cannot run it ({exc.strerror})") from None
    interrupted = False
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_term = signal.signal(signal.SIGTERM, lambda number, frame: process.send_signal(number))  # passed on
    try:
        while True:
            try:
                returncode = process.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover (SIGINT is ignored while waiting)
                interrupted = True
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    if returncode == -signal.SIGINT or returncode == 130:
        interrupted = True
    return returncode, interrupted


def _read_statuses(out_dir: Path, name: str) -> list[dict[str, Any]]:
    statuses = []
    for path in _own_files(out_dir, "." + name, STATUS_SUFFIX):
        with contextlib.suppress(OSError, ValueError):
            statuses.append(json.loads(path.read_text()))
        with contextlib.suppress(OSError):
            path.unlink()
    for path in _own_files(out_dir, "." + name, STATUS_SUFFIX + ".tmp"):  # a write cut short by a kill
        with contextlib.suppress(OSError):
            path.unlink()
    return statuses


def _report(
    args: argparse.Namespace,
    name: str,
    out_dir: Path,
    statuses: list[dict[str, Any]],
    returncode: int,
    interrupted: bool,
    script: str | None,
) -> int:
    program_status = returncode if returncode >= 0 else 128 - returncode
    if any(s.get("state") == "no_torch" for s in statuses):
        python = next(str(s.get("python")) for s in statuses if s.get("state") == "no_torch")
        raise TracelensError(
            f"torch is not installed in the program's environment ({python}); install it there: "
            f"{python} -m pip install torch"
        )
    failed = [s for s in statuses if s.get("recorder_failed")]
    if failed:
        raise TracelensError(
            f"internal error: the recorder failed inside the program ({failed[0]['recorder_failed']}) and stopped "
            "recording; the program ran on; please report it",
            exit_code=3,
        )
    traces = [Path(s["trace"]) for s in statuses if s.get("trace")]
    if not statuses and returncode < 0:
        raise TracelensError(
            f"the program was killed by signal {-returncode}; nothing recorded", exit_code=program_status
        )
    if not statuses:
        what = f"the program exited with status {program_status}" if returncode else "the program ended"
        raise TracelensError(
            f"{what} before the recorder started (was it a Python program that imports torch?); nothing recorded",
            exit_code=program_status or 2,
        )
    for trace in traces:
        print(f"tracelens: trace: {trace}", file=sys.stderr)
    if interrupted:
        kept = f"the trace so far: {', '.join(map(str, traces))}" if traces else "nothing was recorded yet"
        raise TracelensError(f"interrupted; {kept}", exit_code=130)
    partial = [s for s in statuses if s.get("partial_reason")]
    if returncode != 0 and partial:
        kept = (
            f"the partial trace is kept, marked partial in tracelens_record: {', '.join(map(str, traces))}"
            if traces
            else "nothing was exported (it stopped in the profiler's warm-up step, before the first profiled one)"
        )
        raise TracelensError(
            f"the program exited with status {program_status} inside the recording window "
            f"({partial[0]['partial_reason']}); {kept}",
            exit_code=program_status,
        )
    if returncode != 0 and not traces:
        raise TracelensError(
            f"the program exited with status {program_status} before the recording window "
            f"({_progress(statuses[0], args)}); nothing recorded",
            exit_code=program_status,
        )
    if not traces or partial:
        status = partial[0] if partial else statuses[0]
        kept = f"; what was recorded is kept: {', '.join(map(str, traces))}" if traces else "; nothing recorded"
        raise TracelensError(
            f"the program ended before the window was complete ({_progress(status, args)}){kept}",
            exit_code=2,
        )
    _print_timings(statuses, args.analyze)
    if returncode != 0:
        warn(f"the program exited with status {program_status} after the window")
    if args.analyze:
        _analyze(out_dir if len(traces) > 1 else traces[0])
    return program_status


def _progress(status: dict[str, Any], args: argparse.Namespace) -> str:
    hook = {
        "optimizer": "the optimizer step hook (torch.optim.Optimizer.register_optimizer_step_post_hook)",
        "forward": "the outermost nn.Module forward hook",
    }.get(args.step_on, f"calls of {args.step_on}")
    return f"{hook} saw {status.get('boundaries', 0)} step(s); the window needs {status.get('needed')}"


AHEAD_PCT = 5.0  # a profiled wall-clock step this much (%) below the profiler-free one: the host's speed moved


def _print_timings(statuses: list[dict[str, Any]], analyzing: bool) -> None:
    """Each trace's profiler-free step beside the profiled one, on the same clock only: where CUDA events timed
    the profiler-free steps, the profiled step is the trace's (GPU end to GPU end, `analyze`'s
    `per_step.step_us`), which the host's wall clock is not where the CPU runs ahead of the GPU; where the wall
    clock timed them (a CPU program), the window's wall-clock steps are that step."""
    for status in statuses:
        free = status.get("profiler_free") or {}
        wall = status.get("profiled_wall_step_us") or []
        rank = f"rank {status['rank']}: " if status.get("rank") is not None and len(statuses) > 1 else ""
        if free.get("median_step_us") is None:
            continue
        events = free.get("clock") == "cuda_events"
        clock = "CUDA events" if events else "wall clock"
        line = f"{rank}profiler-free step {free['median_step_us']:,.1f} µs (median of {free['steps']}, {clock})"
        if events:
            where = "below" if analyzing else f"tracelens analyze {status.get('trace') or 'TRACE'}"
            line += f"; the profiled step is the trace's, in analyze's summary ({where})"
        elif wall:
            profiled = _median(wall)
            line += f"; profiled {profiled:,.1f} µs (wall clock)"
            if free["median_step_us"] > 0:
                inflation = 100.0 * (profiled / free["median_step_us"] - 1.0)
                if inflation < -AHEAD_PCT:  # the profiler never speeds a program up: the host's speed moved
                    line += f": {-inflation:.0f} % faster profiled, the host's speed moved"
                elif inflation < 0:
                    line += ": the profiler added nothing measurable (under 5 %)"
                else:
                    line += f": the profiler added {change_text(inflation, 0)} %"
        print(f"tracelens: {line}", file=sys.stderr)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _analyze(target: Path) -> None:
    """`tracelens analyze TARGET`'s text, or a warning where tracelens' dependencies are missing."""
    try:
        from tracelens.cli import main as cli_main
    except ImportError as exc:
        warn(
            f"not analyzed ({exc.name or exc} is not installed here); "
            f"run tracelens analyze {target} where tracelens-kineto is installed"
        )
        return
    sys.stdout.flush()
    status = cli_main(["analyze", str(target), "--no-cache"])
    if status != 0:
        warn(f"tracelens analyze {target} exited with status {status}")


def _version() -> str:
    return __version__


def _error(message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"tracelens: error: {' '.join(message.split())}", file=sys.stderr)
