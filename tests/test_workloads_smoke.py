"""Smoke test of the trace recorder (workloads/), CPU only.

Runs ``python -m workloads.record --smoke`` in a subprocess; skipped cleanly
where torch is not installed (the analysis package never needs torch).
"""

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VARIANTS = (
    "eager_linear",
    "compiled_linear",
    "eager_mlp",
    "compiled_mlp",
    "liger_mlp",
    "compiled_mlp_max_autotune",
    "geglu_epilogue_mlp",
)
# variants that may be skipped on a CPU machine, with a word their SKIP reason contains
MAY_SKIP = {
    "liger_mlp": "liger",
    "compiled_linear": "compile",
    "compiled_mlp": "compile",
    "compiled_mlp_max_autotune": "inductor",
    "geglu_epilogue_mlp": "triton",
}
META_KEYS = {
    "variant",
    "tokens",
    "hidden",
    "intermediate",
    "dtype",
    "mode",
    "torch",
    "triton",
    "liger_kernel",
    "gpu",
    "cuda",
    "steps_active",
    "tool",
}
FORBIDDEN = ("tracelens", "msgspec", "plotly", "pandas", "rich")


def test_workloads_do_not_import_analysis_deps():
    """workloads/ must stay independent of tracelens and its analysis deps."""
    pat = re.compile(r"^\s*(?:import|from)\s+({})\b".format("|".join(FORBIDDEN)), re.M)
    files = sorted((REPO / "workloads").glob("*.py"))
    assert files
    for f in files:
        m = pat.search(f.read_text())
        assert m is None, f"{f.name} imports {m.group(1)}"


