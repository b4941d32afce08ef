"""The CUDA-graph twins recorded again with 30 profiled steps on an H100 after every constant was fitted
(traces/h100/graphs_long, docs/actions.md#repeat-recordings-the-cuda-graph-twins-30-steps-on-an-h100): each
action's prediction on the before-trace against the after-trace's mean span over its steps that capture no graph
(raw events, `raw_mean_span_us`), and over its steps from the seventh on (after the decay that follows a capture)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.test_actions import raw_mean_span_us
from tracelens.analyses import analyze

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "traces/h100/graphs_long"
DOC = ROOT / "docs/actions.md"
PAIRS = (
    ("mlp_eager", "mlp_graph", "cuda_graphs"),
    ("block_eager", "block_graph", "cuda_graphs"),
    ("mlp_eager", "mlp_compiled", "compile"),
    ("block_eager", "block_compiled", "compile"),
    ("mlp_eager", "mlp_ro", "compile_reduce_overhead"),
    ("block_eager", "block_ro", "compile_reduce_overhead"),
    ("mlp_compiled", "mlp_ro", "cuda_graphs"),
    ("block_compiled", "block_ro", "cuda_graphs"),
)
SETTLED_FROM = 6  # steps (0-based, in start order) from which the after-trace's span is read as settled


def settled_mean_span_us(path: Path) -> float:
    """Stdlib: the mean span (`rawtrace.step_spans`) of the ProfilerSteps from the seventh on, in start order."""
    bounds = sorted(rawtrace.step_spans(rawtrace.events(path)).values())
    spans = [end - origin for _, origin, end in bounds[SETTLED_FROM:]]
    return sum(spans) / len(spans)


def _error(predicted: float, realized: float) -> str:
    error = 100 * (predicted / realized - 1)
    text = f"{error:+.1f} %".replace("-", "−")
    return f"**{text}**" if abs(error) > 20 else text


def predicted(before: str, action: str) -> tuple[float, float, float, float]:
    """(step before, predicted step, low, high) of `action` on the before-trace, µs."""
    results = analyze(tracelens.load(FOLDER / f"{before}.json.gz"))
    assert results.actions is not None and results.actions.summary.step_us is not None
    (prediction,) = [a for a in results.actions.actions if a.action == action]
    return results.actions.summary.step_us, prediction.predicted_step_us, prediction.low, prediction.high


def long_row(before: str, after: str, action: str) -> str:
    """The docs' row (`python tests/test_actions_graphs_long.py` prints them all)."""
    step, guess, low, high = predicted(before, action)
    realized = raw_mean_span_us(FOLDER / f"{after}.json.gz", without_capture=True)
    settled = settled_mean_span_us(FOLDER / f"{after}.json.gz")
    return (
        f"| `{before}` → `{after}` | {action} | {step:,.1f} | {guess:,.1f} ({low:,.0f}–{high:,.0f}) | "
        f"{realized:,.1f} | {_error(guess, realized)} | {settled:,.1f} | {_error(guess, settled)} |"
    )


@pytest.mark.slow
@pytest.mark.parametrize(("before", "after", "action"), PAIRS, ids=lambda v: str(v))
def test_the_long_twins_table_is_the_recomputed_one(before: str, after: str, action: str) -> None:
    row = long_row(before, after, action)
    assert row in DOC.read_text(encoding="utf-8"), row


@pytest.mark.slow
@pytest.mark.parametrize(("before", "after", "action"), PAIRS, ids=lambda v: str(v))
def test_each_realized_step_lies_in_its_stated_range(before: str, after: str, action: str) -> None:
    _, _, low, high = predicted(before, action)
    assert low <= raw_mean_span_us(FOLDER / f"{after}.json.gz", without_capture=True) <= high


if __name__ == "__main__":
    for pair in PAIRS:
        print(long_row(*pair))
