"""`tracelens analyze` starts fast: it imports neither pandas nor plotly (nor rich for JSON output, nor numpy.ma),
so a run costs the loader and the analyses, not the start-up of libraries it does not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ANCHORS

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "traces" / "h200" / "eager_mlp.json.gz"
# 28,010 [memory] events: more than the memory timeline keeps, so it thins them
MEMORY_TRACE = ANCHORS / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"

PROBE = """
import sys
from tracelens.cli import main
status = main(sys.argv[1:])
heavy = sorted(
    m for m in ("pandas", "plotly", "rich", "numpy.ma", "tracelens.report", "tracelens.hypotheses") if m in sys.modules
)
print("imported:", ",".join(heavy), file=sys.stderr)
sys.exit(status)
"""


def _imported(*argv: str, tmp_path: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, TRACELENS_CACHE_DIR=str(tmp_path / "cache")),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = [x for x in done.stderr.splitlines() if x.startswith("imported:")][-1]
    return {m for m in line.removeprefix("imported:").strip().split(",") if m}


@pytest.mark.skipif(not TRACE.exists(), reason="bundled traces missing")
def test_analyze_json_imports_no_pandas_plotly_or_rich(tmp_path: Path) -> None:
    assert _imported("analyze", str(TRACE), "--format", "json", tmp_path=tmp_path) == set()
    # the second run is served from the analysis cache: still nothing heavy
    assert _imported("analyze", str(TRACE), "--format", "json", tmp_path=tmp_path) == set()


def test_the_memory_analysis_imports_nothing_heavy(tmp_path: Path) -> None:
    # a plain np.unique in the memory timeline once imported numpy.ma (20 ms)
    assert _imported("analyze", str(MEMORY_TRACE), "--format", "json", "--no-cache", tmp_path=tmp_path) == set()


@pytest.mark.skipif(not TRACE.exists(), reason="bundled traces missing")
def test_analyze_text_needs_only_rich(tmp_path: Path) -> None:
    assert _imported("analyze", str(TRACE), tmp_path=tmp_path) == {"rich"}


@pytest.mark.skipif(not TRACE.exists(), reason="bundled traces missing")
def test_the_command_flushes_its_output_before_its_fast_exit(tmp_path: Path) -> None:
    env = dict(os.environ, TRACELENS_CACHE_DIR=str(tmp_path / "cache"))
    command = [sys.executable, "-m", "tracelens", "analyze"]
    done = subprocess.run([*command, str(TRACE), "--format", "json"], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["per_step"]["kernels"] == 5
    missing = subprocess.run([*command, str(tmp_path / "none.json")], capture_output=True, env=env, timeout=120)
    assert missing.returncode == 2 and missing.stderr.decode().count("\n") == 1
    piped = subprocess.run(
        f"{sys.executable} -m tracelens analyze {TRACE} | head -c 5", shell=True, capture_output=True, env=env
    )
    assert piped.stdout == b"What " and b"Traceback" not in piped.stderr  # "What to do next" comes first


GC_PROBE = """
import gc, sys
counts = []
gc.callbacks.append(lambda phase, info: counts.append(info["generation"]) if phase == "start" else None)
if sys.argv[1] == "entry":
    import tracelens.__main__ as entry
    sys.argv = ["tracelens", "--version"]
    try:
        entry.main()
    except SystemExit:
        pass
else:
    import tracelens.cli
print(len(counts), gc.isenabled(), gc.get_freeze_count())
"""


def _collections(how: str) -> tuple[int, bool, int]:
    done = subprocess.run([sys.executable, "-c", GC_PROBE, how], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    count, enabled, frozen = done.stdout.split()[-3:]
    return int(count), enabled == "True", int(frozen)


def test_the_command_imports_its_modules_with_the_collector_off() -> None:
    # a plain import of the command's modules runs dozens of collections (15-25 ms of a 72 MB trace's run)
    plain, _, _ = _collections("plain")
    assert plain >= 20
    # the entry point: a few at most (after the imports), the collector back on, the imported objects frozen
    count, enabled, frozen = _collections("entry")
    assert count <= 5 and enabled and frozen > 10_000
