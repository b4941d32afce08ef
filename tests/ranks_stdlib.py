"""Per-rank figures of a tar of rank traces, computed from the raw JSON with the standard library only: the
independent side of the ranks tests (it shares no code with tracelens).

For each member trace: its rank and world size (`distributedInfo`), the median `ProfilerStep#N` duration
(µs), and the durations of its collective kernels (kernel names with "nccl") launched inside a profiler step
(a kernel counts in the step of the runtime call with the same correlation id), in launch order. Across
ranks: the k-th call of each collective is matched, the shortest duration is the transfer and each rank's
excess is its waiting (per step); a straggler waits less than half the median waiting, when the median
waiting is at least 10 % of the median collective time.

    python tests/ranks_stdlib.py RUN.tar.gz
"""

from __future__ import annotations

import json
import statistics
import sys
import tarfile
from typing import Any

RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "runtime")


def member_figures(trace: dict[str, Any]) -> dict[str, Any]:
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    intervals = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in steps]
    launches = {
        e["args"]["correlation"]: float(e["ts"])
        for e in events
        if e.get("cat") in RUNTIME_CATEGORIES and "correlation" in e.get("args", {})
    }

    def in_a_step(kernel: dict[str, Any]) -> bool:
        ts = launches.get(kernel.get("args", {}).get("correlation"))
        return ts is not None and any(start <= ts < end for start, end in intervals)

    kernels = sorted((e for e in events if e.get("cat") == "kernel" and in_a_step(e)), key=lambda e: float(e["ts"]))
    collectives = [(e["name"], float(e["dur"])) for e in kernels if "nccl" in e["name"].lower()]
    info = trace.get("distributedInfo", {})
    return {
        "rank": info.get("rank"),
        "world_size": info.get("world_size"),
        "steps": len(steps),
        "step_us": statistics.median(float(e["dur"]) for e in steps),
        "collective_us": sum(d for _, d in collectives) / len(steps),
        "collectives": collectives,
    }


def run_figures(archive: str) -> dict[int, dict[str, Any]]:
    """Figures per rank, with `waiting_us` (per step) and `straggler` added."""
    ranks: dict[int, dict[str, Any]] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json"):
                source = tar.extractfile(member)
                assert source is not None
                figures = member_figures(json.load(source))
                figures["file"] = member.name.rsplit("/", 1)[-1]
                ranks[figures["rank"]] = figures
    by_name = {
        rank: {name: [d for n, d in f["collectives"] if n == name] for name, _ in f["collectives"]}
        for rank, f in ranks.items()
    }
    common = set.intersection(*(set(groups) for groups in by_name.values()))
    for rank, f in ranks.items():
        wait = 0.0
        for name in common:
            k = min(len(groups[name]) for groups in by_name.values())
            for call in range(k):
                fastest = min(groups[name][call] for groups in by_name.values())
                wait += by_name[rank][name][call] - fastest
        f["waiting_us"] = wait / f["steps"]
    median_wait = statistics.median(f["waiting_us"] for f in ranks.values())
    median_collective = statistics.median(f["collective_us"] for f in ranks.values())
    for f in ranks.values():
        f["straggler"] = median_wait >= 0.1 * median_collective and f["waiting_us"] < 0.5 * median_wait
    return ranks


if __name__ == "__main__":
    for rank, figures in sorted(run_figures(sys.argv[1]).items()):
        print(
            rank,
            figures["file"],
            f"step {figures['step_us']:.1f} us",
            f"waiting {figures['waiting_us']:.1f} us/step",
            "straggler" if figures["straggler"] else "",
        )
