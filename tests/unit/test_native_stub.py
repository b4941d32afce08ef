"""tracelens/_native.pyi types exactly the C extension: the functions its method table exports (read from
tracelens/_native.c's text, not from the stub), each with the argument count its C body checks, and those the
built module has."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracelens import native

PACKAGE = Path(__file__).resolve().parents[2] / "tracelens"


def _stub_arities() -> dict[str, int]:
    tree = ast.parse((PACKAGE / "_native.pyi").read_text())
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    for function in functions:
        arguments = function.args
        assert not (arguments.args or arguments.kwonlyargs or arguments.vararg or arguments.kwarg), function.name
        assert function.returns is not None, function.name  # every return typed
        assert all(a.annotation is not None for a in arguments.posonlyargs), function.name
    return {function.name: len(function.args.posonlyargs) for function in functions}


def _c_arities() -> dict[str, int]:
    """From the C source: the method table's Python names and C functions, and each C function's `argc != N`."""
    source = (PACKAGE / "_native.c").read_text()
    table = source.split("static PyMethodDef METHODS[] = {", 1)[1].split("{NULL, NULL", 1)[0]
    entries = re.findall(r'\{"(\w+)", \(PyCFunction\)\(void \(\*\)\(void\)\)(\w+), METH_FASTCALL', table)
    arities = {}
    for python_name, c_name in entries:
        body = source.split(f"static PyObject *{c_name}(", 1)[1].split("\n}\n", 1)[0]
        counts = re.findall(r"argc != (\d+)", body)
        assert len(set(counts)) == 1, (c_name, counts)
        arities[python_name] = int(counts[0])
    assert len(arities) >= 9
    return arities


def test_the_stub_names_every_exported_function_with_its_argument_count() -> None:
    assert _stub_arities() == _c_arities()


def test_the_built_module_has_exactly_the_stub_functions() -> None:
    if native.extension is None:
        pytest.skip("TRACELENS_NO_NATIVE is set and the extension is not built")
    exported = {name for name in dir(native.extension) if callable(getattr(native.extension, name))}
    assert exported == set(_stub_arities())


RUN_COPY = """
import sys
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]  # the copy, not the install
sys.path.insert(0, sys.argv[1])
sys.argv = ["tracelens", "analyze", sys.argv[2], "--no-cache"]
from tracelens.__main__ import main
main()
"""


def test_a_copy_without_its_built_extension_stops_with_one_error_line(tmp_path: Path) -> None:
    """A copy of the package with no compiled extension: `tracelens analyze` says so on one line, exit 2; with
    TRACELENS_NO_NATIVE=1 the Python twins run it."""
    shutil.copytree(PACKAGE, tmp_path / "tracelens", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    trace = str(PACKAGE.parent / "traces" / "h200" / "eager_mlp.json.gz")
    env = {key: value for key, value in os.environ.items() if key != native.ORACLE_VARIABLE}
    command = [sys.executable, "-c", RUN_COPY, str(tmp_path), trace]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("tracelens: error: the C extension tracelens._native is not built")
    assert done.stderr.count("\n") == 1
    twins = subprocess.run(
        command, capture_output=True, text=True, env=env | {native.ORACLE_VARIABLE: "1"}, cwd=tmp_path, timeout=120
    )
    assert twins.returncode == 0 and twins.stdout.startswith("What to do next — step"), twins.stderr[-500:]
