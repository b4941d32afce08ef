"""Side-by-side load benchmark: tracelens `analyze` end to end, HTA `TraceAnalysis` load, and the raw msgspec
decode floor, on the same files, each run in a fresh subprocess.

Figures per run: wall seconds (parent clock, Python start-up included), MB/s of *uncompressed* JSON,
CPU seconds (user+sys of the process and the workers it waited for, from `os.wait4`), peak RSS (the sum of
each process's own peak, VmHWM, sampled every 20 ms: an upper bound for the process tree) and peak PSS of the
whole process tree (sampled from /proc/*/smaps_rollup: forked decode workers counted, shared pages once).

    python benchmarks/bench_load.py                      # anchors + 72 MB and 450 MB synthetic files
    python benchmarks/bench_load.py --quick              # anchors + 72 MB only, no HTA on big files
    python benchmarks/bench_load.py FILE... --methods tracelens,floor
    python benchmarks/bench_load.py --baseline /tmp/before   # before/after in one run: another commit's tree

A baseline tree: `git worktree add /tmp/before <commit> && (cd /tmp/before && python setup.py build_ext
--inplace)`; its cold `analyze` runs right after this tree's in every round (method `tracelens@<commit>`).

Writes benchmarks/results.md (a markdown table) unless --output says otherwise. The synthetic files are made
in /tmp by make_big_trace.py (not committed).
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ANCHORS = Path(os.environ.get("TRACELENS_ANCHORS") or REPO / "tests" / "corpus")  # the third-party traces
DEFAULT_ANCHORS = (
    "hta/df_index_resolver/df_index_resolver.json.gz",
    "hta/trace_diff/control/control.json.gz",
    "other/facebookresearch__param/resnet_kineto.json.gz",
)
SYNTHETIC = (("big72.json", 72), ("big450.json", 450))
SYNTHETIC_SOURCE = "hta/df_index_resolver/df_index_resolver.json.gz"

FLOOR = r"""
import gzip, sys, msgspec
class E(msgspec.Struct, gc=False):
    ph: str = ""; cat: str = ""; name: str = ""; pid: int | str | None = None; tid: int | str | None = None
    ts: int | float | None = None; dur: int | float | None = None; args: msgspec.Raw = msgspec.Raw()
class D(msgspec.Struct, gc=False):
    traceEvents: list[E] = []
data = open(sys.argv[1], "rb").read()
if data[:2] == b"\x1f\x8b":
    data = gzip.decompress(data)
events = msgspec.json.Decoder(D).decode(data).traceEvents
print(sum(e.dur or 0 for e in events if e.cat == "kernel"))
"""

HTA = r"""
import logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
print(len(analysis.t.get_trace(analysis.t.get_ranks()[0])))
"""


@dataclass
class Run:
    file: str
    size_mb: float
    method: str
    wall_s: float
    cpu_s: float
    rss_mb: float
    pss_mb: float
    ok: bool
    note: str = ""

    @property
    def mb_per_s(self) -> float:
        return self.size_mb / self.wall_s if self.ok and self.wall_s else float("nan")


def uncompressed_bytes(path: Path) -> int:
    if path.read_bytes()[:2] != b"\x1f\x8b":
        return path.stat().st_size
    total = 0
    with gzip.open(path, "rb") as handle:
        while block := handle.read(16 << 20):
            total += len(block)
    return total


def _tree_memory_kb(root: int, hwm: dict[int, int]) -> int:
    """PSS of `root` and its descendants now (kB); records each process's peak RSS (VmHWM) in `hwm`."""
    total = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm[pid] = max(hwm.get(pid, 0), int(line.split()[1]))
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
            for task in Path(f"/proc/{pid}/task").iterdir():
                children = (task / "children").read_text().split()
                stack.extend(int(c) for c in children)
        except (OSError, ValueError):
            continue
    return total


