"""Shared test helpers: where the real-trace corpus lives, and tiny hand-written traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests import anchors
from tracelens.errors import WARNING_INDENT, WARNING_PREFIX

REPO = Path(__file__).resolve().parent.parent
ANCHORS = anchors.primary()  # holds every redistributable corpus trace (tests/anchors.py: where to look)
TRACES = REPO / "traces"


def anchor(relative: str) -> Path:
    """Path of a corpus trace. A trace whose licence keeps it out of the repository (`anchors.OPTIONAL`) skips
    the test when no folder holds it; any other missing trace fails it (the corpus is in the repository)."""
    path = anchors.find(relative)
    if path is None:
        if relative in anchors.OPTIONAL:
            pytest.skip(anchors.missing_reason(relative))
        pytest.fail(anchors.missing_reason(relative))
    return path


def anchor_traces() -> list[Path]:
    """Every .json/.json.gz trace of the corpus found (tar archives excluded), sorted by relative name."""
    return list(anchors.traces().values())


def anchor_name(path: Path) -> str:
    """A corpus trace's name relative to its folder (test ids, golden names)."""
    return anchors.name(path)


def recorded_trace(relative: str) -> Path:
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"recorded trace {relative} not committed yet")
    return path


def write_trace(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    """Write a tiny trace (gzip if the name ends in .gz) with `events` as traceEvents."""
    document = {"schemaVersion": 1, **top, "traceEvents": events}
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def op(
    name: str, ts: float, dur: float, ext: int | None = None, tid: int = 1, cat: str = "cpu_op", **args: Any
) -> dict[str, Any]:
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(
    name: str, ts: float, dur: float, correlation: int, ext: int | None = None, tid: int = 1, cat: str = "cuda_runtime"
) -> dict[str, Any]:
    args: dict[str, Any] = {"correlation": correlation, "cbid": 211}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(
    name: str, ts: float, dur: float, correlation: int, stream: int = 7, cat: str = "kernel", **args: Any
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": correlation, "device": 0, "stream": stream, **args},
    }


def step(number: int, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return op(f"ProfilerStep#{number}", ts, dur, cat="user_annotation", tid=tid)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write to the user's ~/.cache/tracelens."""
    os.environ["TRACELENS_CACHE_DIR"] = str(tmp_path_factory.mktemp("tracelens-cache"))


@pytest.fixture(autouse=True, scope="session")
def _piped_width() -> None:
    """Text output is laid out as when piped without COLUMNS/LINES (140 columns), whatever the caller's terminal
    (pytest-xdist's workers set COLUMNS=80): tests of the width set their own."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own, with the cache turned on (tests of the caches use it)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(folder))
    monkeypatch.delenv("TRACELENS_NO_CACHE", raising=False)
    return folder


def spy_on_loads(monkeypatch: pytest.MonkeyPatch, *modules: Any) -> list[Path]:
    """Record every trace a command loads (`Cache.begin_load`, served from the trace cache or decoded); returns
    the list of their paths. `modules`: the CLI modules under test (every command loads through the cache)."""
    from tracelens._cache import Cache

    seen: list[Path] = []
    real = Cache.begin_load

    def spy(self: Cache, path: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(Path(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(Cache, "begin_load", spy)
    return seen


def one_gemm_trace(folder: Path, name: str = "t.json", kernel_us: float = 5) -> Path:
    """A one-step trace: aten::mm launching one `gemm` kernel of `kernel_us`."""
    events = [
        step(1, 0, 50),
        op("aten::mm", 1, 20, ext=7),
        launch("cudaLaunchKernel", 3, 2, correlation=70, ext=7),
        kernel("gemm", 10, kernel_us, correlation=70),
    ]
    return write_trace(folder / name, events)


def unwrapped(stderr: str) -> str:
    """`stderr` with each `tracelens: warning:` on one line again: its continuation lines (`errors.warning_text`
    wraps a warning to the width, the lines after the first indented) joined to its first with one space; the
    other lines as they were."""
    lines: list[str] = []
    in_warning = False
    for line in stderr.splitlines():
        if in_warning and line.startswith(WARNING_INDENT):
            lines[-1] += " " + line.removeprefix(WARNING_INDENT)
            continue
        in_warning = line.startswith(WARNING_PREFIX)
        lines.append(line)
    return "".join(f"{line}\n" for line in lines) if stderr.endswith("\n") else "\n".join(lines)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, expect: int = 0) -> tuple[str, str]:
    """`tracelens ARGV` in-process; asserts its exit status and returns (stdout, stderr)."""
    from tracelens.cli import main

    assert main(list(argv)) == expect
    captured = capsys.readouterr()
    return captured.out, captured.err


# ---------------------------------------------------------------- slow tests

# A test run once per trace is slow on the bigger traces (0.3 to 7 s a case, against ~0.1 s on the others):
# those cases are marked `slow` here, so the default run covers every test on the smaller traces and
# `pytest -m slow` (.ci/run) the same tests on the big ones. Tests slow on any input carry @pytest.mark.slow.
BIG_TRACE_BYTES = 400_000  # gzip size; 17 traces today, 0.44 to 3.9 MB
# Recordings whose cases of the once-per-trace tests run with the slow ones: held-out and calibration folders whose
# figures their own tests check (tests/test_actions_heldout_graphs.py, tests/test_profiler_overhead_graphs.py,
# tests/test_actions_graphed_compile.py, tests/test_profiler_overhead.py: the alternated H100 rounds), and repeat
# rounds of programs the default run covers once (the sweep's rows in h200/extra and sweep_long/r1)
SLOW_FOLDERS = tuple(
    TRACES / folder
    for folder in (
        "h100/graphs_heldout",
        "h100/graphs_compiled",
        "h100/graphs_compiled_heldout",
        "h100/heldout",
        "h100/interleaved",
        "h200/sweep_repeats",
        "h200/sweep_long/r2",
    )
)


def _slow_trace(path: Path) -> bool:
    return path.stat().st_size > BIG_TRACE_BYTES or any(path.is_relative_to(folder) for folder in SLOW_FOLDERS)


def _big_traces() -> tuple[set[Path], tuple[str, ...]]:
    """The big traces' paths (and the held-out folders' `SLOW_FOLDERS`), and the names a test may give them
    (corpus-relative, or under traces/)."""
    paths = {p for p in [*anchors.traces().values(), *TRACES.rglob("*.json.gz")] if _slow_trace(p)}
    names = {anchors.name(p) if not p.is_relative_to(TRACES) else p.relative_to(TRACES).as_posix() for p in paths}
    names |= {name.removeprefix("h200/") for name in names}
    return {p.resolve() for p in paths}, tuple(sorted(names))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` every case of a parametrized test whose parameters include a big trace; leave out (deselect)
    every test marked `optional_corpus(name)` whose trace no folder holds (`anchors.OPTIONAL`: no licence to copy
    it into the repository), so that a fresh clone runs every test it can and skips none for a missing trace."""
    paths, names = _big_traces()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            if (isinstance(value, Path) and value.resolve() in paths) or (
                isinstance(value, str) and (value.endswith(names) or f"{value}.json.gz".endswith(names))
            ):  # a name given with or without its .json.gz
                item.add_marker(pytest.mark.slow)
                break
    absent = [item for item in items if _missing_optional(item)]
    if absent:
        items[:] = [item for item in items if not _missing_optional(item)]
        config.hook.pytest_deselected(items=absent)


def optional_corpus(name: str) -> pytest.MarkDecorator:
    """The mark of a test (or a parameter) that needs the optional corpus trace `name` (`anchors.OPTIONAL`)."""
    assert name in anchors.OPTIONAL, name
    return pytest.mark.optional_corpus(name)


def _missing_optional(item: pytest.Item) -> bool:
    return any(anchors.find(mark.args[0]) is None for mark in item.iter_markers("optional_corpus"))


# ---------------------------------------------------------------- the run's last line: what did not run, and why

SLOW_LEFT_OUT = pytest.StashKey[int]()  # slow tests deselected by -m (each pytest-xdist worker sends its count)
OPTIONAL_LEFT_OUT = pytest.StashKey[int]()  # tests of optional traces no folder holds, deselected (the same)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        config = items[0].config
        slow = sum(1 for item in items if item.get_closest_marker("slow") and not _missing_optional(item))
        optional = sum(1 for item in items if _missing_optional(item))
        config.stash[SLOW_LEFT_OUT] = config.stash.get(SLOW_LEFT_OUT, 0) + slow
        config.stash[OPTIONAL_LEFT_OUT] = config.stash.get(OPTIONAL_LEFT_OUT, 0) + optional


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # set on a pytest-xdist worker only
    if output is not None:
        output["slow_left_out"] = session.config.stash.get(SLOW_LEFT_OUT, 0)
        output["optional_left_out"] = session.config.stash.get(OPTIONAL_LEFT_OUT, 0)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: every worker collects (and deselects) the same tests
def pytest_testnodedown(node: Any, error: Any) -> None:
    output = getattr(node, "workeroutput", {})
    for key, name in ((SLOW_LEFT_OUT, "slow_left_out"), (OPTIONAL_LEFT_OUT, "optional_left_out")):
        node.config.stash[key] = max(node.config.stash.get(key, 0), output.get(name, 0))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line: how many tests were skipped, grouped by reason (the tests that need a trace not redistributable
    here counted together, with its upstream repositories), and how many were left out as slow."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons: dict[str, int] = {}
    optional = 0
    sources: set[str] = set()
    for report in skipped:
        reason = _skip_reason(report)
        if reason.startswith(anchors.OPTIONAL_SKIP):
            optional += 1
            sources.update(source for name, source in anchors.OPTIONAL.items() if name in reason)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    parts = [f"{reason} ({count})" for reason, count in sorted(reasons.items(), key=lambda item: -item[1])]
    if optional:
        sources_text = ", ".join(sorted(sources))
        parts.insert(
            0,
            f"a trace not redistributable, from {sources_text}: set TRACELENS_ANCHORS; what they check has "
            f"stand-ins in tests/test_stand_ins.py ({optional})",
        )
    line = f"skipped {len(skipped)}: " + "; ".join(parts) if skipped else "skipped 0"
    absent = config.stash.get(OPTIONAL_LEFT_OUT, 0)
    if absent:
        missing = sorted({source for name, source in anchors.OPTIONAL.items() if anchors.find(name) is None})
        line += (
            f"; {absent} test{'s' * (absent > 1)} of traces not redistributable (from {', '.join(missing)}) not run: "
            "set TRACELENS_ANCHORS to a folder that holds them; what they check has stand-ins in "
            "tests/test_stand_ins.py"
        )
    slow = config.stash.get(SLOW_LEFT_OUT, 0)
    if slow and "not slow" in (config.getoption("markexpr") or ""):
        line += f"; {slow} slow test{'s' * (slow > 1)} not run (pytest -m slow runs {'them' if slow > 1 else 'it'})"
    terminalreporter.write_line(f"tracelens tests: {line}")


def _skip_reason(report: Any) -> str:
    """The reason given to pytest.skip or a skip mark."""
    if isinstance(report.longrepr, tuple):  # (file, line, "Skipped: reason")
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr)
