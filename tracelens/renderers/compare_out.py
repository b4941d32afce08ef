"""Renderers for `tracelens compare`: the study's table (rich) and `tracelens.compare/1` JSON."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from tracelens import __version__
from tracelens.analyses.actions import PredictionCheck
from tracelens.analyses.compare import Comparison, Variant
from tracelens.analyses.components import UNRECORDED, ComponentRow
from tracelens.analyses.shapes_sweep import FIRST_GEMM_VARIES, SWEEP
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.renderers.jsonout import _clean, dumps, per_step_dict, plain
from tracelens.renderers.tables import count, display_name, droppable, name_lines
from tracelens.renderers.text import make_console, print_parts, render_to_string
from tracelens.report.cells import (
    FIRST_GEMM_VARIES_COLUMNS,
    FIRST_GEMM_VARIES_TITLE,
    FIRST_GEMM_VARIES_WHY,
    FUSION_COLUMNS,
    PREDICTION_COLUMNS,
    PREDICTIONS_TITLE,
    WHOLE_TRACE_NOTE,
    balance_line,
    fusion_cells,
    prediction_cells,
    queued_caption,
    skipped_line,
    step_us_cell,
    variant_label,
    weak_caption,
)
from tracelens.units import marked, us_text

COMPARE_SCHEMA = "tracelens.compare/1"


def compare_dict(comparison: Comparison) -> dict[str, Any]:
    variants = [
        {
            "name": v.name,
            "path": v.path,
            "run": v.run,
            "steps": v.steps,
            "bound": v.bound,
            "per_step": {
                **per_step_dict(v.per_step),
                "profiler_free_step_us": v.profiler_free_step_us,
                "profiler_free_source": v.profiler_free_source,
                "metadata_ops": v.metadata_ops_per_step,
                "dispatch_us": v.dispatch_us_per_step,
                "exposed_dispatch_us": v.exposed_dispatch_us_per_step,
            },
            "kernels_by_category": v.kernels_by_category,
            "kernels": plain(v.kernels),
            "components": plain(v.components),
            "shapes": plain(v.shapes),
            "shape_pattern": v.shape_pattern,
            "step_source": v.step_source,
        }
        for v in comparison.variants
    ]
    document = {
        "schema": COMPARE_SCHEMA,
        "tool": {"name": "tracelens", "version": __version__},
        "variants": variants,
        "fusions": plain(comparison.fusions),
        "fusion_balance": plain(comparison.fusion_balance),
        "break_even": plain(comparison.break_even),
        "verdicts": list(comparison.verdicts),
        "graph_removed": [
            {"baseline": plain(r.baseline), "variant": plain(r.variant), "removed": dict(r.removed)}
            for r in comparison.graph_removed
        ],
        "predictions_checked": plain(comparison.predictions_checked),
        "predictions_skipped": plain(comparison.predictions_skipped),
        "clock_drift": plain(comparison.clock_drift),
    }
    return _clean(document)  # type: ignore[no-any-return]


class CompareJsonRenderer:
    def render(self, result: Comparison) -> str:
        return dumps(compare_dict(result))


class CompareTextRenderer:
    def __init__(self, color: bool = False, width: int | None = None) -> None:
        self.color = color
        self.width = width

    def render(self, result: Comparison) -> str:
        console = make_console(self.color, self.width)
        components = _components_table(result) if _has_components(result) else None
        verdicts = (
            Text("What the figures say:\n" + "\n".join(f"- {v}" for v in result.verdicts)) if result.verdicts else None
        )
        print_parts(
            console,
            [
                _variants_table(result),
                components,
                *_fusions_tables(result),
                _balance_text(result),
                *_graph_removed_tables(result),
                *_shapes_tables(result),
                *_break_even_tables(result),
                verdicts,
                prediction_checks_table(result.predictions_checked),  # printed last (docs/actions.md)
                Text(skipped_line(result.predictions_skipped)) if result.predictions_skipped else None,
            ],
        )
        return render_to_string(console)


GRAPH_ROWS = (  # (field of GraphSide, label, is µs) — removed first, then what stayed
    ("launch_calls", "kernel-launch calls /step", False),
    ("cpu_op_us", "CPU op µs/step", True),
    ("runtime_call_us", "runtime µs/step (no syncs)", True),
    ("gpu_idle_us", "GPU idle µs/step", True),
    ("kernels", "kernels /step", False),
    ("graph_launches", "graph launches /step", False),
    ("sync_calls", "sync calls /step", False),
    ("host_copies", "host copies /step", False),
    ("gpu_busy_us", "GPU busy µs/step", True),
)
GRAPH_STAYED = "graph_launches"  # the first row of what stayed


def _graph_removed_tables(result: Comparison) -> list[Table]:
    """Per graph variant: what the graph removed against the eager baseline, and what stayed."""
    tables = []
    for row in result.graph_removed:
        base, graph = row.baseline, row.variant
        table = Table(
            title=f"What the graph removed: {base.variant} → {graph.variant} (median per step)",
            title_justify="left",
        )
        for header, justify in (("", "left"), (base.variant, "right"), (graph.variant, "right"), ("removed", "right")):
            table.add_column(header, justify=justify)  # type: ignore[arg-type]
        for field, label, is_us in GRAPH_ROWS:
            shown = us_text if is_us else _optional_count
            if field == GRAPH_STAYED:
                table.add_section()
                table.add_row(Text("what stayed", style="italic"), "", "", "")
            table.add_row(label, shown(getattr(base, field)), shown(getattr(graph, field)), shown(row.removed[field]))
        table.caption = (
            "removed = eager − graph (negative: added); CPU op µs: outermost CPU ops; runtime µs: "
            "runtime/driver calls but syncs; GPU idle: GPU window less busy (docs/cuda_graphs.md)"
        )
        tables.append(table)
    return tables


def _variants_table(result: Comparison) -> Table:
    table = Table(title="Variants (per step, median over complete steps)", title_justify="left")
    table.add_column("variant")
    columns = (
        "kernels /step",
        "kernel µs/step",
        "GPU busy µs/step",
        "step µs",
        "no-profiler step µs",
        "dispatch µs/step",
        "exposed µs/step",
        "launches /step",
        "CPU ops /step",
        "metadata ops/step",
    )
    for column in columns:
        table.add_column(column, justify="right")
    table.add_column("bound")
    table.add_column("kernels/step by category")
    counts = ("metadata ops/step", "CPU ops /step", "launches /step", "kernels/step by category", "kernel µs/step")
    if any(v.profiler_free_step_us is not None for v in result.variants):  # kept: the name narrows first
        droppable(table, *counts, "dispatch µs/step")
    else:  # a column of "—" goes first
        droppable(table, "no-profiler step µs", *counts)
    for v in result.variants:
        p = v.per_step
        categories = ", ".join(f"{name} {count(n)}" for name, n in v.kernels_by_category.items())
        table.add_row(
            variant_label(v),
            _optional_count(p.kernels),
            us_text(p.gpu_kernel_us),
            us_text(p.gpu_busy_us),
            step_us_cell(v),
            _profiler_free_cell(v),
            us_text(v.dispatch_us_per_step),
            us_text(v.exposed_dispatch_us_per_step),
            _optional_count(p.launches),
            _optional_count(p.cpu_ops),
            count(v.metadata_ops_per_step),
            v.bound or "—",
            categories,
        )
    table.caption = (
        "dispatch: host work issuing GPU work; exposed: the part the GPU waited for (both means over the steps, "
        "the other columns medians: where steps vary, the two can differ); no-profiler step (where shown): measured "
        "by the recording (m) or estimated (e), docs/profiler_overhead.md"
    )
    if any(v.step_source == WHOLE_TRACE_SOURCE for v in result.variants):
        table.caption += "; " + WHOLE_TRACE_NOTE
    return table


def _profiler_free_cell(variant: Variant) -> str:
    """The step without the profiler and where it comes from: "1,234.5 m" (measured) or "e" (estimated)."""
    if variant.profiler_free_step_us is None:
        return "—"
    text, source = us_text(variant.profiler_free_step_us), variant.profiler_free_source
    return marked(text, source[0]) if source else text


FUSED_KERNEL = "fused kernel"  # its column: the kernel's name on the first line, the eager ops it replaces below


def _fusions_tables(result: Comparison) -> list[Table]:
    """One table per variant with fused kernels (the variant is the title, so that at 80 columns the kernel's name
    gets the width): per row the kernel's whole name (shortened in the middle where the column is narrower:
    `tables.name_lines`), the eager ops it replaces on the lines below, and every figure."""
    tables = []
    for name in dict.fromkeys(f.variant for f in result.fusions):
        table = Table(title=f"Fused kernels of {name} and the eager ops they replace (per step)", title_justify="left")
        table.add_column(FUSED_KERNEL)
        table.add_column("launched by")
        for column in FUSION_COLUMNS[-3:]:
            table.add_column(column, justify="right")
        droppable(name_lines(table, FUSED_KERNEL), "launched by")
        for fusion in result.fusions:
            if fusion.variant == name:
                _, kernel, launched_by, replaced, *figures = fusion_cells(fusion, display_name)
                table.add_row(f"{kernel}\nreplaces {replaced}", launched_by, *figures)
        tables.append(table)
    return tables


def _balance_text(result: Comparison) -> Text | None:
    """Per variant: how the fused rows add up to the realized drop (docs/fusion.md, "compare")."""
    if not result.fusion_balance:
        return None
    lines = [f"- {balance_line(b)}" for b in result.fusion_balance]
    return Text("Fused rows against the realized drop in non-GEMM kernel time:\n" + "\n".join(lines))


def _has_components(result: Comparison) -> bool:
    """Whether any variant has kernels in a block component other than `gemm`/`other` (else the table says
    nothing)."""
    return any(
        c.name not in ("gemm", "other") and c.attributed_kernels > 0 for v in result.variants for c in v.components
    )


def _scoped_gemms(result: Comparison) -> str:
    """Where a variant's GEMMs all sit in scopes (its `gemm` row 0 beside GEMM kernels): what that row holds."""
    scoped = [
        v.name
        for v in result.variants
        if v.kernels_by_category.get("gemm", 0) > 0
        and any(c.name == "gemm" and c.attributed_kernels == 0 for c in v.components)
    ]
    if not scoped:
        return ""
    names = ", ".join(scoped[:3]) + (", …" if len(scoped) > 3 else "")
    return f"; gemm 0 in {names}: their GEMMs are in the rows above"