def measure(
    command: list[str], timeout_s: float, env: dict[str, str], sample_memory: bool = False
) -> tuple[float, float, float, float, bool, str]:
    """(wall s, cpu s, peak RSS MB, tree PSS MB, ok, note) of one subprocess.

    Memory is sampled from /proc only when `sample_memory` (reading smaps takes the process's memory-map lock
    and costs CPU, which slows a 2-core run measurably): timed runs and memory runs are separate runs.
    """
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=RUN_DIR[0])
    peak = [0]
    hwm: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_memory_kb(process.pid, hwm))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_memory:
        sampler.start()
    if not _exited_within(process.pid, timeout_s):
        process.kill()
        os.wait4(process.pid, 0)
        done.set()
        return timeout_s, float("nan"), float("nan"), peak[0] / 1024, False, f"timed out after {timeout_s:.0f} s"
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    if sample_memory:
        sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    ok = process.returncode == 0
    note = "" if ok else (stderr.strip().splitlines() or ["failed"])[-1][:120]
    assert usage is not None
    rss_mb = sum(hwm.values()) / 1024 if hwm else usage.ru_maxrss / 1024
    return wall, usage.ru_utime + usage.ru_stime, rss_mb, peak[0] / 1024, ok, note


def _exited_within(pid: int, timeout_s: float) -> bool:
    """Whether process `pid` (a child) ends within `timeout_s`, learnt the moment it does (a pidfd: polling
    every 10 ms would add up to 10 ms to each wall time, a few % of a 0.3 s run and nothing of HTA's 5 s)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            time.sleep(0.001)
        return False
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


JSON_LOAD = "import json, sys\nwith open(sys.argv[1], 'rb') as f:\n    json.load(f)"


def run_method(
    method: str, path: Path, timeout_s: float, cache_dir: Path, sample_memory: bool = False
) -> tuple[float, float, float, float, bool, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), TRACELENS_CACHE_DIR=str(cache_dir))
    python = sys.executable
    if method == "floor":
        return measure([python, "-c", FLOOR, str(path)], timeout_s, env, sample_memory)
    if method == "json.load":  # the standard library's decoder of the whole file (plain JSON only)
        return measure([python, "-c", JSON_LOAD, str(path)], timeout_s, env, sample_memory)
    if method == "hta":
        with tempfile.TemporaryDirectory(prefix="bench_hta_") as folder:
            os.symlink(path, Path(folder) / path.name)
            return measure([python, "-c", HTA, folder], timeout_s, env, sample_memory)
    analyze = [python, "-m", "tracelens", "analyze", str(path), "--format", "json"]
    if method == "tracelens":
        return measure([*analyze, "--no-cache"], timeout_s, env, sample_memory)
    if method in BASELINES:  # another commit's tree, the same cold command
        env["PYTHONPATH"] = str(BASELINES[method])
        return measure([*analyze, "--no-cache"], timeout_s, env, sample_memory)
    if method == "tracelens-1proc":
        env["TRACELENS_WORKERS"] = "1"
        return measure([*analyze, "--no-cache"], timeout_s, env, sample_memory)
    if method == "tracelens-first":
        return measure(analyze, timeout_s, env, sample_memory)  # empty cache: hashes the file, stores entries
    if method == "tracelens-trace-cached":
        measure(analyze, timeout_s, env)  # fills the cache
        shutil.rmtree(cache_dir / "analyses", ignore_errors=True)  # keep only the columnar trace
        return measure(analyze, timeout_s, env, sample_memory)
    if method == "tracelens-cached":
        measure(analyze, timeout_s, env)  # fills the cache
        return measure(analyze, timeout_s, env, sample_memory)
    raise ValueError(method)


BASELINES: dict[str, Path] = {}  # method name ("tracelens@<commit>") -> source tree, from --baseline
# every run's working directory: an empty folder, because `python -m` puts the working directory first on sys.path
# (run from a checkout, every method would import that checkout's tracelens, whatever PYTHONPATH says)
RUN_DIR: list[str | None] = [None]


def baseline_method(tree: Path) -> str:
    """The method name of the source tree `tree` (a worktree of another commit, C extension built in place):
    `tracelens@<its short commit>`, or `tracelens@<folder name>` outside git."""
    found = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"tracelens@{found.stdout.strip() if found.returncode == 0 else tree.name}"


def compile_package(*trees: Path) -> None:
    """Byte-compile tracelens (and each baseline tree) as `pip install` does, so that no run pays for compiling
    it (with PYTHONDONTWRITEBYTECODE set, a source checkout would otherwise compile every module on every run)."""
    for tree in (REPO, *trees):
        compileall.compile_dir(tree / "tracelens", quiet=1)


def ensure_synthetic(folder: Path, which: tuple[tuple[str, int], ...]) -> list[Path]:
    paths = []
    for name, megabytes in which:
        path = folder / name
        if not path.exists():
            print(f"making {path} ({megabytes} MB)…", file=sys.stderr)
            subprocess.run(
                [
                    sys.executable,
                    str(REPO / "benchmarks" / "make_big_trace.py"),
                    str(ANCHORS / SYNTHETIC_SOURCE),
                    str(path),
                    "--target-mb",
                    str(megabytes),
                ],
                check=True,
            )
        paths.append(path)
    return paths


SETTLE_S = 0.5


def settle() -> None:
    """Before each run: the previous run's writes flushed and the kernel's deferred work on them (writeback, the
    journal, freeing the deleted cache) given `SETTLE_S` to finish, so that no run pays for another's. Measured
    without it: a cold tracelens run right after the cache-writing methods took 0.49 s (CPU 0.67 s) instead
    of 0.31 s (CPU 0.42 s): the kernel's threads shared the 2 CPUs with it."""
    os.sync()
    time.sleep(SETTLE_S)


