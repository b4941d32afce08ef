"""What the profiler costs per recorded event, and what that cost follows (issue #27's open question).

The profiler-free model (docs/profiler_overhead.md) charges each recorded CPU op and runtime call a constant in
launch calls, fitted on the study's programs (0.35); Hugging Face training costs about twice that per event on
three H100 hosts. Three guesses, each a pair of programs that differ in one thing only, every trace taken in
alternation with its CUDA-event reference (workloads.interleaved's protocol and file layout):

- **events per step** (`chain_k4` / `chain_k32` / `chain_k256`): the same flat Python loop of K (Linear, GELU)
  pairs at 8 tokens (CPU-limited); if the cost per event grows with the events a step records (buffers), it
  grows with K;
- **Python between ops** (`nested_k32` / `nested_k256` against `chain_k32` / `chain_k256`): the same ops, each
  called through four levels of `nn.Module` with a little Python per level, as Hugging Face's models do;
- **backward** (`train_k32` / `train_k256`): the flat chain with its backward (the autograd thread's events).

    python -m workloads.profiler_cost --out /tmp/pc --rounds 3
    python -m workloads.profiler_cost --out /tmp/pc --device cpu  # the CPU profiler alone (no CUPTI)
    python -m workloads.profiler_cost --out /tmp/pc --smoke       # CPU, 2 rounds of 3 calls
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch import nn

from .interleaved import log, run_group
from .profiling import environment, run_meta, synchronize


class Chain(nn.Module):
    """K (Linear, GELU) pairs called from one flat Python loop."""

    def __init__(self, k: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(k))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return x


class Wrap(nn.Module):
    """One level of module nesting with a little Python (a config lookup, a branch), as Hugging Face's layers do."""

    def __init__(self, inner: nn.Module, depth: int) -> None:
        super().__init__()
        self.inner = inner
        self.config = {"act": "gelu", "residual": False, "depth": depth}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.config["residual"]:
            return x + self.inner(x)
        return self.inner(x)


class Nested(nn.Module):
    """The chain's ops, each Linear called through four `Wrap` levels."""

    def __init__(self, k: int, hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(self._wrapped(nn.Linear(hidden, hidden)) for _ in range(k))

    @staticmethod
    def _wrapped(layer: nn.Module) -> nn.Module:
        for depth in range(4):
            layer = Wrap(layer, depth)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = nn.functional.gelu(layer(x))
        return x


def programs(a: argparse.Namespace, device: torch.device) -> dict:
    env = environment(device)
    torch.manual_seed(0)
    x = torch.randn(a.tokens, a.hidden, device=device)
    progs = {}
    for name, model, train in (
        ("chain_k4", Chain(4, a.hidden), False),
        ("chain_k32", Chain(32, a.hidden), False),
        ("chain_k256", Chain(256, a.hidden), False),
        ("nested_k32", Nested(32, a.hidden), False),
        ("nested_k256", Nested(256, a.hidden), False),
        ("train_k32", Chain(32, a.hidden), True),
        ("train_k256", Chain(256, a.hidden), True),
    ):
        model = model.to(device)

        def fn(model: nn.Module = model, train: bool = train) -> None:
            if train:
                with torch.enable_grad():
                    model(x).sum().backward()
            else:
                model(x)

        for _ in range(5):
            fn()
        synchronize(device)
        meta = run_meta(env, variant=name, tokens=a.tokens, hidden=a.hidden, intermediate=None, dtype="fp32",
                        mode="train" if train else "forward", group="profiler_cost")
        progs[name] = (fn, dict(meta, name=name, device=str(device)))
        log("%s: ready" % name)
    return progs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.profiler_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=40, help="CUDA-event calls before and after each trace")
    p.add_argument("--active", type=int, default=5, help="profiled steps per trace (after wait 1, warm-up 2)")
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--device", default=None, help="default: cuda where available")
    p.add_argument("--smoke", action="store_true", help="CPU, 2 rounds of 3 calls")
    a = p.parse_args(argv)
    if a.smoke:
        a.device, a.rounds, a.calls = "cpu", min(a.rounds, 2), min(a.calls, 3)
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    t0 = time.perf_counter()
    progs = programs(a, device)
    run_group("profiler_cost", progs, a, device)
    log("== profiler_cost: %d programs x %d rounds in %.1f s" % (len(progs), a.rounds, time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
