"""The ``block`` and ``shapes`` groups of ``workloads.record``.

block   (``<out>/block/``): the Llama-style decoder block (``block.py``) for
        inference (``<variant>_block``) and for a training step
        (``train_<variant>_block``: ``zero_grad(set_to_none)``, forward,
        ``y.backward(randn)``, ``AdamW(fused=True)``), variants ``eager``
        (SDPA), ``eager_math`` (eager math attention), ``compiled``
        (``torch.compile(eager SDPA block, dynamic=False)``) and ``liger``.
        Each output (training: output and every parameter's gradient) is
        checked against the eager SDPA block before profiling; then 3 active
        steps are profiled after 5 warm-up calls, as in ``record.py``.
shapes  (``<out>/sweep/``): the GeGLU MLP (``geglu``) and the block
        (``block``) called with a different token count on each profiled
        step (``--shape-tokens``), variants ``eager``, ``liger``,
        ``compiled_static`` (``torch.compile(dynamic=False)``) and
        ``compiled_default`` (``torch.compile()``).  Nothing of the workload
        runs before the profiler window, so compilation and JIT happen inside
        it.  Outputs are checked against eager after the window; then every
        distinct shape is timed with CUDA events outside the profiler.  Run
        one variant per process (``--shape-variants``) with empty
        ``TORCHINDUCTOR_CACHE_DIR``/``TRITON_CACHE_DIR`` for cold compiles.
"""

from __future__ import annotations

import copy
import os
import time

import torch

from .block import block_flops, liger_block_status, make_block
from .models import GeGLUMLP, check_close, liger_status, make_liger_mlp
from .profiling import record_steps, run_meta, synchronize
from .timing import time_fn

BLOCK_VARIANTS = ("eager", "eager_math", "compiled", "liger")
SHAPE_VARIANTS = ("eager", "liger", "compiled_static", "compiled_default")
SHAPE_MODELS = ("geglu", "block")
BLOCK_ACTIVE = 3


class GradientMismatch(Exception):
    """A training variant's gradients differ from eager's beyond tolerance."""


def _adamw(params) -> tuple[torch.optim.Optimizer, str]:
    """``AdamW(lr=1e-4, fused=True)``; where this torch/device has no fused
    AdamW (old CPU builds), the default implementation, and say so."""
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=1e-4, fused=True), "AdamW(lr=1e-4, fused=True)"
    except (RuntimeError, TypeError) as exc:
        return torch.optim.AdamW(params, lr=1e-4), "AdamW(lr=1e-4) (fused unavailable: %s)" % exc


def _grads(model: torch.nn.Module) -> torch.Tensor:
    """All parameter gradients, by parameter name, as one fp32 vector."""
    named = sorted(model.named_parameters())
    missing = [n for n, p in named if p.grad is None]
    if missing:
        raise RuntimeError("no gradient for %s" % missing)
    return torch.cat([p.grad.detach().float().flatten() for _, p in named])


