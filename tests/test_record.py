"""`tracelens record`: real programs recorded with CPU torch (tiny models: a few seconds each). The traces are
read back with the standard library (gzip + json), not with tracelens' loader: the step count, the window,
the metadata and the rank files are checked on the raw file the profiler wrote."""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (CPU is enough)")


def record(tmp_path: Path, *arguments: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    """`python -m tracelens record ARGUMENTS` in `tmp_path` (its working directory)."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "TRACELENS_CACHE_DIR": str(tmp_path / "cache-must-not-exist")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # `python`: this one
    env.pop("TRACELENS_RECORD_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "tracelens", "record", *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def raw(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        document: dict[str, Any] = json.load(handle)
    return document


def profiler_steps(document: dict[str, Any]) -> list[str]:
    """The ProfilerStep#N ranges on the CPU (`ph: X`, category user_annotation), in order."""
    return sorted(
        (
            e["name"]
            for e in document["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
        ),
        key=lambda name: int(name.split("#")[1]),
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tracelens: error:")]


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
def test_a_training_loop_gives_steps_profiled_steps_timings_and_the_summary(tmp_path: Path) -> None:
    result = record(tmp_path, "-o", "out", "--", sys.executable, str(EXAMPLES / "train_tiny.py"), "--exit-code", "0")
    assert result.returncode == 0, result.stderr
    trace = tmp_path / "out" / "train_tiny.json.gz"
    assert files_in(tmp_path) == ["out", "out/train_tiny.json.gz"]  # nothing else, nowhere else (no cache)
    document = raw(trace)
    assert profiler_steps(document) == [f"ProfilerStep#{n}" for n in range(1, 6)]  # --steps 5 (default)
    meta = document["tracelens_record"]
    assert meta["version"] == 1 and meta["step_on"] == "optimizer" and meta["partial"] is False
    assert meta["options"]["skip"] == 3 and meta["options"]["steps"] == 5 and meta["options"]["shapes"] is True
    assert meta["command"] == [sys.executable, str(EXAMPLES / "train_tiny.py"), "--exit-code", "0"]
    free = meta["profiler_free"]
    assert free["clock"] == "wall_clock" and free["steps"] == 5 and len(free["step_us"]) == 5
    assert free["first_step"] == 4 and meta["window"]["first_step"] == 10  # skip 3, time 4-8, warm-up 9
    assert all(v > 0 for v in free["step_us"]) and len(meta["profiled_wall_step_us"]) == 5
    assert meta["versions"]["torch"] and meta["versions"]["cuda"] is None
    assert "train_tiny: 20 steps" in result.stdout and "argv ['--exit-code', '0']" in result.stdout  # argv passed
    assert f"tracelens: trace: {trace}" in result.stderr
    assert "tracelens: profiler-free step" in result.stderr and "(median of 5, wall clock)" in result.stderr
    assert "Per step (5 complete step(s)" in result.stdout  # the analyze summary
    assert "Profiler-free step" in result.stdout
    hypotheses = tmp_path / "h.toml"
    hypotheses.write_text(
        '[[hypothesis]]\nname = "timed"\nmetric = "per_step.profiler_free_source"\nop = "=="\nvalue = "measured"\n'
        f'[[hypothesis]]\nname = "the median"\nmetric = "per_step.profiler_free_step_us"\nop = "=="\n'
        f"value = {sorted(free['step_us'])[2]}\n"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "tracelens", "check", str(trace), "--expect", str(hypotheses), "--no-cache"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and "2 held, 0 wrong" in checked.stdout, checked.stdout + checked.stderr


@pytest.mark.slow
def test_the_programs_exit_code_and_stop_after(tmp_path: Path) -> None:
    script = str(EXAMPLES / "train_tiny.py")
    result = record(
        tmp_path,
        "--no-analyze",
        "--skip",
        "1",
        "--steps",
        "2",
        "--",
        sys.executable,
        "-X",
        "utf8",
        script,
        "--exit-code",
        "3",
    )
    assert result.returncode == 3 and error_lines(result.stderr) == []
    assert profiler_steps(raw(tmp_path / "traces/record/train_tiny.json.gz")) == ["ProfilerStep#1", "ProfilerStep#2"]
    stopped = record(tmp_path, "--no-analyze", "--skip", "1", "--steps", "2", "--stop-after", "--force", "--", script)
    assert stopped.returncode == 0, stopped.stderr
    assert "train_tiny: 20 steps" not in stopped.stdout  # ended right after the window (step 6 of 20)
    assert raw(tmp_path / "traces/record/train_tiny.json.gz")["tracelens_record"]["options"]["stop_after"] is True


@pytest.mark.slow
def test_an_inference_loop_steps_on_forward(tmp_path: Path) -> None:
    script = str(EXAMPLES / "infer_tiny.py")
    result = record(tmp_path, "--no-analyze", "--step-on", "forward", "--steps", "4", "-o", "o", "--", "python", script)
    assert result.returncode == 0, result.stderr
    document = raw(tmp_path / "o/infer_tiny.json.gz")
    assert profiler_steps(document) == [f"ProfilerStep#{n}" for n in range(1, 5)]
    # each step holds exactly one outermost call: 2 Linear modules' addmm
    steps = [e for e in document["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    addmm = [e for e in document["traceEvents"] if e.get("ph") == "X" and e["name"] == "aten::addmm"]
    for step in steps:
        inside = [a for a in addmm if step["ts"] <= a["ts"] <= step["ts"] + step["dur"]]
        assert len(inside) == 2
    assert document["tracelens_record"]["step_on"] == "forward"


@pytest.mark.slow
def test_step_on_forward_with_a_compiled_forward(tmp_path: Path) -> None:
    """A forward compiled with torch.compile (as a static-cache generate() loop does): the hooks of the modules
    inside the compiled region must not break Dynamo's trace (they once called os.getpid there, which Dynamo
    refuses), and each outermost call is still one step."""
    (tmp_path / "compiled_loop.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.a = nn.Linear(8, 8)\n"
        "        self.b = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n        return self.b(torch.relu(self.a(x)))\n"
        "m = M().eval()\nm.forward = torch.compile(m.forward, backend='eager', fullgraph=True)\n"
        "x = torch.randn(4, 8)\nwith torch.no_grad():\n    for _ in range(10):\n        x = torch.tanh(m(x))\n"
    )
    result = record(
        tmp_path, "--no-analyze", "--step-on", "forward", "--skip", "2", "--steps", "3", "--", "compiled_loop.py"
    )
    assert result.returncode == 0, result.stderr
    document = raw(tmp_path / "traces/record/compiled_loop.json.gz")
    assert profiler_steps(document) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


@pytest.mark.slow
def test_step_on_a_named_function(tmp_path: Path) -> None:
    (tmp_path / "steps_mod.py").write_text("import torch\n\ndef one_step(x):\n    return (x @ x).sum()\n")
    (tmp_path / "loop.py").write_text(
        "import os, sys, torch\nimport steps_mod\nx = torch.randn(16, 16)\n"
        "for _ in range(12):\n    steps_mod.one_step(x)\n"
        "print('env', os.environ.get('PYTHONPATH'), 'TRACELENS_RECORD_CONFIG' in os.environ)\n"
        "print('path', any('_inject' in p for p in sys.path), sys.argv)\n"
    )
    result = record(
        tmp_path, "--no-analyze", "--skip", "1", "--steps", "3", "--step-on", "steps_mod:one_step", "--", "loop.py"
    )
    assert result.returncode == 0, result.stderr
    document = raw(tmp_path / "traces/record/loop.json.gz")
    assert profiler_steps(document) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert sum(e.get("name") == "aten::mm" for e in document["traceEvents"]) == 3
    # the program sees its own environment, path and argv: no trace of the recorder
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    assert f"env {pythonpath} False" in result.stdout
    assert "path False ['loop.py']" in result.stdout


@pytest.mark.slow
def test_a_script_with_no_optimizer_under_the_default_is_an_error(tmp_path: Path) -> None:
    result = record(tmp_path, "--", sys.executable, str(EXAMPLES / "train_tiny.py"), "--no-optimizer")
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "tracelens: error: the program ended before the window was complete (the optimizer step hook "
        "(torch.optim.Optimizer.register_optimizer_step_post_hook) saw 0 step(s); the window needs 14); "
        "nothing recorded"
    ]
    assert "Traceback" not in result.stderr
    assert files_in(tmp_path / "traces/record") == []


@pytest.mark.slow
def test_a_crash_inside_the_window_keeps_the_partial_trace(tmp_path: Path) -> None:
    script = str(EXAMPLES / "train_tiny.py")
    result = record(tmp_path, "--steps", "3", "--", sys.executable, script, "--crash-at", "10")
    assert result.returncode == 1  # the program's own status (an uncaught exception)
    trace = tmp_path / "traces/record/train_tiny.json.gz"
    assert error_lines(result.stderr) == [
        "tracelens: error: the program exited with status 1 inside the recording window (the program raised "
        "RuntimeError: crash requested at step 10 after 2 of 3 profiled steps); the partial trace is kept, "
        f"marked partial in tracelens_record: {trace}"
    ]
    document = raw(trace)
    meta = document["tracelens_record"]
    assert meta["partial"] is True and "after 2 of 3 profiled steps" in meta["partial_reason"]
    assert profiler_steps(document) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]  # the 3rd cut short
    analyzed = subprocess.run(
        [sys.executable, "-m", "tracelens", "analyze", str(trace), "--format", "json", "--no-cache"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    free = json.loads(analyzed.stdout)["profiler_free"]
    assert free["source"] == "measured" and free["step_us"] == meta["profiler_free"]["median_step_us"]
    assert free["note"] == f"the recording was cut short: {meta['partial_reason']}"


@pytest.mark.slow
def test_ctrl_c_inside_the_window_writes_the_trace_so_far(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(
        "import os, signal, torch\nm = torch.nn.Linear(8, 8)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(1, 30):\n    if step == 8:\n        os.kill(os.getpid(), signal.SIGINT)\n"
        "    m(torch.randn(4, 8)).sum().backward()\n    opt.step()\n"
    )
    result = record(tmp_path, "--skip", "1", "--steps", "3", "--", str(script))
    trace = tmp_path / "traces/record/interrupted.json.gz"
    assert result.returncode == 130
    assert error_lines(result.stderr) == [f"tracelens: error: interrupted; the trace so far: {trace}"]
    meta = raw(trace)["tracelens_record"]
    assert meta["partial"] is True and "KeyboardInterrupt" in meta["partial_reason"]


def test_a_missing_script_and_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    missing = record(tmp_path, "--", sys.executable, "nope.py")
    assert missing.returncode == 2 and error_lines(missing.stderr) == ["tracelens: error: nope.py: no such script"]
    none = record(tmp_path)
    assert none.returncode == 2
    assert error_lines(none.stderr) == [
        "tracelens: error: no program given: tracelens record [options] -- python SCRIPT.py ARGS"
    ]
    steps = record(tmp_path, "--steps", "0", "--", str(EXAMPLES / "train_tiny.py"))
    assert steps.returncode == 2 and error_lines(steps.stderr) == ["tracelens: error: --steps must be at least 1"]
    assert not (tmp_path / "traces").exists() or files_in(tmp_path / "traces") == ["record"]


def test_an_existing_trace_is_not_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "traces/record"
    out.mkdir(parents=True)
    (out / "train_tiny.json.gz").write_bytes(b"mine")
    result = record(tmp_path, "--", str(EXAMPLES / "train_tiny.py"))
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "tracelens: error: traces/record/train_tiny.json.gz exists; pass --force to replace it or --name to pick "
        "another name"
    ]
    assert (out / "train_tiny.json.gz").read_bytes() == b"mine"


def test_no_torch_in_the_programs_environment(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False, symlinks=True)  # no torch in it (not the system's site-packages either)
    python = bare / "bin" / "python"
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("the base interpreter has torch installed")
    (tmp_path / "plain.py").write_text("print('hello')\n")
    result = record(tmp_path, "--", str(python), "plain.py")
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        f"tracelens: error: torch is not installed in the program's environment ({python}); install it there: "
        f"{python} -m pip install torch"
    ]


@pytest.mark.slow
def test_torchrun_writes_one_trace_per_rank_that_analyze_groups(tmp_path: Path) -> None:
    """Two ranks, one trace each, grouped by `analyze`. CPU torch's gloo teardown now and then aborts a rank at
    exit ("terminate called without an active exception", SIGABRT): a gloo worker thread drops its last
    finished work after the interpreter has begun to finalize, and the work's thread-local state needs the GIL
    (gdb, 2026-12-07). It is the program's own: 3 of 20 runs of the example without tracelens, 6 of 20 under
    it, 4 of 40 with a barrier before `destroy_process_group`, 9 of 30 with all_reduce calls instead of DDP. The
    exit status stays the program's, so such a run is recorded again, up to six times (all six abort with
    p ≈ 0.3⁶ < 0.1 %); any other failure fails at once."""
    for attempt in range(6):
        shutil.rmtree(tmp_path / "ddp", ignore_errors=True)
        result = record(
            tmp_path, "-o", "ddp", "--skip", "1", "--steps", "2", "--no-analyze", "--",
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            str(EXAMPLES / "train_ddp_tiny.py"), "--steps", "8",
        )  # fmt: skip
        torn_down = "terminate called without an active exception" in result.stderr
        if not (result.returncode != 0 and torn_down and "after the window" in result.stderr and attempt < 5):
            break
    assert result.returncode == 0, result.stderr
    assert files_in(tmp_path / "ddp") == ["train_ddp_tiny.rank0.json.gz", "train_ddp_tiny.rank1.json.gz"]
    for rank in (0, 1):
        document = raw(tmp_path / f"ddp/train_ddp_tiny.rank{rank}.json.gz")
        assert document["distributedInfo"]["rank"] == rank and document["distributedInfo"]["world_size"] == 2
        assert document["tracelens_record"]["rank"] == rank and document["tracelens_record"]["world_size"] == 2
        assert profiler_steps(document) == ["ProfilerStep#1", "ProfilerStep#2"]
    analyzed = subprocess.run(
        [sys.executable, "-m", "tracelens", "analyze", "ddp", "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert analyzed.returncode == 0, analyzed.stderr
    assert "2 rank(s) of world size 2: 0-1" in analyzed.stdout


@pytest.mark.slow
def test_the_launcher_runs_without_tracelens_dependencies(tmp_path: Path) -> None:
    """Where only torch is installed (the device image): msgspec, rich, numpy unimportable; the recording
    works and the closing analysis is skipped with a warning."""
    code = (
        "import runpy, sys\n"
        "for name in ('msgspec', 'rich', 'numpy', 'pandas', 'plotly'):\n    sys.modules[name] = None\n"
        "sys.argv = ['tracelens', 'record', '--skip', '1', '--steps', '2', '--', sys.argv[1]]\n"
        "runpy.run_module('tracelens', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "train_tiny.py")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert "tracelens: warning: not analyzed (msgspec is not installed here)" in result.stderr
    assert profiler_steps(raw(tmp_path / "traces/record/train_tiny.json.gz")) == ["ProfilerStep#1", "ProfilerStep#2"]


def test_only_the_in_program_bootstrap_imports_torch() -> None:
    """tracelens never imports torch: only tracelens/record/bootstrap.py, which runs inside the program."""
    offenders = []
    for path in sorted((ROOT / "tracelens").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if any(name == "torch" or name.startswith("torch.") for name in names):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == ["tracelens/record/bootstrap.py"]


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
@pytest.mark.parametrize(("mode", "step_on"), [("train", "optimizer"), ("generate", "forward")])
def test_the_hugging_face_workloads_record_their_steps(tmp_path: Path, mode: str, step_on: str) -> None:
    """workloads/hf_record.py (recorded on the H200 by the lead) in its CPU smoke size."""
    script = str(ROOT / "workloads/hf_record.py")
    result = record(tmp_path, "--no-analyze", "--step-on", step_on, "--name", mode, "--", script, mode, "--small")
    assert result.returncode == 0, result.stderr
    document = raw(tmp_path / f"traces/record/{mode}.json.gz")
    assert profiler_steps(document) == [f"ProfilerStep#{n}" for n in range(1, 6)]
    assert document["tracelens_record"]["profiler_free"]["steps"] == 5


@pytest.mark.slow
def test_profiler_options_and_the_execution_trace(tmp_path: Path) -> None:
    script = str(EXAMPLES / "train_tiny.py")
    result = record(
        tmp_path, "--no-analyze", "--skip", "1", "--steps", "2", "--et", "--stack", "--memory", "--no-shapes", "--",
        script,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = tmp_path / "traces/record"
    assert files_in(out) == ["train_tiny.et.gz", "train_tiny.json.gz"]
    document = raw(out / "train_tiny.json.gz")
    meta = document["tracelens_record"]
    assert meta["execution_trace"] == "train_tiny.et.gz"
    assert (meta["options"]["stack"], meta["options"]["memory"], meta["options"]["shapes"]) == (True, True, False)
    events = document["traceEvents"]
    assert any(e.get("cat") == "python_function" for e in events)  # with_stack
    assert any(e.get("name") == "[memory]" for e in events)  # profile_memory
    assert not any("Input Dims" in e.get("args", {}) for e in events)  # no shapes
    with gzip.open(out / "train_tiny.et.gz", "rt") as handle:
        execution_trace = json.load(handle)
    assert any(n["name"] == "ProfilerStep#1" for n in execution_trace["nodes"])


@pytest.mark.slow
def test_a_program_that_ends_inside_the_window_keeps_what_was_recorded(tmp_path: Path) -> None:
    result = record(tmp_path, "--no-analyze", "--", str(EXAMPLES / "train_tiny.py"), "--steps", "11")
    trace = tmp_path / "traces/record/train_tiny.json.gz"
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "tracelens: error: the program ended before the window was complete (the optimizer step hook "
        "(torch.optim.Optimizer.register_optimizer_step_post_hook) saw 11 step(s); the window needs 14); what was "
        f"recorded is kept: {trace}"
    ]
    meta = raw(trace)["tracelens_record"]
    assert (
        meta["partial"] is True and meta["partial_reason"] == "the program ended after 2 of 5 profiled steps"
    )  # steps 10, 11


def test_the_wheel_carries_the_injected_sitecustomize() -> None:
    """`_inject/` is not a package (it must hold nothing but `sitecustomize.py`), so the wheel takes it as
    package data (checked by building a wheel once: `tracelens/record/_inject/sitecustomize.py` is in it)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "record/_inject/sitecustomize.py" in config["tool"]["setuptools"]["package-data"]["tracelens"]
    assert sorted(p.name for p in (ROOT / "tracelens/record/_inject").iterdir() if p.suffix == ".py") == [
        "sitecustomize.py"
    ]


@pytest.mark.slow
def test_a_crash_in_the_profilers_warm_up_step_exports_nothing(tmp_path: Path) -> None:
    result = record(tmp_path, "--", str(EXAMPLES / "train_tiny.py"), "--crash-at", "9")  # step 9: the warm-up
    assert result.returncode == 1
    assert error_lines(result.stderr) == [
        "tracelens: error: the program exited with status 1 inside the recording window (the program raised "
        "RuntimeError: crash requested at step 9 after 0 of 5 profiled steps); nothing was exported (it stopped in "
        "the profiler's warm-up step, before the first profiled one)"
    ]
    assert files_in(tmp_path / "traces/record") == []


@pytest.mark.slow
def test_a_sigterm_to_the_launcher_reaches_the_program_and_the_window_so_far_is_written(tmp_path: Path) -> None:
    script = tmp_path / "terminated.py"
    script.write_text(
        "import os, signal, time, torch\nm = torch.nn.Linear(8, 8)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(1, 30):\n    if step == 6:\n        os.kill(os.getppid(), signal.SIGTERM)\n"
        "        while True:\n            time.sleep(0.05)\n    m(torch.randn(4, 8)).sum().backward()\n    opt.step()\n"
    )  # the launcher is its parent; it passes the signal on; the program waits for it (not in signal.pause():
    # a signal taken by another of its threads would never wake it)
    result = record(tmp_path, "--skip", "1", "--steps", "2", "--", str(script))
    trace = tmp_path / "traces/record/terminated.json.gz"
    assert result.returncode == 143
    assert error_lines(result.stderr) == [
        "tracelens: error: the program exited with status 143 inside the recording window (the program raised "
        "SystemExit on SIGTERM after 1 of 2 profiled steps); the partial trace is kept, marked partial in "
        f"tracelens_record: {trace}"
    ]
    assert raw(trace)["tracelens_record"]["partial"] is True


@pytest.mark.slow
def test_a_program_killed_after_the_window_keeps_its_trace_and_status(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(
        "import os, signal, torch\nm = torch.nn.Linear(8, 8)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for step in range(1, 30):\n    if step == 8:\n        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    m(torch.randn(4, 8)).sum().backward()\n    opt.step()\n"
    )  # the window (steps 5, 6) ended at step 6; killed at step 8, with no exit handler run
    result = record(tmp_path, "--no-analyze", "--skip", "1", "--steps", "2", "--", str(script))
    assert result.returncode == 137 and error_lines(result.stderr) == []
    assert "tracelens: warning: the program exited with status 137 after the window" in result.stderr
    assert profiler_steps(raw(tmp_path / "traces/record/killed.json.gz")) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert files_in(tmp_path / "traces/record") == ["killed.json.gz"]  # the status file read and removed


def test_cuda_event_timings_are_not_set_against_the_wall_clock(capsys: pytest.CaptureFixture[str]) -> None:
    """The compiled Llama of traces/h100/record: its CPU runs ahead (no sync in the loop), so the host took
    15,810.9 µs a profiled step by the wall clock against a 26,802.8 µs profiler-free step by CUDA events
    (analyze, from the trace: 26,925.0 µs, +0.5 %). CUDA-event timings are compared with the trace's step only, in
    analyze's summary; a CPU program's wall-clock timings with the window's wall-clock steps."""
    from tracelens.record.launcher import _print_timings

    free = {"median_step_us": 26_802.8, "steps": 5, "clock": "cuda_events"}
    status = {"profiler_free": free, "profiled_wall_step_us": [15_810.9], "trace": "out/llama.json.gz"}
    _print_timings([status], analyzing=False)
    line = capsys.readouterr().err
    assert "profiler added" not in line and "15,810.9" not in line
    assert "the profiled step is the trace's, in analyze's summary (tracelens analyze out/llama.json.gz)" in line
    _print_timings([status], analyzing=True)
    assert "in analyze's summary (below)" in capsys.readouterr().err
    cpu = {"median_step_us": 9_079.5, "steps": 5, "clock": "wall_clock"}
    _print_timings([{"profiler_free": cpu, "profiled_wall_step_us": [15_153.8, 15_000.0, 16_000.0]}], analyzing=True)
    assert "profiled 15,153.8 µs (wall clock): the profiler added +67 %" in capsys.readouterr().err
    _print_timings([{"profiler_free": dict(cpu, median_step_us=15_600.0), "profiled_wall_step_us": [15_153.8]}], True)
    assert "the profiler added nothing measurable (under 5 %)" in capsys.readouterr().err
    _print_timings([{"profiler_free": dict(cpu, median_step_us=25_000.0), "profiled_wall_step_us": [15_000.0]}], True)
    assert "40 % faster profiled, the host's speed moved" in capsys.readouterr().err
