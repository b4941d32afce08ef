"""Independent timing (outside the profiler): CUDA events around each call,
plus host wall time per call."""

from __future__ import annotations

import contextlib
import time
from typing import Callable

import torch


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs: list[float]) -> dict:
    return {
        "median": _pct(xs, 0.5),
        "p10": _pct(xs, 0.1),
        "p90": _pct(xs, 0.9),
        "mean": sum(xs) / len(xs),
        "min": min(xs),
        "n": len(xs),
    }


def time_fn(fn: Callable[[], object], device: torch.device, iters: int = 100, warmup: int = 5, grad: bool = False) -> dict:
    """Time ``fn`` ``iters`` times.

    * ``cuda_event_ms``: per call, the device is idle (synchronized) before
      the call; CUDA events are recorded on the current stream right before
      and after it.  This is the forward's latency on the stream, launch gaps
      included.
    * ``host_call_ms``: host wall time of the call itself (dispatch/launch
      cost; returns before the GPU is done).
    * ``host_sync_ms``: host wall time of call + synchronize.
    * ``pipelined_ms_per_call``: ``iters`` back-to-back calls between one
      event pair, divided by ``iters`` (throughput, host overlapped).
    On CPU only the host numbers are given.
    """
    cuda = device.type == "cuda"
    grad_ctx = contextlib.nullcontext() if grad else torch.no_grad()
    ev, call, synced = [], [], []
    with grad_ctx:
        for _ in range(warmup):
            fn()
        if cuda:
            torch.cuda.synchronize(device)
        for _ in range(iters):
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                start.record()
                fn()
                end.record()
                t1 = time.perf_counter()
                end.synchronize()
                t2 = time.perf_counter()
                ev.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                t1 = t2 = time.perf_counter()
            call.append((t1 - t0) * 1e3)
            synced.append((t2 - t0) * 1e3)
        res = {"iters": iters}
        if cuda:
            res["cuda_event_ms"] = summary(ev)
            torch.cuda.synchronize(device)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            res["pipelined_ms_per_call"] = start.elapsed_time(end) / iters
        res["host_call_ms"] = summary(call)
        res["host_sync_ms"] = summary(synced)
    return res


def interleaved_times(fns: dict, device: torch.device, rounds: int = 10, per_round: int = 10, grad: bool = False) -> dict:
    """Round-robin CUDA-event timing of several callables: in each of
    ``rounds`` rounds every callable gets ``per_round`` isolated calls
    (synchronize, event, call, event), as in ``time_fn``'s cuda_event_ms."""
    grad_ctx = contextlib.nullcontext() if grad else torch.no_grad()
    ev = {k: [] for k in fns}
    with grad_ctx:
        for fn in fns.values():  # re-warm (Dynamo caches may have been reset since)
            for _ in range(3):
                fn()
        torch.cuda.synchronize(device)
        for _ in range(rounds):
            for k, fn in fns.items():
                for _ in range(per_round):
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize(device)
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    ev[k].append(start.elapsed_time(end))
    return {k: {"cuda_event_ms": summary(v)} for k, v in ev.items()}
