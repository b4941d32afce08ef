"""The layers import one way: loader → model → analyses → renderers (page data in report/) → cli, with hypotheses/
(check files) beside the renderers and below the commands. A module may import its own layer and the ones
before it, never one after it (imports under TYPE_CHECKING included); and every command, run from `__main__`
under `sys.setprofile`, calls only down the layers (`MAY_CALL`)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tracelens"
# what each package must never import
FORBIDDEN = {
    "loader": ("tracelens.analyses", "tracelens.renderers", "tracelens.report", "tracelens.cli"),
    "model": ("tracelens.analyses", "tracelens.renderers", "tracelens.report", "tracelens.cli"),
    "analyses": ("tracelens.renderers", "tracelens.report", "tracelens.cli", "tracelens.hypotheses"),
    "report": ("tracelens.renderers", "tracelens.cli"),
    "renderers": ("tracelens.cli",),
    "hypotheses": ("tracelens.cli",),
}


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_never_imports_a_later_one(layer: str) -> None:
    offences = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in sorted(imported_modules(path))
        if name.startswith(FORBIDDEN[layer])
    ]
    assert offences == []


def test_the_check_finds_an_offence(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tracelens.renderers import x\n")
    assert "tracelens.renderers" in imported_modules(module)


# ---------------------------------------------------------------- calls, not only imports

# Which layers a function of each layer may call (the import rules above, with the cache between the command and
# the loader); `base` is what every layer may use (errors, records, the progress bar). A module body run by an
# import counts as a call by the importer.
MAY_CALL = {
    "base": {"base"},
    "model": {"model", "base"},
    "loader": {"loader", "model", "base"},
    "analyses": {"analyses", "loader", "model", "base"},
    "report": {"report", "analyses", "loader", "model", "base"},
    "renderers": {"renderers", "report", "analyses", "loader", "model", "base"},
    "cache": {"cache", "loader", "model", "base"},
    "hypotheses": {"hypotheses", "model", "base"},  # parsing and evaluating check files, over JSON documents
    # the documents hypotheses are checked against: the analyses' `analyze --format json` document of each trace
    "checking": {"checking", "hypotheses", "cache", "renderers", "report", "analyses", "loader", "model", "base"},
    "cli": {"cli", "checking", "hypotheses", "cache", "renderers", "report", "analyses", "loader", "model", "base"},
}
MAY_CALL["renderers"] |= {"hypotheses"}  # `check`'s output renders the verdicts
BASE = {"tracelens", "errors", "records", "atomic", "units", "_threads", "native", "frames", "naming", "progress"}
BASE |= {"escapes"}  # control characters of trace data escaped (tracelens/escapes.py): errors.warn uses it
BASE |= {"settings"}  # environment and size parsing (tracelens/settings.py)
BASE |= {"variants"}  # which action a variant took: one rule for compare (analyses) and check (hypotheses)
LAYERS = {"_cache": "cache", "cli": "cli", "__main__": "cli", "loader": "loader", "model": "model"}
LAYERS |= {"record": "cli"}  # the recorder is a front end beside the commands (`tracelens record`)
LAYERS |= {"analyses": "analyses", "report": "report", "renderers": "renderers", "hypotheses": "hypotheses"}
CHECKING = ("tracelens.hypotheses", "tracelens.hypotheses.document")  # `check(...)` and the documents it checks
# A memo wrapper is part of the function it wraps (the layer that owns the function applies it): its frames are
# seen through, like those of the standard library.
TRANSPARENT = ("tracelens.model.memo",)

# Run in a fresh interpreter: `tracelens analyze` from `tracelens.__main__.main`, every call (`sys.setprofile`:
# Python functions, module bodies run by imports, generators resumed) recorded as (caller module, callee
# module) wherever a call crosses modules; the caller of a call made from outside tracelens (contextlib,
# importlib, argparse) is the nearest tracelens frame below it. The ranges are made small (4 kB) and
# TRACELENS_WORKERS=2, so a forked child decodes ranges while this process imports the analyses; the child,
# which inherits the profiler, writes the crossings of its own calls beside this process' record.
WALK = r"""
import json, os, sys
crossings = {}
order = []

