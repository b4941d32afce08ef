"""Recordings that issue #27 still lacks (run on the H200 by the lead; CPU smoke: `--device cpu`).

1. `nostep_autotune_mlp.json.gz`: a shape sweep of a compiled GeGLU MLP under `mode="max-autotune"` with cold
   caches, profiled WITHOUT ProfilerStep (no schedule, no `prof.step()`): Inductor's autotuning benchmark runs
   and their L2-flush fills land in the trace beside the workload (item 6).
2. `sync_chain_eager.json.gz` / `sync_chain_compiled.json.gz`: `abs -> amax -> .item() -> mul` per step, eager
   and compiled (the `.item()` is a graph break), with ProfilerSteps (item 7).

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \\
        python -m workloads.truth3 --out traces/h200/truth3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def _activities(device: torch.device) -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _export(prof: profile, path: str, meta: dict) -> None:
    raw = path.removesuffix(".gz")
    prof.export_chrome_trace(raw)
    with open(raw) as handle:
        document = json.load(handle)
    document["tracelens_run"] = meta
    with gzip.open(path, "wt") as handle:
        json.dump(document, handle)
    os.remove(raw)


def geglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.gelu(x @ w_gate, approximate="tanh") * (x @ w_up)) @ w_down


def record_nostep_autotune(out: str, device: torch.device, hidden: int, tokens: list[int]) -> None:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    weights = [torch.randn(hidden, 4 * hidden, device=device, dtype=dtype) * 0.02 for _ in range(2)]
    weights.append(torch.randn(4 * hidden, hidden, device=device, dtype=dtype) * 0.02)
    mode = "max-autotune" if device.type == "cuda" else None
    compiled = torch.compile(geglu, mode=mode, dynamic=False)
    with profile(activities=_activities(device), record_shapes=True) as prof:  # no schedule: no ProfilerStep
        for n in tokens:
            x = torch.randn(n, hidden, device=device, dtype=dtype)
            for _ in range(3):  # first call compiles and autotunes for this shape, the next two are the workload
                compiled(x, *weights)
            _sync(device)
    meta = {"variant": "nostep_autotune_mlp", "tokens": tokens, "hidden": hidden, "mode": mode or "default"}
    _export(prof, os.path.join(out, "nostep_autotune_mlp.json.gz"), meta)


def sync_chain(x: torch.Tensor) -> torch.Tensor:
    y = x.abs()
    scale = y.amax().item()  # a host sync: a graph break for torch.compile
    return x * (1.0 / scale)


def record_sync_chain(out: str, device: torch.device, n: int) -> None:
    x = torch.randn(n, n, device=device)
    for variant, fn in (("sync_chain_eager", sync_chain), ("sync_chain_compiled", torch.compile(sync_chain))):
        for _ in range(3):
            fn(x)
        _sync(device)
        with profile(
            activities=_activities(device), record_shapes=True, schedule=schedule(wait=1, warmup=1, active=4)
        ) as prof:
            for _ in range(6):
                fn(x)
                _sync(device)
                prof.step()
        _export(prof, os.path.join(out, f"{variant}.json.gz"), {"variant": variant, "n": n})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--hidden", type=int, default=2048)
    args = parser.parse_args()
    device = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)
    small = device.type != "cuda"
    record_nostep_autotune(args.out, device, 256 if small else args.hidden, [8, 16] if small else [512, 2048, 4096])
    record_sync_chain(args.out, device, 64 if small else 4096)


if __name__ == "__main__":
    main()
