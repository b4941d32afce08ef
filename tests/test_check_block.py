"""`tracelens check` with the issue-17 hypothesis files on the H200 block and sweep traces (notebooks/study.py
tells their story): each verdict and the figure it measured, checked by hand in `tracelens analyze` output."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, recorded_trace
from tracelens.cli import main

BLOCK = ("eager", "compiled", "liger", "eager_math")


def _check(paths: list[str], toml: str, capsys: pytest.CaptureFixture[str]) -> dict:
    main(["check", *paths, "--expect", str(REPO / "notebooks" / toml), "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_block_hypotheses(capsys: pytest.CaptureFixture[str]) -> None:
    # inference and training traces together: "compiled_block" is also train_compiled_block's recorded variant,
    # and the file stem must win over it
    paths = [str(recorded_trace(f"h200/block/{p}{v}_block.json.gz")) for v in BLOCK for p in ("", "train_")]
    doc = _check(paths, "block_hypotheses.toml", capsys)

    def verdict(start: str) -> tuple[bool, str, object]:
        (v,) = [v for v in doc["verdicts"] if v["name"].startswith(start)]
        return v["held"], v["trace"], v["measured"]

    assert (doc["held"], doc["wrong"]) == (7, 4)
    assert verdict("guess: torch.compile saves at least 25% of the block") == (True, "compiled_block", 705.596)
    assert verdict("guess: the saving comes from attention") == (False, "compiled_block", pytest.approx(80.405))
    assert verdict("guess: Liger's kernels set") == (False, "liger_block", "cpu")
    assert verdict("guess: Liger's training step") == (False, "train_liger_block", pytest.approx(6567.471))
    assert verdict("guess: torch.compile saves at least 25% of the training") == (
        True,
        "train_compiled_block",
        2466.487,
    )


def test_sweep_hypotheses(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [
        str(recorded_trace(f"h200/sweep/{v}_{m}.json.gz"))
        for v in ("eager", "liger", "compiled_static", "compiled_default")
        for m in ("geglu", "block")
    ]
    doc = _check(paths, "sweep_hypotheses.toml", capsys)
    assert (doc["held"], doc["wrong"]) == (6, 3)
    measured = [(v["held"], v["measured"]) for v in doc["verdicts"]]
    assert measured[1] == (False, pytest.approx(1463348.899))  # Liger's first GeGLU step: Triton JIT, 1.46 s
    assert measured[2] == (False, pytest.approx(57038.106))  # Liger block at 4096 tokens: cuDNN SDPA set-up
    assert measured[6] == (False, [1, 2])  # default torch.compile compiles in steps 1 and 2 only
