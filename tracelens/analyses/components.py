"""Kernels per transformer-block component: norm, rope, attention, mlp, gemm, other.

Contract: `block_components(traces) -> list[list[ComponentRow]]`, one list per trace in the given order, each
with the six components in `COMPONENTS` order; pure. Every kernel (not memset/memcpy) of a trace's analysis
window counts toward exactly one component, so a variant's `attributed_*` figures sum to its mean kernel µs (and
kernels) per step over the window (complete steps minus those that overlap compilation, as for the variants
table). `us_per_step`/`kernels` are those figures where the component is placed, else None with `reason`:
placed mostly by kernel names (rule 3), or empty in a trace with no scope of that name (`unplaced_reason`).
A kernel's component is decided by the first rule that applies (docs/components.md):

1. scope: the innermost enclosing `record_function` annotation of its launch named `norm`, `rope`,
   `attention`, `mlp` (or `residual` → other); a dotted name counts by its first part (`mlp.up` → mlp); for a
   kernel a CUDA graph replayed, of the captured launch's op (`model.cuda_graphs`) where a capture matches;
2. backward: a launch inside `autograd::engine::evaluate_function: …` takes the scope (rule 1) of the forward
   op with the same `Sequence number`;
3. name: words of the kernel's and its launching op's names (`NAME_RULES`), for code without scopes
   (`torch.compile`d regions, where Dynamo drops `record_function`);
4. shape: the launching op's name and first two input shapes, when kernels of rules 1-2 in any trace of the
   same comparison give that pair exactly one component (e.g. a compiled `aten::mm` with the eager block's
   QKV projection shapes → attention);
5. a GEMM kernel that no rule places: `gemm` (the projections of code without scopes);
6. otherwise `other` (optimizer, residual adds, copies).
"""

from __future__ import annotations

import json
import re

import msgspec
import numpy as np

from tracelens.analyses.compiled import steady_window
from tracelens.analyses.dispatch import LAYERS, classify_layers
from tracelens.analyses.window import select_window
from tracelens.model.cuda_graphs import graph_launch_name_mask
from tracelens.model.events import Kind
from tracelens.model.kernel_names import categorize
from tracelens.model.trace import Trace

COMPONENTS = ("norm", "rope", "attention", "mlp", "gemm", "other")
MEASURED_ALWAYS = ("gemm", "other")  # by kernel category / the remainder: never unplaced
SCOPES = {"norm": "norm", "rope": "rope", "attention": "attention", "mlp": "mlp", "residual": "other"}
BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
# (component, substrings of the lower-cased kernel + launching-op name, word sets that all must be present)
NAME_RULES: tuple[tuple[str, tuple[str, ...], tuple[frozenset[str], ...]], ...] = (
    ("rope", ("rope", "rotary"), (frozenset({"neg", "cat"}), frozenset({"neg", "slice"}))),
    ("attention", ("attention", "sdpa", "flash", "fmha", "softmax"), ()),
    ("norm", ("rms_norm", "rmsnorm", "layer_norm", "layernorm", "rsqrt"), ()),
    ("mlp", ("silu", "gelu", "swiglu", "geglu"), ()),
    ("norm", (), (frozenset({"pow", "mean"}), frozenset({"pow", "sum"}))),  # after mlp: tanh-gelu has pow too
)
OTHER = COMPONENTS.index("other")
GEMM = COMPONENTS.index("gemm")
RULES = ("scope", "backward", "name", "shape", "none")


class ComponentRow(msgspec.Struct, frozen=True):
    name: str  # one of COMPONENTS
    kernels: float | None  # per step; None where the component cannot be placed (`reason`)
    us_per_step: float | None  # kernel time, mean over the analyzed steps; None where it cannot be placed
    by_name_us_per_step: float = 0.0  # of the attributed time, placed by kernel/op names alone (rule 3)
    attributed_kernels: float = 0.0  # what the rules put here, placed or not (they sum to the kernels per step)
    attributed_us_per_step: float = 0.0  # likewise for µs (a lower bound of the component where it is unplaced)
    reason: str = ""  # why `us_per_step` is None


def unplaced_reason(name: str, us: float, by_name_us: float, has_scope: bool) -> str:
    """Why a component's figure is no measurement ("" when it is one): most of its time was placed by kernel
    names (an eager RMSNorm's pow/mean/mul kernels are not named after it, a fused one is), or it is empty in
    a trace with no scope of that name (its kernels, if any, are elsewhere)."""
    if name in MEASURED_ALWAYS:
        return ""
    if us > 0 and by_name_us > 0.5 * us:
        return "placed by kernel names only (no record_function scope): not a measurement"
    if us <= 0 and not has_scope:
        return f"no `{name}` scope and no kernel named after it: its kernels, if any, are elsewhere"
    return ""


