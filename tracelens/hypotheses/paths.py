"""Dotted metric paths into an analyze document: `per_step.kernels`, `kernels.name` (a list projected
over its entries), `step_table.0.step_us` (an index), `ops[aten::addmm].kernels_per_step` (the entry named so).

Contract: `resolve(document, path)` returns the value or raises `MetricPathError` naming the bad segment and
the close valid keys; `program_shape(document)` reads what the document says its program runs that an action
changes.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from typing import Any

import msgspec

from tracelens.model.kernel_names import inductor_calls_per_step
from tracelens.model.trace import WHOLE_TRACE_SOURCE
from tracelens.variants import ProgramShape, gemm_kernel_names, gemm_kernel_us, program_fingerprint

_SEGMENT = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")
_INDEX = re.compile(r"-?[0-9]{1,18}")  # ASCII digits only ("²".isdigit() is true, int("²") fails)


class MetricPathError(Exception):
    """The path does not exist in the document (a malformed hypothesis, not a wrong one)."""


class Segment(msgspec.Struct, frozen=True):
    text: str
    selector: bool  # written as [name]


def parse_path(path: str) -> list[Segment]:
    """Split `a.b[c d].e` into segments; raise `MetricPathError` on empty segments or stray brackets."""
    segments: list[Segment] = []
    position = 0
    while position < len(path):
        if segments and not path.startswith("[", position):
            if not path.startswith(".", position):
                raise MetricPathError(f'cannot read metric path "{path}" at character {position + 1}')
            position += 1
        match = _SEGMENT.match(path, position)
        if match is None:
            raise MetricPathError(f'cannot read metric path "{path}" at character {position + 1}')
        selector = match.group(1) is not None
        text = (match.group(1) if selector else match.group(2)).strip()
        if not text:
            raise MetricPathError(f'empty segment in metric path "{path}"')
        segments.append(Segment(text, selector))
        position = match.end()
    if not segments:
        raise MetricPathError("empty metric path")
    return segments


def resolve(document: Any, path: str) -> Any:
    """The value at `path` in `document`."""
    current = document
    walked = ""
    for segment in parse_path(path):
        current = _step(current, segment, walked or "the document")
        walked += _show(segment) if segment.selector or not walked else "." + segment.text
    return current


def _show(segment: Segment) -> str:
    return f"[{segment.text}]" if segment.selector else segment.text


def _step(current: Any, segment: Segment, where: str) -> Any:
    if isinstance(current, dict):
        if segment.text in current:
            return current[segment.text]
        raise MetricPathError(f'no key "{segment.text}" in {where}{close_keys(segment.text, list(current))}')
    if isinstance(current, list):
        if not segment.selector and _INDEX.fullmatch(segment.text):
            return _index(current, int(segment.text), where)
        if segment.selector:
            return _select(current, segment.text, where)
        return _project(current, segment.text, where)
    kind = "null" if current is None else type(current).__name__
    raise MetricPathError(f'{where} is a {kind} ({current!r}); it has no "{segment.text}"')


def _index(items: list[Any], index: int, where: str) -> Any:
    if -len(items) <= index < len(items):
        return items[index]
    raise MetricPathError(f"{where} has {len(items)} entries; no index {index}")


def _select(items: list[Any], name: str, where: str) -> Any:
    """The entry whose `name` (or `short_name`) is `name`; a glob must match exactly one entry."""
    named = [item for item in items if isinstance(item, dict) and "name" in item]
    for key in ("name", "short_name"):
        hits = [item for item in named if item.get(key) == name]
        if hits:
            return hits[0]
    hits = [item for item in named if fnmatch.fnmatchcase(str(item["name"]), name)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        listed = ", ".join(str(h["name"]) for h in hits[:4])
        raise MetricPathError(f"[{name}] matches {len(hits)} entries of {where} ({listed}); make it match one")
    names = [str(item["name"]) for item in named]
    raise MetricPathError(f'no entry named "{name}" in {where}{close_keys(name, names)}')


def _project(items: list[Any], key: str, where: str) -> list[Any]:
    """`kernels.name` → the `name` of every entry."""
    tables = [item for item in items if isinstance(item, dict)]
    if len(tables) != len(items):
        raise MetricPathError(f'{where} is a list of values; it has no "{key}" (use an index, e.g. {where}.0)')
    if tables and not any(key in item for item in tables):
        raise MetricPathError(f'no key "{key}" in the entries of {where}{close_keys(key, list(tables[0]))}')
    return [item.get(key) for item in tables]


def close_keys(word: str, keys: list[str], limit: int = 12) -> str:
    """`; close: a, b` (the closest keys), or every key when none is close."""
    close = difflib.get_close_matches(word, keys, n=4, cutoff=0.5)
    if close:
        return "; close: " + ", ".join(close)
    if not keys:
        return " (it is empty)"
    shown = ", ".join(keys[:limit]) + (", …" if len(keys) > limit else "")
    return f"; valid: {shown}"


def program_shape(document: dict[str, Any]) -> ProgramShape | None:
    """What the analyze document says the program runs that an action changes (the lengths of `compiled.regions`
    and `compiled.graph_replays`, as `tracelens.analyses.compiled.program_shape` counts them, `per_step.launches`
    and `per_step.kernels`); None where the compiled section or either list is missing."""
    compiled = document.get("compiled")
    regions = compiled.get("regions") if isinstance(compiled, dict) else None
    replays = compiled.get("graph_replays") if isinstance(compiled, dict) else None
    if not isinstance(regions, list) or not isinstance(replays, list):
        return None
    per_step = document.get("per_step")
    launches = per_step.get("launches") if isinstance(per_step, dict) else None
    launches = float(launches) if isinstance(launches, (int, float)) and not isinstance(launches, bool) else None
    kernels = per_step.get("kernels") if isinstance(per_step, dict) else None
    kernels = float(kernels) if isinstance(kernels, (int, float)) and not isinstance(kernels, bool) else None
    device, gflop, per_call = _fingerprint(document)
    return ProgramShape(
        compiled_regions=len(regions),
        graph_replays=len(replays),
        launches_per_step=launches,
        kernels_per_step=kernels,
        device=device,
        gemm_gflop_per_step=gflop,
        gemm_gflop_per_call=per_call,
        warmup_only=isinstance(compiled, dict) and compiled.get("warmup_only") is True,
        gemm_us_per_step=_gemm_us(document),
        inductor_calls_per_step=_inductor_calls(document),
        gemm_kernels=_gemm_kernels(document),
        whole_trace=_whole_trace(document),
    )


def _whole_trace(document: dict[str, Any]) -> bool:
    """Whether the document's one window is the whole trace (`trace.step_source`: no ProfilerStep)."""
    trace = document.get("trace")
    return isinstance(trace, dict) and trace.get("step_source") == WHOLE_TRACE_SOURCE


