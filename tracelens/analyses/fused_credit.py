"""Which eager kernels a fused kernel replaced, placed by dataflow and position, not by op names.

Contract: `kernel_slots(trace, categories) -> Slots` and `credit(baseline, variant) -> Credit`; pure.

A *slot* is one kernel of a step, identified across steps by (kernel name, launching op, direction, occurrence
among the step's kernels of that name, op and direction); its figures are totals over the window's steps.
Every slot has a *position*: the number of anchor kernels (GEMMs and attention kernels) of its direction that
ran before it in its step (median over the steps). A fused kernel (Triton: Inductor, Liger, hand-written) is a
*unit* with the other kernels its launching op launched (Liger's RoPE launches two `contiguous` copies).

`credit` places every non-anchor baseline slot (docs/fusion.md, "compare"):

1. *kept*: the variant runs the same kernel from the same op in the same direction (nearest position), or,
   failing that, the same op in the same direction within one anchor: not replaced, credited to no one;
2. *replaced*: else credited to the variant's unit of the same direction that shares a tensor size (element
   count of an input of the launching op) with the baseline op, has the same `record_function` scope where
   both have one, lies between the same host syncs where both steps have as many between their kernels
   (`.item()`, stream/device/event syncs, blocking copies: nothing fuses across one), and is nearest in
   position, at most `MAX_ANCHORS` anchors away; a unit launched by a compiled region that recorded no sizes (a
   CUDA-graph replay keeps only the region around its launch) qualifies for a sized op at its place or up to
   `SIZELESS_ANCHORS` anchor after it (a kernel before the anchor the op follows cannot compute it), after any
   unit that shares a size; otherwise, without recorded shapes, only a unit between the same
   anchors qualifies;
3. *not placed*: none of these: said so, never guessed.

Each baseline µs is credited once. The rows' savings plus the kept kernels' change plus the unplaced baseline
time minus the variant's unmatched non-fused time is the realized drop in non-anchor kernel time, exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

import numpy as np

from tracelens.analyses.compiled import steady_window
from tracelens.analyses.components import nearest_marked
from tracelens.analyses.fusion import host_syncs_before
from tracelens.analyses.window import select_window
from tracelens.model.events import Kind
from tracelens.model.op_names import is_backward
from tracelens.model.steps import REGION_CALL
from tracelens.model.trace import Trace

ANCHORS = ("gemm", "attention")
MAX_ANCHORS = 2  # a replaced op is at most this many GEMM/attention kernels away from its fused kernel
SIZELESS_ANCHORS = 1  # ... and at most this many from a unit whose op recorded no sizes (a graph replay's region)
_PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_SCOPES = ("ProfilerStep#", "## ", "Torch-Compiled Region", "CompiledFunction", "Optimizer.", "autograd::")
_EVALUATE = "autograd::engine::evaluate_function: "
SlotKey = tuple[str, str, bool, int]


@dataclass
class Slot:
    """One kernel of a step, identified across steps (see the module docstring)."""

    key: SlotKey
    category: str
    label: str  # the op shown for it: the backward node (`MulBackward0`) or the innermost op
    us: float = 0.0  # total over the window's steps
    positions: list[int] = field(default_factory=list)
    numels: set[int] = field(default_factory=set)
    scope: str = ""
    order: int = 0  # index among its first step's kernels
    segments: list[int] = field(default_factory=list)  # per step: host syncs in the step before its launch
    head: SlotKey | None = None  # the fused kernel whose unit it belongs to (itself for a head)

    @property
    def name(self) -> str:
        return self.key[0]

    @property
    def backward(self) -> bool:
        return self.key[2]

    @property
    def position(self) -> float:
        return float(median(self.positions)) if self.positions else 0.0

    @property
    def segment(self) -> int:
        """Its place between the step's host syncs: how many ran before its launch (median over the steps)."""
        return round(median(self.segments)) if self.segments else 0


