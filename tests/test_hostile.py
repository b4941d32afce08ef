"""The attack as a suite (issue 19): hostile inputs through every command, each in a child process with a timeout.

Every command (analyze, compare, check, report, annotate) runs in its own forked child of a process that has
already imported tracelens (a fresh interpreter per command would cost ~1.5 s on a loaded CI box; the fork
costs milliseconds), with stdin from /dev/null, stdout and stderr to files, a time limit (then the whole
process group is killed: a hang) and an address-space limit (an unbounded read ends in MemoryError, not in
the machine's swap). A run passes when it
- ends in time (no hang),
- prints no traceback,
- exits 0, 1 or 2 (3 is the internal-error guard: a bug), and what the case expects,
- prints exactly one `tracelens: error:` line when it exits 2, and none otherwise.

The cases: the failures listed in issue 19 "Why", and real traces mutated with a seeded generator
(truncations, bad bytes, huge numbers, deep nesting, odd types, odd file names). Cases whose fix belongs to the
loader or cache rework are `xfail(strict=False)`. `scripts/hostile_run.py` runs many more for a release.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import os
import random
import re
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BASE_TRACES = ("eager_mlp.json.gz", "compiled_mlp.json.gz", "liger_mlp.json.gz", "eager_linear.json.gz")
COMMANDS = ("analyze", "compare", "check", "report", "annotate")
TIMEOUT_S = 30.0  # per command; a tiny trace takes well under a second
MEMORY_BYTES = 3 << 30  # address space of one command
HYPOTHESES = '[[hypothesis]]\nname = "kernels"\nmetric = "per_step.kernels"\nop = ">="\nvalue = 0\n'
ERROR_PREFIX = "tracelens: error: "


# ---------------------------------------------------------------- running one command


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one command did."""

    argv: tuple[str, ...]
    status: int | None  # exit status; negative: killed by that signal; None: hung (killed at the time limit)
    stdout: bytes
    stderr: str
    seconds: float

    def problems(self, allowed: frozenset[int]) -> list[str]:
        """Why this run breaks the promise ([] when it keeps it): 'hang', 'traceback' or 'wrong exit: ...'."""
        if self.status is None:
            return ["hang"]
        found = []
        if "Traceback (most recent call last)" in self.stderr:
            found.append("traceback")
        errors = [line for line in self.stderr.splitlines() if line.startswith(ERROR_PREFIX)]
        if self.status not in allowed:
            found.append(f"wrong exit: {self.status} not in {sorted(allowed)}")
        elif self.status == 2 and len(errors) != 1:
            found.append(f"wrong exit: status 2 with {len(errors)} error lines")
        elif self.status in (0, 1) and errors:
            found.append(f"wrong exit: status {self.status} with an error line")
        return found


def run_command(
    argv: Sequence[str],
    cwd: Path,
    timeout_s: float = TIMEOUT_S,
    env: dict[str, str] | None = None,
    stdout_to: str | None = None,
    memory_bytes: int = MEMORY_BYTES,
) -> Outcome:
    """Run `tracelens ARGV` in a forked child (see the module docstring); `stdout_to` a path such as /dev/full."""
    out_path, err_path = cwd / f".stdout.{os.getpid()}", cwd / f".stderr.{os.getpid()}"
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(list(argv), cwd, env or {}, stdout_to or str(out_path), err_path, memory_bytes)
    status = _wait(pid, timeout_s)
    seconds = time.monotonic() - started
    stdout = out_path.read_bytes() if stdout_to is None and out_path.exists() else b""
    stderr = err_path.read_bytes().decode("utf-8", errors="backslashreplace") if err_path.exists() else ""
    for path in (out_path, err_path):
        with contextlib.suppress(OSError):
            path.unlink()
    return Outcome(tuple(argv), status, stdout, stderr, seconds)


