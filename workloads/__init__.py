"""tracelens.workloads: record the PyTorch profiler traces that tracelens analyses.

This package needs torch (and, for the ``liger_mlp`` variant, liger-kernel +
triton + CUDA; for ``geglu_epilogue_mlp``, triton: CUDA, or its CPU
interpreter for the smoke run).  It must never import tracelens' analysis dependencies
(msgspec, plotly, pandas, rich), and the analysis side must never import it.

Entry point::

    python -m workloads.record --variant all --tokens 4096 --hidden 2048 \
        --intermediate 16384 --dtype bf16 --out traces/h200/

``python -m workloads.summarize DIR`` prints a stdlib-only per-step summary of
recorded traces (kernel names/counts, GPU time, runtime calls).
"""

TOOL = "tracelens.workloads/1"
MAIN_VARIANTS = (
    "eager_linear",
    "compiled_linear",
    "eager_mlp",
    "compiled_mlp",
    "liger_mlp",
    "compiled_mlp_max_autotune",
    "geglu_epilogue_mlp",
)
MLP_VARIANTS = ("eager_mlp", "compiled_mlp", "liger_mlp")

__all__ = ["TOOL", "MAIN_VARIANTS", "MLP_VARIANTS"]