@dataclass
class Slots:
    slots: dict[SlotKey, Slot]
    n_steps: int
    has_shapes: bool
    segments: int = 0  # host syncs between the kernels of a step (the largest `Slot.segment`)


@dataclass
class Unit:
    head: Slot
    members: list[Slot]
    place: float = 0.0  # the head's position in the baseline's anchor numbering (`_anchor_places`)
    credited: list[Slot] = field(default_factory=list)
    by_tie: list[Slot] = field(default_factory=list)  # credited slots another unit ranked as well (it ran later)
    lost_to: dict[str, float] = field(default_factory=dict)  # per winner's kernel: µs of slots it tied for and lost

    @property
    def us(self) -> float:
        return self.head.us + sum(m.us for m in self.members)

    @property
    def numels(self) -> set[int]:
        out = set(self.head.numels)
        for m in self.members:
            out |= m.numels
        return out


@dataclass
class Credit:
    units: list[Unit]
    kept: list[tuple[Slot, Slot]]  # (baseline, variant)
    unplaced: list[Slot]  # baseline slots credited to no unit
    unmatched: list[Slot]  # variant non-fused, non-anchor slots with no baseline counterpart


def is_fused_kernel(name: str, category: str) -> bool:
    """A Triton kernel (Inductor's `triton_*`, Liger's `_rms_norm_forward_kernel`, ...): category `fused`, or
    a plain identifier that is no GEMM or attention library kernel."""
    return category == "fused" or (category not in ANCHORS and bool(_PLAIN_IDENTIFIER.match(name)))


def kernel_slots(trace: Trace, categories: dict[str, str]) -> Slots:
    """The kernels of the steady window (the variants table's steps), as slots."""
    ev, links = trace.events, trace.links
    window = steady_window(trace, select_window(trace))
    rows = np.flatnonzero(window.in_window & (ev.kind == Kind.KERNEL))
    rows = rows[np.lexsort((ev.ts_ns[rows], links.step[rows]))]
    launch = links.launch[rows]
    op = links.op[rows].astype(np.int64)
    names = ev.names
    backward_name = np.array(
        [n.startswith("autograd::engine::evaluate_function") or is_backward(n) for n in names] + [False], dtype=bool
    )
    cpu = (ev.kind == Kind.CPU_OP) | (ev.kind == Kind.USER_ANNOTATION)
    node_mark = cpu & backward_name[ev.name]
    starts = np.maximum(launch, 0).astype(np.int64)
    node = nearest_marked(links.parent, node_mark, starts)
    node = np.where(launch >= 0, node, -1)
    scope_name = np.array([not n.startswith(_NOT_SCOPES) for n in names] + [False], dtype=bool)
    scope_mark = (ev.kind == Kind.USER_ANNOTATION) & scope_name[ev.name]
    scope = np.where(launch >= 0, nearest_marked(links.parent, scope_mark, starts), -1)
    head_op = _fused_ops(trace, rows, op, categories)
    owner = _owners(trace, op, head_op)
    numel_cache: dict[int, set[int]] = {}
    barrier = host_syncs_before(trace, rows)  # per kernel, the syncs on its launching thread before its launch
    first_barrier: dict[int, int] = {}  # per step, that count at its first kernel
    slots: dict[SlotKey, Slot] = {}
    head_of_op: dict[int, SlotKey] = {}
    members: list[tuple[SlotKey, int]] = []
    seen: dict[tuple[int, str, str, bool], int] = {}
    anchors: dict[tuple[int, bool], int] = {}
    order: dict[int, int] = {}
    for i, row in enumerate(rows.tolist()):
        name = names[ev.name[row]]
        category = categories.get(name, "other")
        o = int(op[i])
        op_name = names[ev.name[o]] if o >= 0 else ""
        backward = bool(node[i] >= 0) or is_backward(op_name)
        step = int(links.step[row])
        occurrence = seen.get((step, name, op_name, backward), 0)
        seen[(step, name, op_name, backward)] = occurrence + 1
        key: SlotKey = (name, op_name, backward, occurrence)
        slot = slots.get(key)
        if slot is None:
            node_name = names[ev.name[node[i]]].removeprefix(_EVALUATE) if node[i] >= 0 else ""
            label = node_name if is_backward(node_name) else op_name
            scope_label = names[ev.name[scope[i]]] if scope[i] >= 0 else ""
            slot = slots[key] = Slot(key, category, label, scope=scope_label, order=order.get(step, 0))
        order[step] = order.get(step, 0) + 1
        slot.us += float(ev.dur_ns[row]) / 1000.0
        slot.positions.append(anchors.get((step, backward), 0))
        slot.segments.append(int(barrier[i]) - first_barrier.setdefault(step, int(barrier[i])))
        if o >= 0:
            slot.numels |= _numels(trace, o, numel_cache)
        if category in ANCHORS:
            anchors[(step, backward)] = anchors.get((step, backward), 0) + 1
        elif is_fused_kernel(name, category):
            slot.head = key
            head_of_op.setdefault(o, key)
        elif owner[i] >= 0:
            members.append((key, int(owner[i])))
    for key, owner_op in members:
        head = head_of_op.get(owner_op)
        if head is not None and slots[key].head is None:
            slots[key].head = head
    has_shapes = any(slot.numels for slot in slots.values())
    segments = max((slot.segment for slot in slots.values()), default=0)
    return Slots(slots, max(window.n_steps, 1), has_shapes, segments)


