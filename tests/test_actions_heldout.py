"""The actions on an alternated run recorded after every constant was fitted (traces/h100/heldout, docs/actions.md
#held-out-an-alternated-run): compile on each eager → compiled twin of a round, fuse on each eager → Liger twin,
against the after-trace's mean step span read from the raw events."""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

import tracelens
from tests.test_actions import raw_mean_span_us
from tests.test_actions_fuse import cell_counts
from tracelens.analyses import analyze
from tracelens.analyses.actions import ATTENTION_GEMM_SHARE

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
    with gzip.open(ROOT / name, "rt") as handle:
        ops = {e["name"] for e in json.load(handle)["traceEvents"] if e.get("cat") == "cpu_op"}
    written_out = bool(ops & {"aten::softmax", "aten::_softmax"}) and "aten::bmm" in ops
    written_out = written_out and "aten::scaled_dot_product_attention" not in ops
    results = analyze(tracelens.load(ROOT / name))
    assert results.actions is not None
    compile_ = [a for a in results.actions.actions if a.action == "compile"]
    assert compile_ and ("softmax(QKᵀ)V written out" in compile_[0].basis) == written_out
    assert written_out == name.endswith(("attn_eager_r0.json.gz", "attn_eager.json.gz", "eager_math_block.json.gz"))


ATTENTION_TWINS = sorted(
    eager
    for eager in ROOT.glob("traces/h*/**/attn_eager*.json.gz")
    if eager.with_name(eager.name.replace("attn_eager", "attn_compiled")).exists()
)
FLASH = ("flash", "sdpa", "fmha", "attention")


def _kernel_us_per_step(path: Path, wanted: Callable[[str], bool]) -> float:
    """Stdlib: the summed duration of the kernels whose name `wanted` accepts, over the trace's CPU-side
    ProfilerStep annotations' count."""
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    steps = sum(
        1 for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    return sum(float(e["dur"]) for e in events if e.get("cat") == "kernel" and wanted(str(e["name"]))) / steps


def attention_share(eager: Path) -> float:
    """The compiled twin's attention kernel time over the eager trace's GEMM kernel time, per step (raw events)."""
    compiled = eager.with_name(eager.name.replace("attn_eager", "attn_compiled"))
    fused = _kernel_us_per_step(compiled, lambda n: any(w in n.lower() for w in FLASH))
    gemms = _kernel_us_per_step(eager, lambda n: n.startswith("nvjet") or "gemm" in n.lower())
    return fused / gemms


def attention_table() -> str:
    """The docs' table of the attention twins: the share, the compile prediction against the compiled trace's mean
    span (raw events), and the counts under it."""
    lines = [
        "| eager trace | GPU | share | predicted µs (range) | realized µs | error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    within = inside = 0
    for eager in ATTENTION_TWINS:
        results = analyze(tracelens.load(eager))
        assert results.actions is not None
        (prediction,) = [a for a in results.actions.actions if a.action == "compile"]
        realized = raw_mean_span_us(eager.with_name(eager.name.replace("attn_eager", "attn_compiled")))
        error = 100 * (prediction.predicted_step_us / realized - 1)
        within += abs(error) <= 20
        inside += prediction.low <= realized <= prediction.high
        gpu = "H100" if "/h100/" in eager.as_posix() else "H200"
        lines.append(
            f"| {eager.relative_to(ROOT / 'traces').as_posix()} | {gpu} | {attention_share(eager):.3f} | "
            f"{prediction.predicted_step_us:,.1f} ({prediction.low:,.0f}–{prediction.high:,.0f}) | {realized:,.1f} | "
            f"{error:+.1f} % |".replace("-", "−").replace("−−", "--")
        )
    lines.append("")
    lines.append(f"Within ±20 %: **{within} of {len(ATTENTION_TWINS)}**; inside the stated range: {inside}.")
    return "\n".join(lines)


@pytest.mark.slow
def test_attention_written_out() -> None:
    """The attention twins' table is the recomputed one, and `ATTENTION_GEMM_SHARE` is the midpoint of the H100 and
    H200 twins' median shares (raw events)."""
    doc = DOC.read_text()
    shown = doc.split("<!-- attention twins: begin -->\n")[1].split("\n<!-- attention twins: end -->")[0]
    assert shown == attention_table()
    by_gpu: dict[bool, list[float]] = {True: [], False: []}
    for eager in ATTENTION_TWINS:
        by_gpu["/h100/" in eager.as_posix()].append(attention_share(eager))
    assert round(sum(statistics.median(v) for v in by_gpu.values()) / 2, 2) == ATTENTION_GEMM_SHARE


if __name__ == "__main__":
    print(attention_table())
