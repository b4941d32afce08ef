"""Predictions as hypotheses: `action` and `before` keys, N/A verdicts for an action the trace did not take, the
error of each `==` with a number as value; on hand-built documents (each `compiled` section says what the
trace runs) and through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracelens.analyses.actions import HALF_WIDTH
from tracelens.hypotheses import TraceDocument, document_from, parse_hypotheses
from tracelens.hypotheses.evaluate import CheckResult, Verdict, evaluate
from tracelens.hypotheses.parse import HypothesisError
from tracelens.renderers.check import CheckTextRenderer, check_dict
from tracelens.variants import ACTIONS, ProgramShape, error_pct, possible_actions, taken_action, taken_note, taken_words

EAGER = {"compiled_regions": 0, "graph_replays": 0}


def document(label: str, regions: int, replays: int, step_us: float = 100.0) -> TraceDocument:
    """An analyze document with only what these hypotheses read: `regions` compiled regions and `replays` CUDA-graph
    replay rows, and the mean step span."""
    compiled = {"regions": [{"name": f"r{i}"} for i in range(regions)], "graph_replays": [{}] * replays}
    return document_from(f"{label}.json.gz", {"compiled": compiled, "critical_path": {"step_us": step_us}})


def prediction(action: str, value: float, before: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": f"{action}: step {value}",
        "metric": "critical_path.step_us",
        "op": "==",
        "value": value,
        "tolerance": {"below": 20, "above": 20},
        "action": action,
        "before": EAGER if before is None else before,
    }


def verdicts(*entries: dict[str, Any], on: list[TraceDocument]) -> list[Verdict]:
    return evaluate(parse_hypotheses({"hypothesis": list(entries)}, "p.toml"), on)


PREDICTIONS = [prediction("compile", 110.0), prediction("cuda_graphs", 95.0), prediction("fuse", 130.0)]


def test_the_actions_are_those_analyze_predicts() -> None:
    assert set(ACTIONS) == set(HALF_WIDTH)


@pytest.mark.parametrize(
    ("before", "after", "taken"),
    [
        ((0, 0), (1, 0), "compile"),
        ((0, 0), (0, 2), "cuda_graphs"),
        ((1, 0), (1, 1), "cuda_graphs"),  # a compiled program whose graphs are new: reduce-overhead over default
        ((0, 1), (2, 1), "compile_reduce_overhead"),  # the program's own graphs replaced by torch.compile's
        ((0, 0), (0, 0), None),  # nothing new: Liger, a hand-fused variant, the trace itself
        ((0, 0), (1, 1), "compile_reduce_overhead"),  # both new: mode="reduce-overhead"
        ((1, 1), (1, 1), None),
    ],
)
def test_the_action_taken_is_told_by_what_is_new(
    before: tuple[int, int], after: tuple[int, int], taken: str | None
) -> None:
    assert taken_action(ProgramShape(*before), ProgramShape(*after)) == taken


def test_only_the_prediction_of_the_action_taken_is_checked() -> None:
    compiled = document("compiled_mlp", regions=1, replays=0, step_us=100.0)
    compile_, graphs, fuse = verdicts(*PREDICTIONS, on=[compiled])
    assert (compile_.status, compile_.taken_action, compile_.error_pct) == ("HELD", "compile", 10.0)
    assert compile_.taken == "compiled_mlp took compile (compiled regions, no CUDA-graph replays; before: neither)"
    for verdict in (graphs, fuse):
        assert (verdict.status, verdict.applies, verdict.held, verdict.error_pct) == ("N/A", False, False, None)
    assert graphs.reason == (
        "compiled_mlp took compile (compiled regions, no CUDA-graph replays; before: neither): "
        "this predicts cuda_graphs"
    )
    result = CheckResult("p.toml", [compiled], [compile_, graphs, fuse])
    assert (result.held, result.wrong, result.not_applicable) == (1, 0, 2)


def test_a_wrong_prediction_of_an_action_not_taken_does_not_count() -> None:
    """fuse predicts 130 ± 20 where 100 is measured: wrong were it checked, N/A on a CUDA-graph twin."""
    graphs = document("mlp_graph_replay", regions=0, replays=1, step_us=100.0)
    found = verdicts(*PREDICTIONS, on=[graphs])
    assert [(v.hypothesis.action, v.status) for v in found] == [
        ("compile", "N/A"),
        ("cuda_graphs", "HELD"),
        ("fuse", "N/A"),
    ]
    assert CheckResult("p.toml", [graphs], found).wrong == 0


@pytest.mark.parametrize(
    ("before", "after", "possible"),
    [
        ((0, 0, 7.0), (0, 0, 6.0), ("fuse", "gemm_epilogue")),  # fewer launches, nothing compiled or graphed: Liger
        ((0, 0, 7.0), (0, 0, 7.0), ()),  # as many launches: no action (the trace itself)
        ((0, 0, None), (0, 0, 7.0), ("fuse", "gemm_epilogue")),  # launches not known: either may have been taken
        ((0, 0, 7.0), (1, 1, 1.0), ("compile_reduce_overhead",)),  # both new: mode="reduce-overhead"
        ((0, 0, 7.0), (1, 0, 3.0), ("compile",)),
        ((0, 0, 7.0), (0, 1, 1.0), ("cuda_graphs",)),
        ((1, 0, 7.0), (0, 0, 5.0), ()),  # compiled regions lost: undoing compile is no action
        ((0, 1, 1.0), (0, 0, 7.0), ()),  # graph replays lost
    ],
)
def test_the_possible_actions(
    before: tuple[int, int, float | None], after: tuple[int, int, float | None], possible: tuple[str, ...]
) -> None:
    assert possible_actions(ProgramShape(*before), ProgramShape(*after)) == possible


@pytest.mark.parametrize(
    ("before_inductor", "after_inductor", "after_regions", "possible"),
    [
        (0.0, 5.0, 0, ("compile",)),  # the program's own graphs now replay Inductor's kernels
        (None, 5.0, 0, ()),  # a prediction file written before the field: as before (one graph launch either way)
        (5.0, 5.0, 0, ()),  # the graphs replayed compiled code already
        (0.0, 0.0, 0, ()),  # no Inductor kernel: a hand-fused graph is told by nothing here
        (0.0, 5.0, 1, ("compile_reduce_overhead",)),  # compiled regions and graph replays: reduce-overhead
    ],
)
def test_compile_inside_the_programs_own_graphs(
    before_inductor: float | None, after_inductor: float, after_regions: int, possible: tuple[str, ...]
) -> None:
    before = ProgramShape(0, 1, 1.0, inductor_calls_per_step=before_inductor)
    after = ProgramShape(after_regions, 1, 1.0, inductor_calls_per_step=after_inductor)
    assert possible_actions(before, after) == possible


@pytest.mark.parametrize(
    ("before", "took", "note"),
    [
        (
            ProgramShape(0, 0, 7.0, inductor_calls_per_step=0.0),
            "compile and cuda_graphs",
            "took compile and cuda_graphs",
        ),
        (ProgramShape(1, 0, 3.0, inductor_calls_per_step=3.0), "captured compiled code", "captured its compiled code"),
    ],
)
def test_compiled_code_in_the_programs_own_graphs_from_no_graph_is_no_one_action(
    before: ProgramShape, took: str, note: str
) -> None:
    """From an eager program, own graphs that replay compiled code are compile and cuda_graphs at once; from a
    compiled one, its code captured by hand (not torch.compile's graphs, which cuda_graphs predicts there): no
    prediction applies, and the words say which (not "lost the compiled regions")."""
    after = ProgramShape(0, 1, 1.0, inductor_calls_per_step=5.0)
    assert possible_actions(before, after) == ()
    assert taken_words(before, after) == took
    assert taken_note("x", before, after).startswith(f"x {note}") and "lost" not in taken_note("x", before, after)


@pytest.mark.parametrize(
    ("before_kernels", "after_kernels", "possible", "fell"),
    [
        (36.0, 27.0, ("fuse", "gemm_epilogue"), "kernels 36 → 27 per step inside its CUDA graphs"),
        (36.0, 36.0, (), "kernels 36 → 36 per step inside its CUDA graphs"),
        (None, 27.0, (), "launches 1 → 1 per step"),  # a prediction file written before the field: as before
    ],
)
def test_a_kernel_fused_inside_the_programs_own_graphs(
    before_kernels: float | None, after_kernels: float, possible: tuple[str, ...], fell: str
) -> None:
    """Both replay CUDA graphs, no compiled code: one graph launch a step on either side, so the launches do not
    fall when a kernel is fused inside the graph; the kernels per step do (fuse or gemm_epilogue, no prediction
    says how many kernels: both checked)."""
    before = ProgramShape(0, 1, 1.0, inductor_calls_per_step=0.0, kernels_per_step=before_kernels)
    after = ProgramShape(0, 1, 1.0, inductor_calls_per_step=0.0, kernels_per_step=after_kernels)
    launches = {"fuse": (1.0,), "gemm_epilogue": (1.0,)}
    assert possible_actions(before, after, launches) == possible
    assert f"({'no new compiled regions or CUDA-graph replays'}; {fell})" in taken_note("x", before, after, launches)


def test_where_the_launches_fell_or_compiled_code_runs_the_launches_tell() -> None:
    """The kernels per step decide only where both sides run their own graphs and launch as often: a kernel fused
    outside the graphs (launches 10 → 9) is told by the launches (fuse, nearest 9), and reduce-overhead on both
    sides (compiled regions) is not a program's own graphs."""
    launches = {"fuse": (9.0,), "gemm_epilogue": (7.0,)}
    before = ProgramShape(0, 1, 10.0, inductor_calls_per_step=0.0, kernels_per_step=40.0)
    after = ProgramShape(0, 1, 9.0, inductor_calls_per_step=0.0, kernels_per_step=39.0)
    assert possible_actions(before, after, launches) == ("fuse",)
    assert "launches 10 → 9 per step" in taken_note("x", before, after, launches)
    compiled = (ProgramShape(1, 1, 3.0, kernels_per_step=10.0), ProgramShape(1, 1, 3.0, kernels_per_step=9.0))
    assert possible_actions(*compiled, launches) == ()


def test_where_nothing_is_new_fuse_and_gemm_epilogue_are_checked() -> None:
    """A document without launches per step, nothing new: compile and cuda_graphs N/A, fuse checked."""
    after = document("liger_mlp", regions=0, replays=0, step_us=100.0)
    found = verdicts(*PREDICTIONS, on=[after])
    assert [v.status for v in found] == ["N/A", "N/A", "WRONG"]
    assert found[2].taken == (
        "liger_mlp took fuse or gemm_epilogue (no new compiled regions or CUDA-graph replays; launches per step not "
        "known)"
    )
    assert found[2].error_pct == pytest.approx(30.0)


def test_where_both_are_new_the_reduce_overhead_prediction_applies() -> None:
    """Compiled regions and graph replays both new: `compile_reduce_overhead` is the action taken (it was "compile
    and cuda_graphs together", checked by nothing); compile's and cuda_graphs' predictions are N/A."""
    after = document("reduce_overhead", regions=1, replays=1, step_us=100.0)
    found = verdicts(*PREDICTIONS, prediction("compile_reduce_overhead", 105.0), on=[after])
    assert [v.status for v in found] == ["N/A", "N/A", "N/A", "HELD"]
    assert found[0].taken.startswith("reduce_overhead took compile_reduce_overhead (compiled regions and CUDA-graph")


def test_a_document_without_a_compiled_section_checks_every_prediction() -> None:
    bare = document_from("old.json.gz", {"critical_path": {"step_us": 100.0}})
    found = verdicts(*PREDICTIONS, on=[bare])
    assert all(v.applies for v in found)
    assert found[0].taken == "old: the action taken is unknown (its document has no compiled section)"


def test_a_compiled_before_program_changes_what_is_new() -> None:
    """From a compiled program (`compile` left out of its actions), reduce-overhead's new graphs are cuda_graphs."""
    before = {"compiled_regions": 1, "graph_replays": 0}
    entries = [prediction("cuda_graphs", 95.0, before), prediction("fuse", 98.0, before)]
    graphs, fuse = verdicts(*entries, on=[document("reduce_overhead", regions=1, replays=1)])
    assert (graphs.status, fuse.status) == ("HELD", "N/A")
    assert graphs.taken == (
        "reduce_overhead took cuda_graphs (compiled regions and CUDA-graph replays; before: compiled regions, no "
        "CUDA-graph replays)"
    )


def test_files_without_action_are_checked_as_before() -> None:
    entry = {"name": "h", "metric": "critical_path.step_us", "op": "==", "value": 100.0, "tolerance": "5%"}
    (verdict,) = verdicts(entry, on=[document("compiled_mlp", regions=1, replays=0)])
    assert (verdict.status, verdict.taken_action, verdict.taken, verdict.reason) == ("HELD", None, "", "")
    assert (verdict.hypothesis.action, verdict.hypothesis.before) == (None, None)


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"op": "==", "value": 110.0}, 10.0),  # (expected ÷ measured − 1) × 100
        ({"op": "==", "value": 80}, -20.0),
        ({"op": "!=", "value": 110.0}, None),
        ({"op": "<", "value": 110.0}, None),
        ({"op": "==", "than": {"metric": "critical_path.step_us", "factor": 1.1}}, None),
    ],
)
def test_the_error_of_an_equality_with_a_number(entry: dict[str, Any], error: float | None) -> None:
    (verdict,) = verdicts({"name": "h", "metric": "critical_path.step_us", **entry}, on=[document("a", 0, 0)])
    assert verdict.error_pct == error


