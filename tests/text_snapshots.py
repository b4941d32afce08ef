"""The text-output snapshots: `tracelens` commands at 80 and 140 columns on recorded and corpus traces,
their output kept under tests/snapshots/ (regenerate with `PYTHONPATH=. python scripts/regen_text_snapshots.py`
and review `git diff tests/snapshots`; tests/test_text_snapshots.py compares)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from tests import anchors
from tracelens.cli import main

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = REPO / "tests" / "snapshots"
ANCHORS = anchors.primary()  # the redistributable corpus (tests/corpus/, or $TRACELENS_ANCHORS)
STUDY = ["traces/h200/eager_mlp.json.gz", "traces/h200/compiled_mlp.json.gz", "traces/h200/liger_mlp.json.gz"]
STUDY_ALL = [*STUDY, "traces/h200/eager_linear.json.gz", "traces/h200/compiled_linear.json.gz"]
ANCHOR_TRACES = {
    "torch_compile_triton": "amd_tracelens/torch_compile_triton/trace.json.gz",
    "triton_example": "hta/triton_example/triton_example.json.gz",
    "resnet": "other/facebookresearch__param/resnet_kineto.json.gz",
}

# snapshot name → (folder the command runs in, its arguments); each runs at 80 and at 140 columns
CASES: dict[str, tuple[Path, list[str]]] = {
    "analyze_eager_mlp": (REPO, ["analyze", STUDY[0]]),
    "analyze_compiled_mlp": (REPO, ["analyze", STUDY[1]]),
    **{f"analyze_{name}": (ANCHORS, ["analyze", path]) for name, path in ANCHOR_TRACES.items()},
    "compare_study": (REPO, ["compare", *STUDY]),
    "check_study": (REPO, ["check", *sorted(STUDY_ALL), "--expect", "notebooks/study_hypotheses.toml"]),
}
WIDTHS = (80, 140)


def snapshot_path(name: str, width: int) -> Path:
    return SNAPSHOTS / f"{name}.{width}.txt"


def render(name: str, width: int) -> str:
    """The command's stdout at `width` columns, run from its folder (paths in the output are relative)."""
    folder, argv = CASES[name]
    before = Path.cwd()
    out = io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main([*argv, "--width", str(width)])
    finally:
        os.chdir(before)
    text = out.getvalue()
    if not text:
        raise AssertionError(f"{name}: no output at {width} columns")
    return text
