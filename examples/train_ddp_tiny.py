"""A tiny data-parallel training loop (gloo on the CPU, NCCL on GPUs): record every rank with

    tracelens record -o runs/ddp -- torchrun --nproc-per-node 2 examples/train_ddp_tiny.py

Each rank writes its own trace (`train_ddp_tiny.rank{R}.json.gz`); `tracelens analyze runs/ddp` reads them as
one run.

On CPU torch 2.13 (gloo) a rank now and then aborts at exit, after its last step: "terminate called without an
active exception" (SIGABRT; about 3 runs in 20, with or without tracelens). It is torch's own teardown race: a
gloo worker thread releases its last finished collective after the interpreter has begun to shut down. The
traces are written before it.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.hidden, 2 * args.hidden), nn.ReLU(), nn.Linear(2 * args.hidden, 1))
    ddp = nn.parallel.DistributedDataParallel(model.to(device), device_ids=[device] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(16, args.hidden, device=device) + rank
    for _ in range(args.steps):
        loss = ddp(x).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
