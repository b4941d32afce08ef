"""A tiny training loop with an optimizer: the program `tracelens record` is tried on.

    tracelens record -- python examples/train_tiny.py
    tracelens record --steps 3 -- python examples/train_tiny.py --steps 12 --crash-at 9

Runs on the GPU when there is one, else on the CPU (a few seconds). Options: --steps N (default 20),
--hidden N (default 64), --crash-at N (raise inside step N: for tests), --no-optimizer (forward and backward
only: no step boundary for the default `--step-on optimizer`), --exit-code N (exit with N at the end).
"""

import argparse
import sys

import torch
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--crash-at", type=int, default=None)
    parser.add_argument("--no-optimizer", action="store_true")
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(args.hidden, 4 * args.hidden), nn.GELU(), nn.Linear(4 * args.hidden, args.hidden)
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.hidden, device=device)
    target = torch.randn(args.batch, args.hidden, device=device)
    for step in range(1, args.steps + 1):
        if args.crash_at == step:
            raise RuntimeError(f"crash requested at step {step}")
        loss = nn.functional.mse_loss(model(x), target)
        loss.backward()
        if not args.no_optimizer:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    print(f"train_tiny: {args.steps} steps, loss {loss.item():.4f}, argv {sys.argv[1:]}")
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
