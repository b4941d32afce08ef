"""The backward's handoff in the step graph (docs/critical_path.md#the-dependency-graph): on training traces, the
forks and joins tracelens puts between the caller of `backward()` and the autograd thread are the ones a stdlib
reading of the raw events finds (tests/rawtrace.py: threads, calls and steps from the JSON itself). A call is a
runtime/driver call in the step that launched GPU work (its correlation id on a kernel, copy or memset) or a sync;
the autograd thread is one that runs an op named `…Backward…`; where every call of it lies in a gap between two
calls of another thread, each gap's calls (a burst: one backward pass) hand off from the call before the gap and
to the call after it; of several such threads, the one blocked meanwhile (no op of its own starts during a
burst), then the one with the most calls. Also `_handoffs` on a hand-made layout of two backward passes in one step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import rawtrace
from tracelens.analyses.critical_path import step_graph
from tracelens.loader import load_trace

ROOT = Path(__file__).resolve().parent.parent / "traces"
TRAINING = (
    "h200/block/train_eager_block.json.gz",
    "h200/extra/train_eager_mlp.json.gz",
    "h200/truth/train_cpu_bound_stacks.json.gz",
    "h100/record/hf_llama_train_b1s128_eager.json.gz",
)
SYNC = re.compile(r"^(cuda|hip|cu)(Device|Stream|Event|Ctx)Synchronize|^(cuda|hip)Memcpy(2D)?$|^hipMemcpyWithStream$")
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
API_CATEGORIES = {"cuda_runtime", "cuda_driver"}

Call = tuple[float, float]  # (start, end) µs after the step's start, to 0.1 µs


def _call(start_us: float, end_us: float, step_start_us: float) -> Call:
    return round(start_us - step_start_us, 1), round(end_us - step_start_us, 1)


def expected_handoffs(path: Path) -> dict[int, set[tuple[Call, Call]]]:
    """Per ProfilerStep number: the (earlier, later) call pairs of the handoffs, from the raw events."""
    evs = rawtrace.events(path)
    launched = {e["args"].get("correlation") for e in evs if e.get("cat") in GPU_CATEGORIES and "args" in e}
    autograd = {e.get("tid") for e in evs if e.get("cat") == "cpu_op" and "Backward" in str(e.get("name", ""))}
    api = [
        e
        for e in evs
        if e.get("cat") in API_CATEGORIES
        and (e.get("args", {}).get("correlation") in launched or SYNC.match(str(e.get("name", ""))))
    ]
    found: dict[int, set[tuple[Call, Call]]] = {}
    for number, start, end in rawtrace.steps([e for e in evs if e.get("cat") != "gpu_user_annotation"]):
        calls: dict[Any, list[Call]] = {}
        op_starts: dict[Any, list[float]] = {}
        for e in evs:
            if e.get("cat") == "cpu_op" and start <= float(e["ts"]) < end:
                op_starts.setdefault(e.get("tid"), []).append(round(float(e["ts"]) - start, 1))
        for e in api:
            ts = float(e["ts"])
            if start <= ts < end:
                calls.setdefault(e.get("tid"), []).append(_call(ts, ts + float(e.get("dur", 0)), start))
        pairs: set[tuple[Call, Call]] = set()
        for tid in autograd & set(calls):
            mine = sorted(calls[tid])
            best: tuple[tuple[bool, int, float], set[tuple[Call, Call]]] | None = None
            for other, theirs in calls.items():
                if other == tid:
                    continue
                theirs = sorted(theirs)
                found_pairs, span, ok = set(), 0.0, True
                bursts: dict[int, list[Call]] = {}
                for call in mine:  # the gap of `theirs` it lies in: after call i, before call i + 1
                    i = max((k for k, c in enumerate(theirs) if c[1] <= call[0]), default=-1)
                    if i < 0 or i + 1 >= len(theirs) or theirs[i + 1][0] < call[1]:
                        ok = False
                        break
                    bursts.setdefault(i, []).append(call)
                if not ok:
                    continue
                for i, burst in bursts.items():
                    found_pairs |= {(theirs[i], burst[0]), (burst[-1], theirs[i + 1])}
                    span += theirs[i + 1][0] - theirs[i][1]
                # the caller is blocked while the backward runs: no op of its own starts during a burst
                idle = not any(
                    burst[0][0] < t < burst[-1][1] for burst in bursts.values() for t in op_starts.get(other, ())
                )
                key = (not idle, -len(theirs), span)
                if best is None or key < best[0]:
                    best = (key, found_pairs)
            if best is not None:
                pairs |= best[1]
        found[number] = pairs
    return found


def tracelens_handoffs(path: Path) -> dict[int, set[tuple[Call, Call]]]:
    """The same pairs from tracelens' step graphs: a call whose previous call is on another thread."""
    trace = load_trace(path)
    found: dict[int, set[tuple[Call, Call]]] = {}
    for index, number in enumerate(trace.steps.number.tolist()):
        graph = step_graph(trace, index)
        if graph is None:
            continue
        thread, prev = graph.calls.thread.tolist(), graph.calls.prev.tolist()
        start = [(t - graph.start_ns) / 1000 for t in graph.call_start_ns]
        end = [s + d / 1000 for s, d in zip(start, graph.call_dur_ns, strict=True)]
        pairs = set()
        for k, p in enumerate(prev):
            if p >= 0 and thread[p] != thread[k]:
                pairs.add((_call(start[p], end[p], 0.0), _call(start[k], end[k], 0.0)))
        found[int(number)] = pairs
    return found