def _fused_ops(trace: Trace, rows: np.ndarray, op: np.ndarray, categories: dict[str, str]) -> np.ndarray:
    """A mask over events: the ops that launched a fused kernel, but for a compiled region's call: a fused
    kernel whose op is the region (a CUDA-graph replay keeps only the op around its graph launch) is a unit of
    its own; the region's other kernels (reduce-overhead's copy of its inputs into the graph) are not part of it."""
    ev = trace.events
    marked = np.zeros(len(ev), dtype=bool)
    for i, row in enumerate(rows.tolist()):
        name = ev.names[ev.name[row]]
        if op[i] >= 0 and is_fused_kernel(name, categories.get(name, "other")):
            marked[op[i]] = not REGION_CALL.match(ev.names[ev.name[op[i]]])
    return marked


def _owners(trace: Trace, op: np.ndarray, head_op: np.ndarray) -> np.ndarray:
    """Per kernel: its launching op or nearest ancestor op that launched a fused kernel, else -1."""
    out = np.full(op.size, -1, dtype=np.int64)
    has = op >= 0
    self_hit = has & head_op[np.maximum(op, 0)]
    out[self_hit] = op[self_hit]
    rest = has & ~self_hit
    out[rest] = nearest_marked(trace.links.parent, head_op, op[rest])
    return out


def _numels(trace: Trace, op: int, cache: dict[int, set[int]]) -> set[int]:
    """Element counts (> 1) of the op's recorded input shapes (`Input Dims`); empty when none were recorded."""
    if op in cache:
        return cache[op]
    raw = trace.events.input_dims[op]
    out: set[int] = set()
    if raw is not None:
        try:
            shapes = json.loads(raw)
        except (ValueError, TypeError):
            shapes = []
        for shape in shapes if isinstance(shapes, list) else []:
            if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
                n = int(np.prod(shape, dtype=np.int64))
                if n > 1:
                    out.add(n)
    cache[op] = out
    return out


