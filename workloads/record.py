"""Record the tracelens study traces (and extras) with one profiler setup.

    python -m workloads.record --variant all --tokens 4096 --hidden 2048 \
        --intermediate 16384 --dtype bf16 --out traces/h200/ [--extras all]
    python -m workloads.record --variant eager_mlp,compiled_mlp ...
    python -m workloads.record --smoke --out DIR      # CPU, tiny shapes

Main variants (written to ``<out>/<variant>.json.gz``, timings to
``<out>/timings.json``): eager_linear, compiled_linear, eager_mlp,
compiled_mlp, liger_mlp.

Extras (``--extras all`` or a comma list; written to ``<out>/extra/``, timings
to ``<out>/extra/timings.json``):
  sweep      sweep_<mlp variant>_t<tokens> for --sweep-tokens
  train      train_<mlp variant>: forward + backward + AdamW step
  cudagraph  cudagraph_mlp: torch.compile(mode="reduce-overhead")
  attn       attn_eager / attn_sdpa / attn_compiled
  i8192      i8192_<variant>: the five main variants at intermediate 8192
  block      Llama-style decoder block, inference + training (OUT/block/, see blockrun.py)
  shapes     GeGLU MLP and block, a new token count per profiled step (OUT/sweep/, see blockrun.py)
  graphs     pure CUDA-graph twins (no torch.compile, OUT/graphs/): eager_mlp_t<N> and graph_eager_mlp_t<N>,
             the eager GeGLU MLP forward captured once with torch.cuda.CUDAGraph and replayed, at 64 and
             --tokens tokens (the actions' cuda_graphs calibration, docs/actions.md)
``--extra-variants`` restricts the groups that take main/MLP variants (sweep,
train, i8192) to the named ones.

``--merge-timings`` re-records a subset into an existing folder: each
timings.json is read first, the re-recorded runs replace their entries (the
replaced entries, and their interleaved results, move to ``superseded``), and
the run is listed under ``merges``.  Without it timings.json is rewritten.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.nn as nn

from . import MAIN_VARIANTS, MLP_VARIANTS
from .models import (
    GeGLUMLP,
    GegluEpilogueMLP,
    geglu_status,
    attn_math,
    attn_sdpa,
    check_close,
    LINEAR_BIAS_INIT,
    compile_fn,
    liger_status,
    make_linear_from,
    make_liger_mlp,
)
from . import blockrun
from .profiling import environment, record_trace, run_meta, synchronize
from .timing import interleaved_times, time_fn

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
EXTRAS = ("sweep", "train", "cudagraph", "attn", "i8192", "block", "shapes", "graphs")
# extras written to their own folder under OUT instead of OUT/extra
EXTRA_FOLDERS = {"block": "block", "shapes": "sweep", "graphs": "graphs"}
WARMUP_CALLS = 5


def log(msg: str) -> None:
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Recorder:
    """Holds the shared settings, writes traces + a timings.json per folder."""

    def __init__(self, args):
        self.args = args
        self.device = torch.device(args.device)
        self.dtype = DTYPES[args.dtype]
        self.env = environment(self.device)
        self.backend = args.compile_backend
        self.skipped: list[str] = []
        self.failed: list[str] = []
        self._timings: dict[str, dict] = {}

    # -- bookkeeping --------------------------------------------------------
    def _timings_path(self, folder: str) -> str:
        return os.path.join(folder, "timings.json")

    def _command(self) -> str:
        return " ".join(["python -m workloads.record"] + sys.argv[1:])

    def _doc(self, folder: str) -> dict:
        """The timings document of ``folder``: new, or (--merge-timings) the
        existing file with a new ``merges`` record for this run."""
        path = self._timings_path(folder)
        if path in self._timings:
            return self._timings[path]
        doc = None
        if self.args.merge_timings and os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
            doc.setdefault("runs", {})
            doc.setdefault("merges", []).append({
                "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "command": self._command(),
                "environment": self.env,
                "device": str(self.device),
                "runs": [],
                "interleaved": [],
            })
            log("merging into existing %s (%d runs)" % (path, len(doc["runs"])))
        if doc is None:
            doc = {
                "about": "CUDA-event and host timings measured outside the profiler; "
                "see workloads/timing.py for definitions (ms)",
                "environment": self.env,
                "device": str(self.device),
                "command": self._command(),
                "runs": {},
            }
        self._timings[path] = doc
        return doc

    def _supersede(self, doc: dict, name: str) -> None:
        """--merge-timings: move the entries ``name`` replaces to ``superseded``."""
        merge = doc["merges"][-1]
        if name in merge["runs"]:
            return
        merge["runs"].append(name)
        old = {}
        if name in doc["runs"]:  # the new entry takes its place (same key order)
            old["run"] = doc["runs"][name]
        for grp, res in doc.get("interleaved", {}).items():
            if name in res:
                old.setdefault("interleaved", {})[grp] = res.pop(name)
        if old:
            old["replaced_by_merge"] = len(doc["merges"]) - 1
            doc.setdefault("superseded", {}).setdefault(name, []).append(old)

    def _write(self, folder: str) -> None:
        path = self._timings_path(folder)
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as f:
            json.dump(self._timings[path], f, indent=1, sort_keys=False)

    def save_timing(self, folder: str, name: str, entry: dict) -> None:
        doc = self._doc(folder)
        if "merges" in doc and self.args.merge_timings:
            self._supersede(doc, name)
        doc["runs"][name] = entry
        self._write(folder)

    def skip(self, folder: str, name: str, why: str) -> None:
        log("SKIP %s: %s" % (name, why))
        self.skipped.append(name)
        self.save_timing(folder, name, {"skipped": why})

    # -- one workload -------------------------------------------------------
    def log_msg(self, msg: str) -> None:
        log(msg)

    def log_check(self, what: str, check: dict) -> None:
        log("%s: match reference (rel err %.2e, max abs %.2e)" % (what, check["rel_err"], check["max_abs_err"]))

    def run_one(self, folder, name, fn, ref, meta, grad=False, iters=None, check_fn=None, active=None, check=None):
        """Warm up (compile/autotune), check against ``ref`` (or take the
        caller's ``check`` result when ``ref`` is None), profile ``active``
        steps (default 5), time."""
        log("%s: warm-up (%d calls)" % (name, WARMUP_CALLS))
        t0 = time.perf_counter()
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            out = (check_fn or fn)()
            for _ in range(WARMUP_CALLS - 1):
                fn()
        synchronize(self.device)
        warm_s = time.perf_counter() - t0
        if ref is not None:
            check = check_close(out, ref, name, self.dtype)
            log("%s: matches reference (rel err %.2e, max abs %.2e)" % (name, check["rel_err"], check["max_abs_err"]))
        del out
        meta = dict(meta, name=name, device=str(self.device), check=check)
        path = os.path.join(folder, name + ".json.gz")
        record_trace(
            fn,
            path,
            meta,
            self.device,
            grad=grad,
            profile_memory=getattr(self.args, "profile_memory", False),
            active=active or self.args.active,
        )
        size = os.path.getsize(path)
        t = time_fn(fn, self.device, iters=iters or self.args.timing_iters, grad=grad)
        t.update({"warmup_s": warm_s, "trace": os.path.basename(path), "trace_bytes": size, "check": check,
                  "meta": meta})
        self.save_timing(folder, name, t)
        med = t.get("cuda_event_ms", t["host_sync_ms"])["median"]
        log("%s: trace %s (%d B); median %.4f ms (%s)" % (
            name, path, size, med, "cuda events" if "cuda_event_ms" in t else "host"))
        return fn

    def interleave(self, folder, group, fns, grad=False):
        """Time the variants of one group round-robin (less exposed to clock
        drift and ordering than the per-variant runs)."""
        if self.device.type != "cuda" or len(fns) < 2:
            return
        try:
            res = interleaved_times(fns, self.device, rounds=self.args.interleave_rounds, per_round=10, grad=grad)
        except Exception as exc:
            log("FAILED interleaved timing of %s: %r" % (group, exc))
            traceback.print_exc()
            self.failed.append("interleaved " + group)
            return
        doc = self._doc(folder)
        if "merges" in doc and self.args.merge_timings:
            if group in doc.get("interleaved", {}):
                doc.setdefault("superseded_interleaved", {}).setdefault(group, []).append(
                    {"results": doc["interleaved"].pop(group), "replaced_by_merge": len(doc["merges"]) - 1})
            doc["merges"][-1]["interleaved"].append(group)
        doc.setdefault("interleaved", {})[group] = res
        self._write(folder)
        log("interleaved %s: %s" % (group, ", ".join(
            "%s %.4f" % (k, v["cuda_event_ms"]["median"]) for k, v in res.items())))

    def tune_geglu(self, model, mlp, x, name) -> dict:
        """Pick the GeGLU kernel's configuration (each candidate checked
        against an fp32 reference on a NaN-poisoned output, then timed) before
        anything is profiled, then check the whole variant against eager on a
        fresh random input; returns the trace metadata describing it."""
        t0 = time.perf_counter()
        with torch.no_grad():
            best = model.tune(x)
            x_fresh = torch.randn(x.shape, device=x.device, dtype=x.dtype) * 2.0
            fresh = check_close(model(x_fresh), mlp(x_fresh), name + " (fresh input)", self.dtype)
            del x_fresh
        log("%s: fresh random input matches eager (rel err %.2e)" % (name, fresh["rel_err"]))
        table = next(iter(model.gate_up.results.values()))
        log("%s: tuned %d kernel configurations in %.1f s; chose %s" % (
            name, len(table), time.perf_counter() - t0, best.name))
        for row in sorted(table, key=lambda r: r.get("median_ms", float("inf"))):
            if "error" in row:
                log("  %-48s dropped: %s" % (row["config"], row["error"]))
            elif "median_ms" in row:
                log("  %-48s %.4f ms %5.0f TFLOP/s rel err %.2e regs %s spills %s smem %s" % (
                    row["config"], row["median_ms"], row["tflops"], row["rel_err"], row.get("registers"),
                    row.get("spills"), row.get("shared_bytes")))
            else:
                log("  %-48s rel err %.2e (not timed)" % (row["config"], row["rel_err"]))
        return {"geglu_kernel": "workloads/geglu_kernel.py", "geglu_config": dataclasses.asdict(best),
                "geglu_config_name": best.name, "geglu_tuning": table, "geglu_check_fresh_input": fresh}

    def guarded(self, folder, name, thunk):
        try:
            thunk()
        except Exception as exc:
            if isinstance(exc, RuntimeError) and "OUTPUT MISMATCH" in str(exc):
                raise
            log("FAILED %s: %r" % (name, exc))
            traceback.print_exc()
            self.failed.append(name)
            self.save_timing(folder, name, {"failed": repr(exc)})

    # -- groups -------------------------------------------------------------
    def pick(self, variants):
        """The variants of an extra group that --extra-variants keeps."""
        keep = self.args.extra_variants
        return [v for v in variants if keep is None or v in keep]

    def mlp_set(self, tokens, hidden, intermediate, folder, prefix, variants, suffix="", full=MAIN_VARIANTS):
        """Main-style forward variants sharing one eager MLP's weights.  The
        interleaved group is ``<prefix>*<suffix>``, or, when ``variants`` is
        not all of ``full``, ``<prefix>{v1,v2}<suffix>``."""
        dev, dt = self.device, self.dtype
        torch.manual_seed(0)
        mlp = GeGLUMLP(hidden, intermediate).to(device=dev, dtype=dt).eval()
        lin = make_linear_from(mlp).eval()
        x = torch.randn(tokens, hidden, device=dev, dtype=dt)
        with torch.no_grad():
            refs = {"linear": lin(x), "mlp": mlp(x)}
        liger_ok, why = liger_status(dev)
        geglu_ok, geglu_why = geglu_status(dev, dt)
        fns = {}
        for v in variants:
            name = prefix + v + suffix
            # --side-variants: recorded into --side-out (trace + timings entry) but
            # timed in this group's interleaved pass, stored in ``folder``
            side = not prefix and not suffix and v in self.args.side_variants
            vfolder = self.args.side_out if side else folder
            kind = "linear" if v.endswith("linear") else "mlp"
            extra = {"bias": True, "bias_init": LINEAR_BIAS_INIT} if kind == "linear" else {}
            if v == "compiled_mlp_max_autotune":
                extra["compile_mode"] = "max-autotune"
            meta = run_meta(self.env, variant=v, tokens=tokens, hidden=hidden, intermediate=intermediate,
                            dtype=self.args.dtype, mode="forward",
                            compile_backend=self.backend if v.startswith("compiled") else None, **extra)
            if v == "liger_mlp" and not liger_ok:
                self.skip(vfolder, name, why)
                continue
            if v == "geglu_epilogue_mlp" and not geglu_ok:
                self.skip(vfolder, name, geglu_why)
                continue
            if v.startswith("compiled") and self.backend == "none":
                self.skip(vfolder, name, "compile disabled (--compile-backend none)")
                continue
            if v == "compiled_mlp_max_autotune" and self.backend != "inductor":
                self.skip(vfolder, name, "mode='max-autotune' needs the inductor backend (backend is %s)"
                          % self.backend)
                continue

            def thunk(v=v, kind=kind, name=name, meta=meta, vfolder=vfolder):
                base = lin if kind == "linear" else mlp
                if v.startswith("eager"):
                    model = base
                elif v == "compiled_mlp_max_autotune":
                    # max-autotune also turns on CUDA graphs (cudagraph trees): mark each
                    # call as a new step and check a clone of the graph-owned output
                    graphed = compile_fn(copy.deepcopy(base), backend=self.backend, mode="max-autotune")

                    def step(graphed=graphed):
                        torch.compiler.cudagraph_mark_step_begin()
                        return graphed(x)

                    fns[name] = self.run_one(vfolder, name, step, refs[kind], meta,
                                             check_fn=lambda: step().clone())
                    return
                elif v.startswith("compiled"):
                    model = compile_fn(copy.deepcopy(base), backend=self.backend)
                elif v == "geglu_epilogue_mlp":
                    model = GegluEpilogueMLP(mlp).eval()
                    meta = dict(meta, **self.tune_geglu(model, mlp, x, name))
                else:
                    model = make_liger_mlp(mlp).eval()
                fns[name] = self.run_one(vfolder, name, lambda: model(x), refs[kind], meta)

            self.guarded(vfolder, name, thunk)
        star = "*" if set(full) <= set(variants) else "{%s}" % ",".join(variants)
        self.interleave(folder, "%s%s%s" % (prefix, star, suffix), fns)

    def sweep(self, folder):
        a = self.args
        for t in a.sweep_tokens:
            self.mlp_set(t, a.hidden, a.intermediate, folder, "sweep_", self.pick(MLP_VARIANTS), suffix="_t%d" % t,
                         full=MLP_VARIANTS)

    def train(self, folder):
        a = self.args
        dev, dt = self.device, self.dtype
        torch.manual_seed(0)
        mlp = GeGLUMLP(a.hidden, a.intermediate).to(device=dev, dtype=dt).train()
        x = torch.randn(a.tokens, a.hidden, device=dev, dtype=dt)
        gy = torch.randn(a.tokens, a.hidden, device=dev, dtype=dt)
        with torch.no_grad():
            ref = mlp(x)
        liger_ok, why = liger_status(dev)
        fns = {}
        for v in self.pick(MLP_VARIANTS):
            name = "train_" + v
            if v == "liger_mlp" and not liger_ok:
                self.skip(folder, name, why)
                continue
            if v.startswith("compiled") and self.backend == "none":
                self.skip(folder, name, "compile disabled")
                continue

            def thunk(v=v, name=name):
                if v == "eager_mlp":
                    model = copy.deepcopy(mlp)
                    call = model
                elif v == "compiled_mlp":
                    model = copy.deepcopy(mlp)
                    call = compile_fn(model, backend=self.backend)
                else:
                    model = make_liger_mlp(mlp).train()
                    call = model
                opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

                def step():
                    opt.zero_grad(set_to_none=True)
                    y = call(x)
                    y.backward(gy)
                    opt.step()

                # the first call (check_fn) is a plain forward with the initial weights
                meta = run_meta(self.env, variant=v, tokens=a.tokens, hidden=a.hidden, intermediate=a.intermediate,
                                dtype=a.dtype, mode="train", optimizer="AdamW(lr=1e-5, foreach default)",
                                backward="y.backward(randn grad)",
                                compile_backend=self.backend if v.startswith("compiled") else None)
                fns[name] = self.run_one(folder, name, step, ref, meta, grad=True,
                                         iters=max(50, a.timing_iters // 2), check_fn=lambda: call(x))

            self.guarded(folder, name, thunk)
        self.interleave(folder, "train_*", fns, grad=True)

    def cudagraph(self, folder):
        a = self.args
        name = "cudagraph_mlp"
        if self.device.type != "cuda":
            self.skip(folder, name, "CUDA graphs need CUDA")
            return
        dev, dt = self.device, self.dtype
        torch.manual_seed(0)
        mlp = GeGLUMLP(a.hidden, a.intermediate).to(device=dev, dtype=dt).eval()
        x = torch.randn(a.tokens, a.hidden, device=dev, dtype=dt)
        with torch.no_grad():
            ref = mlp(x)

        def thunk():
            model = compile_fn(copy.deepcopy(mlp), backend="inductor", mode="reduce-overhead")

            def fn():
                torch.compiler.cudagraph_mark_step_begin()
                return model(x)

            meta = run_meta(self.env, variant="cudagraph_mlp", tokens=a.tokens, hidden=a.hidden,
                            intermediate=a.intermediate, dtype=a.dtype, mode="forward",
                            compile_backend="inductor", compile_mode="reduce-overhead")
            self.run_one(folder, name, fn, ref, meta, check_fn=lambda: fn().clone())

        self.guarded(folder, name, thunk)

    def graphs(self, folder):
        """Eager vs CUDA-graph replay of the same eager module, nothing compiled: what `cuda_graphs` predicts."""
        a = self.args
        if self.device.type != "cuda":
            self.skip(folder, "graph_eager_mlp", "CUDA graphs need CUDA")
            return
        dev, dt = self.device, self.dtype
        for tokens in sorted({64, a.tokens}):
            torch.manual_seed(0)
            mlp = GeGLUMLP(a.hidden, a.intermediate).to(device=dev, dtype=dt).eval()
            x = torch.randn(tokens, a.hidden, device=dev, dtype=dt)
            with torch.no_grad():
                ref = mlp(x)
            common = dict(tokens=tokens, hidden=a.hidden, intermediate=a.intermediate, dtype=a.dtype, mode="forward")
            eager_name, graph_name = "eager_mlp_t%d" % tokens, "graph_eager_mlp_t%d" % tokens

            def eager_thunk(mlp=mlp, x=x, ref=ref, name=eager_name, common=common):
                meta = run_meta(self.env, variant="eager_mlp", **common)
                self.run_one(folder, name, lambda: mlp(x), ref, meta)

            def graph_thunk(mlp=mlp, x=x, ref=ref, name=graph_name, common=common):
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side), torch.no_grad():
                    for _ in range(3):  # warm-up on a side stream before capture, as the CUDA-graph docs ask
                        mlp(x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph), torch.no_grad():
                    static_out = mlp(x)

                def fn():
                    graph.replay()
                    return static_out

                meta = run_meta(self.env, variant="graph_eager_mlp", capture="torch.cuda.CUDAGraph", **common)
                self.run_one(folder, name, fn, ref, meta, check_fn=lambda: fn().clone())

            self.guarded(folder, eager_name, eager_thunk)
            self.guarded(folder, graph_name, graph_thunk)

    def attn(self, folder):
        a = self.args
        dev, dt = self.device, self.dtype
        torch.manual_seed(0)
        shape = (a.attn_batch, a.attn_heads, a.attn_seq, a.attn_head_dim)
        q, k, v = (torch.randn(shape, device=dev, dtype=dt) for _ in range(3))
        with torch.no_grad():
            ref = attn_math(q, k, v)
        fns = {}
        for name in ("attn_eager", "attn_sdpa", "attn_compiled"):
            if name == "attn_compiled" and self.backend == "none":
                self.skip(folder, name, "compile disabled")
                continue

            def thunk(name=name):
                if name == "attn_eager":
                    f = attn_math
                elif name == "attn_sdpa":
                    f = attn_sdpa
                else:
                    f = compile_fn(attn_math, backend=self.backend)
                meta = run_meta(self.env, variant=name, tokens=a.attn_batch * a.attn_seq,
                                hidden=a.attn_heads * a.attn_head_dim, intermediate=None, dtype=a.dtype,
                                mode="forward", batch=a.attn_batch, heads=a.attn_heads, seq=a.attn_seq,
                                head_dim=a.attn_head_dim, causal=False,
                                compile_backend=self.backend if name == "attn_compiled" else None)
                fns[name] = self.run_one(folder, name, lambda: f(q, k, v), ref, meta)

            self.guarded(folder, name, thunk)
        self.interleave(folder, "attn_*", fns)

    def i8192(self, folder):
        a = self.args
        self.mlp_set(a.tokens, a.hidden, 8192, folder, "i8192_", self.pick(MAIN_VARIANTS))

    def block(self, folder):
        blockrun.block(self, folder)

    def shapes(self, folder):
        blockrun.shapes(self, folder)


def gpu_warmup(device, seconds: float) -> None:
    """Run large bf16 matmuls for a while so clocks are up before the first variant."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize(device)
        n += 10
    log("GPU warm-up: %d 8192^3 bf16 matmuls in %.1f s" % (n, time.perf_counter() - t0))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m workloads.record", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", default="all", help="'all' or a comma list of %s" % ", ".join(MAIN_VARIANTS))
    p.add_argument("--extras", default="", help="'all' or a comma list of %s (written to OUT/extra/)" % ", ".join(EXTRAS))
    p.add_argument("--extra-variants", default="all",
                   help="'all' or a comma list of main variants: the only ones the sweep/train/i8192 groups run")
    p.add_argument("--merge-timings", action="store_true",
                   help="merge into existing timings.json files instead of rewriting them (re-recorded entries "
                        "replace theirs; the replaced ones move to 'superseded')")
    p.add_argument("--side-variants", default="",
                   help="comma list of main variants recorded into --side-out (trace + timings entry) instead of "
                        "--out, while still timed in the main interleaved group (stored in --out)")
    p.add_argument("--side-out", default=None, help="folder for --side-variants")
    p.add_argument("--profile-memory", action="store_true",
                   help="record [memory] events too (torch.profiler profile_memory=True)")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=16384)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if available")
    p.add_argument("--out", required=True)
    p.add_argument("--smoke", action="store_true",
                   help="CPU, tokens 8, hidden 32, intermediate 64, fp32, compile backend 'eager'")
    p.add_argument("--compile-backend", default=None,
                   help="torch.compile backend: inductor (default on cuda), eager (default on cpu/smoke), none=skip")
    p.add_argument("--active", type=int, default=5,
                   help="profiled (active) steps per trace, after wait=1 and warmup=2 (profiling.ACTIVE)")
    p.add_argument("--timing-iters", type=int, default=100, help=">= 50 CUDA-event timings per variant")
    p.add_argument("--interleave-rounds", type=int, default=20,
                   help="round-robin timing: rounds x 10 calls per variant per group (cuda)")
    p.add_argument("--gpu-warmup-s", type=float, default=2.0, help="seconds of matmuls before recording (cuda)")
    p.add_argument("--sweep-tokens", default="8,64,512,4096,16384")
    p.add_argument("--attn-batch", type=int, default=8)
    p.add_argument("--attn-heads", type=int, default=16)
    p.add_argument("--attn-seq", type=int, default=1024)
    p.add_argument("--attn-head-dim", type=int, default=128)
    g = p.add_argument_group("block and shapes extras (blockrun.py)")
    g.add_argument("--block-batch", type=int, default=2)
    g.add_argument("--block-seq", type=int, default=2048)
    g.add_argument("--block-hidden", type=int, default=2048)
    g.add_argument("--block-heads", type=int, default=16)
    g.add_argument("--block-intermediate", type=int, default=5632)
    g.add_argument("--block-active", type=int, default=blockrun.BLOCK_ACTIVE,
                   help="profiled (active) steps per block trace (default %d)" % blockrun.BLOCK_ACTIVE)
    g.add_argument("--block-kind", choices=("llama", "gpt"), default="llama",
                   help="llama: RMSNorm, rope, SwiGLU; gpt: LayerNorm, GELU MLP, biases (workloads/block.py)")
    g.add_argument("--block-variants", default=",".join(blockrun.BLOCK_VARIANTS),
                   help="comma list of %s" % ", ".join(blockrun.BLOCK_VARIANTS))
    g.add_argument("--shape-tokens", default="1024,2048,3072,2048,4096,1536",
                   help="token count of each profiled step of the shapes group (block: batch x tokens/batch)")
    g.add_argument("--shape-variants", default=",".join(blockrun.SHAPE_VARIANTS),
                   help="comma list of %s (one per process for cold compile caches)"
                        % ", ".join(blockrun.SHAPE_VARIANTS))
    g.add_argument("--shape-models", default=",".join(blockrun.SHAPE_MODELS),
                   help="comma list of %s (geglu uses --hidden/--intermediate)" % ", ".join(blockrun.SHAPE_MODELS))
    g.add_argument("--shape-timing-iters", type=int, default=30,
                   help="CUDA-event timings per distinct shape after the window")
    a = p.parse_args(argv)
    if a.smoke:
        a.device, a.tokens, a.hidden, a.intermediate, a.dtype = "cpu", 8, 32, 64, "fp32"
        a.attn_batch, a.attn_heads, a.attn_seq, a.attn_head_dim = 1, 2, 16, 8
        a.sweep_tokens = "8,16"
        a.block_batch, a.block_seq, a.block_hidden, a.block_heads, a.block_intermediate = 2, 8, 32, 2, 64
        a.shape_tokens = "8,16,24,16,32,12"
        a.compile_backend = a.compile_backend or "eager"
    if a.device is None:
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch.cuda.is_available() is False")
    if a.compile_backend is None:
        a.compile_backend = "inductor" if a.device == "cuda" else "eager"
    a.variants = list(MAIN_VARIANTS) if a.variant == "all" else [v for v in a.variant.split(",") if v]
    bad = [v for v in a.variants if v not in MAIN_VARIANTS]
    if bad:
        p.error("unknown variant(s) %s; choose from %s" % (bad, MAIN_VARIANTS))
    a.extra_variants = None if a.extra_variants == "all" else [v for v in a.extra_variants.split(",") if v]
    bad = [v for v in a.extra_variants or () if v not in MAIN_VARIANTS]
    if bad:
        p.error("unknown --extra-variants %s; choose from %s" % (bad, MAIN_VARIANTS))
    a.side_variants = [v for v in a.side_variants.split(",") if v]
    bad = [v for v in a.side_variants if v not in a.variants]
    if bad:
        p.error("--side-variants %s are not among --variant %s" % (bad, a.variants))
    if a.side_variants and not a.side_out:
        p.error("--side-variants needs --side-out")
    a.extra_groups = list(EXTRAS) if a.extras == "all" else [e for e in a.extras.split(",") if e]
    bad = [e for e in a.extra_groups if e not in EXTRAS]
    if bad:
        p.error("unknown extra(s) %s; choose from %s" % (bad, EXTRAS))
    a.sweep_tokens = [int(t) for t in str(a.sweep_tokens).split(",") if t]
    a.shape_tokens = [int(t) for t in str(a.shape_tokens).split(",") if t]
    if not a.shape_tokens or any(t <= 0 or t % a.block_batch for t in a.shape_tokens):
        p.error("--shape-tokens must be positive multiples of --block-batch %d" % a.block_batch)
    for opt, allowed in (("block_variants", blockrun.BLOCK_VARIANTS), ("shape_variants", blockrun.SHAPE_VARIANTS),
                         ("shape_models", blockrun.SHAPE_MODELS)):
        vals = [v for v in getattr(a, opt).split(",") if v]
        bad = [v for v in vals if v not in allowed]
        if bad:
            p.error("unknown --%s %s; choose from %s" % (opt.replace("_", "-"), bad, allowed))
        setattr(a, opt, vals)
    if a.timing_iters < 1:
        p.error("--timing-iters must be >= 1")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.device == "cpu":
        # the GeGLU kernel runs under Triton's interpreter on the CPU; Triton reads
        # this when its own library functions are defined, i.e. before anything
        # (torch._dynamo included) imports triton
        os.environ.setdefault("TRITON_INTERPRET", "1")
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    if a.compile_backend != "none":
        try:
            from torch._dynamo.eval_frame import is_dynamo_supported

            supported = is_dynamo_supported()
        except Exception:  # pragma: no cover - very old/new torch
            supported = True
        if not supported:
            log("note: torch.compile is not supported on this Python/torch; compiled variants will be skipped")
            a.compile_backend = "none"
    rec = Recorder(a)
    log("env %s; device %s; dtype %s; compile backend %s" % (rec.env, a.device, a.dtype, a.compile_backend))
    ok, why = liger_status(rec.device)
    if not ok:
        log("note: Liger variants will be skipped: %s" % why)
    os.makedirs(a.out, exist_ok=True)
    if rec.device.type == "cuda" and a.gpu_warmup_s > 0:
        gpu_warmup(rec.device, a.gpu_warmup_s)
    t0 = time.perf_counter()
    if a.variants:
        rec.mlp_set(a.tokens, a.hidden, a.intermediate, a.out, "", a.variants)
    for g in a.extra_groups:
        log("== extras: %s" % g)
        getattr(rec, g)(os.path.join(a.out, EXTRA_FOLDERS.get(g, "extra")))
    log("done in %.1f s; skipped: %s; failed: %s" % (time.perf_counter() - t0, rec.skipped or "none",
                                                   rec.failed or "none"))
    return 1 if rec.failed else 0


if __name__ == "__main__":
    sys.exit(main())
