"""Cold `tracelens analyze --format json --no-cache` of a trace as .json.gz (gunzip by python-isal, then by
zlib) and as the plain JSON it holds; the table in docs/benchmarks.md (Gzip traces) comes from it.

    python benchmarks/bench_gzip.py [--rounds 15] [TRACE.json.gz ...]

Each run is a fresh process; the rounds interleave the three ways, and the best and median wall and CPU
(user + system of the process and its children) of each are printed. The zlib runs set the loader's gunzip to
the standard library's before running the command (what runs where isal is not installed).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("TRACELENS_ANCHORS") or REPO / "tests" / "corpus")
DEFAULT = ["hta/df_index_resolver/df_index_resolver.json.gz", "hta/trace_diff/control/control.json.gz"]
COMMAND = """
import sys
if sys.argv[1] == "zlib":
    import zlib
    from tracelens.loader import source
    source._gzip_module = zlib
from tracelens.cli import main
raise SystemExit(main(["analyze", sys.argv[2], "--format", "json", "--no-cache"]))
"""


def run(gunzip: str, path: Path, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one analyze of `path`."""
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), TRACELENS_NO_CACHE="1")
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", COMMAND, gunzip, str(path)], env=env, cwd=folder, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status:
        raise SystemExit(f"analyze {path} failed ({status})")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=[CORPUS / name for name in DEFAULT])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    try:
        import isal  # noqa: F401
    except ImportError:
        print("python-isal is not installed: pip install isal", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        cases = []
        for gz in args.traces:
            copy = folder / gz.name
            shutil.copyfile(gz, copy)
            plain = folder / gz.name.removesuffix(".gz")
            plain.write_bytes(gzip.decompress(gz.read_bytes()))
            cases += [(gz.name, "plain", "isal", plain), (gz.name, "gz isal", "isal", copy)]
            cases += [(gz.name, "gz zlib", "zlib", copy)]
        times: dict[tuple[str, str], list[tuple[float, float]]] = {(c[0], c[1]): [] for c in cases}
        for _name, _way, gunzip, path in cases:  # one warm-up run each: the page cache, the byte code
            run(gunzip, path, folder)
        for _ in range(args.rounds):
            for name, way, gunzip, path in cases:
                times[name, way].append(run(gunzip, path, folder))
                time.sleep(0.3)  # the previous run's writes and frees settle
    print(f"{args.rounds} rounds; load average at the end {os.getloadavg()[0]:.1f}")
    for (name, way), values in times.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(
            f"{name:34s} {way:8s} wall best {min(walls):.3f} s, median {statistics.median(walls):.3f} s; "
            f"CPU best {min(cpus):.3f} s, median {statistics.median(cpus):.3f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