def block_cfg(a) -> dict:
    seqs = [t // a.block_batch for t in a.shape_tokens]
    return {"hidden": a.block_hidden, "heads": a.block_heads, "intermediate": a.block_intermediate,
            "max_seq": max([a.block_seq] + seqs), "kind": getattr(a, "block_kind", "llama")}


def _block_meta(rec, variant: str, mode: str, cfg: dict, **extra) -> dict:
    a = rec.args
    compiled = variant.startswith("compiled")
    return run_meta(rec.env, variant=variant, tokens=a.block_batch * a.block_seq, hidden=cfg["hidden"],
                    intermediate=cfg["intermediate"], dtype=a.dtype, mode=mode, model="%s_block" % cfg["kind"],
                    batch=a.block_batch, seq=a.block_seq, heads=cfg["heads"], head_dim=cfg["hidden"] // cfg["heads"],
                    causal=True, attention="math" if variant == "eager_math" else "sdpa",
                    steps_active=a.block_active, compile_backend=rec.backend if compiled else None,
                    compile_dynamic=False if compiled else None,
                    flops=block_flops(a.block_batch * a.block_seq, a.block_seq, a.block_batch, cfg["hidden"],
                                      cfg["intermediate"]), **extra)


def _block_model(rec, variant: str, cfg: dict, base):
    """(module holding the parameters, callable) for one block variant."""
    from .models import compile_fn

    dev, dt = rec.device, rec.dtype
    if variant == "liger":
        model = make_block(cfg, "liger", "sdpa", dev, dt, like=base)
        return model, model
    model = make_block(cfg, "eager", "math" if variant == "eager_math" else "sdpa", dev, dt, like=base)
    if variant == "compiled":
        return model, compile_fn(model, backend=rec.backend)
    return model, model


def _block_skip(rec, folder: str, name: str, variant: str) -> bool:
    if getattr(rec.args, "block_kind", "llama") != "llama" and variant in ("liger", "eager_math"):
        rec.skip(folder, name, "the %s block has eager SDPA and compiled variants only" % rec.args.block_kind)
        return True
    if variant == "liger":
        ok, why = liger_block_status(rec.device)
        if not ok:
            rec.skip(folder, name, why)
            return True
    if variant.startswith("compiled") and rec.backend == "none":
        rec.skip(folder, name, "compile disabled (--compile-backend none)")
        return True
    return False


def block(rec, folder: str) -> None:
    """Inference then training variants of the decoder block."""
    a = rec.args
    dev, dt = rec.device, rec.dtype
    cfg = block_cfg(a)
    base = make_block(cfg, "eager", "sdpa", dev, dt)
    torch.manual_seed(1)
    x = torch.randn(a.block_batch, a.block_seq, cfg["hidden"], device=dev, dtype=dt)
    gy = torch.randn_like(x)
    variants = [v for v in BLOCK_VARIANTS if v in a.block_variants]

    # inference
    with torch.no_grad():
        ref = base.eval()(x)
    fns = {}
    for v in variants:
        name = "%s_block" % v
        if _block_skip(rec, folder, name, v):
            continue

        def infer(v=v, name=name):
            model, call = _block_model(rec, v, cfg, base)
            model.eval()
            meta = _block_meta(rec, name, "forward", cfg)
            fns[name] = rec.run_one(folder, name, lambda: call(x), ref, meta, active=rec.args.block_active)

        rec.guarded(folder, name, infer)
    rec.interleave(folder, "*_block", fns)

    # training
    base.train()
    ref_y = base(x)
    ref_y.backward(gy)
    ref_g = _grads(base)
    base.zero_grad(set_to_none=True)
    ref_y = ref_y.detach()
    fns = {}
    for v in variants:
        name = "train_%s_block" % v
        if _block_skip(rec, folder, name, v):
            continue

        def train(v=v, name=name):
            model, call = _block_model(rec, v, cfg, base)
            model.train()
            # check (first call: compiles forward and backward) with the initial weights
            y = call(x)
            y.backward(gy)
            check = check_close(y, ref_y, name, dt)
            try:
                gcheck = check_close(_grads(model), ref_g, name + " gradients", dt)
            except RuntimeError as exc:  # fails this variant only (guarded), not the whole run
                raise GradientMismatch(str(exc).replace("OUTPUT MISMATCH", "gradient mismatch")) from None
            rec.log_check(name + " gradients", gcheck)
            model.zero_grad(set_to_none=True)
            del y
            opt, opt_desc = _adamw(model.parameters())

            def step():
                opt.zero_grad(set_to_none=True)
                out = call(x)
                out.backward(gy)
                opt.step()

            meta = _block_meta(rec, v + "_block", "train", cfg, optimizer=opt_desc,
                               backward="y.backward(randn grad)", grad_check=gcheck)
            fns[name] = rec.run_one(folder, name, step, None, meta, grad=True, active=rec.args.block_active,
                                    iters=max(50, a.timing_iters // 2), check=check)

        rec.guarded(folder, name, train)
    rec.interleave(folder, "train_*_block", fns, grad=True)


def _cache_dirs() -> dict:
    """The Inductor/Triton cache folders from the environment and whether
    each was empty (or absent) when the variant started."""
    out = {}
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        path = os.environ.get(var)
        out[var] = path
        out[var + "_empty"] = None if path is None else (not os.path.isdir(path) or not os.listdir(path))
    return out


def _dynamo_probe() -> dict:
    from torch._dynamo.utils import counters

    return {"dynamo_unique_graphs": int(counters["stats"]["unique_graphs"]),
            "dynamo_frames_ok": int(counters["frames"]["ok"])}


def _sweep_inputs(rec, model_kind: str, hidden: int) -> list[torch.Tensor]:
    a = rec.args
    torch.manual_seed(2)
    if model_kind == "geglu":
        return [torch.randn(t, hidden, device=rec.device, dtype=rec.dtype) for t in a.shape_tokens]
    return [torch.randn(a.block_batch, t // a.block_batch, hidden, device=rec.device, dtype=rec.dtype)
            for t in a.shape_tokens]


def _sweep_model(rec, model_kind: str, variant: str):
    """(eager reference module, callable) for one sweep variant."""
    a = rec.args
    dev, dt = rec.device, rec.dtype
    if model_kind == "geglu":
        torch.manual_seed(0)
        ref = GeGLUMLP(a.hidden, a.intermediate).to(device=dev, dtype=dt).eval()
    else:
        ref = make_block(block_cfg(a), "eager", "sdpa", dev, dt).eval()
    if variant == "eager":
        return ref, ref
    if variant == "liger":
        liger = make_liger_mlp(ref) if model_kind == "geglu" else make_block(block_cfg(a), "liger", "sdpa", dev, dt,
                                                                              like=ref)
        return ref, liger.eval()
    torch._dynamo.reset()
    model = copy.deepcopy(ref)
    if variant == "compiled_static":
        return ref, torch.compile(model, backend=rec.backend, dynamic=False)
    return ref, torch.compile(model, backend=rec.backend)


def _sweep_skip(rec, folder: str, name: str, model_kind: str, variant: str) -> bool:
    if variant == "liger":
        ok, why = liger_status(rec.device) if model_kind == "geglu" else liger_block_status(rec.device)
        if not ok:
            rec.skip(folder, name, why)
            return True
    if variant.startswith("compiled") and rec.backend == "none":
        rec.skip(folder, name, "compile disabled (--compile-backend none)")
        return True
    return False


def sweep_one(rec, folder: str, model_kind: str, variant: str) -> None:
    a = rec.args
    name = "%s_%s" % (variant, model_kind)
    caches = _cache_dirs()
    ref_model, call = _sweep_model(rec, model_kind, variant)
    hidden = a.hidden if model_kind == "geglu" else a.block_hidden
    xs = _sweep_inputs(rec, model_kind, hidden)
    outs: list[torch.Tensor] = []
    steps = [(lambda x=x: outs.append(call(x))) for x in xs]
    idle = torch.zeros(1, device=rec.device)

    def idle_fn():
        idle.add_(1)

    compiled = variant.startswith("compiled")
    extra = {"model": "geglu_mlp" if model_kind == "geglu" else "llama_block", "shape_sweep": True,
             "steps_active": len(xs), "compile_backend": rec.backend if compiled else None,
             "compile_dynamic": {"compiled_static": False, "compiled_default": None}.get(variant),
             "compiled_in_window": compiled, "caches": caches}
    if model_kind == "block":
        extra.update(batch=a.block_batch, seq=[t // a.block_batch for t in a.shape_tokens], heads=a.block_heads,
                     causal=True, attention="sdpa")
    meta = run_meta(rec.env, variant=name, tokens=list(a.shape_tokens), hidden=hidden,
                    intermediate=a.intermediate if model_kind == "geglu" else a.block_intermediate,
                    dtype=a.dtype, mode="forward", **extra)
    meta = dict(meta, name=name, device=str(rec.device))
    path = os.path.join(folder, name + ".json.gz")
    rec.log_msg("%s: profiling %d steps of %s tokens (compilation/JIT inside the window)" % (
        name, len(xs), list(a.shape_tokens)))
    t0 = time.perf_counter()
    probe = _dynamo_probe if compiled else None
    per_step = record_steps(steps, idle_fn, path, meta, rec.device, probe=probe)
    window_s = time.perf_counter() - t0
    for t, s in zip(a.shape_tokens, per_step):
        s["tokens"] = t
    # output check after the window (before it would compile/warm the shapes)
    with torch.no_grad():
        checks = [dict(check_close(o, ref_model(x), "%s step %d (%d tokens)" % (name, i, t), rec.dtype), tokens=t)
                  for i, (o, x, t) in enumerate(zip(outs, xs, a.shape_tokens))]
    worst = max(c["rel_err"] for c in checks)
    rec.log_msg("%s: all %d steps match eager (worst rel err %.2e)" % (name, len(checks), worst))
    outs.clear()
    per_shape = {}
    for t in sorted(set(a.shape_tokens)):
        x = xs[list(a.shape_tokens).index(t)]
        per_shape[str(t)] = time_fn(lambda x=x: call(x), rec.device, iters=a.shape_timing_iters, warmup=3)
    entry = {"trace": os.path.basename(path), "trace_bytes": os.path.getsize(path), "meta": meta,
             "window_s": window_s, "profiled_steps": per_step, "checks": checks, "steady_state": per_shape,
             "about": "profiled_steps: host wall time of each profiled step (call + synchronize, inside the "
                      "profiler, first-call costs included); steady_state: per distinct shape, timings outside "
                      "the profiler after the window (workloads/timing.py)"}
    rec.save_timing(folder, name, entry)
    key = "cuda_event_ms" if "cuda_event_ms" in next(iter(per_shape.values())) else "host_sync_ms"
    rec.log_msg("%s: steps %s ms; steady %s ms (%s median)" % (
        name, ", ".join("%d:%.0f" % (s["tokens"], s["host_sync_ms"]) for s in per_step),
        ", ".join("%s:%.3f" % (t, r[key]["median"]) for t, r in per_shape.items()), key))


def shapes(rec, folder: str) -> None:
    a = rec.args
    for model_kind in a.shape_models:
        for v in a.shape_variants:
            name = "%s_%s" % (v, model_kind)
            if _sweep_skip(rec, folder, name, model_kind, v):
                continue
            rec.guarded(folder, name, lambda m=model_kind, v=v: sweep_one(rec, folder, m, v))
            synchronize(rec.device)
