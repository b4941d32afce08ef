"""The actions on an alternated run recorded after every constant was fitted (traces/h100/heldout, docs/actions.md
#held-out-an-alternated-run): compile on each eager → compiled twin of a round, fuse on each eager → Liger twin,
against the after-trace's mean step span read from the raw events."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracelens
from tests.test_actions_fuse import cell_counts
from tracelens.analyses import analyze

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ROOT / "traces/h100/heldout"
DOC = ROOT / "docs/actions.md"


def twins(after: str) -> list[tuple[Path, Path]]:
    """(eager, `after` variant) of each round of the held-out run: the compiled MLP, block and attention; the Liger
    MLP (the Liger block fuses several chains: not one `fuse` action)."""
    pairs = []
    for eager in sorted(HELD_OUT.glob("sweep*/*eager*_r*.json.gz" if after == "liger" else "*/*eager*_r*.json.gz")):
        other = eager.with_name(eager.name.replace("eager", after))
        if other.exists():
            pairs.append((eager, other))
    return pairs


@pytest.mark.slow
@pytest.mark.parametrize(("action", "after"), [("compile", "compiled"), ("fuse", "liger")])
def test_the_held_out_run(action: str, after: str) -> None:
    """Per class of changed step: cells, how many within ±20 % and inside the stated range, as the docs say."""
    counts = cell_counts(twins(after), action)
    doc = " ".join(DOC.read_text().split())
    shown = "; ".join(
        f"{limit}-limited {within} of {cells} within ±20 %, {inside} inside"
        for limit, (cells, within, inside) in counts.items()
        if cells
    )
    assert f"{action}: {shown}" in doc


NOTE_TRACES = (
    "traces/h100/heldout/attn/attn_eager_r0.json.gz",
    "traces/h100/heldout/attn/attn_sdpa_r0.json.gz",
    "traces/h200/extra/attn_eager.json.gz",
    "traces/h200/block/eager_math_block.json.gz",
    "traces/h200/block/eager_block.json.gz",
    "traces/h200/eager_mlp.json.gz",
)


@pytest.mark.parametrize("name", NOTE_TRACES, ids=lambda n: n.split("/")[-1])
def test_attention_written_out_is_flagged(name: str) -> None:
    """The compile action's note on attention written out, where the raw events (stdlib) show a softmax op and a
    bmm in the steps and no scaled_dot_product_attention; nowhere else."""
    import gzip
    import json

    with gzip.open(ROOT / name, "rt") as handle:
        ops = {e["name"] for e in json.load(handle)["traceEvents"] if e.get("cat") == "cpu_op"}
    written_out = bool(ops & {"aten::softmax", "aten::_softmax"}) and "aten::bmm" in ops
    written_out = written_out and "aten::scaled_dot_product_attention" not in ops
    results = analyze(tracelens.load(ROOT / name))
    assert results.actions is not None
    compile_ = [a for a in results.actions.actions if a.action == "compile"]
    assert compile_ and ("rewrite softmax(QKᵀ)V" in compile_[0].basis) == written_out
    assert written_out == name.endswith(("attn_eager_r0.json.gz", "attn_eager.json.gz", "eager_math_block.json.gz"))
