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

`--group ops` (the second experiment): what one event of each kind costs, and whether Hugging Face's cost is its
program's or `tracelens record`'s protocol. Programs of one kind of op each, K calls a step on a CUDA tensor of
8 × 256 (fp32): view ops that launch nothing (`views_k256`: view, transpose, t, unsqueeze), one-kernel pointwise
ops (`pointwise_k256`, and `pointwise_k256_noshapes` recorded without `record_shapes`), small GEMMs (`mm_k256`,
cuBLAS), dtype casts (`cast_k128`: to bf16 and back), allocations that launch nothing (`empty_k256`); and the
held-out Hugging Face Llama at 1 × 128 tokens (workloads/hf_record.py's model and AdamW) in this protocol:
`hf_train`, `hf_train_noshapes`, `hf_forward` (no grad).

    python -m workloads.profiler_cost --out /tmp/pc --rounds 3
    python -m workloads.profiler_cost --out /tmp/pc --device cpu  # the CPU profiler alone (no CUPTI)
    python -m workloads.profiler_cost --out /tmp/pc --smoke       # CPU, 2 rounds of 3 calls
    python -m workloads.profiler_cost --out /tmp/pc --group ops   # the second experiment
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


def _ops_steps(a: argparse.Namespace, device: torch.device) -> dict:
    """The `ops` group's single-kind programs: {name: (step function, record_shapes)}."""
    x = torch.randn(a.tokens, a.hidden, device=device)
    w = torch.randn(a.hidden, a.hidden, device=device) / a.hidden
    k = 256

    def views() -> None:
        for _ in range(k):
            x.view(-1).view(a.tokens, a.hidden).transpose(0, 1).t().unsqueeze(0)
        x.add(1.0)  # one kernel: the step has GPU work to time

    def pointwise() -> None:
        y = x
        for _ in range(k):
            y = y.mul(1.0001)

    def mm() -> None:
        y = x
        for _ in range(k):
            y = torch.mm(y, w)

    def cast() -> None:
        y = x
        for _ in range(k // 2):
            y = y.to(torch.bfloat16).to(torch.float32)

    def empty() -> None:
        for _ in range(k):
            torch.empty(a.tokens, a.hidden, device=device)
        x.add(1.0)

    return {"views_k256": (views, True), "pointwise_k256": (pointwise, True),
            "pointwise_k256_noshapes": (pointwise, False), "mm_k256": (mm, True), "cast_k128": (cast, True),
            "empty_k256": (empty, True)}


def _hf_steps(a: argparse.Namespace, device: torch.device) -> dict:
    """The held-out Hugging Face Llama at 1 × 128 tokens: a training step (forward, backward, fused AdamW, zero_grad)
    with and without `record_shapes`, and a forward without grad. {} where transformers is missing."""
    try:
        from .hf_record import build
    except ImportError as exc:
        log("SKIP hf programs: %s" % exc)
        return {}
    small = device.type != "cuda"
    model = build(small, device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    tokens = torch.randint(3, model.config.vocab_size, (1, 16 if small else 128), device=device)

    def train() -> None:
        with torch.enable_grad():
            model(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def forward() -> None:
        model(input_ids=tokens)

    return {"hf_train": (train, True), "hf_train_noshapes": (train, False), "hf_forward": (forward, True)}


def ops_programs(a: argparse.Namespace, device: torch.device) -> dict:
    env = environment(device)
    torch.manual_seed(0)
    progs = {}
    for name, (fn, shapes) in {**_ops_steps(a, device), **_hf_steps(a, device)}.items():
        for _ in range(5):
            fn()
        synchronize(device)
        meta = run_meta(env, variant=name, tokens=a.tokens, hidden=a.hidden, intermediate=None, dtype="fp32",
                        mode="train" if name.startswith("hf_train") else "forward", group="profiler_cost_ops")
        progs[name] = (fn, dict(meta, name=name, device=str(device), record_shapes=shapes))
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
    p.add_argument("--group", choices=("chain", "ops"), default="chain", help="which experiment (docstring)")
    a = p.parse_args(argv)
    if a.smoke:
        a.device, a.rounds, a.calls = "cpu", min(a.rounds, 2), min(a.calls, 3)
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    t0 = time.perf_counter()
    group = "profiler_cost" if a.group == "chain" else "profiler_cost_ops"
    progs = programs(a, device) if a.group == "chain" else ops_programs(a, device)
    run_group(group, progs, a, device)
    log("== profiler_cost: %d programs x %d rounds in %.1f s" % (len(progs), a.rounds, time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
