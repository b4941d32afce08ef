"""Print the numbers behind traces/README.md's Findings (stdlib only).

    python -m workloads.findings traces/h200
"""

from __future__ import annotations

import collections
import json
import os
import sys

from .summarize import load, summarize

MAIN = ("eager_linear", "compiled_linear", "eager_mlp", "compiled_mlp", "liger_mlp")
STUDY_MS = {"eager_linear": 0.19, "compiled_linear": 0.19, "eager_mlp": 0.55, "compiled_mlp": 0.51, "liger_mlp": 0.53}


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def per_kernel(s):
    agg = collections.defaultdict(list)
    for st in s["steps"]:
        for n, d in zip(st["kernel_names"], st["kernel_us"]):
            agg[n].append(d)
    return agg


def short(n):
    if "GeluCUDAKernelImpl" in n:
        return "aten gelu (vectorized_elementwise)"
    if "BinaryFunctor" in n and "Mul" in n:
        return "aten mul (vectorized_elementwise)"
    if "BinaryFunctor" in n:
        return "aten binary elementwise"
    if "multi_tensor_apply" in n:
        return "foreach multi_tensor_apply"
    return n if len(n) <= 60 else n[:57] + "..."


def table_kernels(root, names):
    print("| trace | kernels/step | memset/step | GPU kernel µs/step (mean) | kernels (mean µs) | runtime calls/step | aten::t/step |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        p = os.path.join(root, name + ".json.gz")
        if not os.path.exists(p):
            print("| %s | (missing) |" % name)
            continue
        s = summarize(load(p))
        st = s["steps"]
        counts = sorted({x["n_kernels"] for x in st})
        mm = sorted({x["n_memcpy_memset"] for x in st})
        gpu = mean(x["gpu_kernel_us"] for x in st)
        ks = "; ".join("%s %.1f" % (short(n), mean(d)) + ("" if len(d) == len(st) else " (x%g)" % (len(d) / len(st)))
                       for n, d in sorted(per_kernel(s).items(), key=lambda kv: -sum(kv[1])))
        rt = collections.Counter()
        for x in st:
            rt.update(x["runtime"])
        rts = ", ".join("%s %g" % (k, v / len(st)) for k, v in sorted(rt.items()) if k != "cudaDeviceSynchronize")
        t = mean(x["aten"].get("aten::t", 0) for x in st)
        orph = len(s["orphan_gpu_events"])
        print("| %s | %s | %s | %.1f | %s | %s | %g |%s" % (name, "/".join(map(str, counts)), "/".join(map(str, mm)), gpu,
                                                           ks, rts, t, " orphans %d" % orph if orph else ""))


def table_launch_ops(root, names):
    """Per trace: each kernel/memset per step with the CPU op that launched it
    (innermost cpu_op around the launch call) and the launch call."""
    print("| trace | GPU ops per step: name [launching op, launch call] | aten ops/step |")
    print("|---|---|---|")
    for name in names:
        p = os.path.join(root, name + ".json.gz")
        if not os.path.exists(p):
            print("| %s | (missing) | |" % name)
            continue
        s = summarize(load(p))
        st = s["steps"]
        per = collections.Counter()
        for x in st:
            for n, o, c in zip(x["kernel_names"], x["kernel_ops"], x["kernel_launch_calls"]):
                per["%s [%s, %s]" % (short(n), o, c)] += 1
            for n, o in x["other_gpu_ops"]:
                per["%s [%s]" % (n, o)] += 1
        ops = collections.Counter()
        for x in st:
            ops.update(x["aten"])
        meta = s["meta"] or {}
        print("| %s%s | %s | %s |" % (
            name, " (bias)" if meta.get("bias") else "",
            "; ".join("%g× %s" % (v / len(st), k) for k, v in sorted(per.items())),
            ", ".join("%s %g" % (k, v / len(st)) for k, v in sorted(ops.items()))))


def occupancy(paths):
    hits = collections.Counter()
    for p in paths:
        d = load(p)
        for e in d.get("traceEvents", []):
            if "ccupancy" in str(e.get("name", "")):
                hits[os.path.basename(p)] += 1
    return hits


def timings(root, names, study=True):
    path = os.path.join(root, "timings.json")
    doc = json.load(open(path))
    inter = {}
    for grp in doc.get("interleaved", {}).values():
        inter.update(grp)
    print("| variant | CUDA-event median ms (p10–p90) | interleaved median ms | back-to-back ms/call | host call ms |%s" %
          (" study ms |" if study else ""))
    print("|---|---|---|---|---|%s" % ("---|" if study else ""))
    for n in names:
        r = doc["runs"].get(n)
        if not r or "cuda_event_ms" not in r:
            print("| %s | %s |" % (n, r))
            continue
        c = r["cuda_event_ms"]
        i = inter.get(n, {}).get("cuda_event_ms", {}).get("median")
        base = n.split("_", 1)[1] if n.startswith("i8192_") else n
        print("| %s | %.3f (%.3f–%.3f) | %s | %.3f | %.3f |%s" % (
            n, c["median"], c["p10"], c["p90"], "%.3f" % i if i else "–", r["pipelined_ms_per_call"],
            r["host_call_ms"]["median"], (" %s |" % STUDY_MS.get(base, "–")) if study else ""))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    root = argv[0] if argv else "traces/h200"
    extra = os.path.join(root, "extra")
    print("## main traces (%s)\n" % root)
    table_kernels(root, MAIN)
    print("\n## i8192 extras\n")
    table_kernels(extra, ["i8192_" + v for v in MAIN])
    print("\n## launching ops (main, i8192)\n")
    table_launch_ops(root, MAIN)
    table_launch_ops(extra, ["i8192_" + v for v in MAIN])
    ex = sorted(f[:-8] for f in os.listdir(extra) if f.endswith(".json.gz") and not f.startswith("i8192_"))
    print("\n## other extras\n")
    table_kernels(extra, ex)
    print("\n## timings (main)\n")
    timings(root, MAIN)
    print("\n## timings (i8192)\n")
    timings(extra, ["i8192_" + v for v in MAIN])
    print("\n## timings (other extras)\n")
    timings(extra, ex, study=False)
    paths = [os.path.join(root, f) for f in os.listdir(root) if f.endswith(".json.gz")]
    paths += [os.path.join(extra, f) for f in os.listdir(extra) if f.endswith(".json.gz")]
    occ = occupancy(paths)
    print("\noccupancy-query events (name contains 'ccupancy') in %d traces: %s" % (len(paths), dict(occ) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
