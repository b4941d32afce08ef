"""Regenerate the golden analyze results under tests/golden/ for every corpus and recorded trace.

    PYTHONPATH=. python scripts/regen_golden.py            # all traces
    PYTHONPATH=. python scripts/regen_golden.py control    # only paths containing "control"

Run it when a change of figures is intended, then review `git diff tests/golden` before committing: every
changed number must be explained by the change. tests/test_golden.py compares against these files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
TRACES = REPO / "traces"
sys.path.insert(0, str(REPO))  # tests/anchors.py: where the corpus traces are
from tests import anchors  # noqa: E402

ANCHORS = anchors.primary()


def corpus() -> dict[str, Path]:
    """Golden name (relative path under tests/golden, without .json) → trace file, sorted by name."""
    found: dict[str, Path] = {}
    for relative, path in anchors.traces().items():
        found[f"anchor_traces/{relative}"] = path
    if TRACES.exists():
        for path in TRACES.rglob("*.json*"):
            if _is_trace(path):
                found[f"traces/{path.relative_to(TRACES).as_posix()}"] = path
    return dict(sorted(found.items()))


def _is_trace(path: Path) -> bool:
    return anchors.is_trace(path)


def golden_document(path: Path) -> dict[str, Any]:
    """The analyze JSON of `path`, every section (summary, dispatch, bound, fusion, roofline, compiled), without
    the absolute path."""
    from tracelens.analyses import analyze
    from tracelens.loader import load_trace
    from tracelens.renderers.jsonout import analyze_dict

    document = analyze_dict(analyze(load_trace(path)))
    frozen = dict(document)
    frozen["trace"] = {key: value for key, value in frozen["trace"].items() if key != "path"}
    return frozen


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def main(argv: list[str]) -> int:
    selected = {name: path for name, path in corpus().items() if not argv or any(a in name for a in argv)}
    if not selected:
        print(f"no trace matched (anchors in {anchors.roots()}, recorded traces at {TRACES})", file=sys.stderr)
        return 2
    for name, path in selected.items():
        target = golden_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = dumps(golden_document(path))
        old = target.read_text() if target.exists() else None
        target.write_text(text)
        print(f"{'unchanged' if old == text else 'new' if old is None else 'CHANGED'}  {target.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