UNRECORDED = "launches but no GPU activity in the trace: its kernels were not recorded"


def _launched_something(trace: Trace) -> bool:
    """Whether the trace has kernel-launch (or copy/memset) API calls."""
    return bool((classify_layers(trace) == LAYERS.index("launch")).any())


class _Attributed(msgspec.Struct, frozen=True):
    """Per trace: the window's kernels, the component and rule each got, and the shape keys of their ops."""

    kernel_rows: np.ndarray
    scopes_present: frozenset[int]  # components whose scope name occurs in the trace
    component: np.ndarray  # index into COMPONENTS, -1 = undecided
    rule: np.ndarray  # index into RULES
    shape_key: list[tuple[str, str] | None]
    n_steps: int


def block_components(traces: list[Trace]) -> list[list[ComponentRow]]:
    attributed = [_attribute(trace) for trace in traces]
    learned = _learn_shapes(attributed)
    return [_rows(trace, a, learned) for trace, a in zip(traces, attributed, strict=True)]


def _attribute(trace: Trace) -> _Attributed:
    ev, links = trace.events, trace.links
    window = steady_window(trace, select_window(trace))  # the variants table's steps: compiling ones dropped
    rows = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    launch = links.launch[rows]
    component = np.full(rows.size, -1, dtype=np.int64)
    rule = np.full(rows.size, RULES.index("none"), dtype=np.int64)
    scope_of_name = _scope_codes(ev.names)
    is_scope = (ev.kind == Kind.USER_ANNOTATION) & (scope_of_name[ev.name] >= 0)
    has_launch = launch >= 0
    op = links.op[rows]
    # a kernel a CUDA graph replayed: its op is the captured launch's (`model.cuda_graphs`), inside the capture's
    # scopes; the graph launch itself sits outside them
    start = launch.astype(np.int64)
    replayed = has_launch & (op >= 0) & graph_launch_name_mask(ev)[ev.name[np.maximum(launch, 0)]]
    start[replayed] = op[replayed]
    scope = np.full(rows.size, -1, dtype=np.int64)
    scope[has_launch] = nearest_marked(links.parent, is_scope, start[has_launch])
    hit = scope >= 0
    component[hit] = scope_of_name[ev.name[scope[hit]]]
    rule[hit] = RULES.index("scope")

    backward_names = np.array([n.startswith(BACKWARD_PREFIX) for n in ev.names], dtype=bool)
    is_backward = (ev.kind == Kind.CPU_OP) & backward_names[ev.name] & (ev.sequence_number >= 0)
    todo = has_launch & (component < 0)
    node = np.full(rows.size, -1, dtype=np.int64)
    node[todo] = nearest_marked(links.parent, is_backward, launch[todo])
    forward_scope = _forward_scopes(trace, is_scope, is_backward, scope_of_name)
    found = node >= 0
    seq = np.where(found, ev.sequence_number[np.maximum(node, 0)], -1)
    from_forward = np.array([forward_scope.get(int(s), -1) if s >= 0 else -1 for s in seq], dtype=np.int64)
    hit = (component < 0) & (from_forward >= 0)
    component[hit] = from_forward[hit]
    rule[hit] = RULES.index("backward")

    op_names = [ev.names[ev.name[o]] if o >= 0 else "" for o in op]
    for i in np.flatnonzero(component < 0):
        code = _by_name(ev.names[ev.name[rows[i]]], op_names[i])
        if code >= 0:
            component[i] = code
            rule[i] = RULES.index("name")
    keys = [_shape_key(op_names[i], ev.input_dims[o]) if o >= 0 else None for i, o in enumerate(op)]
    present = frozenset(int(c) for c in np.unique(scope_of_name[ev.name[is_scope]]).tolist())
    return _Attributed(rows, present, component, rule, keys, max(window.n_steps, 1))


def _scope_codes(names: tuple[str, ...]) -> np.ndarray:
    """Per interned name: the component index of a scope of that name, else -1."""
    codes = np.full(len(names) + 1, -1, dtype=np.int64)  # +1: name index -1 reads the last entry
    for i, name in enumerate(names):
        component = SCOPES.get(name.split(".", 1)[0])
        if component is not None:
            codes[i] = COMPONENTS.index(component)
    return codes