def credit(baseline: Slots, variant: Slots) -> Credit:
    """Place every non-anchor baseline slot: kept, credited to one fused unit of the variant, or not placed."""
    b_slots = [s for s in baseline.slots.values() if s.category not in ANCHORS]
    v_slots = [s for s in variant.slots.values() if s.category not in ANCHORS]
    base_place, var_place = _anchor_places(baseline, variant)
    units = {s.key: Unit(s, [], place=var_place(s)) for s in v_slots if s.head == s.key}
    plain = []
    for s in v_slots:
        if s.head is not None and s.head != s.key and s.head in units:
            units[s.head].members.append(s)
        elif s.head is None:
            plain.append(s)
    kept, unmatched, left = _keep(b_slots, plain, base_place, var_place)
    shapes = baseline.has_shapes and variant.has_shapes
    syncs = baseline.segments > 0 and baseline.segments == variant.segments  # the same syncs cut both steps
    owner: dict[SlotKey, Unit] = {}
    for slot in left:
        unit, tied = _place(slot, base_place(slot), list(units.values()), shapes, syncs)
        if unit is not None:
            owner[slot.key] = unit
        if unit is not None and tied:
            unit.by_tie.append(slot)
            for loser in tied:
                loser.lost_to[unit.head.name] = loser.lost_to.get(unit.head.name, 0.0) + slot.us
    _by_neighbours(baseline, owner, {slot.key for slot in left})
    for slot in left:
        if slot.key in owner:
            owner[slot.key].credited.append(slot)
    unplaced = [slot for slot in left if slot.key not in owner]
    return Credit(list(units.values()), kept, unplaced, unmatched)


def _anchor_places(baseline: Slots, variant: Slots) -> tuple[Callable[[Slot], float], Callable[[Slot], float]]:
    """Positions counted in aligned anchors only, for baseline and variant slots: the anchors of each direction
    are aligned by kernel name (longest common subsequence: Inductor moves a GEMM or two, an epilogue kernel
    absorbs some), and a slot's place is the number of aligned anchors before it (identity when the sequences
    are too long to align)."""
    counts: dict[tuple[int, bool, int], float] = {}
    for backward in (False, True):
        b = _anchor_names(baseline, backward)
        v = _anchor_names(variant, backward)
        pairs = _lcs(b, v) if len(b) * len(v) <= 1_000_000 else [(i, i) for i in range(min(len(b), len(v)))]
        for side, names, aligned in ((0, b, {bi for bi, _ in pairs}), (1, v, {vi for _, vi in pairs})):
            total = 0
            counts[(side, backward, 0)] = 0.0
            for k in range(len(names)):
                total += k in aligned
                counts[(side, backward, k + 1)] = float(total)

    def base(slot: Slot) -> float:
        return counts.get((0, slot.backward, round(slot.position)), slot.position)

    def var(slot: Slot) -> float:
        return counts.get((1, slot.backward, round(slot.position)), slot.position)

    return base, var


def _anchor_names(slots: Slots, backward: bool) -> list[str]:
    anchors = [s for s in slots.slots.values() if s.category in ANCHORS and s.backward == backward]
    return [s.name for s in sorted(anchors, key=lambda s: (s.position, s.order))]


