"""Stdlib only: what each fused kernel of a variant replaced in its eager twin, per op, from the raw events
(independent of tracelens; docs/fusion.md, "compare" states the definition).

Each kernel is tied to its launch (runtime/driver call with the same correlation id) and through the launch to
the CPU events enclosing it on its thread (the innermost `cpu_op` is its op; any `*Backward*` or
`autograd::engine::evaluate_function` around it makes it backward). A step's kernels of one direction, in GPU
order, are cut into regions at GEMM/attention kernels; the two twins' cuts are paired by kernel name along a longest
common subsequence.
In a region, eager kernels whose (kernel, op) the variant still runs there are kept; the rest are credited to the
variant's fused kernel in the same region, else one or two regions away, whose launching op shares a tensor
size (element count of an `Input Dims` entry, equal or within a factor of 4) with the eager op and, where both
steps have as many host syncs between their kernels (`.item()`, a stream/device/event/context sync, a blocking
`cudaMemcpy` on the launching thread), that has as many of them before its launch (an equal size beats a factor,
more equal sizes beat fewer, then the nearer region, then the fused kernel that runs first in the step). Then, in
order, by its neighbours between the same eager anchors: an eager op without recorded sizes goes with the nearest
credited eager kernel before it, else the one after; a sized one that matched no fused kernel goes where the
nearest credited ones before and after it both went. A fused kernel's time includes the other kernels
its op launched, unless that op is a compiled region (a CUDA-graph replay's kernels keep only the region around
the graph launch): there each fused kernel stands alone, and, having no sizes, takes an eager op that shares a size
with no fused kernel when it runs in the op's region or the next one.

    python tests/fusion_credit_stdlib.py EAGER VARIANT   # prints the credit per fused kernel
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from tests.independent.nostep_autotune import inferred_steps, loop_marker_steps

SYNC_CALL = re.compile(r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize|^(cuda|hip)Memcpy(2D)?$|^cuMemcpy")
SYNC_OP = {"aten::item", "aten::_local_scalar_dense"}
ANCHOR = re.compile(r"gemm|nvjet|cutlass|xmma|cublas|splitkreduce|cudnn|flash|fmha|sdpa|attention", re.IGNORECASE)
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def fused(name: str) -> bool:
    return name.startswith("triton_") or (bool(IDENTIFIER.match(name)) and not ANCHOR.search(name))


def _numels(args: dict[str, Any]) -> set[int]:
    out = set()
    for shape in args.get("Input Dims") or []:
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
            n = math.prod(shape)
            if n > 1:
                out.add(n)
    return out


def step_kernels(path: Path, numbers: list[int] | None = None) -> list[dict[bool, list[dict[str, Any]]]]:
    """Per ProfilerStep (those numbered `numbers`, default all), per direction (True = backward), its kernels
    in GPU order: name, dur, op, op_id, owner (the op that launched a fused kernel above it, if any), numels,
    anchor."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    )
    if not steps:  # no ProfilerStep: a training loop's marker periods, else outermost compiled calls (1, 2, ...)
        spans = loop_marker_steps(events) or inferred_steps(events)
        steps = [(start / 1000, end / 1000, i + 1) for i, (start, end) in enumerate(spans)]
    if numbers is not None:
        steps = [s for s in steps if s[2] in numbers]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    cpu: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            cpu[(e["pid"], e["tid"])].append(e)
    stacks = _stacks(cpu, list(launches.values()))
    syncs: dict[tuple[Any, Any], list[float]] = defaultdict(list)  # per thread, the start of each host sync
    for e in events:
        is_call = e.get("cat") in ("cuda_runtime", "cuda_driver") and SYNC_CALL.match(str(e.get("name", "")))
        if e.get("ph") == "X" and (is_call or (e.get("cat") == "cpu_op" and e.get("name") in SYNC_OP)):
            syncs[(e["pid"], e["tid"])].append(float(e["ts"]))
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    fused_ops = set()
    for k in kernels:
        launch = launches.get(k["args"].get("correlation"))
        if launch is not None and fused(k["name"]):
            ops = [a for a in stacks[id(launch)] if a.get("cat") == "cpu_op"]
            if ops:
                fused_ops.add(id(ops[-1]))
    out: list[dict[bool, list[dict[str, Any]]]] = [{False: [], True: []} for _ in steps]
    for k in kernels:
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            continue
        index = next((i for i, (s, e, _) in enumerate(steps) if s <= launch["ts"] <= e), None)
        if index is None:
            continue
        stack = stacks[id(launch)]
        ops = [a for a in stack if a.get("cat") == "cpu_op"]
        op = ops[-1] if ops else None
        backward = any("Backward" in a["name"] or a["name"].startswith("autograd::engine") for a in stack)
        owner = next((id(a) for a in reversed(ops) if id(a) in fused_ops), None)
        out[index][backward].append(
            {
                "name": k["name"],
                "dur": float(k["dur"]),
                "op": op["name"] if op else "",
                "op_id": id(op) if op else None,
                "owner": owner,
                "numels": _numels(op["args"]) if op else set(),
                "anchor": bool(ANCHOR.search(k["name"])) and not fused(k["name"]),
                "scopes": [a["name"] for a in stack if a.get("cat") == "user_annotation"],
                "syncs": sum(t < float(launch["ts"]) for t in syncs[(launch["pid"], launch["tid"])]),
            }
        )
    for step in out:  # host syncs before each kernel, counted from the step's first kernel
        first = min((k["syncs"] for d in (False, True) for k in step[d]), default=0)
        for d in (False, True):
            for k in step[d]:
                k["syncs"] -= first
    return out


