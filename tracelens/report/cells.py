"""Table cells shared by the terminal and the HTML page (no plotly, no rich: both import it)."""

from __future__ import annotations

from tracelens.analyses.compare import FusedKernel
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
    return (
        fusion.variant,
        short_name(fusion.kernel),
        fusion.launched_by or "—",
        f"{', '.join(fusion.ops)}{_gemms(fusion)} ({fusion.baseline_variant})",
        f"{fusion.kernel_us_per_step:,.1f}",
        f"{fusion.baseline_us_per_step:,.1f}",
        f"{fusion.baseline_us_per_step - fusion.kernel_us_per_step:,.1f}",
    )


def _gemms(fusion: FusedKernel) -> str:
    """`, + 2 GEMM calls` when the fused kernel also replaced the baseline's GEMMs (a GEMM-epilogue kernel)."""
    calls = fusion.absorbed_gemm_calls_per_step
    if calls <= 0:
        return ""
    shown = int(calls) if float(calls).is_integer() else round(calls, 2)
    return f" + {shown} GEMM call{'s' if calls != 1 else ''}"
