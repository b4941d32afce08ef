"""Where the third-party test traces are (the "anchor" corpus; tests/corpus/PROVENANCE.md says where each
came from and under which licence).

The redistributable traces are in the repository, under tests/corpus/. The few whose licence does not allow
copying them here (`OPTIONAL`) are looked for in a full copy of the corpus beside the checkout
(../shared/anchor_traces). `TRACELENS_ANCHORS=DIR` replaces both: every trace is then read from DIR. Traces
are named by their path relative to the folder they are in, the same name in either folder. What the optional
traces' own tests check (whole-µs timestamps against HTA, a trace without GPU activity, a graph break with lazy
backward compiles, no ProfilerStep) has redistributable stand-ins in tests/test_stand_ins.py, so a fresh clone
tests every such feature; the optional traces add held-out data.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus"
BESIDE = REPO.parent / "shared" / "anchor_traces"

# relative path → its upstream repository, which published it under no licence that allows copying it here
# (tests/corpus/PROVENANCE.md says why for each)
OPTIONAL: dict[str, str] = {
    "other/deepseek-ai__profile-data/train.json.gz": "deepseek-ai/profile-data",
    "other/Wings236__model_inference/trace.json.gz": "Wings236/model_inference",
    "other/Wings236__model_inference/trace_break.json.gz": "Wings236/model_inference",
    "other/Wings236__model_inference/trace_compile.json.gz": "Wings236/model_inference",
    "other/HazyResearch__zoology/trace.json.gz": "HazyResearch/zoology",
}
OPTIONAL_SKIP = "optional trace, not redistributable"  # how the skip reasons of tests that need one start


def roots() -> tuple[Path, ...]:
    """The folders searched for a trace, first match wins: $TRACELENS_ANCHORS alone when set, else the
    in-repository corpus and then the full copy beside the checkout."""
    override = os.environ.get("TRACELENS_ANCHORS")
    return (Path(override),) if override else (CORPUS, BESIDE)


def primary() -> Path:
    """The folder that holds every redistributable trace: $TRACELENS_ANCHORS, else tests/corpus/."""
    return roots()[0]


def find(relative: str) -> Path | None:
    """The path of the corpus trace `relative` in the first folder that has it, or None."""
    for root in roots():
        path = root / relative
        if path.exists():
            return path
    return None


def missing_reason(relative: str) -> str:
    """Why `relative` was not found (`OPTIONAL_SKIP` first for an optional trace)."""
    if relative in OPTIONAL:
        return (
            f"{OPTIONAL_SKIP}: {relative} from {OPTIONAL[relative]} (no licence to copy it here); "
            "set TRACELENS_ANCHORS to a folder that holds it (tests/corpus/PROVENANCE.md)"
        )
    return f"corpus trace {relative} not found in {', '.join(map(str, roots()))}"


def is_trace(path: Path) -> bool:
    """Whether a corpus file is a trace the tests iterate over (not a tar of ranks, a CSV or a side file)."""
    return (
        path.is_file()
        and path.name.endswith((".json", ".json.gz"))
        and "trace_perf_report_csvs" not in path.parts
        and path.name not in ("execution_details.json", "timings.json")
    )


def traces() -> dict[str, Path]:
    """Every corpus trace found, relative name → path, sorted by name (a name in two folders: the first's)."""
    found: dict[str, Path] = {}
    for root in roots():
        if root.is_dir():
            for path in root.rglob("*.json*"):
                if is_trace(path):
                    found.setdefault(path.relative_to(root).as_posix(), path)
    return dict(sorted(found.items()))


def name(path: Path) -> str:
    """The relative name of a corpus trace's path (the inverse of `find`)."""
    for root in roots():
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    raise ValueError(f"{path} is in none of the corpus folders {roots()}")


# the alternated recordings (traces/h100/interleaved and the held-out run traces/h100/heldout): rounds of the same
# programs, kept for the profiler-overhead calibration and its check (tests/test_profiler_overhead.py reads every
# round); a per-trace test covers each program once, by its round 0
REPLICA = re.compile(r"(interleaved/r\d+|heldout)/[^/]+/.+_r[1-9]\d*\.json\.gz$")


def recorded(root: Path) -> list[Path]:
    """The project's own recorded traces under `root` (traces/) that a per-trace test covers, sorted: every
    `.json.gz` but the later rounds of the alternated recordings (`REPLICA`)."""
    return sorted(p for p in root.rglob("*.json.gz") if not REPLICA.search(p.as_posix()))