@pytest.mark.parametrize("name", TRAINING)
def test_the_backward_handoffs_are_the_raw_events_ones(name: str) -> None:
    path = ROOT / name
    expected, found = expected_handoffs(path), tracelens_handoffs(path)
    shared = set(expected) & set(found)
    assert len(shared) >= 3
    for number in shared:
        assert found[number] == expected[number], number
    assert sum(len(expected[n]) for n in shared) >= 2 * len(shared)  # a fork and a join in every step


def test_two_backward_passes_in_a_step_hand_off_twice() -> None:
    """Gradient accumulation: the main thread (0) launches, blocks in `backward()` while the autograd thread (1)
    launches, launches again, blocks again: two forks and two joins; a burst beside a main-thread call: none."""
    from tracelens.analyses.critical_path import _handoffs, _previous_on_lane

    thread = np.array([0, 0, 1, 1, 0, 1, 1, 0], dtype=np.int64)
    start = np.array([0, 10, 20, 30, 40, 50, 60, 70], dtype=np.int64)
    end = start + 5
    autograd = thread == 1
    previous = _previous_on_lane(thread)
    handed = _handoffs(thread, start, end, previous, autograd)
    assert handed.tolist() == [-1, 0, 1, 2, 3, 4, 5, 6]  # 1 → 2 (fork), 3 → 4 (join), 4 → 5 (fork), 6 → 7 (join)
    concurrent = np.array([0, 10, 20, 22, 40, 50, 60, 70], dtype=np.int64)  # call 3 (main) runs beside call 2
    thread2 = np.array([0, 0, 1, 0, 0, 1, 1, 0], dtype=np.int64)
    unchanged = _handoffs(thread2, concurrent, concurrent + 5, _previous_on_lane(thread2), thread2 == 1)
    assert unchanged.tolist() == _previous_on_lane(thread2).tolist()


def test_a_side_thread_does_not_take_the_handoff() -> None:
    """A third thread (2) with one call just after the main thread's fork call and one just after the backward's
    last: its gap is the tighter, but the main thread (0), with the most calls, is the caller (audit)."""
    from tracelens.analyses.critical_path import _handoffs, _previous_on_lane

    thread = np.array([0, 0, 2, 1, 1, 2, 0, 0], dtype=np.int64)
    start = np.array([0, 10, 16, 20, 30, 36, 60, 70], dtype=np.int64)
    handed = _handoffs(thread, start, start + 5, _previous_on_lane(thread), thread == 1)
    assert handed[3] == 1 and handed[6] == 4  # fork from the main thread's call 1, join into its call 6
