"""Why `WRAPPER_US` stays in µs (docs/actions.md#held-out-cuda-graphs-and-reduce-overhead-on-an-h100): on every
eager → compiled twin the project has, the compiled wrapper (a step's start to its first kernel-launch call, median
over the compiled trace's steps after the first) counted in the eager twin's median kernel-launch call varies as
much as in µs, and the H200 twins' median in those units predicts the H100 twins' wrappers no better than the µs
constant does. Stdlib only (tests/rawtrace.py); `PYTHONPATH=. python tests/test_actions_wrapper_units.py` prints the
figures."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from tests import rawtrace

ROOT = Path(__file__).resolve().parent.parent / "traces"
LAUNCH = re.compile(r"(cuda|cu|hip)(Ext)?(Module)?Launch(Cooperative)?Kernel(Ex|ExC)?(MultiDevice)?(_v\d+)?")
H200_TWINS = [
    ("eager_mlp", "compiled_mlp"),
    ("block/eager_block", "block/compiled_block"),
    ("block/train_eager_block", "block/train_compiled_block"),
    ("extra/train_eager_mlp", "extra/train_compiled_mlp"),
    ("extra/i8192_eager_mlp", "extra/i8192_compiled_mlp"),
    ("extra/i8192_eager_linear", "extra/i8192_compiled_linear"),
    *((f"extra/sweep_eager_mlp_t{t}", f"extra/sweep_compiled_mlp_t{t}") for t in (8, 64, 512, 4096, 16384)),
    ("extra/attn_eager", "extra/attn_compiled"),
    ("graphs/mlp_eager", "graphs/mlp_compiled"),
    ("graphs/block_eager", "graphs/block_compiled"),
]


def twins() -> dict[str, list[tuple[Path, Path]]]:
    """The eager → compiled pairs: the H200 calibration twins, and the H100 held-out ones of `traces/h100/heldout`
    (each round's) and `traces/h100/graphs_heldout`."""
    h200 = [(ROOT / "h200" / f"{b}.json.gz", ROOT / "h200" / f"{a}.json.gz") for b, a in H200_TWINS]
    h100 = []
    for eager in sorted((ROOT / "h100" / "heldout").glob("*/*eager*_r*.json.gz")):
        compiled = eager.with_name(eager.name.replace("eager", "compiled"))
        if compiled.exists():
            h100.append((eager, compiled))
    for run in sorted((ROOT / "h100" / "graphs_heldout").glob("r*")):
        h100.extend((run / f"{m}_eager.json.gz", run / f"{m}_compiled.json.gz") for m in ("mlp", "block"))
    return {"h200": h200, "h100": h100}


def _launches(path: Path) -> list[tuple[float, float]]:
    """(start, duration) µs of each kernel-launch call."""
    evs = rawtrace.events(path)
    return [(float(e["ts"]), float(e.get("dur", 0))) for e in evs if LAUNCH.fullmatch(str(e.get("name", "")))]


def wrapper_us(compiled: Path) -> float:
    """Median over the steps after the first of the step's start to its first kernel-launch call."""
    evs = rawtrace.events(compiled)
    starts = sorted(t for t, _ in _launches(compiled))
    leads = []
    for _, start, end in rawtrace.steps(evs)[1:]:
        first = next((t for t in starts if start <= t < end), None)
        if first is not None:
            leads.append(first - start)
    return statistics.median(leads)


def launch_unit_us(eager: Path) -> float:
    """The median kernel-launch call inside the eager trace's ProfilerSteps."""
    spans = rawtrace.steps(rawtrace.events(eager))
    return statistics.median(d for t, d in _launches(eager) if any(s <= t < e for _, s, e in spans))


def figures() -> dict[str, float]:
    pairs = twins()
    measured = {k: [(wrapper_us(a), launch_unit_us(b)) for b, a in v] for k, v in pairs.items()}
    every = measured["h200"] + measured["h100"]

    def cv(values: list[float]) -> float:
        return statistics.pstdev(values) / statistics.mean(values)

    us_constant = statistics.median(w for w, _ in measured["h200"])
    units_constant = statistics.median(w / u for w, u in measured["h200"])
    h100 = measured["h100"]
    return {
        "twins": len(every),
        "h100": len(h100),
        "cv_us": cv([w for w, _ in every]),
        "cv_units": cv([w / u for w, u in every]),
        "within_us": sum(abs(us_constant / w - 1) <= 0.20 for w, _ in h100),
        "within_units": sum(abs(units_constant * u / w - 1) <= 0.20 for w, u in h100),
        "median_error_us": statistics.median(us_constant / w - 1 for w, _ in h100),
        "median_error_units": statistics.median(units_constant * u / w - 1 for w, u in h100),
    }


def test_launch_call_units_do_not_carry_the_wrapper_across_hosts() -> None:
    found = figures()
    assert found["twins"] == 94 and found["h100"] == 80
    assert found["cv_units"] >= 0.85 * found["cv_us"]  # no steadier in launch calls than in µs
    assert found["within_units"] <= found["within_us"]  # and no better held out
    assert abs(found["median_error_units"]) > abs(found["median_error_us"])
    doc = " ".join((ROOT.parent / "docs" / "actions.md").read_text(encoding="utf-8").split())
    stated = (
        f"over the {found['twins']} eager → compiled twins (14 H200, {found['h100']} H100:",
        f"(coefficient of variation {found['cv_units']:.2f} against {found['cv_us']:.2f})",
        f"(within ±20 %: {found['within_units']} of {found['h100']} against {found['within_us']}; median error "
        f"{100 * found['median_error_units']:+.1f} % against {100 * found['median_error_us']:+.1f} %;",
    )
    for words in stated:
        assert words in doc, words


if __name__ == "__main__":
    for key, value in figures().items():
        print(f"{key}: {value:.3f}")
