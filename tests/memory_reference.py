"""Independent reference for the `memory` analysis: json/gzip and plain Python only (no tracelens, no numpy).

Reads the raw `[memory]` instant events and `ProfilerStep#N` events of a trace file and computes, per step and
device, the figures that `tracelens.analyses.memory` defines, with its own (naive) algorithms: a linear scan for
the level carried into a step, a dict of open allocations by address, and a sorted list of top-level ops per
thread for the allocating op.
"""

from __future__ import annotations

import bisect
import gzip
import json
from pathlib import Path
from typing import Any


def raw_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as handle:
        document = json.load(handle)
    return document["traceEvents"] if isinstance(document, dict) else document


def memory_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`[memory]` instant events in time order (file order among equal times)."""
    found = [e for e in events if e.get("ph") in ("i", "I") and e.get("name") == "[memory]"]
    return sorted(found, key=lambda e: e["ts"])  # sorted() is stable


def step_bounds(events: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """ProfilerStep number -> (start µs, end µs): the span of its CPU-side annotations (not the GPU-side copy)."""
    out: dict[int, tuple[float, float]] = {}
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and name.startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
            number = int(name.split("#")[1])
            start, end = out.get(number, (e["ts"], e["ts"] + e["dur"]))
            out[number] = (min(start, e["ts"]), max(end, e["ts"] + e["dur"]))
    return out


def device_of(event: dict[str, Any]) -> tuple[int, int]:
    return event["args"].get("Device Type", -1), event["args"].get("Device Id", -1)


def per_step(mem: list[dict[str, Any]], device: tuple[int, int], start: float, end: float) -> dict[str, Any]:
    """Peak allocated / reserved (with the level carried in), allocations, and those not freed by `end`."""
    mine = [e for e in mem if device_of(e) == device]
    carried_alloc = carried_res = None
    for e in mine:
        if e["ts"] < start:
            carried_alloc = e["args"].get("Total Allocated", carried_alloc)
            carried_res = e["args"].get("Total Reserved", carried_res)
    inside = [e for e in mine if start <= e["ts"] < end]
    peaks = {}
    for key, carried in (("Total Allocated", carried_alloc), ("Total Reserved", carried_res)):
        values = [e["args"][key] for e in inside if key in e["args"]]
        if carried is not None:
            values.append(carried)
        peaks[key] = max(values) if values else None
    allocs = [e for e in inside if e["args"]["Bytes"] > 0]
    # open allocations by address: an allocation is closed by the next event of its address if that is a free
    freed_at: dict[int, float] = {}
    last_alloc: dict[int, int] = {}
    for index, e in enumerate(mine):
        addr = e["args"].get("Addr")
        if addr is None:
            continue
        if addr in last_alloc and e["args"]["Bytes"] < 0:
            freed_at[last_alloc.pop(addr)] = e["ts"]
        elif e["args"]["Bytes"] > 0:
            last_alloc[addr] = index
        else:
            last_alloc.pop(addr, None)
    index_of = {id(e): i for i, e in enumerate(mine)}
    outliving = [e for e in allocs if freed_at.get(index_of[id(e)], float("inf")) >= end]
    return {
        "peak_allocated": peaks["Total Allocated"],
        "peak_reserved": peaks["Total Reserved"],
        "allocations": len(allocs),
        "allocated_bytes": sum(e["args"]["Bytes"] for e in allocs),
        "frees": sum(1 for e in inside if e["args"]["Bytes"] < 0),
        "outliving": len(outliving),
        "outliving_bytes": sum(e["args"]["Bytes"] for e in outliving),
    }


def top_level_ops(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[tuple[float, float, str]]]:
    """Per (pid, tid): the outermost CPU ops (cat cpu_op/Operator, not ProfilerStep), as sorted (start, end, name)."""
    ops: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    for e in events:
        name = e.get("name", "")
        cpu_op = e.get("ph") == "X" and str(e.get("cat", "")).lower() in ("cpu_op", "operator")
        if cpu_op and not name.startswith("ProfilerStep#"):
            ops.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], name))
    out = {}
    for thread, items in ops.items():
        items.sort(key=lambda item: (item[0], -item[1]))
        top: list[tuple[float, float, str]] = []
        for start, end, name in items:
            if top and start < top[-1][1]:
                continue  # inside the previous top-level op
            top.append((start, end, name))
        out[thread] = top
    return out


def op_bytes(
    events: list[dict[str, Any]], mem: list[dict[str, Any]], device: tuple[int, int], windows: list[tuple[float, float]]
) -> dict[str, int]:
    """Bytes allocated on `device` within `windows`, by the top-level op running on the allocating thread."""
    tops = top_level_ops(events)
    starts = {thread: [item[0] for item in items] for thread, items in tops.items()}
    out: dict[str, int] = {}
    for e in mem:
        if device_of(e) != device or e["args"]["Bytes"] <= 0:
            continue
        if not any(start <= e["ts"] < end for start, end in windows):
            continue
        thread = (e["pid"], e["tid"])
        name = "(no CPU op)"
        at = bisect.bisect_right(starts.get(thread, []), e["ts"]) - 1
        if at >= 0:
            start, end, op_name = tops[thread][at]
            if e["ts"] < end or e["ts"] == start:
                name = op_name
        out[name] = out.get(name, 0) + e["args"]["Bytes"]
    return out
