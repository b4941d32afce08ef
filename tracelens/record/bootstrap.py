"""The recorder inside the user's program (`tracelens record`): loaded by `_inject/sitecustomize.py` before the
program's own code runs, in the program's interpreter. Standard library and torch only (never tracelens).

Contract (docs/record.md):
- `activate(config_json)`: installs the step hook the options name and returns; the program then runs as it
  would. Step boundaries: the end of every optimizer step (`--step-on optimizer`, a global post-hook), the
  end of every outermost `nn.Module` call (`--step-on forward`, global forward hooks), or the end of every
  outermost call of a named function (`--step-on pkg.mod:func`).
- Phases, counted in boundaries: `skip` steps run untouched; the next `steps` are timed without the profiler
  (CUDA events on the current stream where CUDA is initialized, else `time.perf_counter`); then one profiler
  warm-up step and `steps` profiled steps (`ProfilerStep#1..steps`). Then the profiler is removed and the
  program runs on, or ends (`--stop-after`: `SystemExit(0)` from the step hook).
- The trace is `OUT/NAME.json.gz` (`NAME.rank{R}.json.gz` when `WORLD_SIZE` > 1), with the `tracelens_record`
  metadata (`build_meta`); the execution trace (`--et`) is `NAME[.rank{R}].et.gz`. Both are written in OUT only
  (temporary files are hidden files in OUT, renamed or removed).
- At exit a status file `OUT/.NAME[.rank{R}].record-status` (JSON) tells the launcher how far it got; the
  launcher reads and removes it. A window cut short (a crash, Ctrl-C, the program's end) is still exported,
  marked `partial` with the reason.
"""

# ruff: noqa: B905, RUF007  (runs in the program's interpreter: Python 3.9+, no zip(strict=), no pairwise)
from __future__ import annotations

import atexit
import contextlib
import gzip
import json
import os
import platform
import shutil
import signal
import sys
import time
from typing import Any

META_KEY = "tracelens_record"
META_VERSION = 1
STATUS_SUFFIX = ".record-status"

_state: _Recorder | None = None


def activate(config_json: str) -> None:
    """Start recording in this process if it is the program (see the module docstring); never raises."""
    global _state
    config = json.loads(config_json)
    if config.get("ranks_only") and "RANK" not in os.environ:
        return  # a distributed launcher (torchrun): only its worker processes record
    _restore_environment(config)
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        _write_status(config, _rank_suffix(), {"state": "no_torch", "error": str(exc), "python": sys.executable})
        os._exit(2)
    _state = _Recorder(config)
    _state.install()


def _restore_environment(config: dict[str, Any]) -> None:
    """The program's children see the environment the user gave (no recorder in them)."""
    os.environ.pop("TRACELENS_RECORD_CONFIG", None)
    original = config.get("pythonpath")
    if original is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = original


def _rank_suffix() -> str:
    world = _int_env("WORLD_SIZE")
    rank = _int_env("RANK")
    return f".rank{rank}" if world is not None and world > 1 and rank is not None else ""


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _write_status(config: dict[str, Any], suffix: str, status: dict[str, Any]) -> None:
    path = os.path.join(config["out_dir"], f".{config['name']}{suffix}{STATUS_SUFFIX}")
    with contextlib.suppress(OSError):
        with open(path + ".tmp", "w") as handle:
            json.dump(status, handle)
        os.replace(path + ".tmp", path)  # whole or not at all: the program may be killed at any time


