"""Independent thread and process names from the raw trace JSON (stdlib only, never imports tracelens).

The rule of docs/loading.md#thread-names: a CPU thread (pid, tid) that runs complete events on the CPU side (no
`device` in its args, none of `GPU_CATEGORIES`) takes, among its `thread_name` metadata events, the first whose
name, with Kineto's `thread <tid> (...)` wrapper taken off, differs from its process's first `process_name`; else
the first one.
"""

from __future__ import annotations

import gzip
import json
import re

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync")  # on GPU streams


def read(path: str) -> dict[str, object]:
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        document = json.load(f)
    return document if isinstance(document, dict) else {"traceEvents": document}


def short(name: str, tid: str) -> str:
    match = re.fullmatch(rf"thread {re.escape(tid)} \((.+)\)", name, re.S)
    return " ".join((match.group(1) if match else name).split())


def names(path: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(pid, tid) of each CPU thread with complete events → (thread name as written or "", process name or "")."""
    events = read(path)["traceEvents"]
    assert isinstance(events, list)
    threads: dict[tuple[str, str], list[str]] = {}
    processes: dict[str, str] = {}
    cpu: set[tuple[str, str]] = set()
    for e in events:
        if not isinstance(e, dict):
            continue
        pid, tid = str(e.get("pid")), str(e.get("tid"))
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if e.get("ph") == "M" and isinstance(args.get("name"), str) and args["name"].strip():
            if e.get("name") == "thread_name":
                threads.setdefault((pid, tid), []).append(args["name"])
            elif e.get("name") == "process_name":
                processes.setdefault(pid, args["name"])
        elif e.get("ph") == "X" and "device" not in args and e.get("cat") not in GPU_CATEGORIES:
            cpu.add((pid, tid))
    out = {}
    for pid, tid in cpu:
        process = processes.get(pid, "")
        written = threads.get((pid, tid), [])
        chosen = next((n for n in written if short(n, tid) != short(process, tid)), written[0] if written else "")
        out[(pid, tid)] = (chosen, process)
    return out
