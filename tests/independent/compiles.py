"""torch.compile compilations per compile id, recomputed from the raw Kineto JSON (json/gzip only).

A Dynamo compilation is a `_compile.compile_inner (dynamo_timed)` span; its compile id is the
`Torch-Compiled Region: frame/recompile` that the same thread enters next (Dynamo compiles a frame, then runs
it). A lazily compiled backward is a `compile_fx.<locals>.bw_compiler (dynamo_timed)` span outside any
compile_inner; its id is the latest region entered before it. Where Dynamo labelled the span (newer PyTorch:
`entire_frame_compile_data: …, compile_id=F/R` or `bw_compiler_data: compile_id=F/R` on the same thread, at most
10 ms before it starts), the label's id wins. Its step
is the ProfilerStep holding its start; without ProfilerSteps, the inferred step holding it
(tests/independent/nostep_autotune.py), and where the steps are outermost compiled calls, a compile between two
calls belongs to the next call (the one it compiled for).

Run `python -m tests.independent.compiles TRACE` to print (id, step, compile_inner ms) per compilation.
"""

from __future__ import annotations

import sys

from tests.independent.nostep_autotune import inferred_steps, loop_marker_steps
from tests.independent.step_windows import CPU_STEP_CATS, _ns, load_events

FORWARD = "_compile.compile_inner (dynamo_timed)"
BACKWARD = "compile_fx.<locals>.bw_compiler (dynamo_timed)"
BACKWARD_LABEL = "compile_fx.<locals>.bw_compiler_data: compile_id="
REGION = "Torch-Compiled Region: "


def compilations(path: str) -> list[tuple[str | None, int | None, float]]:
    """(compile id, step number or None, duration ms of the compile_inner / bw_compiler span), by start."""
    raw = load_events(path)
    events = [e for e in raw if e.get("cat") in CPU_STEP_CATS]
    steps = [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), int(str(e["name"]).split("#")[1]))
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    marked = [] if steps else loop_marker_steps(raw)
    calls = [] if steps or marked else inferred_steps(raw)
    if not steps:
        steps = [(start, end, i + 1) for i, (start, end) in enumerate(marked or calls)]
    regions = sorted(
        (_ns(e["ts"]), e.get("tid"), str(e["name"])[len(REGION) :])
        for e in events
        if str(e.get("name", "")).startswith(REGION)
    )
    forward = [e for e in events if e.get("name") == FORWARD]
    spans = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in forward]
    # Dynamo's label of the span that follows: `entire_frame_compile_data: fn_name=_compile.compile_inner,
    # compile_id=F/R` just before a compile_inner, `compile_fx.<locals>.bw_compiler_data: compile_id=F/R` just
    # before a bw_compiler (dynamo_timed); compiled autograd's `!0/…` ids are not frame ids
    labels = {FORWARD: "entire_frame_compile_data: fn_name=_compile.compile_inner,", BACKWARD: BACKWARD_LABEL}
    markers = sorted(
        (_ns(e["ts"]), e.get("tid"), name.split(",", 1)[0].split(":", 1)[0], name.rsplit("compile_id=", 1)[1])
        for e in events
        for name in [str(e.get("name", ""))]
        if "_data: " in name and "compile_id=" in name and name.rsplit("compile_id=", 1)[1].replace("/", "").isdigit()
    )
    result = []
    for e in sorted(events, key=lambda e: _ns(e["ts"])):
        start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        label = labels.get(str(e.get("name")), "").split(",", 1)[0].split(":", 1)[0]
        named = [
            m for at, tid, kind, m in markers if tid == e.get("tid") and kind == label and start - 10**7 <= at <= start
        ]
        if named:
            compile_id = named[-1]
        elif e.get("name") == FORWARD:
            following = [r for r in regions if r[1] == e.get("tid") and r[0] >= end]
            compile_id = following[0][2] if following else None
        elif e.get("name") == BACKWARD and not any(s <= start and end <= t for s, t in spans):
            before = [r for r in regions if r[0] <= start]
            compile_id = before[-1][2] if before else None
        else:
            continue
        step = next((number for s, t, number in steps if s <= start < t), None)
        if step is None and calls:
            step = next((number for s, _, number in steps if s > start), None)
        result.append((compile_id, step, (end - start) / 1e6))
    return result


if __name__ == "__main__":
    for row in compilations(sys.argv[1]):
        print(row)