def test_the_error_is_none_where_it_is_no_number() -> None:
    assert error_pct(5.0, 0.0) is None
    assert error_pct(1e308, 1e-308) is None
    assert error_pct(10**400, 3) is None
    assert error_pct(3.0, 2.0) == 50.0
    zero = document_from("z.json.gz", {"critical_path": {"step_us": 0.0}, "name": "x"})
    (at_zero, text) = verdicts(
        {"name": "zero", "metric": "critical_path.step_us", "op": "==", "value": 1.0},
        {"name": "text", "metric": "name", "op": "==", "value": "x"},
        on=[zero],
    )
    assert (at_zero.error_pct, text.error_pct, text.held) == (None, None, True)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"before": None}, "action and before go together"),
        ({"action": None}, "action and before go together"),
        ({"action": "compiled"}, "unknown action 'compiled'; did you mean 'compile'?"),
        ({"action": 1}, "unknown action 1"),
        ({"before": "eager"}, "before must be a table, e.g. before = { compiled_regions = 0, graph_replays = 0 }"),
        ({"before": {**EAGER, "launches_per_step": -1}}, "before: launches_per_step must be a number ≥ 0, not -1"),
        ({"before": {**EAGER, "inductor_calls_per_step": "x"}}, "before: inductor_calls_per_step must be a number ≥ 0"),
        ({"before": {**EAGER, "kernels_per_step": -1}}, "before: kernels_per_step must be a number ≥ 0"),
        ({"before": {**EAGER, "gemm_kernels": [1]}}, "before: gemm_kernels must be a list of kernel names"),
        ({"before": {"compiled_regions": 0}}, "before: graph_replays must be a whole number ≥ 0, not nothing"),
        ({"before": {**EAGER, "graph_replays": -1}}, "before: graph_replays must be a whole number ≥ 0, not -1"),
        ({"before": {**EAGER, "compiled_regions": True}}, "before: compiled_regions must be a whole number ≥ 0"),
        ({"before": {**EAGER, "compiled_regions": 0.5}}, "before: compiled_regions must be a whole number ≥ 0"),
        ({"before": {**EAGER, "graph_replay": 0}}, "before: unknown key 'graph_replay'; did you mean 'graph_replays'?"),
    ],
)
def test_malformed_action_or_before_is_refused(change: dict[str, Any], message: str) -> None:
    entry = {k: v for k, v in {**prediction("compile", 1.0), **change}.items() if v is not None}
    with pytest.raises(HypothesisError) as info:
        parse_hypotheses({"hypothesis": [entry]}, "p.toml")
    assert message in str(info.value), str(info.value)


