"""Regenerate tests/golden/kernel_categories.tsv: every distinct GPU kernel name of the corpus and the recorded
traces, with the category tracelens gives it.

    PYTHONPATH=. python scripts/regen_categories.py

One line per distinct (kernel name, launch API): `category<TAB>launch API<TAB>kernel name`, sorted by name then
launch API. The launch API matters only for plain-named kernels launched through the driver API (Triton:
`fused`). Run it when the category rules change, then review `git diff tests/golden/kernel_categories.tsv`
line by line before committing: tests/test_categories.py compares the rules against this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

GOLDEN = REPO / "tests" / "golden" / "kernel_categories.tsv"
HEADER = "# category\tlaunch API\tkernel name (regenerate: PYTHONPATH=. python scripts/regen_categories.py)\n"


def kernel_names() -> set[tuple[str, str]]:
    """(kernel name, launch API) of every kernel of every trace (launch API "" when none was linked)."""
    from regen_golden import corpus

    from tracelens.loader import load_trace
    from tracelens.model.events import Kind

    found: set[tuple[str, str]] = set()
    for path in corpus().values():
        trace = load_trace(path)
        ev = trace.events
        rows = (ev.kind == Kind.KERNEL).nonzero()[0]
        launch = trace.links.launch[rows]
        for name, api in set(zip(ev.name[rows].tolist(), launch.tolist(), strict=True)):
            found.add((ev.names[name], ev.names[int(ev.name[api])] if api >= 0 else ""))
    return found


def table(pairs: set[tuple[str, str]]) -> str:
    from tracelens.model.kernel_names import categorize

    lines = [f"{categorize(name, api)}\t{api}\t{name}\n" for name, api in sorted(pairs)]
    return HEADER + "".join(lines)


def main() -> int:
    text = table(kernel_names())
    GOLDEN.write_text(text, encoding="utf-8")
    print(f"{GOLDEN.relative_to(REPO)}: {text.count(chr(10)) - 1} kernel names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
