"""A shape sweep is one GEMM input at several token counts; steps whose first GEMM is another GEMM are not one.

HTA's sampled rank traces have two steps whose first GEMMs are different layers (`aten::addmm` on
[2048, 6948] @ [6948, 256] in step 551, [2048, 2842] @ [2842, 512] in step 552). A step's shape is its first GEMM's
activation, the first input of two or more dimensions: `aten::addmm`'s first input is its bias ([256], [512],
which tracelens keyed steps by before 2026-12-08). `compare` titled them "Shape sweep" with step numbers in its
"steps" column; it now names them "First GEMM varies by step (not a shape sweep)", with how many steps each
input has. The H200 sweeps (one `aten::mm` on the same weight at 1024-4096 tokens) stay "Shape sweep". Both
sides are read from the raw JSON by tests/independent/first_gemm_inputs.py (stdlib only); the definition is
docs/shapes.md#first-gemm-varies-by-step.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import anchor, recorded_trace
from tests.independent.first_gemm_inputs import first_gemm_ops
from tracelens.cli import main

HTA = ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz")
SWEEPS = ("h200/sweep/eager_geglu.json.gz", "h200/sweep/liger_block.json.gz")


def _activation(dims: list[list[int]]) -> int:
    """Index of the op's activation input: its first input of two or more dimensions, else 0."""
    return next((i for i, d in enumerate(dims) if len(d) >= 2), 0)


def _raw_first_inputs(path: Path) -> tuple[Counter[str], bool, bool]:
    """From the raw events: steps per activation shape (`1024×2048`), whether every one has two or more
    dimensions and one last dimension (one GEMM input at several token counts), and whether the op's other
    inputs (the weights, the bias) are the same in every step."""
    ops = first_gemm_ops(str(path))
    picks = [_activation(dims) for _, _, dims in ops]
    firsts = [tuple(dims[i]) for (_, _, dims), i in zip(ops, picks, strict=True)]
    one_input = all(len(f) >= 2 for f in firsts) and len({f[-1] for f in firsts}) == 1
    others = {json.dumps(dims[:i] + dims[i + 1 :]) for (_, _, dims), i in zip(ops, picks, strict=True)}
    same_weights = len(others) == 1
    return Counter("×".join(map(str, f)) for f in firsts), one_input, same_weights


def _compare(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    assert main(["compare", *map(str, paths), "--format", "json", "--no-cache"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main(["compare", *map(str, paths), "--width", "100", "--no-cache"]) == 0
    return document, capsys.readouterr().out


def _table_counts(text: str, name: str) -> Counter[str]:
    """steps per shape in the text tables' rows of variant `name` ("│ variant │ shape │ steps │ step # │")."""
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│ ")]
    return Counter({row[1]: int(row[2]) for row in cells if row[0] == name and len(row) == 4})


def test_hta_first_gemm_varies_by_step_is_not_a_shape_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [anchor(name) for name in HTA]
    document, text = _compare(paths, capsys)
    assert "Shape sweep" not in text
    assert "First GEMM varies by step (not a shape sweep)" in text
    for path, variant in zip(paths, document["variants"], strict=True):
        steps_per_input, one_input, same_weights = _raw_first_inputs(path)
        assert len(steps_per_input) == 2 and not one_input and not same_weights  # two different GEMMs first
        assert all(len(shape.split("×")) == 2 for shape in steps_per_input)  # the activation, not the 1-D bias
        assert variant["shape_pattern"] == "first_gemm_varies"
        assert {r["shape"]: len(r["steps"]) for r in variant["shapes"]} == steps_per_input
        assert _table_counts(text, variant["name"]) == steps_per_input  # "steps" is how many
    assert document["break_even"] == []


@pytest.mark.parametrize("name", SWEEPS)
def test_recorded_sweeps_stay_shape_sweeps(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = recorded_trace(name)
    steps_per_input, one_input, same_weights = _raw_first_inputs(path)
    assert len(steps_per_input) >= 2 and one_input and same_weights  # one GEMM at several token counts
    document, text = _compare([path, path], capsys)
    (variant, _) = document["variants"]
    assert variant["shape_pattern"] == "sweep"
    assert {r["shape"]: len(r["steps"]) for r in variant["shapes"]} == steps_per_input
    assert f"Shape sweep of {variant['name']}: steps by first GEMM's input" in text
    assert "First GEMM varies" not in text
    table = text[text.index(f"Shape sweep of {variant['name']}") :].splitlines()
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in table if line.startswith("│ ")]
    assert {row[0]: int(row[1]) for row in rows[: len(steps_per_input)]} == steps_per_input  # a count
    assert table[2].split("┃")[1:4] == [" shape     ", " steps ", " step # "]


def test_a_linear_with_bias_is_keyed_by_its_activation() -> None:
    """`aten::addmm`'s Input Dims start with the bias: the shape is the activation that follows it."""
    from tracelens.analyses.shapes_sweep import _first_input

    assert _first_input(json.dumps([[256], [2048, 6948], [6948, 256], [], []])) == (2048, 6948)
    assert _first_input(json.dumps([[4096, 2048], [2048, 16384]])) == (4096, 2048)
    assert _first_input(json.dumps([[7], []])) == (7,)
