"""`analyze BEFORE --predict p.toml`, then `check AFTER --expect p.toml` and `compare BEFORE AFTER` on the study's
twins: both name the same action taken, and give its prediction one range, one measured span and one error; the
action taken agrees with a stdlib count of the raw events (tests/rawtrace.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import rawtrace
from tests.conftest import recorded_trace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

# (before, after, the action after took)
TWINS = [
    ("eager_mlp", "compiled_mlp", "compile"),
    ("block/eager_block", "block/compiled_block", "compile"),
    ("graphs/mlp_eager", "graphs/mlp_graph_replay", "cuda_graphs"),
    # Liger's fused kernels and a GEMM epilogue: no new compiled region or graph replay, told apart by the launches
    ("eager_mlp", "liger_mlp", "fuse"),
    ("eager_mlp", "geglu_epilogue_mlp", "gemm_epilogue"),
]
# pairs where the taken action has several predictions (one per fusion chain), and the reverse of an action
MULTI = [
    ("block/eager_block", "block/liger_block", "fuse"),
    ("block/train_eager_block", "block/train_liger_block", "fuse"),
    ("block/eager_math_block", "block/eager_block", "fuse"),
    ("compiled_mlp", "geglu_epilogue_mlp", None),  # compiled regions lost: undoing compile is no action
    ("graphs/block_graph", "graphs/block_eager", None),  # graph replays lost (the replay-only trace predicts none)
]


# more pairs for the raw-event reading: a compiled graph twin, reduce-overhead (both new), the trace itself
RAW_PAIRS = [
    *((before, after) for before, after, _ in TWINS),
    ("graphs/mlp_eager", "graphs/mlp_compiled"),
    ("graphs/mlp_eager", "graphs/mlp_graph"),  # its first step captures: warm-up, not steady state
    ("graphs/block_eager", "graphs/block_graph_replay"),
    ("eager_mlp", "extra/cudagraph_mlp"),
    ("block/train_eager_block", "block/train_compiled_block"),
    ("compiled_mlp", "compiled_mlp"),
    *((before, after) for before, after, _ in MULTI),
]


def trace(name: str) -> str:
    return str(recorded_trace(f"h200/{name}.json.gz"))


def predict_and_check(before: str, after: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`analyze BEFORE --predict`, then `check AFTER --format json`: the check document."""
    from tracelens.cli import main

    predictions = folder / "p.toml"
    assert main(["analyze", trace(before), "--summary", "--predict", str(predictions), "--force"]) == 0
    capsys.readouterr()
    assert main(["check", trace(after), "--expect", str(predictions), "--format", "json"]) in (0, 1)
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def compare_rows(before: str, after: str, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    """The cells of `compare BEFORE AFTER`'s "Predictions checked" table (none when it has no such table)."""
    from tracelens.cli import main

    assert main(["compare", "--width", "200", trace(before), trace(after)]) == 0
    out = capsys.readouterr().out
    if "Predictions checked" not in out:
        return []
    table = out[out.index("Predictions checked") :]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]