class _Recorder:
    """The phases of one process' recording (module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        import torch

        self.torch = torch
        self.config = config
        self.skip = int(config["skip"])
        self.steps = int(config["steps"])
        self.pid = os.getpid()
        self.suffix = _rank_suffix()
        self.name = config["name"] + self.suffix
        self.out_dir = config["out_dir"]
        self.trace_path = os.path.join(self.out_dir, self.name + ".json.gz")
        self.et_path = os.path.join(self.out_dir, self.name + ".et.gz") if config.get("et") else None
        self.boundaries = 0
        self.depth = 0
        self.state = "waiting"  # waiting → timing → warmup → window → done
        self.timing_marks: list[Any] = []  # CUDA events, or perf_counter seconds
        self.timing_clock = "wall_clock"
        self.window_wall_s: list[float] = []
        self.profiler_free: dict[str, Any] | None = None
        self.prof: Any = None
        self.et_observer: Any = None
        self.exported = False
        self.exception: str | None = None
        self.stop_requested = False
        self.failed: str | None = None
        self._previous_excepthook = sys.excepthook

    # ------------------------------------------------------------ hooks

    def install(self) -> None:
        step_on = self.config["step_on"]
        if step_on == "optimizer":
            from torch.optim.optimizer import register_optimizer_step_post_hook

            register_optimizer_step_post_hook(lambda *_: self.boundary())
        elif step_on == "forward":
            from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

            register_module_forward_pre_hook(self._enter)
            register_module_forward_hook(self._leave, always_call=True)
        else:
            _FunctionHook(step_on, self).install()
        sys.excepthook = self._excepthook
        atexit.register(self.finish)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # the program's own handler, if any, stays
            signal.signal(signal.SIGTERM, self._terminated)

    def _restore_sigterm(self) -> None:
        """After the window the program gets SIGTERM's default action back (where it is still ours)."""
        with contextlib.suppress(ValueError, TypeError):  # ValueError: not the main thread
            if signal.getsignal(signal.SIGTERM) == self._terminated:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def _terminated(self, number: int, frame: Any) -> None:
        """SIGTERM (e.g. passed on by the launcher): end as SystemExit so that `finish` writes the window so far;
        the exit status is the one the signal's default action gives a shell (128 + 15)."""
        self.exception = "SystemExit on SIGTERM"
        raise SystemExit(128 + number)

    def _enter(self, *_: Any) -> None:
        # inside a compiled region (torch.compile traces inner modules' hooks) a step boundary cannot be
        # counted and os.getpid cannot be traced: the outermost call, which runs eagerly, counts it
        if self.torch.compiler.is_compiling():
            return
        if os.getpid() == self.pid:
            self.depth += 1

    def _leave(self, *_: Any) -> None:
        if self.torch.compiler.is_compiling() or os.getpid() != self.pid:
            return
        self.depth = max(self.depth - 1, 0)
        if self.depth == 0:
            self.boundary()

    def _excepthook(self, kind: type[BaseException], value: BaseException, tb: Any) -> None:
        self.exception = f"{kind.__name__}: {value}" if str(value) else kind.__name__
        self._previous_excepthook(kind, value, tb)

    # ------------------------------------------------------------ phases

    def boundary(self) -> None:
        """The end of one step (and the start of the next). A failure of the recorder itself never reaches the
        program: the recording stops (`failed`, reported by the launcher) and the program runs on."""
        if os.getpid() != self.pid or self.state in ("done", "failed"):
            return
        try:
            self._boundary()
        except Exception as exc:
            self.failed = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.state = "failed"
            if self.prof is not None:
                with contextlib.suppress(Exception):
                    self.prof.stop()
                self.prof = None
        if self.stop_requested:
            raise SystemExit(0)

    def _boundary(self) -> None:
        self.boundaries += 1
        n = self.boundaries
        if n == self.skip:
            self._mark_timing()
            self.state = "timing"
            if self.steps == 0:
                self._start_window()
        elif self.skip < n <= self.skip + self.steps:
            self._mark_timing()
            if n == self.skip + self.steps:
                self._finish_timing()
                self._start_window()
        elif self.state in ("warmup", "window"):
            self._window_step(n)

    def _cuda_active(self) -> bool:
        cuda = self.torch.cuda
        return bool(cuda.is_available() and cuda.is_initialized())

    def _mark_timing(self) -> None:
        if not self.timing_marks:
            self.timing_clock = "cuda_events" if self._cuda_active() else "wall_clock"
        if self.timing_clock == "cuda_events":
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            self.timing_marks.append(event)
        else:
            self.timing_marks.append(time.perf_counter())

    def _finish_timing(self) -> None:
        marks = self.timing_marks
        if self.timing_clock == "cuda_events":
            marks[-1].synchronize()
            step_us = [a.elapsed_time(b) * 1e3 for a, b in zip(marks, marks[1:])]
        else:
            step_us = [(b - a) * 1e6 for a, b in zip(marks, marks[1:])]
        self.profiler_free = {
            "clock": self.timing_clock,
            "steps": len(step_us),
            "first_step": self.skip + 1,
            "step_us": [round(v, 3) for v in step_us],
            "median_step_us": round(_median(step_us), 3) if step_us else None,
        }

    def _start_window(self) -> None:
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile, schedule

        if self.profiler_free is None:
            self._finish_timing()
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        if self.et_path is not None:
            from torch.profiler import ExecutionTraceObserver

            self.et_observer = ExecutionTraceObserver().register_callback(self._hidden(".et.json"))
        self.prof = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=1, active=self.steps, repeat=1),
            record_shapes=bool(self.config["shapes"]),
            with_stack=bool(self.config["stack"]),
            profile_memory=bool(self.config["memory"]),
            execution_trace_observer=self.et_observer,
            on_trace_ready=self._export,
        )
        self.prof.start()
        self.state = "warmup"

    def _window_step(self, n: int) -> None:
        first_active = self.skip + self.steps + 1  # the boundary that ends the profiler's warm-up step
        last = first_active + self.steps
        now = time.perf_counter()
        if n >= first_active:
            self.window_wall_s.append(now)
        if n == first_active:
            self.state = "window"
        if n == last:
            self._add_meta(partial=None)
        self.prof.step()  # at `last`: the window ends and is exported (`_export`)
        if n == last:
            self.prof.stop()
            self._close_et()
            self.prof = None
            self.state = "done"
            self._restore_sigterm()
            self._write_status(None)
            if self.config.get("stop_after"):
                self.stop_requested = True

    def _add_meta(self, partial: str | None) -> None:
        self.prof.add_metadata_json(META_KEY, json.dumps(self.build_meta(partial)))

    def build_meta(self, partial: str | None) -> dict[str, Any]:
        """The `tracelens_record` object (docs/record.md#metadata)."""
        torch = self.torch
        cuda = torch.cuda.is_available()
        wall = self.window_wall_s
        return {
            "version": META_VERSION,
            "tool": self.config.get("tool"),
            "command": self.config.get("command"),
            "cwd": os.getcwd(),
            "options": {
                key: self.config.get(key)
                for key in ("skip", "steps", "step_on", "shapes", "stack", "memory", "et", "name", "stop_after")
            },
            "step_on": self.config["step_on"],
            "window": {"first_step": self.skip + self.steps + 2, "steps": self.steps, "warmup_steps": 1},
            "profiler_free": self.profiler_free,
            "profiled_wall_step_us": [round((b - a) * 1e6, 3) for a, b in zip(wall, wall[1:])],
            "partial": partial is not None,
            "partial_reason": partial,
            "execution_trace": os.path.basename(self.et_path) if self.et_path else None,
            "rank": _int_env("RANK"),
            "world_size": _int_env("WORLD_SIZE"),
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "cuda": torch.version.cuda if cuda else None,
                "gpu": torch.cuda.get_device_name() if cuda and torch.cuda.is_initialized() else None,
            },
        }

    def _hidden(self, suffix: str) -> str:
        return os.path.join(self.out_dir, f".{self.name}{suffix}.tmp")

    def _export(self, prof: Any) -> None:
        temporary = self._hidden(".json")
        prof.export_chrome_trace(temporary)
        _gzip_to(temporary, self.trace_path)
        self.exported = True

    def _close_et(self) -> None:
        if self.et_observer is None or self.et_path is None:
            return
        with contextlib.suppress(Exception):
            self.et_observer.unregister_callback()
        temporary = self._hidden(".et.json")
        if os.path.exists(temporary):
            _gzip_to(temporary, self.et_path)
        self.et_observer = None

    # ------------------------------------------------------------ exit

    def finish(self) -> None:
        """At exit: export a window cut short (marked partial), then write the status for the launcher."""
        if os.getpid() != self.pid:
            return
        reason = None
        if self.prof is not None and self.state in ("warmup", "window"):
            done = max(len(self.window_wall_s) - 1, 0)
            reason = (
                f"the program raised {self.exception}" if self.exception else "the program ended"
            ) + f" after {done} of {self.steps} profiled steps"
            try:
                if self.state == "window":
                    self._add_meta(partial=reason)
                self.prof.stop()  # exports what was recorded (nothing in the warm-up step)
            except Exception as exc:  # the profiler may be unusable after a crash
                reason += f"; stopping the profiler failed ({type(exc).__name__})"
            self._close_et()
        self._write_status(reason)

    def _write_status(self, reason: str | None) -> None:
        """What the launcher reads (after the window, and again at exit: a program killed later keeps it)."""
        _write_status(
            self.config,
            self.suffix,
            {
                "state": self.state,
                "boundaries": self.boundaries,
                "needed": self.skip + 2 * self.steps + 1,
                "trace": self.trace_path if self.exported else None,
                "partial_reason": reason,
                "exception": self.exception,
                "recorder_failed": self.failed,
                "profiler_free": self.profiler_free,
                "profiled_wall_step_us": [
                    round((b - a) * 1e6, 3) for a, b in zip(self.window_wall_s, self.window_wall_s[1:])
                ],
                "rank": _int_env("RANK"),
            },
        )


