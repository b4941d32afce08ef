"""A tiny inference loop (no optimizer): record it with `--step-on forward`.

    tracelens record --step-on forward -- python examples/infer_tiny.py

Each call of the model (the outermost nn.Module call) is one step. Runs on the GPU when there is one.
"""

import argparse

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Tiny(args.hidden).to(device).eval()
    x = torch.randn(8, args.hidden, device=device)
    with torch.no_grad():
        for _ in range(args.calls):
            x = torch.tanh(model(x))
    print(f"infer_tiny: {args.calls} calls, mean {x.mean().item():.4f}")


if __name__ == "__main__":
    main()