def _stacks(cpu: dict[tuple[Any, Any], list[dict[str, Any]]], launches: list[dict[str, Any]]) -> dict[int, list]:
    """For every launch, the CPU events of its thread that enclose it, outermost first."""
    result: dict[int, list[dict[str, Any]]] = {}
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for launch in launches:
        by_thread[(launch["pid"], launch["tid"])].append(launch)
    for thread, items in by_thread.items():
        spans = sorted(cpu.get(thread, []), key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        i = 0
        for launch in sorted(items, key=lambda e: e["ts"]):
            while i < len(spans) and spans[i]["ts"] <= launch["ts"]:
                while stack and stack[-1]["ts"] + stack[-1]["dur"] < spans[i]["ts"]:
                    stack.pop()
                stack.append(spans[i])
                i += 1
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < launch["ts"]:
                stack.pop()
            result[id(launch)] = [s for s in stack if s["ts"] + s["dur"] >= launch["ts"]]
    return result


def _regions(kernels: list[dict[str, Any]], cuts: list[int]) -> list[int]:
    """Region of each kernel: how many of the paired anchors (positions in `cuts`) came before it."""
    out, region, anchor, paired = [], 0, 0, set(cuts)
    for k in kernels:
        if k["anchor"]:
            if anchor in paired:
                region += 1
            anchor += 1
        out.append(region)
    return out


def _pair_anchors(eager: list[str], variant: list[str]) -> tuple[list[int], list[int]]:
    """The anchors paired by name along a longest common subsequence of the two name lists: walking both from the
    start, equal names pair; else the eager side moves on where that keeps as long a common subsequence as moving
    the variant side, else the variant side."""
    n, m = len(eager), len(variant)
    longest = [[0] * (m + 1) for _ in range(n + 1)]  # longest[i][j]: of eager[i:] and variant[j:]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if eager[i] == variant[j]:
                longest[i][j] = longest[i + 1][j + 1] + 1
            else:
                longest[i][j] = max(longest[i + 1][j], longest[i][j + 1])
    e_cuts, v_cuts, i, j = [], [], 0, 0
    while i < n and j < m:
        if eager[i] == variant[j]:
            e_cuts.append(i)
            v_cuts.append(j)
            i, j = i + 1, j + 1
        elif longest[i + 1][j] >= longest[i][j + 1]:
            i += 1
        else:
            j += 1
    return e_cuts, v_cuts


def _shares(a: set[int], b: set[int]) -> int:
    """2 for an equal element count, 1 for one within a factor of 4, 0 for none."""
    if a & b:
        return 2
    return 1 if any(max(x, y) % min(x, y) == 0 and max(x, y) // min(x, y) <= 4 for x in a for y in b) else 0


REGION_CALL = re.compile(r"Torch-Compiled Region: \d+/\d+")


def _head_key(k: dict[str, Any]) -> Any:
    """A fused kernel's unit: its op, which also owns the other kernels that op launched; where the op is a
    compiled region (a CUDA-graph replay keeps only the op around its graph launch) each fused kernel is a unit
    of its own, and the region's other kernels (reduce-overhead's input copy) belong to none."""
    return (k["op_id"], k["name"]) if REGION_CALL.fullmatch(k["op"]) else k["op_id"]


def credit_step(eager: list[dict[str, Any]], variant: list[dict[str, Any]]) -> dict[str, Any]:
    """One step, one direction: eager µs credited per fused kernel name, fused µs per name, kept and left."""
    e_cuts, v_cuts = _pair_anchors(
        [k["name"] for k in eager if k["anchor"]], [k["name"] for k in variant if k["anchor"]]
    )
    e_region, v_region = _regions(eager, e_cuts), _regions(variant, v_cuts)
    e_syncs, v_syncs = (max((k["syncs"] for k in ks), default=0) for ks in (eager, variant))
    by_syncs = e_syncs > 0 and e_syncs == v_syncs  # the same syncs cut both steps: nothing is credited across one
    heads: dict[Any, tuple[str, int, set[int]]] = {}  # head key (`_head_key`) → (fused kernel name, region, sizes)
    head_syncs: dict[str, int] = {}
    fused_us: Counter[str] = Counter()
    for k, r in zip(variant, v_region, strict=True):
        if fused(k["name"]) and not k["anchor"]:
            heads.setdefault(_head_key(k), (k["name"], r, set()))
            head_syncs.setdefault(k["name"], k["syncs"])
            heads[_head_key(k)][2].update(k["numels"])
    plain: list[tuple[str, str, int]] = []  # the variant's other kernels: (name, op, region), in GPU order
    for k, r in zip(variant, v_region, strict=True):
        if k["anchor"]:
            continue
        own = _head_key(k) if fused(k["name"]) else k["op_id"]
        owner = own if own in heads else k["owner"]
        if owner in heads:
            fused_us[heads[owner][0]] += k["dur"]
            heads[owner][2].update(k["numels"])
        else:
            plain.append((k["name"], k["op"], r))
    candidates = []  # the eager non-anchor kernels: (kernel, region, eager anchors before it)
    anchors_before = 0
    for k, r in zip(eager, e_region, strict=True):
        if k["anchor"]:
            anchors_before += 1
        else:
            candidates.append((k, r, anchors_before))
    free = list(range(len(candidates)))
    unmatched = []
    for name, op, r in plain:  # kept: the same kernel and op, nearest region (the earliest on a tie)
        same = [i for i in free if candidates[i][0]["name"] == name and candidates[i][0]["op"] == op]
        if same:
            free.remove(min(same, key=lambda i: abs(candidates[i][1] - r)))
        else:
            unmatched.append((op, r))
    for op, r in unmatched:  # else the same op (another kernel: a vectorized copy) within one region
        same = [i for i in free if candidates[i][0]["op"] == op and abs(candidates[i][1] - r) <= 1]
        if same:
            free.remove(min(same, key=lambda i: abs(candidates[i][1] - r)))
    replaced = [candidates[i] for i in free]
    credited: Counter[str] = Counter()
    left = 0.0
    placed: list[tuple[dict[str, Any], int, str | None]] = []  # (kernel, eager anchors before it, choice)
    tied: Counter[str] = Counter()  # per fused kernel: eager µs it won by the tie rule
    for k, r, before_it in replaced:
        choice = None
        if k["numels"]:
            ranked = [
                (-_shares(k["numels"], sizes), -len(k["numels"] & sizes), abs(region - r), first, name)
                for first, (name, region, sizes) in enumerate(heads.values())
                if abs(region - r) <= 2
                and _shares(k["numels"], sizes)
                and (not by_syncs or head_syncs[name] == k["syncs"])
            ]
            if not ranked:  # a graph replay's fused kernel (its op the compiled region, no sizes): at or after
                ranked = [
                    (0, 0, region - r, first, name)
                    for first, (key, (name, region, sizes)) in enumerate(heads.items())
                    if isinstance(key, tuple)
                    and not sizes
                    and 0 <= region - r <= 1
                    and (not by_syncs or head_syncs[name] == k["syncs"])
                ]
            ranked.sort()
            choice = ranked[0][-1] if ranked else None
            if len(ranked) > 1 and ranked[1][:3] == ranked[0][:3]:  # another fused kernel ranked as well
                tied[choice] += k["dur"]  # type: ignore[index]
        placed.append((k, before_it, choice))
    # by its neighbours, in order: a kernel without sizes goes with the nearest credited kernel before it between
    # the same anchors, else the one after; a sized one that matched no fused kernel, where those two went to one
    choices = [choice for _, _, choice in placed]
    for i, (k, before_it, choice) in enumerate(placed):
        if choice is not None:
            continue
        same = [j for j in range(len(placed)) if placed[j][1] == before_it and choices[j] is not None]
        before = next((choices[j] for j in reversed(same) if j < i), None)
        after = next((choices[j] for j in same if j > i), None)
        if not k["numels"]:
            choices[i] = before or after
        elif before is not None and before == after:
            choices[i] = before
    for (k, _, _), choice in zip(placed, choices, strict=True):
        if choice is None:
            left += k["dur"]
        else:
            credited[choice] += k["dur"]
    return {"credited": credited, "fused": fused_us, "left": left, "tied": tied}


def credits(eager_path: Path, variant_path: Path, eager_steps: list[int], variant_steps: list[int]) -> dict:
    """Per (fused kernel name, backward): [eager µs/step credited, fused µs/step, of the credit µs/step won by a
    tie]."""
    eager = step_kernels(eager_path, eager_steps)
    variant = step_kernels(variant_path, variant_steps)
    pairs = list(zip(eager, variant, strict=False))
    rows: dict[tuple[str, bool], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for e_step, v_step in pairs:
        for backward in (False, True):
            result = credit_step(e_step[backward], v_step[backward])
            for name, us in result["credited"].items():
                rows[(name, backward)][0] += us / len(pairs)
            for name, us in result["fused"].items():
                rows[(name, backward)][1] += us / len(pairs)
            for name, us in result["tied"].items():
                rows[(name, backward)][2] += us / len(pairs)
    return dict(rows)


def scope_us_per_step(path: Path, steps: list[int], scope: str) -> float:
    """Forward non-anchor kernel µs per step launched inside a `record_function` range named `scope`."""
    per_step = step_kernels(path, steps)
    total = sum(k["dur"] for step in per_step for k in step[False] if not k["anchor"] and scope in k["scopes"])
    return total / max(len(per_step), 1)


def non_anchor_us_per_step(path: Path, steps: list[int]) -> float:
    """Kernel µs per step of everything that is not a GEMM or attention kernel."""
    per_step = step_kernels(path, steps)
    total = sum(k["dur"] for step in per_step for d in (False, True) for k in step[d] if not k["anchor"])
    return total / max(len(per_step), 1)


if __name__ == "__main__":
    for (name, backward), (credit, us, _) in sorted(credits(Path(sys.argv[1]), Path(sys.argv[2]), None, None).items()):
        direction = "backward" if backward else "forward"
        print(f"{name[:60]:60} {direction:8} {credit:9.1f} {us:9.1f} {credit - us:9.1f}")
