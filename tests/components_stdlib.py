"""Independent (stdlib-only) per-component kernel figures of Kineto traces, for tests/test_components.py.

Reads the raw gzip JSON itself and applies docs/components.md's rules with plain loops over events:
kernel → runtime/driver launch by `correlation`; the analysis window = kernels whose launch starts inside the
time span of a `ProfilerStep#N` annotation (of any thread: the autograd engine launches backward kernels from
its own); scopes and backward nodes by time containment on the launch's thread; the launching op = innermost
`cpu_op` containing the launch, for a kernel a CUDA graph replayed the captured launch's op (matched by
tests/independent/graphs_stdlib.py), whose scopes it takes. Shares no code with tracelens.

    python tests/components_stdlib.py TRACE [TRACE ...]
"""

from __future__ import annotations

import gzip
import json
import re
import sys

from tests.independent import graphs_stdlib

COMPONENTS = ("norm", "rope", "attention", "mlp", "gemm", "other")
GEMM = re.compile(r"gemm|nvjet|cutlass|xmma|cublas", re.IGNORECASE)
SCOPES = {"norm": "norm", "rope": "rope", "attention": "attention", "mlp": "mlp", "residual": "other"}
NAME_RULES = (
    ("rope", ("rope", "rotary"), ({"neg", "cat"}, {"neg", "slice"})),
    ("attention", ("attention", "sdpa", "flash", "fmha", "softmax"), ()),
    ("norm", ("rms_norm", "rmsnorm", "layer_norm", "layernorm", "rsqrt"), ()),
    ("mlp", ("silu", "gelu", "swiglu", "geglu"), ()),
    ("norm", (), ({"pow", "mean"}, {"pow", "sum"})),
)
BACKWARD = "autograd::engine::evaluate_function:"


def _events(path):
    with gzip.open(path, "rt") if str(path).endswith(".gz") else open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _contains(outer, inner):
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer.get("dur", 0)


def _innermost(candidates, inner):
    best = None
    for c in candidates:
        inside = c is not inner and c["tid"] == inner["tid"] and _contains(c, inner)
        if inside and (best is None or c["ts"] > best["ts"] or (c["ts"] == best["ts"] and c["dur"] < best["dur"])):
            best = c
    return best


def _scope_component(scopes, event):
    s = _innermost(scopes, event)
    return None if s is None else SCOPES[s["name"].split(".", 1)[0]]


def _by_name(kernel, op):
    text = f"{kernel} {op}".lower()
    words = set(re.split(r"[^a-z0-9]+|_", text))
    for component, substrings, word_sets in NAME_RULES:
        if any(s in text for s in substrings) or any(ws <= words for ws in word_sets):
            return component
    return None


def _shape_key(op):
    dims = op.get("args", {}).get("Input Dims") if op else None
    if not isinstance(dims, list) or len(dims) < 2:
        return None
    return op["name"], json.dumps(dims[:2])


def attribute(path, step_numbers=None):
    """[(kernel name, dur µs, component or None, rule, shape key)], number of steps; `step_numbers` limits the
    window to those `ProfilerStep#N`."""
    ev = _events(path)
    steps = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    if step_numbers is not None:
        steps = [s for s in steps if int(s["name"].split("#")[1]) in step_numbers]
    launches = {
        e["args"]["correlation"]: e
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    scopes = [e for e in ev if e.get("cat") == "user_annotation" and e["name"].split(".", 1)[0] in SCOPES]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    nodes = [e for e in ops if e["name"].startswith(BACKWARD) and e["args"].get("Sequence number", -1) >= 0]
    forward_by_seq = {}
    for op in sorted(ops, key=lambda e: e["ts"]):
        seq = op["args"].get("Sequence number", -1)
        if seq < 0 or op["name"].startswith(BACKWARD) or any(n["tid"] == op["tid"] and _contains(n, op) for n in nodes):
            continue
        component = _scope_component(scopes, op)
        if component is not None:
            forward_by_seq.setdefault(seq, component)
    rows = []
    present = {SCOPES[e["name"].split(".", 1)[0]] for e in scopes}
    graphed = any("GraphLaunch" in e["name"] for e in launches.values())
    captured = graphs_stdlib.match_detail(str(path))[0] if graphed else {}
    for k in ev:
        if k.get("cat") != "kernel":
            continue
        launch = launches.get(k["args"].get("correlation"))
        if launch is None or not any(s["ts"] <= launch["ts"] <= s["ts"] + s["dur"] for s in steps):
            continue
        op = captured.get((round(k["ts"] * 1000), k["name"])) if "GraphLaunch" in launch["name"] else None
        component, rule = _scope_component(scopes, op if op is not None else launch), "scope"
        op = op if op is not None else _innermost(ops, launch)
        if component is None:
            node = _innermost(nodes, launch)
            component, rule = (forward_by_seq.get(node["args"]["Sequence number"]) if node else None), "backward"
        if component is None:
            component, rule = _by_name(k["name"], op["name"] if op else ""), "name"
        rows.append((k["name"], k["dur"], component, rule if component else "none", _shape_key(op)))
    return rows, len(steps), present


def components(paths, step_numbers=None):
    """{path: {component: (kernels per step, µs per step)}} with the shape rule learned across `paths`;
    `step_numbers` maps a path to the steps of its window (default: every step)."""
    attributed = {p: attribute(p, (step_numbers or {}).get(p)) for p in paths}
    seen = {}
    for rows, _, _ in attributed.values():
        for _, _, component, rule, key in rows:
            if rule in ("scope", "backward") and key is not None:
                seen.setdefault(key, set()).add(component)
    learned = {key: next(iter(c)) for key, c in seen.items() if len(c) == 1}
    result = {}
    for path, (rows, n_steps, _) in attributed.items():
        table = {c: [0, 0.0] for c in COMPONENTS}
        for name, dur, component, _, key in rows:
            if component is None:
                component = learned.get(key, "gemm" if GEMM.search(name) else "other")
            table[component][0] += 1
            table[component][1] += dur
        result[path] = {c: (n / n_steps, us / n_steps) for c, (n, us) in table.items()}
    return result


def unplaced(paths, step_numbers=None):
    """{path: set of components that are no measurement}: most of their time placed by kernel names, or empty
    with no scope of that name in the trace (gemm and other never)."""
    out = {}
    table = components(paths, step_numbers)  # the shape rule learns across all of them
    for path in paths:
        rows, n_steps, present = attribute(path, (step_numbers or {}).get(path))
        totals = table[path]
        by_name = {c: 0.0 for c in COMPONENTS}
        for _, dur, component, rule, _ in rows:
            if rule == "name":
                by_name[component] += dur / n_steps
        out[path] = {
            c
            for c in COMPONENTS[:4]
            if (totals[c][1] > 0 and by_name[c] > 0.5 * totals[c][1]) or (totals[c][1] == 0 and c not in present)
        }
    return out


if __name__ == "__main__":
    for path, table in components(sys.argv[1:]).items():
        print(path)
        for c, (n, us) in table.items():
            print(f"  {c:10s} {n:6.2f} kernels {us:10.3f} us")
