"""Redistributable stand-ins for what the non-redistributable corpus traces check (issue #31: the suite stands on
its own). Run on the H200 by the lead; `--device cpu` for a smoke run.

1. `nostep_compile_train.json.gz`: a small MLP with a graph break in its forward, `torch.compile`d with cold
   caches and trained 3 iterations under the profiler WITHOUT ProfilerStep (no schedule, no `prof.step()`):
   frame 0 compiles at the first call, its backward lazily at the first backward, frame 1 after the graph break
   (what Wings236's `trace_compile.json.gz` checks).
2. `cpu_only_train.json.gz`: an eager training loop profiled with CPU activity only, 3 ProfilerSteps: a trace
   with no GPU activity (what HazyResearch/zoology's trace checks).

    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \\
        python -m workloads.stand_ins --out traces/h200/stand_ins
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

from .truth3 import _export


class BrokenMLP(nn.Module):
    """Two Linear layers with a graph break between them (two Dynamo frames)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.up(x))
        torch._dynamo.graph_break()
        return self.down(h).relu()


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


def nostep_compile_train(out: str, device: torch.device) -> None:
    torch.manual_seed(0)
    model = BrokenMLP(512).to(device)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    t0 = time.perf_counter()
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(3):
            _train_step(compiled, opt, x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    meta = {"name": "nostep_compile_train", "iterations": 3, "device": str(device), "wall_s": time.perf_counter() - t0}
    _export(prof, os.path.join(out, "nostep_compile_train.json.gz"), meta)


def cpu_only_train(out: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256)
    for _ in range(2):
        _train_step(model, opt, x)
    plan = schedule(wait=0, warmup=1, active=3, repeat=1)  # without a schedule, prof.step() writes no ProfilerStep
    path = os.path.join(out, "cpu_only_train.json.gz")

    def ready(prof: profile) -> None:
        _export(prof, path, {"name": "cpu_only_train", "steps": 3})

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=plan, on_trace_ready=ready) as prof:
        for _ in range(5):
            _train_step(model, opt, x)
            prof.step()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    nostep_compile_train(args.out, torch.device(args.device))
    cpu_only_train(args.out)
    for name in sorted(os.listdir(args.out)):
        print(name, os.path.getsize(os.path.join(args.out, name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