def test_action_and_before_go_with_any_subject() -> None:
    (fused,) = parse_hypotheses(
        {"hypothesis": [{"name": "f", "fuses": ["gelu", "mul"], "action": "fuse", "before": EAGER}]}, "p.toml"
    )
    assert (fused.action, fused.before) == ("fuse", ProgramShape(0, 0))


def test_text_and_json_say_what_was_taken() -> None:
    after = document("compiled_mlp", regions=1, replays=0, step_us=100.0)
    result = CheckResult("p.toml", [after], verdicts(*PREDICTIONS, on=[after]))
    text = CheckTextRenderer(width=80).render(result)
    lines = text.splitlines()
    assert lines[1:3] == [
        "compiled_mlp took compile (compiled regions, no CUDA-graph replays; before:",
        "neither): 1 checked, 2 not applicable",
    ]
    assert lines[3].startswith("HELD 1. compile: step 110.0: measured 100.0 µs, error +10.0 %")
    assert lines[-3:] == [
        "N/A  2. cuda_graphs: step 95.0: compiled_mlp took compile",  # the name says what it predicts
        "N/A  3. fuse: step 130.0: compiled_mlp took compile",
        "1 held, 0 wrong, 2 not applicable",
    ]
    assert max(len(line) for line in lines) <= 80
    document_json = json.loads(json.dumps(check_dict(result)))
    assert (document_json["held"], document_json["wrong"], document_json["not_applicable"]) == (1, 0, 2)
    held, na, _ = document_json["verdicts"]
    assert {k: held[k] for k in ("status", "held", "error_pct", "action", "taken_action")} == {
        "status": "held",
        "held": True,
        "error_pct": 10.0,
        "action": "compile",
        "taken_action": "compile",
    }
    assert held["before"] == {
        **EAGER,
        "launches_per_step": None,
        "device": None,
        "gemm_gflop_per_step": None,
        "gemm_gflop_per_call": None,
        "gemm_us_per_step": None,
        "inductor_calls_per_step": None,
        "kernels_per_step": None,
        "gemm_kernels": None,
    }
    assert {k: na[k] for k in ("status", "held", "error_pct", "action", "taken_action")} == {
        "status": "not_applicable",
        "held": None,
        "error_pct": None,
        "action": "cuda_graphs",
        "taken_action": "compile",
    }
    assert na["reason"].endswith(": this predicts cuda_graphs")


