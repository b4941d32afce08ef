"""Make a big synthetic Kineto trace by replicating a real trace's events N times.

Copy k of every event is shifted by k x (trace span + 1 ms) in time; `External id`, `correlation`,
`Sequence number`, `Record function id`, `Python id`/`Python parent id` and flow `id`s are shifted by
k x (largest value + 1), and `ProfilerStep#N` becomes `ProfilerStep#(N + k x steps)`, so the copies link
and step exactly like the original, one after another. Metadata (`ph: "M"`) events are kept once.
The output is printed the way Kineto prints (one event per block, keys on a few lines), so bytes per event
match real files. `--target-mb` takes a prefix of the last copy to hit a size.

    python benchmarks/make_big_trace.py ANCHOR.json.gz /tmp/big450.json --target-mb 450
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

ID_KEYS = (
    "External id",
    "external id",
    "correlation",
    "Sequence number",
    "Record function id",
    "Python id",
    "Python parent id",
)
STEP = re.compile(r"^ProfilerStep#(\d+)$")
GAP_US = 1000


def read_document(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    document = msgspec.json.decode(data)
    if isinstance(document, list):
        document = {"traceEvents": document}
    return document  # type: ignore[no-any-return]


def _max_int(events: list[dict[str, Any]], key: str, in_args: bool) -> int:
    best = 0
    for event in events:
        source = event.get("args") if in_args else event
        value = source.get(key) if isinstance(source, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            best = max(best, value)
    return best


def _span(events: list[dict[str, Any]]) -> tuple[float, float]:
    starts = [e["ts"] for e in events if isinstance(e.get("ts"), int | float)]
    ends = [e["ts"] + (e.get("dur") or 0) for e in events if isinstance(e.get("ts"), int | float)]
    return min(starts), max(ends)


def _enc(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def format_event(event: dict[str, Any]) -> str:
    """One event as Kineto prints it."""
    head = ", ".join(f'"{k}": {_enc(event[k])}' for k in ("ph", "cat", "name", "pid", "tid") if k in event)
    lines = ["  {", f"    {head},"]
    timing = ", ".join(f'"{k}": {_enc(event[k])}' for k in ("ts", "dur") if k in event)
    rest = [k for k in event if k not in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")]
    tail = ", ".join(f'"{k}": {_enc(event[k])}' for k in rest)
    args = event.get("args")
    parts = [p for p in (timing, tail) if p]
    if isinstance(args, dict):
        body = ", ".join(f"{_enc(k)}: {_enc(v)}" for k, v in args.items())
        lines.append(f"    {', '.join(parts)},")
        lines.append(f'    "args": {{\n      {body}\n    }}')
    else:
        lines.append(f"    {', '.join(parts)}")
    lines.append("  }")
    return "\n".join(lines)


def shifted(
    event: dict[str, Any], k: int, dt: float, id_step: dict[str, int], flow_step: int, step_count: int
) -> dict[str, Any]:
    """Copy k of `event` (k = 0 is the original)."""
    if k == 0:
        return event
    out = dict(event)
    if isinstance(out.get("ts"), int | float):
        out["ts"] = out["ts"] + k * dt
        if isinstance(event["ts"], float):
            out["ts"] = round(out["ts"], 3)
    if out.get("ph") in ("s", "f", "t") and isinstance(out.get("id"), int):
        out["id"] = out["id"] + k * flow_step
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key, step in id_step.items():
            value = args.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                args[key] = value + k * step
        out["args"] = args
    name = out.get("name")
    if isinstance(name, str) and (match := STEP.match(name)):
        out["name"] = f"ProfilerStep#{int(match.group(1)) + k * step_count}"
    return out


def make(source: Path, target: Path, copies: int | None, target_mb: float | None) -> tuple[int, int]:
    """Write the replicated trace; returns (events written, bytes written)."""
    document = read_document(source)
    events: list[dict[str, Any]] = [e for e in document.pop("traceEvents") if isinstance(e, dict)]
    meta_events = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    body.sort(key=lambda e: e.get("ts") if isinstance(e.get("ts"), int | float) else 0)
    first, last = _span(body)
    dt = (last - first) + GAP_US
    id_step = {key: _max_int(body, key, True) + 1 for key in ID_KEYS}
    flow_step = _max_int(body, "id", False) + 1
    step_numbers = {int(m.group(1)) for e in body if (m := STEP.match(str(e.get("name", ""))))}
    step_count = (max(step_numbers) - min(step_numbers) + 1) if step_numbers else 0
    limit = int(target_mb * 1e6) if target_mb else None
    n_copies = copies if copies else 10**9
    written = 0
    count = 0
    with target.open("w", encoding="utf-8") as out:
        head = ",\n".join(f"  {_enc(k)}: {_enc(v)}" for k, v in document.items() if k != "traceName")
        prefix = "{\n" + (head + ",\n" if head else "") + '  "traceEvents": [\n'
        out.write(prefix)
        written += len(prefix)
        separator = ""
        for event in meta_events:
            text = separator + format_event(event)
            out.write(text)
            written += len(text)
            count += 1
            separator = ",\n"
        done = False
        for k in range(n_copies):
            for event in body:
                text = separator + format_event(shifted(event, k, dt, id_step, flow_step, step_count))
                out.write(text)
                written += len(text)
                count += 1
                if limit is not None and written >= limit:
                    done = True
                    break
            if done:
                break
        suffix = f'\n  ],\n  "traceName": {_enc(str(target))}\n}}\n'
        out.write(suffix)
        written += len(suffix)
    return count, written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--copies", type=int)
    group.add_argument("--target-mb", type=float, help="stop once this many MB (1e6 bytes) are written")
    args = parser.parse_args(argv)
    count, size = make(args.source, args.target, args.copies, args.target_mb)
    print(f"{args.target}: {count:,} events, {size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
