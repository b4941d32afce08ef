"""Profiled and profiler-free runs of one program taken in alternation (issues #27 and #28).

On the H200 hosts this project records on, a dispatch-bound step's length follows the host's speed, which moves
by up to 2x within one process (``workloads.host_noise``): a trace and a CUDA-event timing loop taken seconds
apart can disagree by more than the profiler's own cost. Here every trace has its reference beside it in time:

    for round r in 0..R-1:
        for each variant V of the group (the order rotated by one each round):
            CUDA-event timing of V, N calls    ("before": as workloads.timing.time_fn's cuda_event_ms)
            trace V_r: wait 1, warm-up 2, ACTIVE profiled steps (workloads.profiling.record_trace)
            CUDA-event timing of V, N calls    ("after")

so (a) each trace's profiler-free step is the median of the 2N calls timed just before and after it, and (b) the
variants of one round (eager, compiled, Liger) are recorded within about a second of each other: a twin
(``eager_r`` -> ``compiled_r``) shares its host's speed as closely as one process allows. A pure-Python probe
(the host's speed: a fixed loop's time) is taken beside each timing block.

Everything is compiled, tuned and checked against eager before round 0, so no round compiles. Writes
``OUT/<group>/<variant>_r<r>.json.gz`` and ``OUT/<group>/timings.json`` ({trace name: {"cuda_event_ms":
summary of the 2N calls, "before"/"after": summaries, "host_probe_us": [before, after], "round", "variant",
"order"}}).

    python -m workloads.interleaved --out /tmp/il --groups sweep,block,attn,i8192 --rounds 5
    python -m workloads.interleaved --smoke --out /tmp/il      # CPU, tiny, compile backend "eager"
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from typing import Callable

import torch

from .block import liger_block_status, make_block
from .models import GeGLUMLP, attn_math, attn_sdpa, check_close, liger_status, make_liger_mlp
from .profiling import environment, record_trace, run_meta, synchronize
from .timing import summary

GROUPS = ("sweep", "block", "attn", "i8192")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def log(msg: str) -> None:
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def host_probe_us(reps: int = 5) -> float:
    """The host's speed now: the fastest of ``reps`` runs of a fixed pure-Python loop, in µs."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        total = 0
        for i in range(20000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def event_times_ms(fn: Callable[[], object], device: torch.device, calls: int, warmup: int = 2) -> list[float]:
    """``calls`` isolated calls of ``fn`` (synchronize, event, call, event), in ms, after ``warmup`` untimed ones;
    host wall time on the CPU."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(calls):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


class Programs:
    """The groups' variants as ``{name: (callable, meta)}``, each warmed up and checked against eager."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.device = torch.device(a.device)
        self.dtype = DTYPES[a.dtype]
        self.env = environment(self.device)

    def _compile(self, fn):
        # no torch._dynamo.reset() here (models.compile_fn does one): every variant stays compiled across rounds
        return torch.compile(fn, backend=self.a.compile_backend, dynamic=False)

    def _ready(self, name: str, fn, ref, meta: dict) -> tuple[Callable[[], object], dict]:
        with torch.no_grad():
            out = fn()
            for _ in range(4):
                fn()
        synchronize(self.device)
        check = check_close(out, ref, name, self.dtype)
        log("%s: ready, matches eager (rel err %.2e)" % (name, check["rel_err"]))
        return fn, dict(meta, name=name, device=str(self.device), check=check)

    def mlp(self, prefix: str, tokens: int, intermediate: int, liger: bool, suffix: str = "") -> dict:
        a, dev, dt = self.a, self.device, self.dtype
        torch.manual_seed(0)
        mlp = GeGLUMLP(a.hidden, intermediate).to(device=dev, dtype=dt).eval()
        x = torch.randn(tokens, a.hidden, device=dev, dtype=dt)
        with torch.no_grad():
            ref = mlp(x)
        models = {"eager_mlp": mlp, "compiled_mlp": self._compile(copy.deepcopy(mlp))}
        ok, why = liger_status(dev)
        if liger and ok:
            models["liger_mlp"] = make_liger_mlp(mlp).eval()
        elif liger:
            log("SKIP %sliger_mlp: %s" % (prefix, why))
        progs = {}
        for v, model in models.items():
            meta = run_meta(self.env, variant=v, tokens=tokens, hidden=a.hidden, intermediate=intermediate,
                            dtype=a.dtype, mode="forward",
                            compile_backend=a.compile_backend if v.startswith("compiled") else None)
            name = prefix + v + suffix
            progs[name] = self._ready(name, lambda model=model: model(x), ref, meta)
        return progs

    def sweep(self) -> dict:
        progs = {}
        for t in self.a.sweep_tokens:
            progs.update(self.mlp("sweep_", t, self.a.intermediate, liger=True, suffix="_t%d" % t))
        return progs

    def i8192(self) -> dict:
        return self.mlp("i8192_", self.a.tokens, 8192, liger=False)

    def attn(self) -> dict:
        a, dev, dt = self.a, self.device, self.dtype
        torch.manual_seed(0)
        shape = (a.attn_batch, a.attn_heads, a.attn_seq, a.attn_head_dim)
        q, k, v = (torch.randn(shape, device=dev, dtype=dt) for _ in range(3))
        with torch.no_grad():
            ref = attn_math(q, k, v)
        fns = {"attn_eager": attn_math, "attn_sdpa": attn_sdpa, "attn_compiled": self._compile(attn_math)}
        progs = {}
        for name, f in fns.items():
            meta = run_meta(self.env, variant=name, tokens=a.attn_batch * a.attn_seq,
                            hidden=a.attn_heads * a.attn_head_dim, intermediate=None, dtype=a.dtype,
                            mode="forward", batch=a.attn_batch, heads=a.attn_heads, seq=a.attn_seq,
                            head_dim=a.attn_head_dim, causal=False)
            progs[name] = self._ready(name, lambda f=f: f(q, k, v), ref, meta)
        return progs

    def block(self) -> dict:
        a, dev, dt = self.a, self.device, self.dtype
        cfg = {"hidden": a.block_hidden, "heads": a.block_heads, "intermediate": a.block_intermediate,
               "max_seq": a.block_seq, "kind": "llama"}
        base = make_block(cfg, "eager", "sdpa", dev, dt).eval()
        torch.manual_seed(1)
        x = torch.randn(a.block_batch, a.block_seq, cfg["hidden"], device=dev, dtype=dt)
        with torch.no_grad():
            ref = base(x)
        calls = {"eager_block": base, "compiled_block": self._compile(make_block(cfg, "eager", "sdpa", dev, dt,
                                                                                   like=base))}
        ok, why = liger_block_status(dev)
        if ok:
            calls["liger_block"] = make_block(cfg, "liger", "sdpa", dev, dt, like=base)
        else:
            log("SKIP liger_block: %s" % why)
        progs = {}
        for name, call in calls.items():
            meta = run_meta(self.env, variant=name, tokens=a.block_batch * a.block_seq, hidden=cfg["hidden"],
                            intermediate=cfg["intermediate"], dtype=a.dtype, mode="forward", model="llama_block",
                            batch=a.block_batch, seq=a.block_seq, heads=cfg["heads"], causal=True,
                            attention="sdpa")
            progs[name] = self._ready(name, lambda call=call: call(x), ref, meta)
        return progs


def run_group(group: str, progs: dict, a: argparse.Namespace, device: torch.device) -> None:
    """The alternation of the module docstring over one group's programs; writes its traces and timings.json."""
    folder = os.path.join(a.out, group)
    os.makedirs(folder, exist_ok=True)
    timings: dict = {"protocol": __doc__.split("\n\n")[1].strip(), "rounds": a.rounds, "calls": a.calls,
                     "active": a.active, "command": " ".join(sys.argv), "traces": {}}
    order = 0
    names = list(progs)
    for r in range(a.rounds):
        shift = r % len(names)  # no variant always first or last in its round (the host warms up along a round)
        for name in names[shift:] + names[:shift]:
            fn, meta = progs[name]
            with torch.no_grad():
                probe_before = host_probe_us()
                before = event_times_ms(fn, device, a.calls)
                trace = "%s_r%d" % (name, r)
                path = os.path.join(folder, trace + ".json.gz")
                record_trace(fn, path, dict(meta, round=r, interleaved=True), device, active=a.active,
                             record_shapes=meta.get("record_shapes", True))
                after = event_times_ms(fn, device, a.calls)
                probe_after = host_probe_us()
            timings["traces"][trace] = {
                "variant": name, "round": r, "order": order, "cuda_event_ms": summary(before + after),
                "before": summary(before), "after": summary(after), "host_probe_us": [probe_before, probe_after],
                "trace_bytes": os.path.getsize(path),
            }
            order += 1
            log("%s: before %.4f ms, after %.4f ms (median), probe %.0f/%.0f µs" % (
                trace, summary(before)["median"], summary(after)["median"], probe_before, probe_after))
    with open(os.path.join(folder, "timings.json"), "w") as f:
        json.dump(timings, f, indent=1, sort_keys=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m workloads.interleaved", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--groups", default=",".join(GROUPS), help="comma list of %s" % ", ".join(GROUPS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=40, help="CUDA-event calls before and after each trace")
    p.add_argument("--active", type=int, default=5, help="profiled steps per trace (after wait 1, warm-up 2)")
    p.add_argument("--sweep-tokens", default="8,64,512,4096")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=16384)
    p.add_argument("--attn-batch", type=int, default=8)
    p.add_argument("--attn-heads", type=int, default=16)
    p.add_argument("--attn-seq", type=int, default=1024)
    p.add_argument("--attn-head-dim", type=int, default=128)
    p.add_argument("--block-batch", type=int, default=2)
    p.add_argument("--block-seq", type=int, default=2048)
    p.add_argument("--block-hidden", type=int, default=2048)
    p.add_argument("--block-heads", type=int, default=16)
    p.add_argument("--block-intermediate", type=int, default=5632)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--device", default=None)
    p.add_argument("--compile-backend", default=None)
    p.add_argument("--gpu-warmup-s", type=float, default=2.0, help="seconds of matmuls first (cuda)")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, fp32, compile backend 'eager'")
    a = p.parse_args(argv)
    if a.smoke:
        a.device, a.dtype, a.compile_backend = "cpu", "fp32", "eager"
        a.tokens, a.hidden, a.intermediate, a.sweep_tokens = 8, 32, 64, "8"
        a.attn_batch, a.attn_heads, a.attn_seq, a.attn_head_dim = 1, 2, 16, 8
        a.block_batch, a.block_seq, a.block_hidden, a.block_heads, a.block_intermediate = 2, 8, 32, 2, 64
        a.rounds, a.calls = min(a.rounds, 2), min(a.calls, 3)
    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    a.compile_backend = a.compile_backend or ("inductor" if a.device == "cuda" else "eager")
    a.sweep_tokens = [int(t) for t in a.sweep_tokens.split(",") if t]
    a.groups = [g for g in a.groups.split(",") if g]
    bad = [g for g in a.groups if g not in GROUPS]
    if bad:
        p.error("unknown group(s) %s; choose from %s" % (bad, GROUPS))
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    programs = Programs(a)
    if programs.device.type == "cuda" and a.gpu_warmup_s > 0:
        from .record import gpu_warmup

        gpu_warmup(programs.device, a.gpu_warmup_s)
    log("env %s; groups %s; %d rounds x %d calls" % (programs.env, a.groups, a.rounds, a.calls))
    for group in a.groups:
        t0 = time.perf_counter()
        progs = getattr(programs, group)()
        run_group(group, progs, a, programs.device)
        log("== %s: %d programs x %d rounds in %.1f s" % (group, len(progs), a.rounds, time.perf_counter() - t0))
        del progs
        if programs.device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
