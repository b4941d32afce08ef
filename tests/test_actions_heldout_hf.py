"""The compile action on Hugging Face training recorded by `tracelens record` on an H100 after every constant was
fitted (traces/h100/record, docs/actions.md#held-out-hugging-face-training-on-an-h100): each eager trace's
prediction against its compiled twin's mean step span (raw events) and against the compiled program's CUDA-event
step without the profiler (its trace's `tracelens_record` metadata)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracelens
from tests.test_actions import raw_mean_span_us
from tracelens.analyses import analyze

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "traces/h100/record"
DOC = ROOT / "docs/actions.md"
TWINS = ("hf_llama_train", "hf_llama_train_b1s128", "hf_gpt2_train")
# the second H100 lease (2026-12-07 16:29 UTC, workloads/record2.sh): recorded after the backward handoff
SECOND = ROOT / "traces/h100/record2"
SECOND_TWINS = ("hf_llama_train_b1s128", "hf_gpt2_train")
# a third H100 host (2026-12-07 19:07 UTC, the same script): the same twins, nothing refitted
THIRD = ROOT / "traces/h100/record3"


def measured_free_us(path: Path) -> float:
    """Stdlib: the CUDA-event median the recorder wrote into the trace."""
    with gzip.open(path, "rt") as handle:
        return float(json.load(handle)["tracelens_record"]["profiler_free"]["median_step_us"])


def _error(predicted: float, realized: float) -> str:
    error = 100 * (predicted / realized - 1)
    text = f"{error:+.1f} %".replace("-", "−")
    return f"**{text}**" if abs(error) > 20 else text


def heldout_row(name: str, folder: Path = FOLDER) -> str:
    """The docs' row for one twin (`python tests/test_actions_heldout_hf.py` prints them all)."""
    eager, compiled = folder / f"{name}_eager.json.gz", folder / f"{name}_compiled.json.gz"
    results = analyze(tracelens.load(eager))
    assert results.actions is not None and results.actions.summary.step_us is not None
    (action,) = [a for a in results.actions.actions if a.action == "compile"]
    assert action.predicted_profiler_free_step_us is not None
    realized, free = raw_mean_span_us(compiled), measured_free_us(compiled)
    return (
        f"| `{name}` | {action.limited_by} | {results.actions.summary.step_us:,.1f} | "
        f"{action.predicted_step_us:,.1f} ({action.low:,.0f}–{action.high:,.0f}) | {realized:,.1f} | "
        f"{_error(action.predicted_step_us, realized)} | {action.predicted_profiler_free_step_us:,.1f} | "
        f"{free:,.1f} | {_error(action.predicted_profiler_free_step_us, free)} |"
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", TWINS)
def test_the_held_out_hf_table_is_the_recomputed_one(name: str) -> None:
    row = heldout_row(name)
    assert row in DOC.read_text(encoding="utf-8"), row


@pytest.mark.slow
@pytest.mark.parametrize("name", SECOND_TWINS)
def test_the_second_lease_table_is_the_recomputed_one(name: str) -> None:
    row = heldout_row(name, SECOND)
    assert row in DOC.read_text(encoding="utf-8"), row


@pytest.mark.slow
@pytest.mark.parametrize("name", SECOND_TWINS)
def test_the_third_lease_table_is_the_recomputed_one(name: str) -> None:
    row = heldout_row(name, THIRD)
    assert row in DOC.read_text(encoding="utf-8"), row


if __name__ == "__main__":
    for twin in TWINS:
        print(heldout_row(twin))
    for twin in SECOND_TWINS:
        print(heldout_row(twin, SECOND))
    for twin in SECOND_TWINS:
        print(heldout_row(twin, THIRD))
