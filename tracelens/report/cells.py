"""Table cells shared by the terminal and the HTML page (no plotly, no rich: both import it)."""

from __future__ import annotations

from collections.abc import Callable

from tracelens.analyses.actions import PredictionCheck, PredictionSkip
from tracelens.analyses.compare import FusedKernel, FusionBalance, Variant
from tracelens.model.kernel_names import short_name
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.units import change_text, marked, us_text

FUSION_COLUMNS = (
    "variant",
    "fused kernel",
    "launched by",
    "replaces ops",
    "fused µs/step",
    "eager µs/step",
    "saved µs/step",
)


def fusion_cells(fusion: FusedKernel, name: Callable[[str], str] = short_name) -> tuple[str, ...]:
    """One row of the fused-kernels table (`FUSION_COLUMNS`), as text (shared by the terminal and HTML
    renderers); `name`: how the kernel's name is shown (default `short_name`: cut at 60 characters)."""
    baseline = fusion.baseline_us_per_step
    direction = " [backward]" if fusion.direction == "backward" else ""
    tie = f"; {fusion.tied_us_per_step:,.1f} of it by a tie" if fusion.tied_us_per_step >= 0.05 else ""
    replaced = (
        f"{', '.join(fusion.ops)}{_gemms(fusion)} ({fusion.baseline_variant}{tie})"
        if baseline is not None
        else f"— {fusion.note}"
        if fusion.note
        else "—"
    )
    return (
        fusion.variant,
        name(fusion.kernel) + direction,
        fusion.launched_by or "—",
        replaced,
        f"{fusion.kernel_us_per_step:,.1f}",
        "—" if baseline is None else f"{baseline:,.1f}",
        "—" if baseline is None else f"{baseline - fusion.kernel_us_per_step:,.1f}",
    )


PREDICTION_COLUMNS = (
    "after",
    "action",
    "held",
    "error",
    "predicted µs",
    "measured µs",
    "change µs pred / meas",
    "range µs",
)
PREDICTIONS_TITLE = "Predictions checked (the first trace's actions; step: mean span; docs/actions.md)"


def prediction_cells(check: PredictionCheck) -> tuple[str, ...]:
    """One row of the predictions-checked table (`PREDICTION_COLUMNS`), as text."""
    targets = ", ".join(t.removeprefix("aten::") for t in check.targets)
    change = "—"  # the step's change, predicted / measured, against the step before, where it is known
    if check.before_step_us is not None:
        predicted, measured = (v - check.before_step_us for v in (check.predicted_step_us, check.measured_step_us))
        change = f"{change_text(predicted, 0)} / {change_text(measured, 0)}"
    return (
        check.after,
        f"{check.action} ({targets})" if targets else check.action,
        "weak" if check.weak else "yes" if check.held else "no",
        f"{change_text(check.error_pct)} %",
        us_text(check.predicted_step_us),
        us_text(check.measured_step_us),
        change,
        f"{check.low:,.0f}–{check.high:,.0f}",
    )


def weak_caption(checks: list[PredictionCheck]) -> str:
    """What "weak" means, with the step before, where a row is weak; "" otherwise."""
    before = next((c.before_step_us for c in checks if c.weak and c.before_step_us is not None), None)
    if before is None:
        return ""
    return f"weak: held, but the step before, {us_text(before)} µs, lies in the range too (no change would have held)"


def queued_caption(checks: list[PredictionCheck]) -> str:
    """Where the after-trace's steps start before earlier steps' GPU work ends: how much of their time, and the
    step's period ("" else)."""
    check = next((c for c in checks if c.queued_pct is not None and c.period_us is not None), None)
    if check is None or check.queued_pct is None or check.period_us is None:
        return ""
    return (
        f"{check.after}: each step's CPU starts before earlier steps' GPU work ends ({check.queued_pct:.0f} % of the "
        f"time from its CPU start to its end lies before, in their spans); its step's period is "
        f"{us_text(check.period_us)} µs"
    )


def skipped_line(skips: list[PredictionSkip]) -> str:
    """The later traces that check none of the predictions, and why ("" where there are none)."""
    return "Predictions not checked: " + "; ".join(f"{s.after}: {s.reason}" for s in skips) if skips else ""


def balance_line(balance: FusionBalance) -> str:
    """How a variant's fused rows add up to the drop in non-GEMM, non-attention kernel time it realized."""
    shown = balance.unplaced_ops[:6]
    more = len(balance.unplaced_ops) - len(shown)
    unplaced = f" ({', '.join(shown)}{f', … {more} more' if more > 0 else ''})" if shown else ""
    absorbed = balance.absorbed_gemm_us_per_step
    gemms = f" − GEMMs absorbed {absorbed:,.1f}" if absorbed else ""
    return (
        f"{balance.variant} vs {balance.baseline_variant}: realized {balance.realized_saving_us_per_step:,.1f} "
        f"µs/step = fused rows {balance.credited_saving_us_per_step:,.1f}{gemms} + kernels both run "
        f"{balance.kept_change_us_per_step:,.1f} + eager not placed {balance.unplaced_baseline_us_per_step:,.1f}"
        f"{unplaced} − {balance.variant}'s unmatched {balance.unmatched_variant_us_per_step:,.1f}"
    )


FIRST_GEMM_VARIES_TITLE = "First GEMM varies by step (not a shape sweep)"
FIRST_GEMM_VARIES_COLUMNS = ("variant", "shape", "steps", "step #")
FIRST_GEMM_VARIES_WHY = (  # the tables' caption (text) and note (HTML) begin with it
    "the steps' first GEMMs are not one GEMM's input at several token counts (a 1-D input, or another last "
    "dimension: another GEMM first, or one at another feature size), so nothing is given per shape"
)

WHOLE_TRACE_MARK = "w"  # after a variant's step µs: its whole trace's length (no steps)
WHOLE_TRACE_NOTE = (
    "step µs w: the whole trace's length, as analyze gives it (no ProfilerStep: not a step time, in no per-step "
    "comparison; docs/shapes.md#traces-without-profilerstep)"
)


def variant_label(variant: Variant) -> str:
    """A variant's name in the variants tables: "(whole trace)" after it where it has no steps."""
    return f"{variant.name} (whole trace)" if variant.step_source == WHOLE_TRACE_SOURCE else variant.name


def step_us_cell(variant: Variant) -> str:
    """The variants tables' step µs: the median step period, or where the variant has no steps its whole trace's
    length marked `WHOLE_TRACE_MARK` (the value of analyze's "the whole trace, … µs profiled")."""
    text = us_text(variant.per_step.step_us)
    whole = variant.step_source == WHOLE_TRACE_SOURCE and variant.per_step.step_us is not None
    return marked(text, WHOLE_TRACE_MARK) if whole else text


def _gemms(fusion: FusedKernel) -> str:
    """`, + 2 GEMM calls` when the fused kernel also replaced the baseline's GEMMs (a GEMM-epilogue kernel)."""
    calls = fusion.absorbed_gemm_calls_per_step
    if calls <= 0:
        return ""
    shown = int(calls) if float(calls).is_integer() else round(calls, 2)
    return f" + {shown} GEMM call{'s' if calls != 1 else ''}"