TRANSPARENT = %r

def name_of(frame):
    name = frame.f_globals.get("__name__", "")
    ours = (name == "tracelens" or name.startswith("tracelens.")) and name not in TRANSPARENT
    return name if ours else None

def profile(frame, event, arg):
    if event != "call":
        return
    callee = name_of(frame)
    if callee is None:
        return
    back = frame.f_back
    while back is not None and name_of(back) is None:
        back = back.f_back
    caller = name_of(back) if back is not None else "(start)"
    if caller != callee:
        key = (caller, callee)
        if key not in crossings:
            crossings[key] = f"{back.f_code.co_name if back else ''} -> {frame.f_code.co_name}"
        if frame.f_code.co_name != "<module>":
            order.append([callee, frame.f_code.co_name])

real_exit = os._exit

def exit_with_record(status):
    sys.setprofile(None)
    parent = os.getpid() == int(os.environ["WALK_PARENT"])
    path = os.environ["WALK_OUT"] + ("" if parent else f".child{os.getpid()}")  # a forked decoder's own record
    with open(path, "w") as out:
        json.dump({"status": status, "crossings": [[a, b, how] for (a, b), how in crossings.items()],
                   "order": order if parent else []}, out)
    real_exit(status)

os._exit = exit_with_record
os.environ["WALK_PARENT"] = str(os.getpid())
sys.argv = ["tracelens", *sys.argv[1:]]
import tracelens.loader.stream as stream
stream.begin_stream.__defaults__ = (None, 4096, 1)
sys.setprofile(profile)
from tracelens.__main__ import main
main()
"""


def layer_of(module: str) -> str:
    """The layer of a module of tracelens; a module in none fails the test."""
    parts = module.split(".")
    if module in CHECKING:
        return "checking"
    if len(parts) == 1 or parts[1] in BASE:
        return "base"
    if parts[1] in LAYERS:
        return LAYERS[parts[1]]
    raise AssertionError(f"{module}: in no layer (add its package to LAYERS and MAY_CALL)")


def walk(tmp_path: Path, *arguments: str) -> dict[str, Any]:
    """The record of one `tracelens` command run from `__main__` in a fresh interpreter (see `WALK`), run from
    `tmp_path` so that `python -c` imports this tree's tracelens, never one in the working directory."""
    record = tmp_path / "walk.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(PACKAGE.parent),
        "WALK_OUT": str(record),
        "TRACELENS_WORKERS": "2",
        "TRACELENS_CACHE_DIR": str(tmp_path / "cache"),
    }
    command = [sys.executable, "-c", WALK % (TRANSPARENT,), *arguments]
    for old in tmp_path.glob("walk.json*"):
        old.unlink()
    subprocess.run(command, env=env, check=False, timeout=300, capture_output=True, cwd=tmp_path)  # status: recorded
    result: dict[str, Any] = json.loads(record.read_text())
    children = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("walk.json.child*"))]
    result["children"] = len(children)
    result["crossings"] += [crossing for child in children for crossing in child["crossings"]]
    return result


def calls_up(record: dict[str, Any]) -> list[str]:
    """Every call from a function of one layer into a layer it may not call."""
    return [
        f"{caller} calls {callee} ({how})"
        for caller, callee, how in record["crossings"]
        if caller != "(start)" and layer_of(callee) not in MAY_CALL[layer_of(caller)]
    ]


STAGES = (  # the steps of `analyze`, in the order the command takes them
    ("cache", "lookup_result"),
    ("cache", "begin_load"),
    ("loader", "begin_load"),
    ("loader", "finish"),
    ("model", "build_trace"),
    ("analyses", "analyze"),
    ("renderers", "render"),
    ("cache", "store_result"),
)


