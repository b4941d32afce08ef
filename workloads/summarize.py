"""Stdlib-only summary of recorded traces (no torch, no tracelens deps).

    python -m workloads.summarize traces/h200 [traces/h200/extra] [--json OUT]

Per trace: ProfilerStep windows; per step the GPU kernels launched from that
step (kernel -> runtime launch by ``correlation``), their names and summed
durations; runtime API calls per step (e.g. cudaOccupancy* queries); a few
aten op counts (aten::t, aten::linear, aten::mm ...); and kernels whose launch
is not in the trace (e.g. at the window's edges).  Each kernel's launching op
is the innermost CPU op (``cat == "cpu_op"``) on the launch's thread whose
interval contains the runtime/driver launch call.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import sys

RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
ATEN_OF_INTEREST = ("aten::t", "aten::linear", "aten::mm", "aten::matmul", "aten::addmm", "aten::gelu", "aten::mul",
                    "aten::_scaled_dot_product_flash_attention", "aten::_softmax", "aten::bmm", "aten::copy_")


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def summarize(data: dict) -> dict:
    evs = [e for e in data.get("traceEvents", []) if e.get("ph") == "X"]
    steps = sorted((e for e in evs if str(e.get("name", "")).startswith("ProfilerStep#")
                    and e.get("cat") != "gpu_user_annotation"), key=lambda e: e["ts"])
    runtime = [e for e in evs if e.get("cat") in RUNTIME_CATS]
    gpu = [e for e in evs if e.get("cat") in GPU_CATS]
    cpu_ops = [e for e in evs if e.get("cat") == "cpu_op"]
    rt_by_corr = {}
    for e in runtime:
        c = (e.get("args") or {}).get("correlation")
        if c is not None:
            rt_by_corr[c] = e

    ops_by_tid = collections.defaultdict(list)
    for e in cpu_ops:
        ops_by_tid[e.get("tid")].append(e)

    def launching_op(launch):
        """Innermost cpu_op around the runtime/driver call (None if none)."""
        t0, t1 = launch["ts"], launch["ts"] + launch.get("dur", 0)
        best = None
        for o in ops_by_tid.get(launch.get("tid"), ()):
            if o["ts"] <= t0 and o["ts"] + o["dur"] >= t1 and (
                    best is None or (o["ts"], -o["dur"]) > (best["ts"], -best["dur"])):
                best = o
        return best["name"] if best else None

    def step_of(ts):
        for i, s in enumerate(steps):
            if s["ts"] <= ts <= s["ts"] + s["dur"]:
                return i
        return None

    per_step = [{"name": s["name"], "cpu_dur_us": s["dur"], "kernels": [], "gpu": [], "runtime": collections.Counter(),
                 "aten": collections.Counter()} for s in steps]
    for e in runtime:
        i = step_of(e["ts"])
        if i is not None:
            per_step[i]["runtime"][e["name"]] += 1
    for e in cpu_ops:
        if e["name"] in ATEN_OF_INTEREST:
            i = step_of(e["ts"])
            if i is not None:
                per_step[i]["aten"][e["name"]] += 1
    orphans, outside = [], []
    for k in gpu:
        c = (k.get("args") or {}).get("correlation")
        launch = rt_by_corr.get(c)
        if launch is None:
            orphans.append(k)
            continue
        i = step_of(launch["ts"])
        if i is None:
            outside.append(k)
            continue
        per_step[i]["gpu"].append(k)
        k = dict(k, launch_op=launching_op(launch), launch_call=launch["name"])
        if k.get("cat") == "kernel":
            per_step[i]["kernels"].append(k)
        else:
            per_step[i].setdefault("other_gpu", []).append(k)
    t_first = min((e["ts"] for e in evs), default=0)
    out_steps = []
    for s in per_step:
        ks = s["kernels"]
        span = (max(k["ts"] + k["dur"] for k in ks) - min(k["ts"] for k in ks)) if ks else 0.0
        out_steps.append({
            "name": s["name"],
            "cpu_dur_us": s["cpu_dur_us"],
            "n_kernels": len(ks),
            "kernel_names": [k["name"] for k in sorted(ks, key=lambda k: k["ts"])],
            "kernel_us": [k["dur"] for k in sorted(ks, key=lambda k: k["ts"])],
            "kernel_ops": [k["launch_op"] for k in sorted(ks, key=lambda k: k["ts"])],
            "kernel_launch_calls": [k["launch_call"] for k in sorted(ks, key=lambda k: k["ts"])],
            "other_gpu_ops": [(k["name"], k["launch_op"]) for k in sorted(s.get("other_gpu", ()), key=lambda k: k["ts"])],
            "gpu_kernel_us": sum(k["dur"] for k in ks),
            "gpu_span_us": span,
            "n_memcpy_memset": len(s["gpu"]) - len(ks),
            "runtime": dict(s["runtime"]),
            "aten": dict(s["aten"]),
        })
    return {
        "meta": data.get("tracelens_run"),
        "n_steps": len(steps),
        "steps": out_steps,
        "orphan_gpu_events": [{"name": k["name"], "cat": k.get("cat"), "ts_rel_us": k["ts"] - t_first,
                               "dur_us": k["dur"]} for k in orphans],
        "gpu_events_launched_outside_steps": [{"name": k["name"], "dur_us": k["dur"]} for k in outside],
    }


def short(name: str, n: int = 90) -> str:
    return name if len(name) <= n else name[: n - 3] + "..."


def report(path: str, s: dict) -> str:
    lines = ["== %s  (%d steps)" % (path, s["n_steps"])]
    st = s["steps"]
    if not st:
        return "\n".join(lines + ["  no ProfilerStep events"])
    lines.append("  kernels/step: %s" % [x["n_kernels"] for x in st])
    lines.append("  GPU kernel us/step: %s" % ["%.1f" % x["gpu_kernel_us"] for x in st])
    lines.append("  GPU span us/step:   %s" % ["%.1f" % x["gpu_span_us"] for x in st])
    lines.append("  CPU step us:        %s" % ["%.1f" % x["cpu_dur_us"] for x in st])
    # per kernel name: count per step and mean duration over all steps
    agg = collections.defaultdict(list)
    for x in st:
        for n, d in zip(x["kernel_names"], x["kernel_us"]):
            agg[n].append(d)
    ops = {}
    for x in st:
        for n, o in zip(x["kernel_names"], x.get("kernel_ops", ())):
            ops.setdefault(n, collections.Counter())[o] += 1
    for n, ds in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
        by = ", ".join("%s" % o for o in sorted(ops.get(n, {}), key=str))
        lines.append("    %5.2f/step  mean %8.2f us  %s  [from %s]" % (len(ds) / len(st), sum(ds) / len(ds), short(n), by))
    rt = collections.Counter()
    for x in st:
        rt.update(x["runtime"])
    lines.append("  runtime calls/step: " + ", ".join("%s=%.2f" % (k, v / len(st)) for k, v in sorted(rt.items())))
    at = collections.Counter()
    for x in st:
        at.update(x["aten"])
    lines.append("  aten ops/step: " + ", ".join("%s=%.2f" % (k, v / len(st)) for k, v in sorted(at.items())))
    if s["orphan_gpu_events"]:
        lines.append("  GPU events with no launch in trace: %d: %s" % (
            len(s["orphan_gpu_events"]), [(short(o["name"], 50), round(o["ts_rel_us"])) for o in s["orphan_gpu_events"]]))
    if s["gpu_events_launched_outside_steps"]:
        lines.append("  GPU events launched outside ProfilerStep windows: %d" % len(s["gpu_events_launched_outside_steps"]))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = argv[i + 1]
        del argv[i: i + 2]
    paths = []
    for a in argv or ["."]:
        if os.path.isdir(a):
            paths += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".json.gz"))
        else:
            paths.append(a)
    allres = {}
    for p in paths:
        s = summarize(load(p))
        allres[p] = s
        print(report(p, s))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(allres, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