def test_na_predictions_do_not_change_the_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a hand-built compiled trace (a compiled region each step, no graph replays) from an eager program: a
    wrong cuda_graphs prediction is N/A, the exit status 0."""
    from tests.conftest import op, write_trace
    from tests.test_check_builders import compiled_step
    from tracelens.cli import main

    events = [
        *compiled_step(1, 0, 100),
        op("Torch-Compiled Region: 0/0", 5, 120),
        *compiled_step(2, 1000, 200),
        op("Torch-Compiled Region: 0/0", 1005, 120),
    ]
    trace = write_trace(tmp_path / "compiled.json", events)
    (tmp_path / "p.toml").write_text(
        "\n".join(
            f'[[hypothesis]]\nname = "{a}"\nmetric = "per_step.kernels"\nop = "=="\nvalue = {v}\naction = "{a}"\n'
            "before = { compiled_regions = 0, graph_replays = 0 }\n"
            for a, v in (("compile", 2), ("cuda_graphs", 7))
        ),
        encoding="utf-8",
    )
    assert main(["check", str(trace), "--expect", str(tmp_path / "p.toml")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 held, 0 wrong, 1 not applicable"


def test_a_trace_without_predictions_gives_a_file_with_nothing_to_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No step launched GPU work: `--predict` writes `hypothesis = []`, which check reads as no hypotheses (exit
    0); a file with no entries that does not say so stays malformed (exit 2)."""
    from tests.conftest import op, step, write_trace
    from tracelens.cli import main

    trace = write_trace(tmp_path / "cpu.json", [step(1, 0, 100), op("aten::add", 10, 20), step(2, 100, 100)])
    predictions = tmp_path / "p.toml"
    assert main(["analyze", str(trace), "--summary", "--predict", str(predictions)]) == 0
    assert predictions.read_text(encoding="utf-8").splitlines()[-2:] == [
        "# no prediction: no analyzed step launched GPU work",
        "hypothesis = []  # none: `check` has nothing to check",
    ]
    capsys.readouterr()
    assert main(["check", str(trace), "--expect", str(predictions), "--width", "200"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Hypotheses: {predictions} (none: the file says hypothesis = [])",
        "0 held, 0 wrong",
    ]
    predictions.write_text("# nothing\n", encoding="utf-8")
    assert main(["check", str(trace), "--expect", str(predictions)]) == 2
    assert capsys.readouterr().err == f"tracelens: error: {predictions}: no [[hypothesis]] entries\n"


def test_a_name_that_does_not_say_the_action_gets_it_said() -> None:
    """N/A lines name the action only where the hypothesis' own name does not start with it; a range given as
    `below`/`above` (as `--predict` writes it: 110 −20/+20) is printed as the range, 90.0–130.0, in the text; JSON's
    `statement` keeps the offsets as written; a narrow range gets the digits that tell its ends apart."""
    after = document("compiled_mlp", regions=1, replays=0, step_us=100.0)
    graphs = {**prediction("cuda_graphs", 95.0), "name": "my guess"}
    result = CheckResult("p.toml", [after], verdicts(prediction("compile", 110.0), graphs, on=[after]))
    lines = CheckTextRenderer(width=200).render(result).splitlines()
    assert "N/A  2. my guess: predicts cuda_graphs; compiled_mlp took compile" in lines
    (held,) = [line for line in lines if line.startswith("HELD")]
    assert held.endswith("(critical_path.step_us == 110.0 (range 90.0–130.0))")
    (statement,) = [v["statement"] for v in check_dict(result)["verdicts"] if v["status"] == "held"]
    assert statement == "critical_path.step_us == 110.0 (−20/+20)"
    narrow = {**prediction("compile", 1620.6), "tolerance": {"below": 0.02, "above": 0.02}}
    (hypothesis,) = parse_hypotheses({"hypothesis": [narrow]}, "p.toml")
    assert hypothesis.readable_statement() == "critical_path.step_us == 1,620.600 (range 1,620.580–1,620.620)"


@pytest.mark.parametrize(
    ("before_value", "measured", "status", "weak"),
    [(115.0, 100.0, "HELD", True), (140.0, 100.0, "HELD", False), (115.0, 150.0, "WRONG", False)],
)
def test_a_held_verdict_is_weak_where_no_change_would_hold(
    before_value: float, measured: float, status: str, weak: bool
) -> None:
    """`before_value` inside the range (110 ± 20): HELD but weak; outside it, an ordinary HELD; WRONG is never
    weak. The counts, the text and JSON say so."""
    entry = {**prediction("compile", 110.0), "before_value": before_value}
    (verdict,) = verdicts(entry, on=[document("compiled_mlp", regions=1, replays=0, step_us=measured)])
    assert (verdict.status, verdict.weak, verdict.no_change_holds) == (status, weak, 90 <= before_value <= 130)
    result = CheckResult("p.toml", [], [verdict])
    assert result.weak == int(weak) and check_dict(result)["weak"] == int(weak)
    assert check_dict(result)["verdicts"][0]["no_change_holds"] == (90 <= before_value <= 130)
    text = " ".join(CheckTextRenderer(width=200).render(result).split())
    assert ("weak: the value before, 115.0 µs, lies in the range too" in text) == weak
    if weak:
        assert f"(change predicted -5.0 µs, measured {measured - before_value:+,.1f} µs)" in text
        assert "1 held (1 weak: no change would have held too)" in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"before_value": "fast"}, "before_value must be a number"),
        ({"before_value": True}, "before_value must be a number"),
        ({"action": None, "before": None, "before_value": 1.0}, "before_value goes with action and before"),
    ],
)
def test_a_malformed_before_value_is_refused(change: dict[str, Any], message: str) -> None:
    entry = {k: v for k, v in {**prediction("compile", 110.0), **change}.items() if v is not None}
    with pytest.raises(HypothesisError, match=message):
        parse_hypotheses({"hypothesis": [entry]}, "p.toml")
