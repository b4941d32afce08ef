"""Where a dispatch-bound step's run-to-run spread comes from (a probe for issues #27/#28; H200 only).

Times the eager GeGLU MLP at a small token count (the host dispatches it; the GPU waits) in blocks of calls,
cycling through conditions so that drift over time and the condition's effect can be told apart:

* ``free``: as `workloads.record` runs today (no affinity, the garbage collector on);
* ``pinned``: the process pinned to one CPU (``os.sched_setaffinity``);
* ``pinned_nogc``: pinned, and ``gc`` disabled during the block.

Each block also times a fixed pure-Python loop (no torch) and reads the steal and iowait columns of
``/proc/stat``, so a slow block can be told apart as the host (steal, the pure loop slows too) or the program.

    python -m workloads.host_noise --out "$OUT/noise_r1.json"
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time

import torch

from .models import GeGLUMLP


def _proc_stat() -> dict[str, int]:
    with open("/proc/stat") as handle:
        fields = handle.readline().split()[1:]
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    return {n: int(v) for n, v in zip(names, fields, strict=False)}


def _pure_loop_us() -> float:
    t0 = time.perf_counter()
    acc = 0
    for i in range(20000):
        acc += i * 3 & 7
    return (time.perf_counter() - t0) * 1e6


def _block(fn, device: torch.device, calls: int) -> dict:
    host_us, event_us, pure_us = [], [], []
    before = _proc_stat()
    t_start = time.perf_counter()
    for i in range(calls):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        start.record()
        fn()
        end.record()
        host_us.append((time.perf_counter() - t0) * 1e6)
        end.synchronize()
        event_us.append(start.elapsed_time(end) * 1e3)
        if i % 50 == 0:
            pure_us.append(_pure_loop_us())
    wall_s = time.perf_counter() - t_start
    after = _proc_stat()
    delta = {k: after[k] - before[k] for k in before}
    total = max(1, sum(delta.values()))
    return {
        "event_median_us": statistics.median(event_us),
        "event_p10_us": sorted(event_us)[len(event_us) // 10],
        "event_p90_us": sorted(event_us)[9 * len(event_us) // 10],
        "host_median_us": statistics.median(host_us),
        "pure_loop_median_us": statistics.median(pure_us),
        "steal_pct": 100.0 * delta["steal"] / total,
        "iowait_pct": 100.0 * delta["iowait"] / total,
        "wall_s": wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--cpu", type=int, default=3, help="the CPU that the pinned conditions use")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    torch.manual_seed(0)
    mlp = GeGLUMLP(2048, 16384).to(device=device, dtype=torch.bfloat16)
    x = torch.randn(args.tokens, 2048, device=device, dtype=torch.bfloat16)
    all_cpus = os.sched_getaffinity(0)

    def fn() -> None:
        with torch.no_grad():
            mlp(x)

    for _ in range(50):
        fn()
    rows = []
    for cycle in range(args.cycles):
        for condition in ("free", "pinned", "pinned_nogc"):
            os.sched_setaffinity(0, {args.cpu} if condition != "free" else all_cpus)
            if condition == "pinned_nogc":
                gc.disable()
            row = _block(fn, device, args.calls)
            gc.enable()
            row.update(cycle=cycle, condition=condition)
            rows.append(row)
            print("%d %-12s event %7.1f (p10 %7.1f p90 %7.1f) host %7.1f pure %7.1f steal %4.1f%%" % (
                cycle, condition, row["event_median_us"], row["event_p10_us"], row["event_p90_us"],
                row["host_median_us"], row["pure_loop_median_us"], row["steal_pct"]), flush=True)
    os.sched_setaffinity(0, all_cpus)
    with open(args.out, "w") as handle:
        json.dump({"tokens": args.tokens, "cpus": sorted(all_cpus), "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
