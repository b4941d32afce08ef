"""Fixed colours, so a category has the same colour in every chart of every report."""

from __future__ import annotations

CATEGORY_COLORS: dict[str, str] = {
    "gemm": "#1f77b4",
    "attention": "#9467bd",
    "conv": "#17becf",
    "norm": "#98df8a",
    "elementwise": "#ff7f0e",
    "reduction": "#2ca02c",
    "fused": "#d62728",
    "copy": "#8c564b",
    "memset": "#bcbd22",
    "communication": "#e377c2",
    "other": "#7f7f7f",
}
CPU_COLORS: dict[str, str] = {
    "CPU op": "#6baed6",
    "user annotation": "#c7e9c0",
    "runtime / driver call": "#fdae6b",
}
AGGREGATED_COLOR = "rgba(120,120,120,0.45)"
LINK_COLOR = "rgba(90,90,90,0.5)"


def category_color(category: str) -> str:
    return CATEGORY_COLORS.get(category, CATEGORY_COLORS["other"])


def variant_colors(n: int) -> list[str]:
    """Distinct colours for `n` compared variants (cycled past ten)."""
    base = [
        "#4c78a8",
        "#f58518",
        "#54a24b",
        "#e45756",
        "#72b7b2",
        "#b279a2",
        "#ff9da6",
        "#9d755d",
        "#bab0ac",
        "#eeca3b",
    ]
    return [base[i % len(base)] for i in range(n)]
