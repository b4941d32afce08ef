"""The overview of one trace: facts about the recording and the per-step figures, as tables."""

from __future__ import annotations

from tracelens.analyses.summary import StepFigures, Summary
from tracelens.model.steps import step_label, steps_words
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.report.document import Panel, Table
from tracelens.report.generic import format_value
from tracelens.units import bytes_text

STEP_COLUMNS = (
    ("kernels", "kernels"),
    ("memcpy", "memcpy"),
    ("memset", "memset"),
    ("launches", "launches"),
    ("cpu_ops", "CPU ops"),
    ("cpu_us", "CPU step µs"),
    ("gpu_busy_us", "GPU busy µs"),
    ("gpu_kernel_us", "kernel µs"),
    ("step_us", "step µs"),
)


def facts_panel(summary: Summary, panel_id: str = "facts") -> Panel:
    facts = summary.facts
    rows: list[tuple[str, str]] = [
        ("format", facts.format),
        ("GPUs", ", ".join(facts.gpus) or "none recorded"),
        ("CUDA runtime / driver", f"{facts.cuda_runtime or '–'} / {facts.cuda_driver or '–'}"),
    ]
    if facts.hip_runtime:
        rows.append(("HIP runtime", facts.hip_runtime))
    if facts.torch:
        rows.append(("torch", facts.torch))
    if facts.rank is not None:
        rows.append(("rank", f"{facts.rank} of {facts.world_size}"))
    rows += [
        ("events", format_value(facts.events)),
        ("span", f"{facts.span_us / 1000:,.3f} ms"),
        (
            "steps",
            f"{summary.steps} analyzed ({facts.step_source})"
            if facts.step_source != WHOLE_TRACE_SOURCE
            else steps_words(summary.steps, facts.step_source),
        ),
        ("uncompressed size", bytes_text(facts.uncompressed_bytes)),
    ]
    run = [f"{key}={format_value(value)}" for key, value in sorted(facts.run.items()) if _plain(value)]
    if run:
        rows.append(("recorded run", ", ".join(run)))
    line = [facts.format, ", ".join(facts.gpus) or "no GPU recorded"]
    line += [f"torch {facts.torch}"] if facts.torch else []
    line += [steps_words(summary.steps, facts.step_source), f"{facts.span_us / 1000:,.3f} ms span", "details"]
    return Panel(id=panel_id, title="Trace", table=Table(("", ""), tuple(rows)), folded=" · ".join(line))


def per_step_row(figures: StepFigures) -> tuple[str, ...]:
    return tuple(format_value(getattr(figures, key)) for key, _ in STEP_COLUMNS)


def per_step_panel(summary: Summary, panel_id: str = "per-step") -> Panel:
    """The median step, then each analyzed step (at most 50 rows)."""
    columns = ("step", *(label for _, label in STEP_COLUMNS))
    rows = [("median", *per_step_row(summary.per_step))]
    rows += [(step_label(row.number), *per_step_row(row)) for row in summary.step_table[:50]]
    return Panel(id=panel_id, title="Per step (median first)", table=Table(columns, tuple(rows)))


def _plain(value: object) -> bool:
    return isinstance(value, str | int | float | bool)