def nearest_marked(parent: np.ndarray, marked: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row, its innermost proper ancestor with `marked` set, else -1 (one vector step per level)."""
    result = np.full(rows.size, -1, dtype=np.int64)
    current = parent[rows].astype(np.int64) if rows.size else np.zeros(0, dtype=np.int64)
    active = current >= 0
    while active.any():
        idx = np.flatnonzero(active)
        hit = marked[current[idx]]
        result[idx[hit]] = current[idx[hit]]
        current[idx[~hit]] = parent[current[idx[~hit]]]
        active[idx[hit]] = False
        active &= current >= 0
    return result


def _forward_scopes(trace: Trace, is_scope: np.ndarray, is_backward: np.ndarray, codes: np.ndarray) -> dict[int, int]:
    """Sequence number → component of the scope around the first forward op carrying it (ops outside any
    backward node only)."""
    ev, parent = trace.events, trace.links.parent
    candidates = np.flatnonzero((ev.kind == Kind.CPU_OP) & (ev.sequence_number >= 0) & ~is_backward)
    if candidates.size == 0:
        return {}
    in_backward = nearest_marked(parent, is_backward, candidates) >= 0
    forward = candidates[~in_backward]
    scope = nearest_marked(parent, is_scope, forward)
    keep = scope >= 0
    mapping: dict[int, int] = {}
    for seq, s in zip(ev.sequence_number[forward[keep]].tolist(), scope[keep].tolist(), strict=True):
        mapping.setdefault(int(seq), int(codes[ev.name[s]]))
    return mapping


def _by_name(kernel: str, op: str) -> int:
    text = f"{kernel} {op}".lower()
    words = set(re.split(r"[^a-z0-9]+|_", text))
    for component, substrings, word_sets in NAME_RULES:
        if component == "attention" and ("log_softmax" in text or "logsoftmax" in text):
            continue  # a log-softmax is the loss's (cross-entropy), not attention's
        if any(s in text for s in substrings) or any(ws <= words for ws in word_sets):
            return COMPONENTS.index(component)
    return -1


def _shape_key(op_name: str, dims: object) -> tuple[str, str] | None:
    """(op name, its first two input shapes) — Inductor passes `out=` as a third input, eager does not."""
    if not op_name or dims is None:
        return None
    try:
        shapes = json.loads(dims if isinstance(dims, (str, bytes)) else str(dims))
    except ValueError:
        return None
    if not isinstance(shapes, list) or len(shapes) < 2:
        return None
    return op_name, json.dumps(shapes[:2])


def _learn_shapes(attributed: list[_Attributed]) -> dict[tuple[str, str], int]:
    """Shape keys seen on scope/backward-attributed kernels that map to exactly one component."""
    seen: dict[tuple[str, str], set[int]] = {}
    for a in attributed:
        for i in np.flatnonzero(a.rule <= RULES.index("backward")):
            key = a.shape_key[i]
            if key is not None:
                seen.setdefault(key, set()).add(int(a.component[i]))
    return {key: next(iter(c)) for key, c in seen.items() if len(c) == 1}


def _rows(trace: Trace, a: _Attributed, learned: dict[tuple[str, str], int]) -> list[ComponentRow]:
    component = a.component.copy()
    for i in np.flatnonzero(component < 0):
        key = a.shape_key[i]
        if key is not None and key in learned:
            component[i] = learned[key]
    names = trace.events.names
    gemm = np.array(
        [categorize(names[code]) == "gemm" for code in trace.events.name[a.kernel_rows].tolist()], dtype=bool
    )
    component[(component < 0) & gemm] = GEMM
    component[component < 0] = OTHER
    dur_us = trace.events.dur_ns[a.kernel_rows] / 1000.0
    counts = np.bincount(component, minlength=len(COMPONENTS))
    sums = np.bincount(component, weights=dur_us, minlength=len(COMPONENTS))
    named = np.bincount(
        component, weights=np.where(a.rule == RULES.index("name"), dur_us, 0.0), minlength=len(COMPONENTS)
    )
    unrecorded = not a.kernel_rows.size and _launched_something(trace)
    out = []
    for c, name in enumerate(COMPONENTS):
        kernels, us = round(float(counts[c]) / a.n_steps, 3), round(float(sums[c]) / a.n_steps, 3)
        by_name = round(float(named[c]) / a.n_steps, 3)
        reason = UNRECORDED if unrecorded else unplaced_reason(name, us, by_name, c in a.scopes_present)
        out.append(
            ComponentRow(
                name,
                None if reason else kernels,
                None if reason else us,
                by_name,
                attributed_kernels=kernels,
                attributed_us_per_step=us,
                reason=reason,
            )
        )
    return out
