"""The actions on an alternated run recorded after every constant was fitted (traces/h100/heldout, docs/actions.md
#held-out-an-alternated-run): compile on each eager → compiled twin of a round, fuse on each eager → Liger twin,
against the after-trace's mean step span read from the raw events."""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tracelens
from tests import rawtrace
from tests.test_actions import raw_mean_span_us
from tests.test_actions_fuse import cell_counts
from tracelens.analyses import analyze
from tracelens.analyses.actions import ATTENTION_GEMM_SHARE, ATTENTION_NOTE, MATH_ATTENTION_NOTE, _attention_rewrite
from tracelens.analyses.critical_path import step_graph

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


@pytest.mark.slow
def test_the_third_held_out_run_alone() -> None:
    """The docs' counts of the run recorded at 07:44 UTC (the `*_c` folders) alone."""
    parts = []
    for action, after in (("compile", "compiled"), ("fuse", "liger")):
        counts = cell_counts([p for p in twins(after) if p[0].parent.name.endswith("_c")], action)
        (g_cells, g_within, _), (c_cells, c_within, c_inside) = counts["gpu"], counts["cpu"]
        parts.append(f"{action} {g_within} of {g_cells} and {c_within} of {c_cells} ({c_inside} inside)")
    assert f"The third run alone: {', '.join(parts)}." in " ".join(DOC.read_text().split())


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
    bmm in the steps and no scaled_dot_product_attention, nowhere else: that it is modelled on the attention
    twins, that it is not on the masked block."""
    with gzip.open(ROOT / name, "rt") as handle:
        ops = {e["name"] for e in json.load(handle)["traceEvents"] if e.get("cat") == "cpu_op"}
    written_out = bool(ops & {"aten::softmax", "aten::_softmax"}) and "aten::bmm" in ops
    written_out = written_out and "aten::scaled_dot_product_attention" not in ops
    results = analyze(tracelens.load(ROOT / name))
    assert results.actions is not None
    compile_ = [a for a in results.actions.actions if a.action == "compile"]
    modelled, left_out = (ATTENTION_NOTE in compile_[0].basis, MATH_ATTENTION_NOTE in compile_[0].basis)
    assert compile_ and (modelled or left_out) == written_out and modelled == ("attn_eager" in name)
    assert written_out == name.endswith(("attn_eager_r0.json.gz", "attn_eager.json.gz", "eager_math_block.json.gz"))


ATTENTION_TWINS = sorted(
    eager
    for eager in ROOT.glob("traces/h*/**/attn_eager*.json.gz")
    if eager.with_name(eager.name.replace("attn_eager", "attn_compiled")).exists()
)
FLASH = ("flash", "sdpa", "fmha", "attention")
# the twins `ATTENTION_GEMM_SHARE` is fitted on (the alternated calibration run and the H200 extras); the others
# (traces/h100/heldout, traces/h200/attn_long) are held out from it
ATTENTION_FIT = ("h100/interleaved/", "h200/extra/")


def _fitted(eager: Path) -> bool:
    return any(part in eager.as_posix() for part in ATTENTION_FIT)


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
        "| eager trace | GPU | share | set | predicted µs (range) | realized µs | error |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    within = inside = held_within = held_inside = 0
    for eager in ATTENTION_TWINS:
        results = analyze(tracelens.load(eager))
        assert results.actions is not None
        (prediction,) = [a for a in results.actions.actions if a.action == "compile"]
        realized = raw_mean_span_us(eager.with_name(eager.name.replace("attn_eager", "attn_compiled")))
        error = 100 * (prediction.predicted_step_us / realized - 1)
        ok, held = (abs(error) <= 20, prediction.low <= realized <= prediction.high)
        within, inside = within + ok, inside + held
        if not _fitted(eager):
            held_within, held_inside = held_within + ok, held_inside + held
        gpu = "H100" if "/h100/" in eager.as_posix() else "H200"
        lines.append(
            f"| {eager.relative_to(ROOT / 'traces').as_posix()} | {gpu} | {attention_share(eager):.3f} | "
            f"{'fit' if _fitted(eager) else 'held out'} | "
            f"{prediction.predicted_step_us:,.1f} ({prediction.low:,.0f}–{prediction.high:,.0f}) | {realized:,.1f} | "
            f"{error:+.1f} % |".replace("-", "−").replace("−−", "--")
        )
    lines.append("")
    held_out = sum(not _fitted(e) for e in ATTENTION_TWINS)
    lines.append(
        f"Within ±20 %: **{within} of {len(ATTENTION_TWINS)}**, inside the stated range: {inside}; of the "
        f"{held_out} held out, {held_within} and {held_inside}."
    )
    return "\n".join(lines)


@pytest.mark.slow
def test_attention_written_out() -> None:
    """The attention twins' table is the recomputed one; `ATTENTION_GEMM_SHARE` is the midpoint of the fitted H100
    and H200 twins' median shares (raw events), and every twin's share lies within the docs' −14/+18 % of it."""
    doc = DOC.read_text()
    shown = doc.split("<!-- attention twins: begin -->\n")[1].split("\n<!-- attention twins: end -->")[0]
    assert shown == attention_table()
    by_gpu: dict[bool, list[float]] = {True: [], False: []}
    for eager in ATTENTION_TWINS:
        if _fitted(eager):
            by_gpu["/h100/" in eager.as_posix()].append(attention_share(eager))
    assert round(sum(statistics.median(v) for v in by_gpu.values()) / 2, 2) == ATTENTION_GEMM_SHARE
    shapes: dict[str, list[float]] = {}
    for eager in ATTENTION_TWINS:
        folder = eager.parent.name
        shapes.setdefault(folder if folder in ("attn_s512", "attn_s2048", "attn_d64") else "", []).append(
            attention_share(eager)
        )
    off = [ATTENTION_GEMM_SHARE / share - 1 for share in shapes.pop("")]
    assert (f"{min(off):+.0%}", f"{max(off):+.0%}") == ("-14%", "+18%")
    prose = " ".join(doc.split())
    (s512, s2048, d64) = (shapes["attn_s512"], shapes["attn_s2048"], shapes["attn_d64"])
    assert f"512 tokens (batch 8) {min(s512):.3f}-{max(s512):.3f}" in prose
    assert f"2,048 tokens (batch 4) {min(s2048):.3f}-{max(s2048):.3f}" in prose
    too_long = [ATTENTION_GEMM_SHARE / share - 1 for share in d64]
    assert f"head size 64 (1,024 tokens) {min(d64):.3f}-{max(d64):.3f}" in prose
    assert f"{100 * min(too_long):.0f}-{100 * max(too_long):.0f} % too long" in prose