@pytest.mark.parametrize(("before", "after", "taken"), TWINS, ids=lambda v: str(v).split("/")[-1])
def test_compare_and_check_agree_on_the_prediction_of_the_action_taken(
    before: str, after: str, taken: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = predict_and_check(before, after, tmp_path, capsys)
    bounds = {
        entry["action"]: (entry["value"], entry["tolerance"]["below"], entry["tolerance"]["above"])
        for entry in tomllib.loads((tmp_path / "p.toml").read_text(encoding="utf-8"))["hypothesis"]
    }
    verdicts = document["verdicts"]
    assert {v["taken_action"] for v in verdicts} == {taken}
    rows = compare_rows(before, after, capsys)
    if taken in ("fuse", "gemm_epilogue"):  # told by the launches each prediction leaves, by check and compare
        assert all(f" took {taken} (" in v["reason"] and "nearest the launches" in v["reason"] for v in verdicts)
    (checked,) = [v for v in verdicts if v["status"] != "not_applicable"]
    assert checked["action"] == taken
    assert document["not_applicable"] == len(verdicts) - 1
    value, below, above = bounds[taken]
    assert checked["expected"] == value
    (row,) = rows
    _, action, held, error, predicted, measured, change, span = row
    assert action.startswith(f"{taken} (") and predicted == f"{value:,.1f}"
    assert span == f"{value - below:,.0f}–{value + above:,.0f}"
    assert measured == f"{checked['measured']:,.1f}"
    assert error == f"{checked['error_pct']:+.1f} %"
    weak = checked["held"] and checked["no_change_holds"]
    assert held == ("weak" if weak else "yes" if checked["held"] else "no")
    before_us = checked["before_value"]
    assert change == f"{value - before_us:+,.0f} / {checked['measured'] - before_us:+,.0f}"


@pytest.mark.parametrize(("before", "after", "taken"), TWINS[:3], ids=lambda v: str(v).split("/")[-1])
def test_the_figures_are_the_same_numbers(before: str, after: str, taken: str, tmp_path: Path) -> None:
    """Beyond the printed digits: compare's `PredictionCheck` and check's verdict hold the same floats."""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.analyses.actions import prediction_checks
    from tracelens.renderers.predictions import predictions_toml

    reports = [analyze(tracelens.load(trace(name))) for name in (before, after)]
    (compared,) = prediction_checks([("before", reports[0]), ("after", reports[1])])
    (tmp_path / "p.toml").write_text(predictions_toml(reports[0], before), encoding="utf-8")
    (checked,) = [v for v in tracelens.check(trace(after), tmp_path / "p.toml") if v.applies]
    tolerance = checked.hypothesis.tolerance
    assert tolerance is not None and tolerance.below is not None and tolerance.above is not None
    assert (compared.action, checked.taken_action) == (taken, taken)
    assert (compared.predicted_step_us, compared.measured_step_us) == (checked.expected, checked.measured)
    assert compared.error_pct == checked.error_pct
    assert compared.held == checked.held
    assert compared.low == pytest.approx(checked.expected - tolerance.below, abs=1e-9)
    assert compared.high == pytest.approx(checked.expected + tolerance.above, abs=1e-9)


def raw_taken_action(before: Path, after: Path, predicted_launches: dict[str, list[float]]) -> str | None:
    """Stdlib: None where after lost the compiled regions or graph launches before had; `compile` where after
    runs `Torch-Compiled Region` ranges in its steps and before none, and no CUDA-graph launches;
    `cuda_graphs` where only the graph launches are new; `compile_reduce_overhead` where the regions are new and
    after launches graphs (new or not: torch.compile's graphs in place of the program's own); where neither
    is new and after launches fewer kernels per step, whichever of `fuse` and `gemm_epilogue` has a prediction
    whose launches lie nearest after's (`predicted_launches`: every prediction's, from the predictions file); else
    None."""
    (regions_before, launches_before), (regions_after, launches_after) = (
        rawtrace.compiled_regions_and_graph_launches(path) for path in (before, after)
    )
    if (regions_before and not regions_after) or (launches_before and not launches_after):
        return None
    new_regions = regions_after > 0 and regions_before == 0
    new_launches = launches_after > 0 and launches_before == 0
    if new_regions and launches_after:  # torch.compile(mode="reduce-overhead"), its graphs new or in place of own
        return "compile_reduce_overhead"
    if new_regions or new_launches:
        return "compile" if new_regions else "cuda_graphs"
    counts = [_kernel_launches_per_step(path) for path in (before, after)]
    told = {
        a: min(abs(n - counts[1]) for n in ns) for a, ns in predicted_launches.items() if a in ("fuse", "gemm_epilogue")
    }
    if counts[1] >= counts[0] or not told:
        return None
    nearest = sorted(a for a, d in told.items() if d <= min(told.values()) + 0.5)
    return nearest[0] if len(nearest) == 1 else None


def _kernel_launches_per_step(path: Path) -> float:
    """Stdlib: runtime or driver calls inside the CPU-side ProfilerSteps that launched GPU work (a kernel, memset
    or copy with their correlation id), per step: `per_step.launches`' definition."""
    events = rawtrace.events(path)
    steps = rawtrace.steps([e for e in events if not str(e.get("cat", "")).startswith("gpu_")])
    gpu = ("kernel", "gpu_memset", "gpu_memcpy")
    launched = {(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in gpu}
    calls = [
        float(e["ts"])
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and (e.get("args") or {}).get("correlation") in launched
    ]
    return sum(1 for ts in calls if any(start <= ts < end for _, start, end in steps)) / len(steps)


def test_the_action_taken_is_what_the_raw_events_say(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = set()
    for before, after in RAW_PAIRS:
        document = predict_and_check(before, after, tmp_path, capsys)
        entries = tomllib.loads((tmp_path / "p.toml").read_text(encoding="utf-8")).get("hypothesis", [])
        predicted: dict[str, list[float]] = {}
        for e in entries:
            if "launches_per_step" in e:
                predicted.setdefault(e["action"], []).append(e["launches_per_step"])
        taken = raw_taken_action(Path(trace(before)), Path(trace(after)), predicted)
        verdicts = {v["taken_action"] for v in document["verdicts"]}
        assert entries or before.endswith("_replay"), before  # only a replay without its capture predicts none
        assert verdicts == ({taken} if entries else set()), (before, after)
        found.add(taken)
    assert found == {"compile", "cuda_graphs", "compile_reduce_overhead", "fuse", "gemm_epilogue", None}  # all


def test_the_text_says_which_action_was_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """eager_mlp → compiled_mlp: the compile prediction checked, the four others N/A, exit status 0;
    eager_mlp → liger_mlp: fuse (fewer launches, nothing compiled or graphed, 6 per step as fuse predicts) checked;
    eager_mlp → itself: no action, none checked."""
    from tracelens.cli import main

    predictions = tmp_path / "p.toml"
    assert main(["analyze", trace("eager_mlp"), "--summary", "--predict", str(predictions)]) == 0
    capsys.readouterr()
    assert main(["check", trace("compiled_mlp"), "--expect", str(predictions), "--width", "80"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    first = next(i for i, line in enumerate(lines) if line.startswith("compiled_mlp"))  # after the file's name
    assert " ".join(lines[first : first + 2]) == (
        "compiled_mlp took compile (compiled regions, no CUDA-graph replays; before: neither): 1 checked, "
        "4 not applicable"
    )
    assert lines[first + 2].startswith("HELD 5. compile (the step): step 1,613.3 µs: measured 1,490.9 µs, error +8.2 %")
    assert [line.split()[0] for line in lines if line.startswith("N/A")] == ["N/A"] * 4
    assert lines[-1] == "1 held (1 weak: no change would have held too), 0 wrong, 4 not applicable"
    assert main(["check", trace("liger_mlp"), "--expect", str(predictions), "--width", "80"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    first = next(i for i, line in enumerate(lines) if line.startswith("liger_mlp"))
    assert " ".join(lines[first : first + 2]) == (
        "liger_mlp took fuse (no new compiled regions or CUDA-graph replays; launches 7 → 6 per step); nearest the "
        "launches fuse predicts (6): 1 checked, 4 not applicable"
    )
    assert sorted(line.split()[1] for line in lines if line.startswith("N/A")) == ["1.", "2.", "4.", "5."]
    assert lines[-1] == "1 held (1 weak: no change would have held too), 0 wrong, 4 not applicable"
    assert main(["check", trace("eager_mlp"), "--expect", str(predictions), "--width", "80"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("eager_mlp"))
    assert " ".join(lines[first : first + 2]) == (
        "eager_mlp took no action (no new compiled regions or CUDA-graph replays; launches 7 → 7 per step); none "
        "checked"
    )
    assert lines[-1] == "0 held, 0 wrong, 5 not applicable"


def _golden_shape(name: str) -> Any:
    """`program_shape` of a trace's golden `analyze --format json` document (tests/golden)."""
    import gzip

    from tracelens.hypotheses.paths import program_shape

    golden = Path(__file__).parent / "golden" / "traces" / f"{name}.json.gz.json.gz"
    with gzip.open(golden, "rt") as handle:
        return program_shape(json.load(handle))


def _golden_twins() -> list[tuple[str, str]]:
    """Every (eager, other variant) pair among the golden documents of the project's recordings: the same name
    with `eager` replaced by compiled, liger, geglu_epilogue, graph, cudagraph or sdpa, in one folder."""
    root = Path(__file__).parent / "golden" / "traces"
    names = {p.relative_to(root).as_posix()[: -len(".json.gz.json.gz")] for p in root.rglob("*.json.gz.json.gz")}
    pairs = []
    for name in sorted(n for n in names if "eager" in n.rsplit("/", 1)[-1]):
        for other in ("compiled", "liger", "geglu_epilogue", "graph", "cudagraph", "sdpa", "graph_replay"):
            twin = name[: name.rindex("/") + 1] + name.rsplit("/", 1)[-1].replace("eager", other, 1)
            if twin in names and twin != name:
                pairs.append((name, twin))
    return pairs


def test_no_twin_is_another_program() -> None:
    """The fingerprint (GPU, GEMM and attention GFLOP per step, GEMM GFLOP per call) never tells a recorded variant
    from its eager twin, and tells the study's programs apart from each other: the graphs folder's block and MLP
    run GEMM work per step 3 % apart (26.6 and 25.8 GFLOP), but GEMMs of 4.0/5.9/6.4 against 8.6 GFLOP a call."""
    from tracelens.variants import other_program

    pairs = _golden_twins()
    assert len(pairs) >= 100
    flagged = [(a, b, other_program(_golden_shape(a), _golden_shape(b))) for a, b in pairs]
    assert [f for f in flagged if f[2] is not None] == []
    known = sum(_golden_shape(a).gemm_gflop_per_step is not None for a, _ in pairs)
    assert known >= 0.8 * len(pairs)
    others = [("h200/eager_mlp", "h200/block/compiled_block"), ("h200/eager_mlp", "h200/extra/sweep_liger_mlp_t8")]
    others += [
        ("h200/block/eager_block", "h200/eager_mlp"),
        ("h200/eager_mlp", "h100/heldout/sweep_c/sweep_eager_mlp_t4096_r0"),
        ("h200/graphs/block_eager", "h200/graphs/mlp_compiled"),
    ]
    for a, b in others:
        assert other_program(_golden_shape(a), _golden_shape(b)) is not None, (a, b)


def test_another_program_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """eager_mlp's predictions on the compiled block (another program: 455.3 against 824.6 GFLOP of GEMM and
    attention work per step) are all N/A, exit status 0, and the text says why."""
    from tracelens.cli import main

    document = predict_and_check("eager_mlp", "block/compiled_block", tmp_path, capsys)
    assert {v["status"] for v in document["verdicts"]} == {"not_applicable"}
    assert {v["took"] for v in document["verdicts"]} == {"another program"}
    assert main(["check", trace("block/compiled_block"), "--expect", str(tmp_path / "p.toml"), "--width", "200"]) == 0
    assert (
        "compiled_block: another program than the prediction's (GEMM and attention work 455.3 GFLOP per step, "
        "the prediction's program 824.6)" in capsys.readouterr().out
    )


def _gemm_kernel_names(path: Path) -> set[str]:
    """Stdlib: the names of the trace's cuBLAS/nvjet/CUTLASS GEMM kernels."""
    gemm = ("nvjet", "gemm", "cutlass", "cublas")
    return {e["name"] for e in rawtrace.events(path) if e.get("cat") == "kernel" and any(g in e["name"] for g in gemm)}


def test_a_replay_of_another_shape_is_another_program(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A graph replay without its capture has no known GEMM work; its GEMM kernels tell the program (the library
    picks them by shape; raw events): the 256-token MLP's predictions are N/A on the 64-token MLP's replay (its
    GEMM time only 1.22× apart), and checked on the 256-token replay of the same recording round."""
    from tracelens.cli import main

    root = recorded_trace("h100/graphs_heldout/r1/mlp_eager.json.gz").parent.parent
    before, same, other = (
        root / "r1/mlp_eager.json.gz",
        root / "r1/mlp_graph_replay.json.gz",
        root / "r3/mlp_graph_replay.json.gz",
    )
    assert _gemm_kernel_names(before) == _gemm_kernel_names(same) != _gemm_kernel_names(other)
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(before), "--summary", "--predict", str(predictions)]) == 0
    capsys.readouterr()
    for after, took in ((other, {"another program"}), (same, {"cuda_graphs"})):
        assert main(["check", str(after), "--expect", str(predictions), "--format", "json"]) in (0, 1)
        verdicts = json.loads(capsys.readouterr().out)["verdicts"]
        assert {v["took"] for v in verdicts} == took
    assert main(["check", str(other), "--expect", str(predictions), "--width", "200"]) == 0
    assert (
        "another program than the prediction's (GEMM kernel nvjet_sm90_tst_64x64_64x13_2x1_v_bz_spl… not in the "
        "prediction's program)" in " ".join(capsys.readouterr().out.split())
    )


def test_compare_checks_no_prediction_on_another_program(capsys: pytest.CaptureFixture[str]) -> None:
    """The compiled block took "compile" by its regions, but it is not a variant of the eager MLP (another
    program: its GEMM work per step is not the MLP's): compare checks no prediction there, as check answers N/A;
    the MLP's own compiled twin is checked."""
    assert compare_rows("eager_mlp", "block/compiled_block", capsys) == []
    assert compare_rows("eager_mlp", "compiled_mlp", capsys) != []


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        ("eager_mlp", "block/compiled_block", "another program than the prediction's (GEMM and attention work"),
        ("graphs/mlp_eager", "graphs/block_graph", "another program than the prediction's (GEMMs of"),
        ("graphs/mlp_eager", "graphs/mlp_graph_capture", "every step it analyzes is warm-up"),
        # graph replays without their capture: told apart by GEMM kernel time (47.1 against 61.2 µs per step)
        (
            "graphs/mlp_eager",
            "graphs/graph_eager_mlp_t64",
            "another program than the prediction's (GEMM kernels 61.2 µs per step",
        ),
        ("eager_mlp", "eager_mlp", "took no action"),
        ("compiled_mlp", "geglu_epilogue_mlp", "took no action"),
    ],
)
def test_compare_says_why_a_trace_checks_no_prediction(
    before: str, after: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A later trace that checks none of the first trace's predictions is named with the reason, in text and
    JSON (`predictions_skipped`), as check's N/A lines give it."""
    from tracelens.cli import main

    assert main(["compare", "--format", "json", trace(before), trace(after)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["predictions_checked"] == []
    (skipped,) = document["predictions_skipped"]
    assert skipped["reason"].startswith(reason)
    assert main(["compare", "--width", "300", trace(before), trace(after)]) == 0
    out = capsys.readouterr().out
    assert f"Predictions not checked: {skipped['after']}: {skipped['reason']}" in " ".join(out.split())
    if reason.startswith("took"):  # check answers the same
        document = predict_and_check(before, after, tmp_path, capsys)
        assert all(v["status"] == "not_applicable" for v in document["verdicts"])
        assert all(v["reason"].startswith(f"{skipped['after'].split(' #')[0]} {reason}") for v in document["verdicts"])


@pytest.mark.parametrize(("before", "after", "taken"), TWINS, ids=lambda v: str(v).split("/")[-1])
def test_compare_json_carries_the_checked_prediction(
    before: str, after: str, taken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare --format json`'s `predictions_checked`: the row the text table prints, with check's figures."""
    from tracelens.cli import main

    document = predict_and_check(before, after, tmp_path, capsys)
    (checked,) = [v for v in document["verdicts"] if v["status"] != "not_applicable"]
    assert main(["compare", "--format", "json", trace(before), trace(after)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["predictions_checked"]
    assert (row["action"], row["after"]) == (taken, Path(trace(after)).name.split(".")[0])
    assert (row["predicted_step_us"], row["error_pct"], row["held"]) == (
        checked["expected"],
        checked["error_pct"],
        checked["held"],
    )
    assert row["measured_step_us"] == pytest.approx(checked["measured"], abs=5e-4)


def _predict_files() -> list[str]:
    return sorted(
        str(p.relative_to(recorded_trace("h200/eager_mlp.json.gz").parent))
        for p in recorded_trace("h200/eager_mlp.json.gz").parent.rglob("*.json.gz")
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", _predict_files())
def test_every_predictions_file_is_one_check_reads(name: str, tmp_path: Path) -> None:
    """`analyze --predict` on every H200 trace writes a file `check` accepts: valid TOML, unique names, one
    hypothesis per action (sweep/eager_geglu had two identical `gemm_epilogue` entries, and check refused it)."""
    import tracelens
    from tracelens.analyses import analyze
    from tracelens.hypotheses.parse import load_hypotheses
    from tracelens.renderers.predictions import predictions_toml

    path = recorded_trace(f"h200/{name}")
    results = analyze(tracelens.load(path))
    (tmp_path / "p.toml").write_text(predictions_toml(results, path.name), encoding="utf-8")
    hypotheses = load_hypotheses(tmp_path / "p.toml")
    actions = results.actions.actions if results.actions is not None else []
    assert len(hypotheses) == len(actions)
    assert len({h.name for h in hypotheses}) == len(hypotheses)
    targets = [(a.action, tuple(a.targets)) for a in actions]
    assert len(set(targets)) == len(targets), targets  # one action per change: none predicted twice


@pytest.mark.parametrize(("before", "after", "taken"), MULTI, ids=lambda v: str(v).split("/")[-1])
def test_compare_checks_what_check_checks(
    before: str, after: str, taken: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare`'s rows are `check`'s applicable verdicts, one per prediction of the action taken (Liger's block
    took fuse: its 18 launches per step lie nearest a fuse prediction, 34, not gemm_epilogue's 38; compare used to
    check only the first fuse prediction, check every one); a trace that lost the regions or replays of BEFORE
    took no action (compiled_mlp → the GEMM-epilogue MLP was read as gemm_epilogue, held)."""
    from tracelens.cli import main

    document = predict_and_check(before, after, tmp_path, capsys)
    applicable = [v for v in document["verdicts"] if v["status"] != "not_applicable"]
    assert {v["taken_action"] for v in document["verdicts"]} == {taken}
    assert main(["compare", "--format", "json", trace(before), trace(after)]) == 0
    rows = json.loads(capsys.readouterr().out)["predictions_checked"]
    assert len(rows) == len(applicable) == (0 if taken is None else len(rows))
    assert sorted((r["action"], r["predicted_step_us"], r["held"]) for r in rows) == sorted(
        (v["action"], v["expected"], v["held"]) for v in applicable
    )
    assert all(r["action"] == taken for r in rows)


@pytest.mark.parametrize(("before", "after", "taken"), [*TWINS, *MULTI[:2]], ids=lambda v: str(v).split("/")[-1])
def test_weak_is_where_the_step_before_lies_in_the_range(
    before: str, after: str, taken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A held prediction is weak where the before-trace's mean span (stdlib, raw events) lies in its range; check
    and compare say the same, and the measured change is the stdlib spans' difference."""
    from tests.test_actions import raw_mean_span_us
    from tracelens.cli import main

    before_us = raw_mean_span_us(Path(trace(before)))
    after_us = raw_mean_span_us(Path(trace(after)))
    document = predict_and_check(before, after, tmp_path, capsys)
    checked = [v for v in document["verdicts"] if v["status"] != "not_applicable"]
    assert checked
    assert main(["compare", "--format", "json", trace(before), trace(after)]) == 0
    rows = json.loads(capsys.readouterr().out)["predictions_checked"]
    assert len(rows) == len(checked)
    for verdict, row in zip(checked, rows, strict=True):
        assert verdict["before_value"] == pytest.approx(before_us, abs=0.01)
        assert row["before_step_us"] == pytest.approx(before_us, abs=0.01)
        inside = row["low"] <= before_us <= row["high"]
        assert verdict["no_change_holds"] == row["no_change_holds"] == inside
        assert row["measured_step_us"] - row["before_step_us"] == pytest.approx(after_us - before_us, abs=0.01)
    weak = sum(v["held"] and v["no_change_holds"] for v in checked)
    assert document["weak"] == weak


@pytest.mark.parametrize(
    ("before", "after", "several"),
    [("block/eager_block", "block/liger_block", True), ("eager_mlp", "liger_mlp", False)],
)
def test_a_trace_below_every_fuse_prediction_made_several_changes(
    before: str, after: str, several: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Liger's block launches 18 kernels a step where each fuse prediction leaves 31 or more (stdlib launch counts
    of both traces, `_kernel_launches_per_step`): the reason says it made several such changes; Liger's MLP (7 → 6,
    one fusion) does not."""
    document = predict_and_check(before, after, tmp_path, capsys)
    hypotheses = tomllib.loads((tmp_path / "p.toml").read_text(encoding="utf-8"))["hypothesis"]
    fuse = [h["launches_per_step"] for h in hypotheses if h["action"] == "fuse"]
    below = _kernel_launches_per_step(Path(trace(after))) < min(fuse) - 0.5
    assert below == several
    checked = [v for v in document["verdicts"] if v["status"] != "not_applicable"]
    assert checked and all(("it made several such changes" in v["reason"]) == several for v in checked)


def test_a_weak_verdict_says_when_the_step_moved_the_other_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CUDA graphs on the 4,096-token MLP of the graphs folder: predicted faster than eager, measured slower (the
    raw mean spans), yet inside the range: the weak HELD says the change went the other way. (Before 2026-12-07,
    when a first step of warm-up counted in the means, reduce-overhead on the folder's small MLP was the case.)"""
    from tests.test_actions import raw_mean_span_us
    from tracelens.cli import main

    before, after = "graphs/eager_mlp_t4096", "graphs/graph_eager_mlp_t4096"
    predictions = tmp_path / "p.toml"
    assert main(["analyze", trace(before), "--predict", str(predictions)]) == 0
    capsys.readouterr()
    assert main(["check", trace(after), "--expect", str(predictions), "--width", "200"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    entries = tomllib.loads(predictions.read_text(encoding="utf-8"))["hypothesis"]
    (entry,) = [e for e in entries if e["action"] == "cuda_graphs"]
    measured = raw_mean_span_us(Path(trace(after)), without_capture=True) - raw_mean_span_us(Path(trace(before)))
    assert (entry["value"] - entry["before_value"]) * measured < 0
    assert "HELD" in out and ": the other way)" in out