def _components_table(result: Comparison) -> Table:
    table = Table(
        title="Kernel µs per step by block component (kernels per step)",
        title_justify="left",
        caption=(
            "µs: the mean over the steps (the variants table's are medians); "
            "from record_function scopes, backward nodes, kernel names or GEMM shapes; —: not placed (mostly by "
            "kernel names, or no scope of that name), its kernels in the row 'not placed'"
            + _scoped_gemms(result)
            + " (docs/components.md)"
        ),
    )
    table.add_column("component")
    for v in result.variants:
        table.add_column(variant_label(v), justify="right")  # "(whole trace)": its figures are the whole trace's
    names = [c.name for c in result.variants[0].components] if result.variants else []
    for i, name in enumerate(names):
        cells = (_component_cell(v.components[i].us_per_step, v.components[i].kernels) for v in result.variants)
        table.add_row(name, *cells)
    unplaced = [  # the — rows' kernels: so that the rows add up to the total
        _unless_unrecorded(
            v.components,
            sum(c.attributed_us_per_step for c in v.components if c.us_per_step is None),
            sum(c.attributed_kernels for c in v.components if c.us_per_step is None),
        )
        for v in result.variants
    ]
    if any(kernels for _, kernels in unplaced if kernels is not None):
        table.add_row("not placed", *(_component_cell(us, kernels) for us, kernels in unplaced))
    totals = [
        _unless_unrecorded(
            v.components,
            sum(c.attributed_us_per_step for c in v.components),
            sum(c.attributed_kernels for c in v.components),
        )
        for v in result.variants
    ]
    table.add_row("total", *(_component_cell(us, kernels) for us, kernels in totals))
    return table


