"""One profiler setup for every workload, and the run metadata written into
each trace under the top-level key ``tracelens_run``."""

from __future__ import annotations

import contextlib
import gzip
import importlib.metadata
import json
import os
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from . import TOOL

WAIT, WARMUP, ACTIVE = 1, 2, 5
META_KEY = "tracelens_run"


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(device: torch.device) -> dict:
    """Versions and hardware facts (None where not applicable/absent)."""
    cuda = device.type == "cuda"
    return {
        "torch": torch.__version__,
        "triton": _dist_version("triton") or _dist_version("pytorch-triton"),
        "liger_kernel": _dist_version("liger-kernel") or _dist_version("liger_kernel"),
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "cuda": torch.version.cuda if cuda else None,
    }


def run_meta(env: dict, *, variant: str, tokens, hidden, intermediate, dtype: str, mode: str, **extra) -> dict:
    meta = {
        "variant": variant,
        "tokens": tokens,
        "hidden": hidden,
        "intermediate": intermediate,
        "dtype": dtype,
        "mode": mode,
        "torch": env["torch"],
        "triton": env["triton"],
        "liger_kernel": env["liger_kernel"],
        "gpu": env["gpu"],
        "cuda": env["cuda"],
        "steps_active": ACTIVE,
        "tool": TOOL,
    }
    meta.update(extra)
    return meta


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def record_trace(
    step_fn: Callable[[], object],
    path: str,
    meta: dict,
    device: torch.device,
    grad: bool = False,
    active: int = ACTIVE,
    profile_memory: bool = False,
    record_shapes: bool = True,
) -> None:
    """Profile ``step_fn`` for wait=1, warmup=2, ``active`` (default 5) steps
    and export a gzip Chrome trace to ``path`` (which must end in .json.gz).

    ``record_shapes``: the profiler's option of that name (input shapes, strides and scalar arguments per op).

    ``profile_memory``: also record the allocator's ``[memory]`` events
    (allocations and frees with Addr, Bytes, Total Allocated / Reserved), which
    tracelens' ``memory`` analysis reads; it slows the recorded steps.

    The caller must have finished compilation/autotuning (warm-up calls) and
    created the inputs already.  Each step ends with a device synchronize
    before ``prof.step()``.
    """
    if not path.endswith(".json.gz"):
        raise ValueError("trace path must end with .json.gz: %s" % path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    meta_json = json.dumps(dict(meta, steps_active=active))
    exported = []

    def on_ready(p):
        p.export_chrome_trace(path)
        exported.append(path)

    grad_ctx = contextlib.nullcontext() if grad else torch.no_grad()
    synchronize(device)
    with grad_ctx, profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=active, repeat=1),
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        on_trace_ready=on_ready,
    ) as prof:
        for i in range(WAIT + WARMUP + active):
            if i == WAIT + WARMUP:  # first active step: the profiler is recording
                prof.add_metadata_json(META_KEY, meta_json)
            step_fn()
            synchronize(device)
            prof.step()
    if not exported or not os.path.exists(path):
        raise RuntimeError("profiler did not export %s" % path)
    _ensure_meta(path, meta)


def record_steps(
    step_fns: list[Callable[[], object]],
    idle_fn: Callable[[], object],
    path: str,
    meta: dict,
    device: torch.device,
    grad: bool = False,
    probe: Callable[[], dict] | None = None,
) -> list[dict]:
    """Profile one call of each of ``step_fns`` (one active step each, in
    order) and export a gzip Chrome trace to ``path``.

    Unlike ``record_trace`` nothing of the workload runs before the window:
    the profiler's single warm-up step runs ``idle_fn`` (a tiny op, not the
    workload), so first-call costs (Dynamo/Inductor compilation, Triton JIT,
    cuBLAS heuristics) of every step's shape land inside the recorded steps.
    Each step ends with a device synchronize before ``prof.step()``.

    Returns, per step, the host wall time of the call plus the synchronize
    (``host_sync_ms``, measured inside the profiler, so it includes the
    profiler's own overhead) and, with ``probe``, ``probe()`` after the step
    minus ``probe()`` before it (numeric values only).
    """
    if not path.endswith(".json.gz"):
        raise ValueError("trace path must end with .json.gz: %s" % path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    meta_json = json.dumps(meta)
    exported = []
    steps: list[dict] = []

    def on_ready(p):
        p.export_chrome_trace(path)
        exported.append(path)

    grad_ctx = contextlib.nullcontext() if grad else torch.no_grad()
    synchronize(device)
    with grad_ctx, profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=len(step_fns), repeat=1),
        record_shapes=True,
        on_trace_ready=on_ready,
    ) as prof:
        idle_fn()
        synchronize(device)
        prof.step()
        prof.add_metadata_json(META_KEY, meta_json)
        for fn in step_fns:
            before = probe() if probe else {}
            t0 = time.perf_counter()
            fn()
            synchronize(device)
            t1 = time.perf_counter()
            after = probe() if probe else {}
            step = {"host_sync_ms": (t1 - t0) * 1e3}
            step.update({k: after[k] - before.get(k, 0) for k in after})
            steps.append(step)
            prof.step()
    if not exported or not os.path.exists(path):
        raise RuntimeError("profiler did not export %s" % path)
    _ensure_meta(path, meta)
    return steps


def _ensure_meta(path: str, meta: dict) -> None:
    """Check the exported file is gzip JSON with traceEvents and our key; if
    this torch dropped the metadata, add it (and say so)."""
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    if "traceEvents" not in data:
        raise RuntimeError("%s has no traceEvents" % path)
    if data.get(META_KEY) != meta:
        print("  note: %s lacked %s after export; added it by rewriting the file" % (path, META_KEY), flush=True)
        data[META_KEY] = meta
        with gzip.open(path, "wt") as f:
            json.dump(data, f)
