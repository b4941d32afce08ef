"""The layers import one way: loader → model → analyses → renderers (page data in report/) → cli. A module
may import its own layer and the ones before it, never one after it (imports under TYPE_CHECKING included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tracelens"
# what each package must never import
FORBIDDEN = {
    "loader": ("tracelens.analyses", "tracelens.renderers", "tracelens.report", "tracelens.cli"),
    "model": ("tracelens.analyses", "tracelens.renderers", "tracelens.report", "tracelens.cli"),
    "analyses": ("tracelens.renderers", "tracelens.report", "tracelens.cli", "tracelens.hypotheses"),
    "report": ("tracelens.renderers", "tracelens.cli"),
    "renderers": ("tracelens.cli",),
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