def _unless_unrecorded(components: list[ComponentRow], us: float, kernels: float) -> tuple[float | None, float | None]:
    """(`us`, `kernels`), or (None, None) where the variant's kernels were not recorded (`UNRECORDED`)."""
    if any(c.reason == UNRECORDED for c in components):
        return None, None
    return us, kernels


def _component_cell(us: float | None, kernels: float | None) -> str:
    return "—" if us is None or kernels is None else f"{us_text(us)} ({count(kernels)})"


def _optional_count(value: float | None) -> str:
    return "—" if value is None else count(value)


def _shapes_tables(result: Comparison) -> list[Table]:
    """One table per variant with shapes (80 columns: the variant is the title): a shape sweep's figures per
    shape, or where the first GEMM varies by step only its inputs and their steps."""
    sweeps = [_sweep_table(v) for v in result.variants if v.shape_pattern == SWEEP]
    if sweeps:
        sweeps[-1].caption = (
            "steps: how many; step #: their numbers; kernel µs: median per step, compilation's kernels left out; "
            "repeat: median period of the shape's later steps that compiled nothing (— if it ran once); first: "
            "its first step's period, with its compile, JIT or set-up (docs/shapes.md)"
        )
    varies = [v for v in result.variants if v.shape_pattern == FIRST_GEMM_VARIES]
    return [*sweeps, _varies_table(varies)] if varies else list(sweeps)


