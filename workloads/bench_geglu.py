"""Check and time the GeGLU epilogue kernel's configurations on one GPU.

    python -m workloads.bench_geglu [--tokens 4096 --hidden 2048 --intermediate 16384] [--json OUT.json]

Prints the ceilings it measures (cuBLAS bf16 GEMM rate on random data for
the gate GEMM and for the gate+up GEMM over concatenated weights, the down
GEMM), every kernel configuration's median time (``triton.testing.do_bench``)
and rel L2 error against an fp32 reference on fresh random inputs with a
NaN-poisoned output, then the whole MLP (eager, torch.compile default, Liger
if importable, the epilogue variant) checked against eager and timed.  A
short table comes last.  Needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F
import triton

from .geglu_kernel import GegluGateUp, launch, pack_weights, reference, rel_l2
from .models import GeGLUMLP, check_close, compile_fn, liger_status, make_liger_mlp


def log(msg: str) -> None:
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def bench(fn, rep: int = 200) -> float:
    return triton.testing.do_bench(fn, warmup=50, rep=rep, return_mode="median")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.bench_geglu", description=__doc__)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=16384)
    p.add_argument("--json", default=None)
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP bench_geglu: needs CUDA", flush=True)
        return 0
    dev, dt = torch.device("cuda"), torch.bfloat16
    M, K, N = a.tokens, a.hidden, a.intermediate
    res: dict = {"shape": {"tokens": M, "hidden": K, "intermediate": N}, "gpu": torch.cuda.get_device_name(),
                 "torch": torch.__version__, "triton": triton.__version__}
    torch.manual_seed(0)
    mlp = GeGLUMLP(K, N).to(device=dev, dtype=dt).eval()
    wg, wu, wd = mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach(), mlp.down_proj.weight.detach()
    x = torch.randn(M, K, device=dev, dtype=dt)
    # clocks up
    t0 = time.perf_counter()
    big = torch.randn(8192, 8192, device=dev, dtype=dt)
    while time.perf_counter() - t0 < 2.0:
        big @ big
    torch.cuda.synchronize()
    del big

    gu_flop = 2.0 * M * K * 2 * N
    ceil = {}
    wcat = pack_weights(wg, wu, "stacked")
    ceil["cublas_gate_ms"] = bench(lambda: x @ wg.T)
    ceil["cublas_gate_up_cat_ms"] = bench(lambda: x @ wcat.T)
    h = torch.randn(M, N, device=dev, dtype=dt)
    ceil["cublas_down_ms"] = bench(lambda: h @ wd.T)
    g = x @ wg.T
    u = x @ wu.T
    ceil["eager_gelu_mul_ms"] = bench(lambda: F.gelu(g, approximate="tanh") * u)
    ceil["cublas_gate_up_cat_tflops"] = gu_flop / ceil["cublas_gate_up_cat_ms"] / 1e9
    ceil["cublas_gate_tflops"] = gu_flop / 2 / ceil["cublas_gate_ms"] / 1e9
    ceil["cublas_down_tflops"] = gu_flop / 2 / ceil["cublas_down_ms"] / 1e9
    res["ceilings"] = ceil
    log("ceilings: %s" % json.dumps({k: round(v, 4) for k, v in ceil.items()}))
    del g, u, wcat

    # every configuration: fresh x, fp32 reference, poisoned output, then timed
    gate_up = GegluGateUp(wg, wu)
    t0 = time.perf_counter()
    best = gate_up.tune(x)
    rows = gate_up.results[(M, N, K, dt)]
    log("tuned %d configs in %.1f s; best %s" % (len(rows), time.perf_counter() - t0, best.name))
    # second, independent check of every config that ran, on fresh inputs
    x2 = torch.randn(M, K, device=dev, dtype=dt) * 2.0
    ref2 = reference(x2, wg, wu)
    for row in rows:
        if "error" in row:
            continue
        cfg = next(c for c in gate_up.configs if c.name == row["config"])
        out = torch.full((M, N), float("nan"), device=dev, dtype=dt)
        launch(x2, gate_up.packed(cfg.layout), out, cfg)
        torch.cuda.synchronize()
        row["rel_err_fresh"] = rel_l2(out, ref2) if torch.isfinite(out).all() else float("nan")
    del ref2
    res["configs"] = rows
    res["best"] = best.name

    # whole MLP, checked against eager on fresh inputs, then timed
    x3 = torch.randn(M, K, device=dev, dtype=dt)
    with torch.no_grad():
        ref = mlp(x3)

        def epi(xx):
            return F.linear(gate_up(xx), wd)

        variants = {"eager_mlp": mlp, "geglu_epilogue_mlp": epi}
        ok, why = liger_status(dev)
        if ok:
            variants["liger_mlp"] = make_liger_mlp(mlp).eval()
        else:
            log("SKIP liger_mlp: %s" % why)
        if not a.no_compile:
            t0 = time.perf_counter()
            cm = compile_fn(mlp)
            cm(x3)
            log("compiled default in %.1f s" % (time.perf_counter() - t0))
            variants["compiled_mlp"] = cm
        mlp_rows = {}
        for name, fn in variants.items():
            out = fn(x3)
            chk = check_close(out, ref, name, dt)
            mlp_rows[name] = {"rel_err": chk["rel_err"], "median_ms": bench(lambda fn=fn: fn(x)), }
        # second timing pass in reverse order (drift check)
        for name in reversed(list(variants)):
            fn = variants[name]
            mlp_rows[name]["median_ms_2"] = bench(lambda fn=fn: fn(x))
    res["mlp"] = mlp_rows
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)

    print("\n== gate+up (M=%d K=%d N=%d, %.0f GFLOP) ==" % (M, K, N, gu_flop / 1e9))
    print("cuBLAS x@[Wg;Wu].T %.3f ms = %.0f TFLOP/s; x@Wg.T %.3f ms; down %.3f ms (%.0f TFLOP/s); gelu*mul %.3f ms" % (
        ceil["cublas_gate_up_cat_ms"], ceil["cublas_gate_up_cat_tflops"], ceil["cublas_gate_ms"],
        ceil["cublas_down_ms"], ceil["cublas_down_tflops"], ceil["eager_gelu_mul_ms"]))
    for row in sorted(rows, key=lambda r: r.get("median_ms", 1e9)):
        if "error" in row:
            print("%-45s ERROR %s" % (row["config"], row["error"][:120]))
        else:
            print("%-45s %.3f ms %5.0f TFLOP/s err %.2e / %.2e" % (
                row["config"], row["median_ms"], row["tflops"], row["rel_err"], row["rel_err_fresh"]))
    print("== MLP forward (do_bench median, two passes) ==")
    for name, r in mlp_rows.items():
        print("%-22s %.3f / %.3f ms  rel err vs eager %.2e" % (name, r["median_ms"], r["median_ms_2"], r["rel_err"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