def test_gpt2s_compiled_twin_kept_its_attention() -> None:
    """Why masked, dropped-out attention is not modelled (docs/actions.md#attention-written-out): GPT-2 training
    compiled kept its batched GEMMs, with about the eager GEMM time and no attention kernel (raw events)."""
    figures = []
    for name in ("gpt2_train_eager", "gpt2_train_compiled_stack"):
        with gzip.open(ROOT / f"traces/h200/audit/{name}.json.gz", "rt") as handle:
            events = json.load(handle)["traceEvents"]
        steps = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
        kernels = [e for e in events if e.get("cat") == "kernel"]
        bmm = sum(1 for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::bmm") / steps
        gemm_us = sum(e["dur"] for e in kernels if e["name"].startswith("nvjet") or "gemm" in e["name"].lower())
        attention = sum(1 for e in kernels if any(w in e["name"].lower() for w in FLASH))
        figures.append((bmm, f"{gemm_us / steps:.1f}", attention))
    assert figures == [(12, "965.0", 0), (12, "975.5", 0)]
    assert "kept its 12 batched GEMMs per step (975.5 against 965.0 µs" in " ".join(DOC.read_text().split())


@pytest.mark.slow
def test_the_share_moves_the_prediction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' sensitivity: the H200 twin's compile prediction with a share of 0.3, 0.57 and 1.0."""
    from tracelens.analyses import actions

    predicted = []
    for share in (0.3, ATTENTION_GEMM_SHARE, 1.0):
        monkeypatch.setattr(actions, "ATTENTION_GEMM_SHARE", share)
        results = analyze(tracelens.load(ROOT / "traces/h200/extra/attn_eager.json.gz"))
        assert results.actions is not None
        predicted += [f"{a.predicted_step_us:.0f}" for a in results.actions.actions if a.action == "compile"]
    low, mid, high = predicted
    assert (
        f"with a share of 0.3 or 1.0 instead of 0.57 the H200 twin's prediction is {low} or {high} µs instead of {mid}"
        in (" ".join(DOC.read_text().split()))
    )


@pytest.mark.slow
def test_before_the_attention_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' figures of the model before the rewrite (no attention ever matched) on the 14 twins."""
    from tracelens.analyses import actions

    monkeypatch.setattr(actions, "_attention_rewrite", lambda trace, graph: [])
    errors, inside = [], 0
    for eager in ATTENTION_TWINS:
        results = analyze(tracelens.load(eager))
        assert results.actions is not None
        (prediction,) = [a for a in results.actions.actions if a.action == "compile"]
        realized = raw_mean_span_us(eager.with_name(eager.name.replace("attn_eager", "attn_compiled")))
        errors.append(100 * (prediction.predicted_step_us / realized - 1))
        inside += prediction.low <= realized <= prediction.high
    within = sum(abs(e) <= 20 for e in errors)
    shown = f"{min(errors):.0f}-{max(errors):.0f} % above the realized step on these {len(errors)} twins, {within} "
    assert shown + f"within ±20 % and {inside} inside their ranges" in " ".join(DOC.read_text().split())


if __name__ == "__main__":
    print(attention_table())


def raw_attention_matches(path: Path) -> float:
    """Stdlib: per (CPU-side) ProfilerStep, the attentions in the modelled form. Each GPU kernel or memset is
    charged to the innermost CPU op around its launch call (runtime or driver, same thread); per stream in start
    order, a window from a batched GEMM's kernel to the next one whose kernels between are of a scale op and
    exactly one forward softmax op (memsets aside) is one; a kernel of any other op breaks the window."""
    events = rawtrace.events(path)
    ops = sorted(
        (float(e["ts"]), -float(e.get("dur", 0)), e.get("tid"), e["name"]) for e in events if e.get("cat") == "cpu_op"
    )
    launches = {
        int(e["args"]["correlation"]): (float(e["ts"]), e.get("tid"))
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})
    }
    between = {"aten::mul", "aten::div", "aten::mul_", "aten::div_"}
    softmax = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax"}
    streams: dict[Any, list[tuple[float, str, bool]]] = {}
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memset"):
            continue
        launch = launches.get(int((e.get("args") or {}).get("correlation", -1)))
        if launch is None:
            continue
        ts, tid = launch
        around = [name for start, neg, t, name in ops if t == tid and start <= ts <= start - neg]
        op = around[-1] if around else ""
        streams.setdefault(e["args"].get("stream"), []).append((float(e["ts"]), op, e.get("cat") == "gpu_memset"))
    found = 0
    for kernels in streams.values():
        first, softmaxes = False, 0
        for _, op, is_memset in sorted(kernels):
            if is_memset:
                continue
            if op in ("aten::bmm", "aten::baddbmm"):
                if first and softmaxes == 1:
                    found, first = found + 1, False
                else:
                    first = True
                softmaxes = 0
            elif first and op in between | softmax:
                softmaxes += op in softmax
            else:
                first, softmaxes = False, 0
    return found / len(rawtrace.steps([e for e in events if not str(e.get("cat", "")).startswith("gpu_")]))


REWRITE_TRACES = (
    "traces/h200/extra/attn_eager.json.gz",
    "traces/h100/heldout/attn_c/attn_eager_r0.json.gz",
    "traces/h200/block/eager_math_block.json.gz",
    "traces/h200/block/train_eager_math_block.json.gz",
    "traces/h200/audit/gpt2_train_eager.json.gz",
)


@pytest.mark.slow
@pytest.mark.parametrize("name", REWRITE_TRACES, ids=lambda n: n.split("/")[-1])
def test_the_rewrite_matches_only_the_modelled_form(name: str) -> None:
    """Where `compile` makes attention one kernel: once per step on the attention twins, never on the masked
    block's attention (mask add, fp32 cast) nor on GPT-2's (mask, dropout, backward) nor on a loss's log-softmax
    between GEMMs, as a stdlib reading of the raw events finds."""
    trace = tracelens.load(ROOT / name)
    graphs = [g for g in (step_graph(trace, i) for i in range(len(trace.steps))) if g is not None and g.gpu_start_ns]
    per_step = sum(len(_attention_rewrite(trace, g)) for g in graphs) / len(graphs)
    assert per_step == raw_attention_matches(ROOT / name) == (1 if "attn_eager" in name else 0)
