"""Which action a variant of a program took, and how far a prediction for it was off: one rule for `compare` and
`check`.

Contract: pure. `ProgramShape` is what a program's trace runs that the `compile` and `cuda_graphs` actions change
(compiled regions, CUDA-graph replays); `taken_action(before, after)` names the action `after` took relative to
`before` (None where it cannot be told); `taken_note` says so in words; `error_pct(predicted, measured)` is
(predicted ÷ measured − 1) × 100. `compare BEFORE AFTER` reads the shapes from the analyses' `Compiled` results,
`check AFTER --expect FILE` from a hypothesis' `before` table and AFTER's analyze document (docs/actions.md).
"""

from __future__ import annotations

import math

import msgspec

ACTIONS = ("compile", "cuda_graphs", "fuse", "gemm_epilogue")  # the actions `analyze` predicts (docs/actions.md)


class ProgramShape(msgspec.Struct, frozen=True):
    """What a trace's analyzed steps run that tells its program's variants apart: `compiled_regions`, the rows of
    `compiled.regions` (one per compiled region: frame and recompile) and `graph_replays`, the rows of
    `compiled.graph_replays` (CUDA-graph launches, grouped by launch API, op and region) in `analyze --format
    json`. `taken_action` reads only whether each is 0."""

    compiled_regions: int = 0
    graph_replays: int = 0

    def describe(self) -> str:
        """Which of the two it runs, e.g. "compiled regions, no CUDA-graph replays"."""
        regions, replays = self.compiled_regions > 0, self.graph_replays > 0
        if regions and replays:
            return "compiled regions and CUDA-graph replays"
        if regions:
            return "compiled regions, no CUDA-graph replays"
        if replays:
            return "CUDA-graph replays, no compiled regions"
        return "no compiled regions or CUDA-graph replays"


def taken_action(before: ProgramShape, after: ProgramShape) -> str | None:
    """The action `after` took relative to `before`: "cuda_graphs" when only `after` replays CUDA graphs (and runs
    no compiled region `before` did not), "compile" when only `after` runs compiled regions (and replays no
    graph `before` did not), else None: not a known variant (nothing new, as a hand-fused or Liger variant, or
    both new, as torch.compile's `mode="reduce-overhead"`)."""
    new_regions = after.compiled_regions > 0 and before.compiled_regions == 0
    new_replays = after.graph_replays > 0 and before.graph_replays == 0
    if new_replays and not new_regions:
        return "cuda_graphs"
    if new_regions and not new_replays:
        return "compile"
    return None


def taken_note(label: str, before: ProgramShape, after: ProgramShape) -> str:
    """`taken_action` in words, about the trace `label`: "compiled_mlp took compile (compiled regions, no CUDA-graph
    replays; before: neither)", or "liger_mlp: the action taken is unknown (no new compiled regions or CUDA-graph
    replays; before: neither)"."""
    shown_before = "neither" if before == ProgramShape() else before.describe()
    action = taken_action(before, after)
    if action is not None:
        return f"{label} took {action} ({after.describe()}; before: {shown_before})"
    both = after.compiled_regions > 0 and before.compiled_regions == 0  # unknown: both are new, or neither is
    new = "new compiled regions and CUDA-graph replays" if both else "no new compiled regions or CUDA-graph replays"
    return f"{label}: the action taken is unknown ({new}; before: {shown_before})"


def error_pct(predicted: float, measured: float) -> float | None:
    """How far `predicted` is off `measured`: (predicted ÷ measured − 1) × 100, rounded to 3 decimals; None where
    `measured` is 0 or the ratio is not a finite number."""
    try:
        error = 100 * (float(predicted) / float(measured) - 1)
    except (ZeroDivisionError, OverflowError):  # measured 0; an int too large for a float
        return None
    return round(error, 3) if math.isfinite(error) else None
