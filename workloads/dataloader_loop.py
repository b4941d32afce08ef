"""A training loop fed by a DataLoader, eager and compiled, with and without ProfilerStep (issues #27 item 6 and
#28: steps from a loop's DataLoader ranges, and actions that keep the wait for the next batch). Run on the H200
from the repository root:

    python3 workloads/dataloader_loop.py OUTDIR        (needs CUDA; its traces are traces/h200/dataloader/)

The model: the study's GeGLU MLP (hidden 2048, intermediate 8192, bf16) with AdamW, on batches of 256 tokens
that a `torch.utils.data.DataLoader` (num_workers=0) builds on the CPU each step (`BATCH_WORK` matmuls of a
256x256 fp32 tensor: host work no compiled region or CUDA graph holds), copied to the GPU, then forward,
backward and the optimizer step, with a synchronize at the end of each step.

Per variant it writes OUTDIR/NAME.json.gz (torch.profiler, activities CPU+CUDA, record_shapes) and an entry in
OUTDIR/timings.json in the format of traces/h200/extra/timings.json: `runs[NAME].cuda_event_ms` are CUDA
events around each of 30 steps of the same loop run WITHOUT the profiler after the window (the device
synchronized before each), so they are the profiler-free step time of the same steps.

Variants: `train_eager` / `train_compiled` (torch.compile of the model, default mode; compiled and warmed
before the window): 8 iterations each, with `prof.step()` after each (without a schedule torch 2.11 records no
ProfilerStep range for it: these traces have none either); `train_eager_nostep`: the eager loop without
`prof.step()` (10 iterations in one window). Every trace's steps are the DataLoader's and the optimizer's own
ranges (traces/h200/dataloader/README.md says what the recordings turned out to be).
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

HIDDEN, INTERMEDIATE, TOKENS, BATCH_WORK = 2048, 8192, 256, 40


class GeGLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.gelu(self.gate(x), approximate="tanh") * self.up(x))


class Batches(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Each item costs host work (the CPU side of a real input pipeline), then yields one batch."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int) -> torch.Tensor:
        work = torch.randn(256, 256)
        for _ in range(BATCH_WORK):
            work = torch.tanh(work @ work) * 0.5
        return torch.randn(TOKENS, HIDDEN) + work.mean()


def _loader() -> torch.utils.data.DataLoader:  # type: ignore[type-arg]
    return torch.utils.data.DataLoader(Batches(), batch_size=None, num_workers=0)


def _setup(compiled: bool) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = GeGLU().cuda().to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return (torch.compile(model) if compiled else model), optimizer  # type: ignore[return-value]


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> None:
    x = batch.to("cuda", torch.bfloat16, non_blocking=False)
    optimizer.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    optimizer.step()
    torch.cuda.synchronize()


def _timed(model: nn.Module, optimizer: torch.optim.Optimizer, batches: object, n: int) -> list[float]:
    """CUDA events around each of `n` loop iterations (next batch included), no profiler."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _step(model, optimizer, next(batches))  # type: ignore[call-overload]
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return out


def record(name: str, compiled: bool, stepped: bool, out: str) -> dict[str, object]:
    model, optimizer = _setup(compiled)
    batches = iter(_loader())
    for _ in range(5):  # warm-up (and the compile)
        _step(model, optimizer, next(batches))
    path = os.path.join(out, f"{name}.json.gz")
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts, record_shapes=True) as prof:
        iterator = iter(_loader())
        for _ in range(8 if stepped else 10):
            _step(model, optimizer, next(iterator))
            if stepped:
                prof.step()
    raw = path[: -len(".gz")]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        dst.write(src.read())
    os.remove(raw)
    times = _timed(model, optimizer, batches, 30)
    return {
        "trace": f"{name}.json.gz",
        "iters": len(times),
        "cuda_event_ms": {"median": statistics.median(times), "min": min(times), "max": max(times), "n": len(times)},
    }


def write_timings(out: str, runs: dict[str, object]) -> None:
    """`out`/timings.json: the runs' CUDA-event timings with the environment and the command."""
    document = {
        "about": "CUDA events around each loop iteration (next batch, copy, forward, backward, AdamW, sync), "
        "measured outside the profiler after the window (ms)",
        "environment": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
                        "cpus": os.cpu_count()},
        "command": " ".join(sys.argv),
        "runs": runs,
    }
    with open(os.path.join(out, "timings.json"), "w") as handle:
        json.dump(document, handle, indent=1)


def main(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    runs: dict[str, object] = {}
    for name, compiled, stepped in (
        ("train_eager", False, True),
        ("train_compiled", True, True),
        ("train_eager_nostep", False, False),
    ):
        t0 = time.time()
        try:
            runs[name] = record(name, compiled, stepped, out)
            print(f"{name}: {runs[name]['cuda_event_ms']} ({time.time() - t0:.1f} s)", flush=True)
        except Exception as error:  # noqa: BLE001 - one variant failing must not lose the others
            print(f"{name}: FAILED {error!r}", flush=True)
    write_timings(out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