def _lcs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of `a` and `b`."""
    n, m = len(a), len(b)
    table = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i, j] = table[i + 1, j + 1] + 1 if a[i] == b[j] else max(table[i + 1, j], table[i, j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1, j] >= table[i, j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _by_neighbours(baseline: Slots, owner: dict[SlotKey, Unit], todo: set[SlotKey]) -> None:
    """Credit an unplaced baseline slot by its place: a slot without recorded shapes (a `cat` of a tensor
    list) goes with the nearest credited slot before it between the same anchors (else the one after); a slot
    whose sizes match no unit goes with its neighbours when the nearest credited slots before and after it
    between the same anchors went to one unit (an RMSNorm's `eps` add and rsqrt between its pow/mean and mul)."""
    for backward in (False, True):
        ordered = sorted(
            (s for s in baseline.slots.values() if s.backward == backward and s.category not in ANCHORS),
            key=lambda s: (s.position, s.order),
        )
        for i, slot in enumerate(ordered):
            if slot.key in owner or slot.key not in todo:
                continue
            near = [s for s in ordered if s.position == slot.position and s.key in owner]
            before = next((s for s in reversed(ordered[:i]) if s.key in owner), None)
            after = next((s for s in ordered[i + 1 :] if s.key in owner), None)
            before = before if before in near else None
            after = after if after in near else None
            if not slot.numels:
                chosen = before or after
                if chosen is not None:
                    owner[slot.key] = owner[chosen.key]
            elif before is not None and after is not None and owner[before.key] is owner[after.key]:
                owner[slot.key] = owner[before.key]


def _keep(
    baseline: list[Slot], plain: list[Slot], base_place: Callable[[Slot], float], var_place: Callable[[Slot], float]
) -> tuple[list[tuple[Slot, Slot]], list[Slot], list[Slot]]:
    """Pair each plain variant slot with the nearest unpaired baseline slot of the same kernel, op and
    direction, else of the same op and direction within one anchor. Returns (pairs, unpaired variant slots,
    unpaired baseline slots)."""
    free = list(baseline)
    pairs: list[tuple[Slot, Slot]] = []
    unmatched: list[Slot] = []
    for exact in (True, False):
        todo = plain if exact else unmatched
        unmatched = []
        for v in todo:
            same = [
                b
                for b in free
                if b.backward == v.backward
                and b.key[1] == v.key[1]
                and (b.name == v.name if exact else abs(base_place(b) - var_place(v)) <= 1)
            ]
            if not same:
                unmatched.append(v)
                continue
            best = min(same, key=lambda b: abs(base_place(b) - var_place(v)))
            free.remove(best)
            pairs.append((best, v))
    return pairs, unmatched, free


def _place(
    slot: Slot, position: float, units: list[Unit], shapes: bool, syncs: bool = False
) -> tuple[Unit | None, list[Unit]]:
    """The unit a replaced baseline slot is credited to (rule 2 of the module docstring), or None, and the units
    that ranked as well and lost the tie to it (it runs first); with `syncs`, only a unit between the same host
    syncs."""
    best: tuple[int, int, float, int, int] | None = None
    chosen = None
    ranked: list[tuple[tuple[int, int, float, int, int], Unit]] = []
    for index, unit in enumerate(units):
        if unit.head.backward != slot.backward:
            continue
        if syncs and unit.head.segment != slot.segment:
            continue  # a host sync between them: torch.compile breaks the graph there, nothing fuses across
        distance = abs(unit.place - position)
        if unit.head.scope and slot.scope and unit.head.scope != slot.scope:
            continue
        inexact, shared = 0, 0
        if shapes and slot.numels and unit.numels:
            if not _shared_size(slot.numels, unit.numels) or distance > MAX_ANCHORS:
                continue
            shared = len(slot.numels & unit.numels)
            inexact = 0 if shared else 1
        elif shapes and not slot.numels:
            continue  # no recorded shapes: placed by its neighbours (`_by_neighbours`)
        elif slot.numels and not unit.numels and REGION_CALL.match(unit.head.key[1]):  # a graph replay's region
            if not 0 <= unit.place - position <= SIZELESS_ANCHORS:
                continue  # a kernel before the anchor the op follows cannot compute it: only at or after it
            inexact = 1
        elif distance > 0.5:
            continue
        rank = (inexact, -shared, distance, 0 if unit.head.scope and unit.head.scope == slot.scope else 1, index)
        ranked.append((rank, unit))
        if best is None or rank < best:
            best, chosen = rank, unit
    tied = [unit for rank, unit in ranked if best is not None and rank[:-1] == best[:-1] and unit is not chosen]
    return chosen, tied


def _shared_size(a: set[int], b: set[int]) -> bool:
    """Whether some element counts of the two sets are equal or differ by a factor of 2-4 (a slice, a chunk
    or one of q/k/v of a packed buffer)."""
    return any(max(x, y) % min(x, y) == 0 and max(x, y) // min(x, y) <= 4 for x in a for y in b)