@pytest.mark.slow
def test_record_smoke(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "traces"
    proc = subprocess.run(
        [sys.executable, "-m", "workloads.record", "--smoke", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log

    timings = json.loads((out / "timings.json").read_text())
    runs = timings["runs"]
    for v in VARIANTS:
        path = out / (f"{v}.json.gz")
        # liger needs CUDA + triton + liger-kernel; compile may be unsupported
        # on this Python; max-autotune needs the inductor backend (smoke: eager);
        # the GeGLU kernel needs triton (its CPU interpreter here): then the
        # variant is skipped with a printed reason.
        if v in MAY_SKIP and not path.exists():
            assert "skipped" in runs[v], runs.get(v)
            assert f"SKIP {v}" in log
            assert MAY_SKIP[v] in runs[v]["skipped"] or "compile" in runs[v]["skipped"], runs[v]
            continue
        assert path.exists(), log
        with gzip.open(path, "rt") as f:
            data = json.load(f)
        assert isinstance(data["traceEvents"], list) and data["traceEvents"]
        meta = data["tracelens_run"]
        assert set(meta) >= META_KEYS, meta
        assert meta["variant"] == v
        assert meta["tool"] == "tracelens.workloads/1"
        assert meta["mode"] == "forward"
        assert (meta["tokens"], meta["hidden"], meta["intermediate"], meta["dtype"]) == (8, 32, 64, "fp32")
        assert meta["steps_active"] == 5
        if v.endswith("linear"):
            assert meta["bias"] is True, meta  # nn.Linear(bias=True): eager dispatches to aten::addmm
        steps = {e["name"] for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
        assert len(steps) >= 5, steps
        assert runs[v]["host_call_ms"]["n"] >= 50
    # on a CPU-only torch, liger must be skipped, never attempted
    if "liger_mlp" in runs and "skipped" in runs["liger_mlp"]:
        assert "liger" in runs["liger_mlp"]["skipped"]
    # the GeGLU epilogue kernel: run under Triton's CPU interpreter where triton is
    # installed (checked against eager, every tuned configuration correct), else skipped
    geglu = runs["geglu_epilogue_mlp"]
    if importlib.util.find_spec("triton") is None:
        assert geglu == {"skipped": "geglu_epilogue_mlp needs triton, which is not installed"}
    else:
        assert "skipped" not in geglu and "failed" not in geglu, geglu
        meta = geglu["meta"]
        assert meta["check"]["ok"] and meta["check"]["rel_err"] <= 1e-4, meta["check"]
        assert meta["geglu_check_fresh_input"]["ok"], meta
        assert meta["geglu_tuning"] and all(row["rel_err"] <= 1e-4 for row in meta["geglu_tuning"])
        assert meta["geglu_config_name"] in {row["config"] for row in meta["geglu_tuning"]}
        with gzip.open(out / "geglu_epilogue_mlp.json.gz", "rt") as f:
            events = json.load(f)["traceEvents"]
        # the down projection is an aten op in every step; the Triton kernel runs on the
        # CPU interpreter, so it launches no GPU work
        assert sum(e.get("name") == "aten::mm" for e in events) >= 5
    assert "mode='max-autotune' needs the inductor backend" in runs["compiled_mlp_max_autotune"].get(
        "skipped", "mode='max-autotune' needs the inductor backend"
    )

    # --merge-timings: re-record one variant into the same folder; the other entries stay
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloads.record",
            "--smoke",
            "--variant",
            "eager_linear",
            "--merge-timings",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = json.loads((out / "timings.json").read_text())
    assert list(merged["runs"]) == list(runs)
    assert merged["runs"]["eager_mlp"] == runs["eager_mlp"]
    assert merged["runs"]["eager_linear"] != runs["eager_linear"]
    assert merged["superseded"]["eager_linear"][0]["run"] == runs["eager_linear"]
    assert merged["merges"][-1]["runs"] == ["eager_linear"]


BLOCK_SCOPES = {"norm", "attention", "rope", "mlp", "residual"}


def _trace(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _steps(data):
    return sorted(e["name"] for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))


def _scope_counts(data):
    counts = {}
    for e in data["traceEvents"]:
        if e.get("cat") == "user_annotation" and e.get("name") in BLOCK_SCOPES:
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    return counts


@pytest.mark.slow
def test_record_smoke_block_and_shapes(tmp_path):
    """The decoder block (inference + training) and the shape sweeps, CPU smoke."""
    pytest.importorskip("torch")
    out = tmp_path / "traces"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workloads.record",
            "--smoke",
            "--variant",
            "",
            "--extras",
            "block,shapes",
            "--timing-iters",
            "5",
            "--shape-timing-iters",
            "2",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log

    runs = json.loads((out / "block" / "timings.json").read_text())["runs"]
    for prefix, mode in (("", "forward"), ("train_", "train")):
        for v in ("eager", "eager_math", "compiled", "liger"):
            name = f"{prefix}{v}_block"
            path = out / "block" / f"{name}.json.gz"
            if v == "liger" and not path.exists():  # CPU: Liger needs CUDA + triton
                assert "skipped" in runs[name], runs[name]
                assert f"SKIP {name}" in log
                continue
            data = _trace(path)
            meta = data["tracelens_run"]
            assert (meta["variant"], meta["mode"], meta["model"]) == (f"{v}_block", mode, "llama_block")
            assert (meta["batch"], meta["seq"], meta["tokens"], meta["hidden"], meta["heads"]) == (2, 8, 16, 32, 2)
            assert meta["steps_active"] == 3 and len(_steps(data)) == 3
            assert meta["check"]["ok"] and runs[name]["check"]["ok"]
            scopes = _scope_counts(data)
            if v == "compiled":  # Dynamo drops record_function scopes
                assert scopes == {}, scopes
            else:  # 2 norm + 2 residual scopes per forward, one of the others
                assert scopes == {"norm": 6, "residual": 6, "attention": 3, "rope": 3, "mlp": 3}, scopes
            if mode == "train":
                assert meta["grad_check"]["ok"], meta
                assert meta["optimizer"].startswith("AdamW(lr=1e-4"), meta
            assert runs[name]["host_call_ms"]["n"] >= 5

    sweep = json.loads((out / "sweep" / "timings.json").read_text())["runs"]
    tokens = [8, 16, 24, 16, 32, 12]
    for model in ("geglu", "block"):
        for v in ("eager", "liger", "compiled_static", "compiled_default"):
            name = f"{v}_{model}"
            path = out / "sweep" / f"{name}.json.gz"
            if v == "liger" and not path.exists():
                assert "skipped" in sweep[name] and f"SKIP {name}" in log
                continue
            data = _trace(path)
            meta = data["tracelens_run"]
            assert meta["tokens"] == tokens and meta["shape_sweep"] is True
            assert len(_steps(data)) == meta["steps_active"] == 6
            entry = sweep[name]
            assert [s["tokens"] for s in entry["profiled_steps"]] == tokens
            assert all(c["ok"] for c in entry["checks"]) and len(entry["checks"]) == 6
            assert sorted(entry["steady_state"], key=int) == ["8", "12", "16", "24", "32"]
            if v.startswith("compiled"):
                graphs = [s["dynamo_unique_graphs"] for s in entry["profiled_steps"]]
                # the repeated shape (4th step) never compiles; static compiles every new shape
                assert graphs[3] == 0, graphs
                if v == "compiled_static":
                    assert graphs == [1, 1, 1, 0, 1, 1], graphs
            if model == "block":
                assert meta["seq"] == [t // 2 for t in tokens]


@pytest.mark.slow
def test_interleaved_smoke(tmp_path):
    """`workloads.interleaved` (CPU smoke): every program of each group gets one trace per round, each with the
    calls timed just before and just after it in timings.json, in the documented order (rounds outside,
    variants inside, their order rotated by one each round), and the trace's metadata names its round."""
    pytest.importorskip("torch")
    out = tmp_path / "il"
    proc = subprocess.run(
        [sys.executable, "-m", "workloads.interleaved", "--smoke", "--groups", "sweep,attn", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for group, programs in (
        ("sweep", ("sweep_eager_mlp_t8", "sweep_compiled_mlp_t8")),
        ("attn", ("attn_eager", "attn_sdpa", "attn_compiled")),
    ):
        timings = json.loads((out / group / "timings.json").read_text())
        assert timings["rounds"] == 2 and timings["calls"] == 3
        traces = timings["traces"]
        rotated = [programs[r % len(programs) :] + programs[: r % len(programs)] for r in range(2)]
        expected = [f"{p}_r{r}" for r in range(2) for p in rotated[r]]
        assert sorted(traces, key=lambda name: traces[name]["order"]) == expected
        for name, entry in traces.items():
            assert entry["before"]["n"] == 3 and entry["after"]["n"] == 3 and entry["cuda_event_ms"]["n"] == 6
            assert len(entry["host_probe_us"]) == 2 and min(entry["host_probe_us"]) > 0
            with gzip.open(out / group / f"{name}.json.gz", "rt") as handle:
                meta = json.load(handle)["tracelens_run"]
            assert meta["round"] == entry["round"] and meta["interleaved"] is True and meta["name"] == entry["variant"]
