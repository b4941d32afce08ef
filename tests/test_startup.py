"""`tracelens analyze` starts fast: it imports neither pandas nor plotly (nor rich for JSON output), so a run
costs the loader and the analyses, not the start-up of libraries it does not use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "traces" / "h200" / "eager_mlp.json.gz"

PROBE = """
import sys
from tracelens.cli import main
status = main(sys.argv[1:])
heavy = sorted(m for m in ("pandas", "plotly", "rich", "tracelens.report", "tracelens.hypotheses") if m in sys.modules)
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


@pytest.mark.skipif(not TRACE.exists(), reason="bundled traces missing")
def test_analyze_text_needs_only_rich(tmp_path: Path) -> None:
    assert _imported("analyze", str(TRACE), tmp_path=tmp_path) == {"rich"}