def _gemm_kernels(document: dict[str, Any]) -> tuple[str, ...] | None:
    """`gemm_kernel_names` of the document's `kernels` rows (category, name); None without them."""
    kernels = document.get("kernels")
    if not isinstance(kernels, list):
        return None
    rows = [r for r in kernels if isinstance(r, dict)]
    return gemm_kernel_names(
        [
            (r["category"], r["name"])
            for r in rows
            if isinstance(r.get("category"), str) and isinstance(r.get("name"), str)
        ]
    )


def _inductor_calls(document: dict[str, Any]) -> float | None:
    """`inductor_calls_per_step` of the document's `kernels` rows (name, calls) and `steps`; None without them."""
    found = _kernel_pairs(document, "name", str, "calls", (int,))
    return None if found is None else inductor_calls_per_step([(n, int(c)) for n, c in found[0]], found[1])


def _gemm_us(document: dict[str, Any]) -> float | None:
    """`gemm_kernel_us` of the document's `kernels` rows and `steps`; None without them."""
    found = _kernel_pairs(document, "category", str, "total_us", (int, float))
    return None if found is None else gemm_kernel_us([(c, float(t)) for c, t in found[0]], found[1])


def _kernel_pairs(
    document: dict[str, Any], key: str, key_type: type, number: str, number_types: tuple[type, ...]
) -> tuple[list[tuple[Any, Any]], int] | None:
    """The (row[key], row[number]) pairs of the document's `kernels` rows whose values have those types (a bool
    is no number), and its `steps`; None without either."""
    kernels, steps = document.get("kernels"), document.get("steps")
    if not isinstance(kernels, list) or not isinstance(steps, int) or isinstance(steps, bool):
        return None
    pairs = [
        (row[key], row[number])
        for row in kernels
        if isinstance(row, dict)
        and isinstance(row.get(key), key_type)
        and isinstance(row.get(number), number_types)
        and not isinstance(row.get(number), bool)
    ]
    return pairs, steps


def _fingerprint(document: dict[str, Any]) -> tuple[str | None, float | None, tuple[float, ...] | None]:
    """`program_fingerprint` of the document's `roofline` section and `steps`; Nones without them."""
    roofline, steps = document.get("roofline"), document.get("steps")
    if not isinstance(roofline, dict) or not isinstance(steps, int) or isinstance(steps, bool):
        return None, None, None
    rows = []
    for row in roofline.get("rows") or []:
        model, op, calls, per_call = (
            row.get(k) if isinstance(row, dict) else None for k in ("model", "op", "calls", "gflop_per_call")
        )
        if isinstance(model, str) and isinstance(calls, int) and isinstance(per_call, (int, float)):
            rows.append((model, op if isinstance(op, str) else "", calls, float(per_call)))
    device = roofline.get("device")
    pct = roofline.get("modelled_kernel_time_pct")
    return program_fingerprint(
        device if isinstance(device, str) else None,
        rows,
        steps,
        float(pct) if isinstance(pct, (int, float)) and not isinstance(pct, bool) else None,
    )