class _FunctionHook:
    """`--step-on pkg.mod:func` (or `pkg.mod.func`, `pkg.mod:Class.method`): each outermost call's return is a
    step boundary. The function is wrapped when its module is imported (now, if it already is)."""

    def __init__(self, target: str, recorder: _Recorder) -> None:
        if ":" in target:
            module, _, qualname = target.partition(":")
        else:
            module, _, qualname = target.rpartition(".")
        self.module, self.qualname = module, qualname
        self.recorder = recorder
        self.done = False

    def install(self) -> None:
        if self.module in sys.modules:
            self.patch(sys.modules[self.module])
            return
        sys.meta_path.insert(0, _PatchingFinder(self))  # type: ignore[arg-type]

    def patch(self, module: Any) -> None:
        if self.done:
            return
        owner, name = module, self.qualname
        parts = self.qualname.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part, None)
        name = parts[-1]
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            return
        recorder = self.recorder

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            recorder.depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                recorder.depth -= 1
                if recorder.depth == 0:
                    recorder.boundary()

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__qualname__ = getattr(original, "__qualname__", name)
        if isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod):
            setattr(owner, name, staticmethod(wrapper))
        elif isinstance(owner, type) and isinstance(owner.__dict__.get(name), classmethod):
            setattr(owner, name, classmethod(lambda cls, *a, **k: wrapper(cls, *a, **k)))  # pragma: no cover
        else:
            setattr(owner, name, wrapper)
        self.done = True


class _PatchingFinder:
    """A meta path finder that patches `_FunctionHook`'s module right after it is executed."""

    def __init__(self, hook: _FunctionHook) -> None:
        self.hook = hook

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.hook.module or self.hook.done:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original_exec = loader.exec_module
        hook = self.hook

        def exec_module(module: Any) -> None:
            original_exec(module)
            hook.patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _gzip_to(source: str, target: str) -> None:
    """`source` gzipped into `target` (through a hidden temporary beside it), then `source` removed."""
    partial = os.path.join(os.path.dirname(target), "." + os.path.basename(target) + ".tmp")
    with open(source, "rb") as raw, gzip.open(partial, "wb", compresslevel=6) as packed:
        shutil.copyfileobj(raw, packed, 1 << 20)
    os.replace(partial, target)
    os.remove(source)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
