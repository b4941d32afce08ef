"""`analyze TRACE --predict FILE`: each action's prediction as a `check` hypothesis about the changed program's
trace (docs/actions.md, docs/check.md).

Contract: `predictions_toml(results, source) -> str`, a hypotheses file: one `[[hypothesis]]` per action, metric
`critical_path.step_us` (the mean step span that `predicted_step_us` predicts) == the prediction, with the
action's stated range (`low` to `high`) as the tolerance (`below`/`above`), the `action` and the program it was
predicted from (`before`: its compiled regions and CUDA-graph replay rows); no `trace` key, so `check AFTER
--expect FILE` checks on AFTER the prediction of the action AFTER took relative to BEFORE (every one where that
cannot be told). Without a prediction, `hypothesis = []`: a file that check reads and finds nothing in. Pure: the
caller writes the file.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tracelens.analyses.actions import Actions, program_of
from tracelens.model.trace import WHOLE_TRACE_SOURCE

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults

METRIC = "critical_path.step_us"


def _r(value: float) -> float:
    """µs to the ns the predictions carry (no binary-fraction tails in the file)."""
    return round(value, 3)


def _quoted(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these characters)."""
    return json.dumps(text, ensure_ascii=False)


NO_STEPS = "no ProfilerStep: the trace is one window, not a step, and a prediction is about a step's time"


def _no_prediction(results: AnalysisResults, actions: Actions | None) -> str | None:
    """Why no prediction is written, or None: a trace without steps (`NO_STEPS`), no actions analysis, or no
    action (its note)."""
    if results.summary.facts.step_source == WHOLE_TRACE_SOURCE:
        return NO_STEPS
    if actions is None:
        return "the actions analysis did not run"
    if actions.summary.step_us is None or not actions.actions:
        return actions.note
    return None


def predictions_toml(results: AnalysisResults, source: str) -> str:
    actions = results.get(Actions)
    lines = [
        f"# predictions of `tracelens analyze {source}`: one per action, each about the trace of the program",
        "# changed by that action; check with `tracelens check AFTER --expect THIS_FILE`",
        f"# (metric {METRIC}: the mean step span, its origin to its last CPU or GPU end; docs/critical_path.md)",
    ]
    why_not = _no_prediction(results, actions)
    if why_not is not None or actions is None:
        lines.append(f"# no prediction: {why_not}")
        return "\n".join([*lines, "hypothesis = []  # none: `check` has nothing to check"]) + "\n"
    shape = program_of(results)
    before = ""
    if shape is not None:
        before = _inline_table({k: v for k, v in shape.as_before().items() if v is not None})
    names: set[str] = set()
    for action in actions.actions:
        targets = ", ".join(t.removeprefix("aten::") for t in action.targets)  # as the summary names them
        name = f"{action.action} ({targets}): step {action.predicted_step_us:,.1f} µs"
        name = (
            next(f"{name} #{n}" for n in range(2, len(names) + 3) if f"{name} #{n}" not in names)
            if name in names
            else name
        )
        names.add(name)  # names are unique in a hypotheses file
        lines += [
            "",
            "[[hypothesis]]",
            f"name = {_quoted(name)}",
            f"metric = {_quoted(METRIC)}",
            'op = "=="',
            f"value = {action.predicted_step_us}",
            # the action's stated range, low to high, around the prediction
            f"tolerance = {{ below = {_r(max(0.0, action.predicted_step_us - action.low))}, "
            f"above = {_r(max(0.0, action.high - action.predicted_step_us))} }}",
            f"note = {_quoted(f'from {source}: {actions.summary.step_us:,.1f} µs before; {action.basis}')}",
        ]
        if before:  # which prediction a trace checks: that of the action it took relative to this program
            lines += [f"action = {_quoted(action.action)}", f"before = {before}"]
            if action.predicted_launches_per_step is not None:
                lines.append(f"launches_per_step = {action.predicted_launches_per_step}")
            lines.append(f"before_value = {actions.summary.step_us}  # the step before: no change")
    return "\n".join(lines) + "\n"


def _inline_table(counts: dict[str, float | str | tuple[float, ...] | tuple[str, ...]]) -> str:
    """`{ compiled_regions = 0, graph_replays = 0, device = "NVIDIA H200", gemm_gflop_per_call = [8.59] }`."""
    shown = (f"{key} = {_toml_value(value)}" for key, value in counts.items())
    return "{ " + ", ".join(shown) + " }"


def _toml_value(value: float | str | tuple[float, ...] | tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)