def first_calls(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The stages of `STAGES` in the order the run first called each."""
    seen: dict[tuple[str, str], int] = {}
    for index, (module, function) in enumerate(record["order"]):
        stage = (layer_of(module), function)
        if stage in STAGES:
            seen.setdefault(stage, index)
    return sorted(seen, key=seen.__getitem__)


TRACE = PACKAGE.parent / "traces" / "h200" / "eager_mlp.json.gz"


def test_analyze_calls_only_down_the_layers(tmp_path: Path) -> None:
    """`tracelens analyze FILE` (a cold run with the cache on, ranges claimed by a forked child and this
    process) enters cli, cache, loader, model, analyses and renderers in that order, and no function of a layer
    ever calls one of a layer above it: no closure of the command run by the cache or the loader, no renderer
    reached from the registry."""
    record = walk(tmp_path, "analyze", str(TRACE), "--format", "json", "-o", str(tmp_path / "out.json"))
    assert record["status"] == 0
    assert calls_up(record) == []
    assert first_calls(record) == list(STAGES)
    called = [function for _, function in record["order"]]
    assert "start_forked" in called  # a child claimed ranges while this process worked, then this one the rest
    assert any(how.endswith("-> _decode_range_args") for _, _, how in record["crossings"])  # by either process
    assert record["children"] == 1  # and its calls were checked too
    served = walk(tmp_path, "analyze", str(TRACE), "--format", "json", "-o", str(tmp_path / "out.json"), "--force")
    assert served["status"] == 0 and calls_up(served) == []  # the same command served from the results cache


HYPOTHESES = """
[[hypothesis]]
name = "kernels"
metric = "per_step.kernels"
op = ">"
value = 0

[[hypothesis]]
name = "gemms"
kernel = "*gemm*"
op = ">="
value = 0

[[hypothesis]]
name = "fused"
fuses = ["aten::mul", "aten::add"]
"""


@pytest.mark.parametrize(
    ("arguments", "status"),
    [
        pytest.param(("report", "{trace}", "-o", "{tmp}/page.html"), 0, marks=pytest.mark.slow, id="report"),
        pytest.param(("compare", "{trace}", "{trace}", "--format", "json"), 0, id="compare"),
        pytest.param(("check", "{trace}", "--expect", "{tmp}/h.toml"), 1, id="check"),
        pytest.param(("check", "{trace}", "--expect", "{tmp}/h.toml", "-v", "--format", "json"), 1, id="check-json"),
        pytest.param(("annotate", "{trace}", "-o", "{tmp}/annotated.json.gz"), 0, id="annotate"),
        pytest.param(("cache", "info"), 0, id="cache-info"),
    ],
)
def test_every_command_calls_only_down_the_layers(tmp_path: Path, arguments: tuple[str, ...], status: int) -> None:
    """The other commands hold to the same rule as `analyze` (check's status 1: a wrong hypothesis, as meant)."""
    (tmp_path / "h.toml").write_text(HYPOTHESES)
    record = walk(tmp_path, *(a.format(trace=TRACE, tmp=tmp_path) for a in arguments))
    assert record["status"] == status
    assert calls_up(record) == []


def test_the_walk_sees_a_call_back_up() -> None:
    """A call from the loader into the command (what the old `meanwhile` callback was) is found."""
    record = {"crossings": [["tracelens.loader.stream", "tracelens.cli.analyze", "finish -> <lambda>"]]}
    assert calls_up(record) == ["tracelens.loader.stream calls tracelens.cli.analyze (finish -> <lambda>)"]


def test_a_call_never_climbs_back_through_a_chain_of_allowed_calls() -> None:
    """`MAY_CALL` is transitive and never lets a layer call one that may call it, so checking each call (its
    caller the nearest tracelens frame below it) checks every stack: once a call has entered a layer, no frame
    of a layer above it runs inside it, however many allowed calls lie between."""
    for layer, allowed in MAY_CALL.items():
        for callee in allowed:
            assert MAY_CALL[callee] <= allowed, (layer, callee)  # transitive: what the callee may call, so may it
            assert callee == layer or layer not in MAY_CALL[callee], (layer, callee)  # no way back up
    ranks = sorted(MAY_CALL, key=lambda layer: len(MAY_CALL[layer]))
    assert ranks[0] == "base" and ranks[-1] == "cli"  # the walk's order, bottom to top
    assert MAY_CALL["cli"] == set(MAY_CALL)