def _child(argv: list[str], cwd: Path, env: dict[str, str], stdout_to: str, err_path: Path, memory: int) -> None:
    status = 1
    try:
        os.setpgid(0, 0)  # its own process group: a hang is killed with every worker it started
        os.chdir(cwd)
        for fd, target, flags in (
            (0, "/dev/null", os.O_RDONLY),
            (1, stdout_to, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, str(err_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(target, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")  # strict, like Python's
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.environ.update(env)
        sys.argv = ["tracelens", *argv]
        from tracelens.cli import run

        run()  # ends the process with os._exit
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # what the interpreter would print for an exception escaping `run`
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
    os._exit(status)


def _wait(pid: int, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            with contextlib.suppress(OSError):  # leftover workers of a finished command
                os.killpg(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


# ---------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class Case:
    """One hostile input and the commands to run on it.

    `make(folder)` writes the input(s) and returns the trace path; `argv` optionally builds explicit command
    lines instead of the standard one per command; `expect` the exit statuses allowed."""

    name: str
    make: Callable[[Path], Path]
    commands: tuple[str, ...] = COMMANDS
    argv: Callable[[Path, Path], list[list[str]]] | None = None  # (trace, folder) -> command lines
    expect: frozenset[int] = frozenset({0, 1, 2})
    env: tuple[tuple[str, str], ...] = ()
    stdout_to: str | None = None
    xfail: str | None = None
    no_raw_escape: bool = False  # stdout must not carry a raw ESC (names are escaped)
    timeout_s: float = TIMEOUT_S
    memory_bytes: int = MEMORY_BYTES


def standard_argv(command: str, trace: Path, folder: Path) -> list[str]:
    """The command line of `command` on `trace`; outputs go into `folder`, hypotheses from `folder/h.toml`."""
    if command == "analyze":
        return ["analyze", str(trace)]
    if command == "compare":
        return ["compare", str(trace), str(REPO / "traces" / "h200" / "eager_linear.json.gz")]
    if command == "check":
        hypotheses = folder / "h.toml"
        if not hypotheses.exists():
            hypotheses.write_text(HYPOTHESES)
        return ["check", str(trace), "--expect", str(hypotheses)]
    if command == "report":
        return ["report", str(trace), "-o", str(folder / "out.html"), "--force", "--max-slices", "2000"]
    return ["annotate", str(trace), "-o", str(folder / "out.json.gz"), "--force"]


def command_lines(case: Case, trace: Path, folder: Path) -> list[list[str]]:
    if case.argv is not None:
        return case.argv(trace, folder)
    return [standard_argv(command, trace, folder) for command in case.commands]


def run_case(case: Case, folder: Path) -> list[tuple[Outcome, list[str]]]:
    """Every command of `case` in `folder`; each outcome with its problems."""
    folder.mkdir(parents=True, exist_ok=True)
    trace = case.make(folder)
    results = []
    for argv in command_lines(case, trace, folder):
        outcome = run_command(argv, folder, case.timeout_s, dict(case.env), case.stdout_to, case.memory_bytes)
        problems = outcome.problems(case.expect)
        if case.no_raw_escape and (b"\x1b]" in outcome.stdout or b"\x1b[2J" in outcome.stdout):
            problems.append("raw terminal escape in the output")
        results.append((outcome, problems))
    return results


def base_events(name: str = "eager_mlp.json.gz") -> dict[str, Any]:
    with gzip.open(REPO / "traces" / "h200" / name) as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def _file(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return make


def _document(name: str, edit: Callable[[dict[str, Any]], None], compress: bool = False) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        document = base_events()
        edit(document)
        data = json.dumps(document).encode()
        path = folder / name
        path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
        return path

    return make


def _raw_document(name: str, edit: Callable[[str], str]) -> Callable[[Path], Path]:
    """The JSON text of the base trace edited as text (for what `json.dumps` cannot write)."""

    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(edit(json.dumps(base_events())).encode("utf-8", errors="surrogatepass"))
        return path

    return make


def _kernels(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (e for e in document["traceEvents"] if e.get("cat") == "kernel")


def _rename_kernels(name: str) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        for event in _kernels(document):
            event["name"] = name + event["name"]
        for event in document["traceEvents"]:
            if event.get("cat") == "cpu_op" and event.get("name", "").startswith("aten::"):
                event["name"] = event["name"] + name
            if event.get("ph") == "M" and event.get("name") == "thread_name":
                event["args"]["name"] = name + str(event["args"].get("name"))

    return edit


def _set_step_name(document: dict[str, Any]) -> None:
    for event in document["traceEvents"]:
        if str(event.get("name", "")).startswith("ProfilerStep#"):
            event["name"] = "ProfilerStep#99999999999999999999"


def _set_rank(document: dict[str, Any]) -> None:
    document["distributedInfo"] = {"rank": 2**70, "world_size": 2}


def _set_huge_ts(document: dict[str, Any]) -> None:
    next(_kernels(document))["ts"] = 10**400  # an int no float holds


def _fifo(folder: Path) -> Path:
    path = folder / "fifo.json"
    os.mkfifo(path)
    return path


def _symlink_loop(folder: Path) -> Path:
    first, second = folder / "loop1.json", folder / "loop2.json"
    first.symlink_to(second)
    second.symlink_to(first)
    return first


def _copy_base(name: str) -> Callable[[Path], Path]:
    return _file(name, (REPO / "traces" / "h200" / "eager_mlp.json.gz").read_bytes())


def _hypotheses_case(name: str, text: str | bytes, expect: frozenset[int] = frozenset({2})) -> Case:
    data = text.encode() if isinstance(text, str) else text

    def argv(trace: Path, folder: Path) -> list[list[str]]:
        path = folder / "hostile.toml"
        path.write_bytes(data)
        return [["check", str(trace), "--expect", str(path)]]

    return Case(f"hypotheses: {name}", _copy_base("t.json.gz"), argv=argv, expect=expect)


def _special_hypotheses(kind: str) -> Callable[[Path, Path], list[list[str]]]:
    def argv(trace: Path, folder: Path) -> list[list[str]]:
        path = folder / "special.toml"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        else:
            path = Path(kind)
        return [["check", str(trace), "--expect", str(path)]]

    return argv


def _outputs(*flags: str, make_target: Callable[[Path], str]) -> Callable[[Path, Path], list[list[str]]]:
    def argv(trace: Path, folder: Path) -> list[list[str]]:
        target = make_target(folder)
        return [
            [command, str(trace), *(["--format", "json"] if command == "analyze" else []), "-o", target, *flags]
            for command in ("analyze", "report", "annotate")
        ]

    return argv


def _symlink_target(folder: Path) -> str:
    (folder / "precious.txt").write_text("precious")
    link = folder / "link.html"
    if not link.is_symlink():
        link.symlink_to(folder / "precious.txt")
    return str(link)


def _fifo_target(folder: Path) -> str:
    path = folder / "out.fifo"
    if not path.exists():
        os.mkfifo(path)
    return str(path)


def _check_over_hypotheses(trace: Path, folder: Path) -> list[list[str]]:
    hypotheses = folder / "h.toml"
    hypotheses.write_text(HYPOTHESES)
    return [["check", str(trace), "--expect", str(hypotheses), "-o", str(hypotheses), "--force"]]


def _peak_argv(*flags: str) -> Callable[[Path, Path], list[list[str]]]:
    return lambda trace, folder: [["analyze", str(trace), *flags]]


def _gzip_claiming_4_gib(folder: Path) -> Path:
    """A gzip cut in the middle whose last 4 bytes (the size field of a whole gzip) claim ~4 GiB."""
    data = gzip.compress(json.dumps(base_events()).encode(), mtime=0)
    path = folder / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2] + b"\xff\xff\xff\xf0")
    return path


def _endless_whitespace(megabytes: int) -> Callable[[Path], Path]:
    """`{"traceEvents":[` and then MB of spaces (compressed ~1000:1): no event boundary ever."""

    def make(folder: Path) -> Path:
        compressor = gzip.GzipFile(filename="", mode="wb", fileobj=(buffer := io.BytesIO()), mtime=0)
        compressor.write(b'{"traceEvents":[')
        block = b" " * (1 << 20)
        for _ in range(megabytes):
            compressor.write(block)
        compressor.close()
        path = folder / "spaces.json.gz"
        path.write_bytes(buffer.getvalue())
        return path

    return make


def _dev_zero(folder: Path) -> Path:
    return Path("/dev/zero")


HOSTILE_NAME = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e<a href='https://example.com'>x</a>&amp;%{x}"


def issue_cases(release: bool = False) -> list[Case]:
    """The failures issue 19 lists, and their neighbours; `release` makes the slow ones as big as the issue's
    (1 GB of whitespace, a FIFO given 60 s, /dev/zero given 4 GiB) instead of CI-sized."""
    two_commands = ("analyze", "report")
    whitespace_mb = 1024 if release else 16
    return [
        # outputs (item 1)
        Case(
            "-o a symlink --force",
            _copy_base("t.json.gz"),
            argv=_outputs("--force", make_target=_symlink_target),
            expect=frozenset({2}),
        ),
        Case(
            "-o a FIFO --force",
            _copy_base("t.json.gz"),
            argv=_outputs("--force", make_target=_fifo_target),
            expect=frozenset({2}),
        ),
        Case(
            "-o /dev/full --force",
            _copy_base("t.json.gz"),
            argv=_outputs("--force", make_target=lambda f: "/dev/full"),
            expect=frozenset({2}),
        ),
        Case(
            "-o /dev/stdout",
            _copy_base("t.json.gz"),
            argv=_outputs(make_target=lambda f: "/dev/stdout"),
            expect=frozenset({2}),
        ),
        Case(
            "-o a folder --force",
            _copy_base("t.json.gz"),
            argv=_outputs("--force", make_target=str),
            expect=frozenset({2}),
        ),
        Case(
            "-o into a missing folder",
            _copy_base("t.json.gz"),
            argv=_outputs(make_target=lambda f: str(f / "missing" / "out")),
            expect=frozenset({2}),
        ),
        Case(
            "-o the input --force",
            _copy_base("t.json.gz"),
            argv=lambda trace, folder: [
                [command, str(trace), "-o", str(trace), "--force"] for command in ("analyze", "report", "annotate")
            ],
            expect=frozenset({2}),
        ),
        Case(
            "check -o the hypotheses file --force",
            _copy_base("t.json.gz"),
            argv=_check_over_hypotheses,
            expect=frozenset({2}),
        ),
        Case(
            "stdout on /dev/full",
            _copy_base("t.json.gz"),
            commands=("analyze", "compare", "check"),
            stdout_to="/dev/full",
            expect=frozenset({2}),
        ),
        # no traceback from any input (item 4)
        Case("no arguments", _copy_base("t.json.gz"), argv=lambda trace, folder: [[]], expect=frozenset({2})),
        Case("a symlink loop", _symlink_loop, expect=frozenset({2})),
        Case("a file name with byte 0xff", _copy_base(os.fsdecode(b"\xff.json.gz"))),
        Case(
            "a file name with byte 0xff, no cache",
            _copy_base(os.fsdecode(b"\xff.json.gz")),
            env=(("TRACELENS_NO_CACHE", "1"),),
            commands=("analyze",),
        ),
        Case("odd file name: spaces, newline, dash", _copy_base("-x \n y.json.gz"), commands=two_commands),
        Case(
            "a \\ud800 escape in names",
            _raw_document("t.json", lambda t: t.replace('"aten::', '"\\ud800aten::')),
        ),
        Case("ProfilerStep#99999999999999999999", _document("t.json", _set_step_name)),
        Case(
            "a 400-digit integer ts",
            _document("t.json", _set_huge_ts),
            commands=("analyze", "annotate"),
        ),
        Case("distributedInfo.rank = 2**70", _document("t.json", _set_rank)),
        _hypotheses_case(
            "arrays nested 1,000 deep", HYPOTHESES.replace("value = 0", "value = " + "[" * 1000 + "]" * 1000)
        ),
        _hypotheses_case("a 5,000-digit value", HYPOTHESES.replace("value = 0", "value = " + "9" * 5000)),
        _hypotheses_case(
            "a 400-digit value with <", HYPOTHESES.replace('">="', '"<"').replace("value = 0", "value = " + "9" * 400)
        ),
        _hypotheses_case('metric = "kernels.²"', HYPOTHESES.replace("per_step.kernels", "kernels.²")),
        _hypotheses_case("a UTF-8 BOM", b"\xef\xbb\xbf" + HYPOTHESES.encode(), expect=frozenset({0})),
        _hypotheses_case("bytes that are not UTF-8", b"\xff\xfe" + HYPOTHESES.encode()),
        _hypotheses_case("an empty file", b""),
        Case("hypotheses: a FIFO", _copy_base("t.json.gz"), argv=_special_hypotheses("fifo"), expect=frozenset({2})),
        Case(
            "hypotheses: /dev/zero",
            _copy_base("t.json.gz"),
            argv=_special_hypotheses("/dev/zero"),
            expect=frozenset({2}),
        ),
        Case(
            "hypotheses: a folder", _copy_base("t.json.gz"), argv=_special_hypotheses("folder"), expect=frozenset({2})
        ),
        # smaller items (item 6)
        Case(
            "terminal escapes in names",
            _document("t.json", _rename_kernels(HOSTILE_NAME)),
            commands=("analyze", "compare", "check"),
            expect=frozenset({0}),
            no_raw_escape=True,
        ),
        Case(
            "terminal escapes in names: report and annotate",
            _document("t.json", _rename_kernels(HOSTILE_NAME)),
            commands=("report", "annotate"),
            expect=frozenset({0}),
        ),
        Case("--peak-tbps -3", _copy_base("t.json.gz"), argv=_peak_argv("--peak-tbps", "-3"), expect=frozenset({2})),
        Case("--peak-tbps 0", _copy_base("t.json.gz"), argv=_peak_argv("--peak-tbps", "0"), expect=frozenset({2})),
        Case(
            "--peak-tflops nan", _copy_base("t.json.gz"), argv=_peak_argv("--peak-tflops", "nan"), expect=frozenset({2})
        ),
        Case(
            "TRACELENS_PEAKS with a zero",
            _copy_base("t.json.gz"),
            commands=two_commands,
            env=(("TRACELENS_PEAKS", '{"hbm_tbps": 0}'),),
            expect=frozenset({2}),
        ),
        Case(
            "TRACELENS_PEAKS not JSON",
            _copy_base("t.json.gz"),
            commands=("analyze",),
            env=(("TRACELENS_PEAKS", "{"),),
            expect=frozenset({2}),
        ),
        Case(
            "TRACELENS_WORKERS=99999",
            _copy_base("t.json.gz"),
            commands=("analyze",),
            env=(("TRACELENS_WORKERS", "99999"),),
        ),
        # the loader's (items 2-3): run, marked until the loader rework lands
        Case("a gzip cut short claiming 4 GiB", _gzip_claiming_4_gib, commands=("analyze",)),
        Case(
            f"{whitespace_mb} MB of whitespace and no event",
            _endless_whitespace(whitespace_mb),
            commands=("analyze",),
            timeout_s=300 if release else 60,
        ),
        Case("a FIFO as input", _fifo, commands=("analyze",), timeout_s=60 if release else 3),
        Case(
            "/dev/zero as input",
            _dev_zero,
            commands=("analyze",),
            timeout_s=120 if release else 30,
            memory_bytes=(4 << 30) if release else (1 << 30),
        ),
    ]


# ---------------------------------------------------------------- mutated real traces


def _numbers(text: str) -> list[re.Match[str]]:
    return list(re.finditer(r"(?<=[:\[,] )-?\d+(\.\d+)?", text))


MUTATIONS = ("truncate", "flip bytes", "huge number", "deep nesting", "odd types", "drop keys", "NaN and strings")


def mutate(text: str, kind: str, rng: random.Random) -> bytes:
    """The JSON text of a real trace changed by one kind of hostile edit."""
    if kind == "truncate":
        return text.encode()[: rng.randrange(1, len(text))]
    if kind == "flip bytes":
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == "huge number":
        matches = _numbers(text)
        chosen = sorted(rng.sample(matches, min(len(matches), rng.randint(1, 5))), key=lambda m: -m.start())
        for match in chosen:
            digits = rng.choice(["9" * rng.choice([20, 40, 400, 5000]), "1e400", "-1e400", "1" + "0" * 30])
            text = text[: match.start()] + digits + text[match.end() :]
        return text.encode()
    if kind == "deep nesting":
        depth = rng.choice([100, 1_000, 100_000])
        anchor = text.index('"args": {') if '"args": {' in text else len(text) // 2
        return (text[:anchor] + '"deep": ' + "[" * depth + "]" * depth + ", " + text[anchor:]).encode()
    document = json.loads(text)
    events = document["traceEvents"]
    for event in rng.sample(events, min(len(events), rng.randint(1, 30))):
        key = rng.choice(["name", "ts", "dur", "pid", "tid", "args", "cat", "ph", "id"])
        if kind == "drop keys":
            event.pop(key, None)
        elif kind == "odd types":
            event[key] = rng.choice([None, [], {}, [1, 2], {"a": 1}, True, "", "x" * 10_000, -1, 2**64, 0.5])
        else:  # NaN and strings
            event[key] = rng.choice([float("nan"), float("inf"), "12", "nan", "-0", "١٢"])
    return json.dumps(document).encode()


def mutated_cases(count: int, seed: int, commands_per_case: int | None = 2) -> list[Case]:
    """`count` mutated real traces; each runs analyze and `commands_per_case - 1` other commands in rotation
    (all commands when `commands_per_case` is None)."""
    rng = random.Random(seed)
    texts = {name: json.dumps(base_events(name)) for name in BASE_TRACES}
    cases = []
    for index in range(count):
        base = BASE_TRACES[index % len(BASE_TRACES)]
        kind = MUTATIONS[index % len(MUTATIONS)]
        data = mutate(texts[base], kind, random.Random(rng.getrandbits(64)))
        compress = rng.random() < 0.4
        name = f"m{index}.json.gz" if compress else f"m{index}.json"
        payload = gzip.compress(data, mtime=0) if compress else data
        if commands_per_case is None:
            commands = COMMANDS
        else:
            others = COMMANDS[1:]
            commands = ("analyze", *(others[(index + k) % len(others)] for k in range(commands_per_case - 1)))
        cases.append(
            Case(
                f"mutated {index}: {kind} of {base}{' (gzip)' if compress else ''}",
                _file(name, payload),
                commands=commands,
            )
        )
    return cases


# ---------------------------------------------------------------- the tests

MUTATED_IN_CI = 28
SEED = 19


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_imports()


def warm_imports() -> None:
    """Import what the commands import, once, so each forked child starts in milliseconds."""
    import plotly.offline

    import tracelens.analyses.pipeline
    import tracelens.cli
    import tracelens.hypotheses.evaluate
    import tracelens.loader.rewrite
    import tracelens.renderers.html
    import tracelens.renderers.text
    import tracelens.report  # noqa: F401

    plotly.offline.get_plotlyjs()


def _params() -> list[Any]:
    cases = issue_cases() + mutated_cases(MUTATED_IN_CI, SEED)
    return [
        pytest.param(
            case, id=case.name, marks=[pytest.mark.xfail(strict=False, reason=case.xfail)] if case.xfail else []
        )
        for case in cases
    ]


@pytest.mark.parametrize("case", _params())
def test_hostile_input(case: Case, tmp_path: Path) -> None:
    failures = [
        f"{' '.join(outcome.argv)!r}: {', '.join(problems)} (exit {outcome.status}); stderr: {outcome.stderr[-600:]!r}"
        for outcome, problems in run_case(case, tmp_path)
        if problems
    ]
    assert not failures, "\n".join(failures)


def test_the_checker_catches_tracebacks_hangs_and_wrong_exits(tmp_path: Path) -> None:
    """The suite can fail: a traceback, a hang, exit 3 and a silent exit 2 are each reported."""
    assert Outcome((), 1, b"", "Traceback (most recent call last):\n  x\nValueError\n", 0).problems(
        frozenset({0, 1, 2})
    ) == ["traceback"]
    assert Outcome((), None, b"", "", 9).problems(frozenset({0})) == ["hang"]
    assert Outcome((), 3, b"", "tracelens: error: internal error (x)\n", 0).problems(frozenset({0, 1, 2})) == [
        "wrong exit: 3 not in [0, 1, 2]"
    ]
    assert Outcome((), 2, b"", "", 0).problems(frozenset({2})) == ["wrong exit: status 2 with 0 error lines"]
    slow = run_command(["analyze", "/dev/stdin"], tmp_path, timeout_s=0.5)  # stdin is /dev/null: ends at once
    assert slow.status is not None


# ---------------------------------------------------------------- hostile names in the text and HTML output


def _hostile_trace(folder: Path) -> Path:
    return _document("hostile.json", _rename_kernels(HOSTILE_NAME))(folder)


@pytest.mark.parametrize("color", [False, True])
def test_text_output_escapes_control_characters(tmp_path: Path, color: bool) -> None:
    """A name can neither retitle the terminal (OSC), clear it (CSI 2J, C1 CSI) nor reorder it (bidi)."""
    from tracelens import load
    from tracelens.analyses import analyze
    from tracelens.analyses.compare import compare_variants
    from tracelens.hypotheses.document import check_document
    from tracelens.hypotheses.evaluate import CheckResult, evaluate
    from tracelens.hypotheses.parse import parse_hypotheses
    from tracelens.renderers.check import CheckTextRenderer
    from tracelens.renderers.compare_out import CompareTextRenderer
    from tracelens.renderers.text import AnalyzeTextRenderer

    trace = load(_hostile_trace(tmp_path))
    results = analyze(trace)
    document = check_document(trace)
    hypothesis = {"name": "k", "kernel": "*pwned*", "op": ">=", "value": 0}
    result = CheckResult("h.toml", [document], evaluate(parse_hypotheses({"hypothesis": [hypothesis]}), [document]))
    outputs = {
        "analyze": AnalyzeTextRenderer(color=color).render(results),
        "compare": CompareTextRenderer(color=color).render(compare_variants([(HOSTILE_NAME, trace, results)])),
        "check": CheckTextRenderer(color=color, width=200, verbose=True).render(result),  # evidence of a HELD one
    }
    for command, text in outputs.items():
        for raw in ("\x1b]", "\x1b[2J", "\x9b", "\u202e", "\x07"):
            assert raw not in text, (command, raw)
        assert "\\x1b]0;pwned\\x07" in text or "\\x1b]0;pwned" in text, command
        if not color:
            assert "\x1b" not in text, command


def test_report_labels_never_become_links(tmp_path: Path) -> None:
    """Plotly draws `<a href>` in axis labels, legends and hover text as a link: trace names are escaped."""
    from tracelens import load
    from tracelens.analyses import analyze
    from tracelens.renderers.page import build_report

    trace = load(_hostile_trace(tmp_path))
    document = build_report([(trace, analyze(trace)), (trace, analyze(trace))], max_slices=1000)
    strings: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)
        elif hasattr(value, "tolist"):
            collect(value.tolist())

    for _, figure in document.figures():
        collect(figure.to_plotly_json())
    joined = "\n".join(strings)
    assert "pwned" in joined  # the hostile names are drawn ...
    assert "<a " not in joined
    assert "&lt;a href='https://example.com'&gt;x&lt;/a&gt;&amp;amp;&#37;{x}" in joined  # ... as text
