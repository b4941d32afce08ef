"""Table cells shared by the terminal and the HTML page (no plotly, no rich: both import it)."""

from __future__ import annotations

from tracelens.analyses.compare import FusedKernel, FusionBalance
from tracelens.model.kernel_names import short_name

FUSION_COLUMNS = (
    "variant",
    "fused kernel",
    "launched by",
    "replaces ops",
    "fused µs/step",
    "eager µs/step",
    "saved µs/step",
)


def fusion_cells(fusion: FusedKernel) -> tuple[str, ...]:
    """One row of the fused-kernels table, as text (shared by the terminal and HTML renderers)."""
    baseline = fusion.baseline_us_per_step
    direction = " [backward]" if fusion.direction == "backward" else ""
    replaced = (
        f"{', '.join(fusion.ops)}{_gemms(fusion)} ({fusion.baseline_variant})"
        if baseline is not None
        else f"— {fusion.note}"
        if fusion.note
        else "—"
    )
    return (
        fusion.variant,
        short_name(fusion.kernel) + direction,
        fusion.launched_by or "—",
        replaced,
        f"{fusion.kernel_us_per_step:,.1f}",
        "—" if baseline is None else f"{baseline:,.1f}",
        "—" if baseline is None else f"{baseline - fusion.kernel_us_per_step:,.1f}",
    )


def balance_line(balance: FusionBalance) -> str:
    """How a variant's fused rows add up to the drop in non-GEMM, non-attention kernel time it realized."""
    shown = balance.unplaced_ops[:6]
    more = len(balance.unplaced_ops) - len(shown)
    unplaced = f" ({', '.join(shown)}{f', … {more} more' if more > 0 else ''})" if shown else ""
    return (
        f"{balance.variant} vs {balance.baseline_variant}: realized {balance.realized_saving_us_per_step:,.1f} "
        f"µs/step = fused rows {balance.credited_saving_us_per_step:,.1f} + kernels both run "
        f"{balance.kept_change_us_per_step:,.1f} + eager not placed {balance.unplaced_baseline_us_per_step:,.1f}"
        f"{unplaced} − {balance.variant}'s unmatched {balance.unmatched_variant_us_per_step:,.1f}"
    )


def _gemms(fusion: FusedKernel) -> str:
    """`, + 2 GEMM calls` when the fused kernel also replaced the baseline's GEMMs (a GEMM-epilogue kernel)."""
    calls = fusion.absorbed_gemm_calls_per_step
    if calls <= 0:
        return ""
    shown = int(calls) if float(calls).is_integer() else round(calls, 2)
    return f" + {shown} GEMM call{'s' if calls != 1 else ''}"