def _sweep_table(v: Variant) -> Table:
    table = Table(title=f"Shape sweep of {v.name}: steps by first GEMM's input", title_justify="left")
    for column in ("shape", "steps", "step #", "kernel µs", "repeat µs", "first ms", "compile ms"):
        table.add_column(column, justify="left" if column in ("shape", "step #") else "right")
    for row in v.shapes:
        table.add_row(
            row.shape,
            count(len(row.steps)),
            _step_numbers(row.steps),
            us_text(row.kernel_us),
            us_text(row.step_us),
            f"{row.first_step_us / 1000:,.1f}",
            f"{row.compile_ms:,.1f}",
        )
    return table


def _varies_table(variants: list[Variant]) -> Table:
    """The first GEMM's inputs of the variants whose steps ran different GEMMs first: no per-shape figures."""
    table = Table(title=FIRST_GEMM_VARIES_TITLE, title_justify="left")
    for column in FIRST_GEMM_VARIES_COLUMNS:
        table.add_column(column, justify="right" if column == "steps" else "left")
    for v in variants:
        for row in v.shapes:
            table.add_row(v.name, row.shape, count(len(row.steps)), _step_numbers(row.steps))
    table.caption = (
        f"{FIRST_GEMM_VARIES_WHY}; steps: how many, step #: their numbers (docs/shapes.md#first-gemm-varies-by-step)"
    )
    return table


def _step_numbers(numbers: list[int]) -> str:
    return ",".join(map(str, numbers))


def _break_even_tables(result: Comparison) -> list[Table]:
    """Per compiled variant: steps of each shape that pay back its compile time against each baseline."""
    tables = []
    for name in dict.fromkeys(row.variant for row in result.break_even):
        table = Table(title=f"Break-even of {name}: steps to pay back the compile", title_justify="left")
        for column in ("shape", "vs", "compile ms", "saving µs", "steps"):
            table.add_column(column, justify="left" if column in ("shape", "vs") else "right")
        for row in result.break_even:
            if row.variant == name:
                table.add_row(
                    row.shape,
                    row.baseline,
                    f"{row.compile_ms:,.1f}",
                    us_text(row.saving_us_per_step),
                    "never" if row.steps is None else f"{row.steps:,}",
                )
        tables.append(table)
    if tables:
        tables[-1].caption = (
            "steps = compile ms / saving in GPU kernel µs per step; never: not faster. A host-bound "
            "baseline saves more per step than its kernels show (docs/shapes.md)"
        )
    return tables


def prediction_checks_table(checks: list[PredictionCheck]) -> Table | None:
    """`compare`'s table of the before-trace's predictions against the variants that took the action (the cells
    the report shows too: `report.cells.prediction_cells`)."""
    if not checks:
        return None
    table = Table(title=PREDICTIONS_TITLE, title_justify="left")
    headers = [column.replace("µs pred", "µs\npred") for column in PREDICTION_COLUMNS]
    for header in headers:
        table.add_column(header, justify="left" if header in ("after", "action", "held") else "right")
    for check in checks:
        table.add_row(*prediction_cells(check))
    table.caption = "; ".join(c for c in (weak_caption(checks), queued_caption(checks)) if c) or None
    return droppable(table, "range µs", headers[-2])