def measure_file(path: Path, methods: list[str], args: argparse.Namespace, cache_dir: Path) -> list[Run]:
    """Every method on one file. Timed runs are interleaved (round r runs every method once), so that a
    machine that speeds up or slows down over minutes affects every method alike; then one memory run each."""
    size_mb = uncompressed_bytes(path) / 1e6
    methods = [m for m in methods if not (m == "hta" and size_mb > (100 if args.quick else args.hta_max_mb))]
    best: dict[str, tuple[float, float, float, float, bool, str]] = {}
    walls: dict[str, list[float]] = {}
    for round_index in range(args.repeat):
        for method in methods:
            if method == "hta" and size_mb > 100 and round_index > 0:
                continue  # minutes per run: one is enough
            shutil.rmtree(cache_dir, ignore_errors=True)
            settle()
            result = run_method(method, path, args.timeout, cache_dir)
            if result[4]:
                walls.setdefault(method, []).append(result[0])
            previous = best.get(method)
            if previous is None or (result[4] and (not previous[4] or result[0] < previous[0])):
                best[method] = result
    for method, times in walls.items():  # the spread of the timed runs, beside the best the table keeps
        ordered = sorted(times)
        median = ordered[len(ordered) // 2] if len(ordered) % 2 else sum(ordered[len(ordered) // 2 - 1 :][:2]) / 2
        print(
            f"{path.name} {method}: wall median {median:.3f} s, min {ordered[0]:.3f}, max {ordered[-1]:.3f} "
            f"({len(ordered)} runs: {', '.join(f'{t:.3f}' for t in times)})",
            file=sys.stderr,
            flush=True,
        )
    runs = []
    for method in methods:
        shutil.rmtree(cache_dir, ignore_errors=True)
        settle()
        memory = run_method(method, path, args.timeout, cache_dir, sample_memory=True)
        timed = best[method]
        run = Run(path.name, size_mb, method, timed[0], timed[1], memory[2], memory[3], timed[4], timed[5])
        runs.append(run)
        print(render([run], "").splitlines()[-1], file=sys.stderr, flush=True)
    return runs


def render(runs: list[Run], header: str) -> str:
    lines = [
        header,
        "",
        "| trace | uncompressed MB | method | wall s | MB/s | CPU s | peak RSS MB (sum over processes) "
        "| peak PSS MB (all processes) | PSS ÷ size | × HTA |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    hta_wall_s = {run.file: run.wall_s for run in runs if run.method == "hta" and run.ok}
    for run in runs:
        if not run.ok:
            lines.append(f"| {run.file} | {run.size_mb:.1f} | {run.method} | – | – | – | – | – | {run.note} | – |")
            continue
        versus = f"{hta_wall_s[run.file] / run.wall_s:.1f}×" if run.file in hta_wall_s else "–"
        lines.append(
            f"| {run.file} | {run.size_mb:.1f} | {run.method} | {run.wall_s:.2f} | {run.mb_per_s:.0f} | "
            f"{run.cpu_s:.2f} | {run.rss_mb:.0f} | {run.pss_mb:.0f} | {run.pss_mb / run.size_mb:.2f}× | {versus} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="traces (default: the anchors + synthetic files)")
    parser.add_argument(
        "--methods", default="tracelens,tracelens-first,tracelens-trace-cached,tracelens-cached,hta,floor"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per method and file, the fastest kept (HTA above 100 MB: one run)"
    )
    parser.add_argument("--quick", action="store_true", help="only the 72 MB synthetic file, no HTA above 100 MB")
    parser.add_argument("--synthetic-dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--hta-max-mb", type=float, default=1e9, help="skip HTA on files bigger than this")
    parser.add_argument("-o", "--output", type=Path, default=REPO / "benchmarks" / "results.md")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="a source tree of another commit (e.g. a git worktree, C extension built in place): its cold "
        "`analyze` runs beside this tree's in every round, as method tracelens@<commit> (before/after in one run)",
    )
    args = parser.parse_args(argv)
    files = [path.resolve() for path in args.files]
    if not files:
        files = [ANCHORS / a for a in DEFAULT_ANCHORS if (ANCHORS / a).exists()]
        files += ensure_synthetic(args.synthetic_dir.resolve(), SYNTHETIC[:1] if args.quick else SYNTHETIC)
    methods = [m for m in args.methods.split(",") if m]
    for tree in args.baseline:
        BASELINES[baseline_method(tree)] = tree.resolve()
    at = methods.index("tracelens") + 1 if "tracelens" in methods else 0
    methods[at:at] = list(BASELINES)  # right after this tree's cold run, in every round
    compile_package(*args.baseline)
    runs: list[Run] = []
    cache_dir = Path(tempfile.mkdtemp(prefix="bench_cache_"))
    RUN_DIR[0] = tempfile.mkdtemp(prefix="bench_cwd_")
    try:
        for path in files:
            runs += measure_file(path, methods, args, cache_dir)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(RUN_DIR[0], ignore_errors=True)
    load = os.getloadavg()
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average at the end "
        f"{load[0]:.1f} (other jobs share this machine: wall times are noisy, CPU s less so). "
        f"Wall and CPU: best of {args.repeat} interleaved run(s) (HTA above 100 MB: one); memory: one more run "
        "sampled every 20 ms (sampling slows a run, so it is not timed). Each run is a fresh process, Python "
        "start-up included. "
        "tracelens = `analyze --format json --no-cache`, auto workers (this process and forked chunk decoders); "
        + "".join(f"{name} = the same command from the source tree of commit {name[10:]}; " for name in BASELINES)
        + "tracelens-1proc = TRACELENS_WORKERS=1; "
        "tracelens-first = a first run with the cache on (hashes the file, stores the entries); "
        "tracelens-trace-cached = the columnar trace from the cache, analyses run (what report/check get); "
        "tracelens-cached = the second run of the same command (finished analysis from the cache); "
        "floor = msgspec typed decode only. × HTA = HTA's wall time ÷ this method's."
    )
    text = render(runs, header)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
