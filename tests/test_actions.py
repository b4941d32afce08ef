"""Actions: each prediction against the twin that took the action (calibration, docs/actions.md), realized step
spans read from the raw events by a stdlib script; the summary's size; the CUDA-graph model's hook."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

import tracelens
from tests import rawtrace
from tests.conftest import TRACES, recorded_trace
from tracelens.analyses import analyze
from tracelens.analyses.actions import GRAPH_MODELS, half_width_of

# (before, after, the action the after-trace took)
TWINS = [
    ("eager_mlp", "compiled_mlp", "compile"),
    ("block/eager_block", "block/compiled_block", "compile"),
    ("block/train_eager_block", "block/train_compiled_block", "compile"),
    ("extra/train_eager_mlp", "extra/train_compiled_mlp", "compile"),
    ("extra/i8192_eager_mlp", "extra/i8192_compiled_mlp", "compile"),
    ("extra/i8192_eager_linear", "extra/i8192_compiled_linear", "compile"),
    *((f"extra/sweep_eager_mlp_t{t}", f"extra/sweep_compiled_mlp_t{t}", "compile") for t in (8, 64, 512, 4096, 16384)),
    ("extra/attn_eager", "extra/attn_compiled", "compile"),
    ("graphs/mlp_eager", "graphs/mlp_graph_replay", "cuda_graphs"),
    ("graphs/block_eager", "graphs/block_graph_replay", "cuda_graphs"),
    ("graphs/mlp_eager", "graphs/mlp_compiled", "compile"),
    ("graphs/block_eager", "graphs/block_compiled", "compile"),
    ("eager_mlp", "geglu_epilogue_mlp", "gemm_epilogue"),
    ("eager_mlp", "liger_mlp", "fuse"),
    # torch.compile(mode="reduce-overhead"): its capture in a trace of its own, and inside the window (the steps
    # after it); the sweep's eager 4,096-token MLP is the extras run's eager twin of cudagraph_mlp
    ("graphs/mlp_eager", "graphs/mlp_ro_replay", "compile_reduce_overhead"),
    ("graphs/block_eager", "graphs/block_ro_replay", "compile_reduce_overhead"),
    ("graphs/mlp_eager", "graphs/mlp_ro", "compile_reduce_overhead"),
    ("graphs/block_eager", "graphs/block_ro", "compile_reduce_overhead"),
    ("extra/sweep_eager_mlp_t4096", "extra/cudagraph_mlp", "compile_reduce_overhead"),
    # Hugging Face generate(): eager decode against static cache + mode="reduce-overhead" (issue #28's twin)
    ("graphs/decode_eager", "graphs/decode_static_graph", "compile_reduce_overhead"),
    # CUDA graphs on a compiled program: the same reduce-overhead recordings against the default-mode compiled twin
    ("graphs/mlp_compiled", "graphs/mlp_ro_replay", "cuda_graphs"),
    ("graphs/block_compiled", "graphs/block_ro_replay", "cuda_graphs"),
    ("graphs/mlp_compiled", "graphs/mlp_ro", "cuda_graphs"),
    ("graphs/block_compiled", "graphs/block_ro", "cuda_graphs"),
    ("extra/sweep_compiled_mlp_t4096", "extra/cudagraph_mlp", "cuda_graphs"),
    # pure CUDA-graph twins of `python -m workloads.record --extras graphs`, when recorded into traces/h200/graphs
    *(
        (f"graphs/{p.name[6:-8]}", f"graphs/{p.name[:-8]}", "cuda_graphs")
        for p in sorted(
            (Path(__file__).resolve().parent.parent / "traces/h200/graphs").glob("graph_eager_mlp_t*.json.gz")
        )
    ),
]


MISSES = {
    ("extra/sweep_eager_mlp_t64", "extra/sweep_compiled_mlp_t64"),
    ("graphs/mlp_eager", "graphs/mlp_compiled"),
    ("graphs/mlp_eager", "graphs/mlp_ro_replay"),
    ("graphs/mlp_compiled", "graphs/mlp_ro_replay"),
    ("graphs/mlp_compiled", "graphs/mlp_ro"),
    ("graphs/decode_eager", "graphs/decode_static_graph"),
}


def raw_mean_span_us(path: Path, without_capture: bool = False) -> float:
    """Stdlib: the mean over the trace's ProfilerSteps (CPU-side annotations; with `without_capture`, those that
    hold no cudaStreamBeginCapture; the first of them left out where it has a GPU activity and its span is over
    1.5 × the median span, with three steps or more) of each step's span (`rawtrace.step_spans`: from the later
    of its start and the end of earlier steps' GPU work on its streams, to the later of its end and the last end of
    the GPU activity launched inside it, by correlation id)."""
    evs = rawtrace.events(path)
    spans = rawtrace.steps([e for e in evs if not str(e.get("cat", "")).startswith("gpu_")])
    if without_capture:
        captures = [float(e["ts"]) for e in evs if str(e.get("name", "")).endswith("StreamBeginCapture")]
        spans = [s for s in spans if not any(s[1] <= c < s[2] for c in captures)]
    bounds = rawtrace.step_spans(evs)
    lengths = [bounds[n][2] - bounds[n][1] for n, _, _ in spans if n in bounds]
    if len(lengths) > 2 and lengths[0] > FIRST_STEP_OFF * statistics.median(lengths):
        lengths = lengths[1:]  # the first step, a warm-up: left out of the mean (docs/critical_path.md)
    return sum(lengths) / len(lengths)


FIRST_STEP_OFF = 1.5  # docs/critical_path.md: a first step longer than this × the median span is warm-up


@pytest.mark.parametrize(("before", "after", "action"), TWINS, ids=lambda v: str(v).split("/")[-1])
def test_the_action_the_twin_took_predicts_its_step(before: str, after: str, action: str) -> None:
    """The predicted step span of the action the twin took lies in its stated range around the realized one (the
    after-trace's steps that capture no CUDA graph, raw events: the steady state's); within ±20 % on every twin
    but `MISSES`: the 64-token sweep (+22.5 %; its repeat recordings: tests/test_actions_repeats.py), the graphs
    folder's MLP under compile (+34.4 %) and reduce-overhead from its replay-only recording (+29.5 %), CUDA graphs
    on its compiled form (−20.3, −27.6 %) and the decode twin under reduce-overhead (−25.7 %: docs/actions.md)."""
    results = analyze(tracelens.load(recorded_trace(f"h200/{before}.json.gz")))
    assert results.actions is not None
    (prediction,) = [a for a in results.actions.actions if a.action == action][:1]
    realized = raw_mean_span_us(recorded_trace(f"h200/{after}.json.gz"), without_capture=True)
    assert prediction.low <= realized <= prediction.high
    assert abs(realized / prediction.predicted_step_us - 1) <= half_width_of(action, prediction.limited_by)
    error = prediction.predicted_step_us / realized - 1
    if (before, after) not in MISSES:
        assert abs(error) <= 0.20


def test_a_graph_model_plugs_in_as_one_function() -> None:
    """`GRAPH_MODELS["cuda_graphs"]` replaces the built-in CUDA-graph model: a model that changes nothing predicts
    the observed step."""
    from tracelens.analyses.actions import _Plan

    GRAPH_MODELS["cuda_graphs"] = lambda trace, graph: _Plan(list(graph.call_work_ns), list(graph.call_dur_ns), {})
    try:
        results = analyze(tracelens.load("traces/h200/eager_mlp.json.gz"))
    finally:
        del GRAPH_MODELS["cuda_graphs"]
    assert results.actions is not None
    graphs = next(a for a in results.actions.actions if a.action == "cuda_graphs")
    assert graphs.saved_us == pytest.approx(0.0, abs=0.01)


SUMMARY_TRACES = [
    "h200/eager_mlp",
    "h200/compiled_mlp",
    "h200/block/eager_block",
    "h200/block/eager_math_block",
    "h200/extra/sweep_eager_mlp_t8",
    "corpus/hta/trace_diff/test/test",
    "corpus/hta/negative_queue_length_values_check/rank0",
    "corpus/amd_tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005",
    "corpus/other/facebookresearch__param/resnet_kineto",
]


@pytest.mark.parametrize("name", SUMMARY_TRACES)
def test_the_summary_fits_15_lines_at_80_columns(name: str) -> None:
    """Rendered 200 columns wide, so that no line is wrapped by the terminal: the summary's own lines are at most
    80 columns and 15 lines (the traces whose summaries ran longest)."""
    from tests.conftest import anchor
    from tracelens.renderers.analyses.actions import actions_parts
    from tracelens.renderers.text import make_console, print_parts, render_to_string

    folder, relative = name.split("/", 1)
    path = TRACES / "h200" / f"{relative}.json.gz" if folder == "h200" else anchor(f"{relative}.json.gz")
    results = analyze(tracelens.load(path))
    assert results.actions is not None
    console = make_console(False, 200)
    print_parts(console, actions_parts(results.actions, results)[:1])  # the summary (the table follows it)
    lines = render_to_string(console).rstrip("\n").split("\n")
    assert len(lines) <= 15 and all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("What to do next — step ")
    if lines[1].startswith("Without the profiler: "):  # where a profiler-free step time is known (or why not)
        lines = lines[1:]
    if lines[1].startswith("  (for the median step, ") or lines[1].startswith("  (CPU starts "):  # which step
        lines = lines[1:]
    assert lines[1].startswith("Limit: ")
    assert any(line.startswith("1. ") and "saves" in line for line in lines)
    # every action is either listed or counted (those predicted to lengthen the step too): none dropped unsaid
    listed = sum(bool(re.match(r"\d+\. ", line)) for line in lines)
    more = next((int(m.group(1)) for line in lines if (m := re.match(r"\((\d+) more in “Every action”", line))), 0)
    assert listed + more == len(results.actions.actions), (listed, more, len(results.actions.actions))


def test_section_and_summary_print_only_those(capsys: pytest.CaptureFixture[str]) -> None:
    from tracelens.cli import main

    trace = "traces/h200/eager_mlp.json.gz"
    assert main(["analyze", trace, "--summary", "--no-cache"]) == 0
    only = capsys.readouterr().out
    assert only.startswith("What to do next") and "Bound:" not in only and "Critical path" not in only
    assert main(["analyze", trace, "--section", "bound", "--section", "critical_path", "--no-cache"]) == 0
    two = capsys.readouterr().out
    assert two.startswith("Bound:") and "Critical path over" in two and "What to do next" not in two
    assert main(["analyze", trace, "--section", "nope"]) == 2
    assert "unknown section 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("before", "after"), [("eager_mlp", "compiled_mlp"), ("block/eager_block", "block/compiled_block")]
)
def test_predictions_are_hypotheses_that_check_verifies(
    before: str, after: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`analyze BEFORE --predict p.toml` then `check AFTER --expect p.toml`: the compile prediction holds on the
    compiled twin (within its stated range), and check prints predicted vs measured for each."""
    from tracelens.cli import main

    predictions = tmp_path / "p.toml"
    assert main(["analyze", f"traces/h200/{before}.json.gz", "--summary", "--predict", str(predictions)]) == 0
    capsys.readouterr()
    assert main(["check", f"traces/h200/{after}.json.gz", "--expect", str(predictions)]) in (0, 1)
    out = capsys.readouterr().out
    (compile_line,) = [line for line in out.splitlines() if "compile (the step)" in line]
    assert compile_line.startswith("HELD") and "measured" in compile_line and "critical_path.step_us ==" in compile_line
    assert main(["analyze", f"traces/h200/{before}.json.gz", "--predict", str(predictions)]) == 2  # no --force


def test_compare_checks_the_prediction_of_the_action_the_variant_took(capsys: pytest.CaptureFixture[str]) -> None:
    """`compare BEFORE AFTER...`: each after-trace that is a known variant (compiled, CUDA graphs) gets the
    before-trace's prediction for that action, with the measured span and error; reduce-overhead (both) gets none."""
    from tracelens.cli import main

    traces = ["graphs/mlp_eager", "graphs/mlp_compiled", "graphs/mlp_graph_replay", "extra/cudagraph_mlp"]
    assert main(["compare", "--width", "160", *(f"traces/h200/{t}.json.gz" for t in traces)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Predictions checked") :]
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert [r.split("│")[2].strip() for r in rows] == ["compile (the step)", "cuda_graphs (the step's launches)"]
    measured = float(rows[0].split("│")[6].replace(",", ""))
    assert measured == pytest.approx(raw_mean_span_us(recorded_trace("h200/graphs/mlp_compiled.json.gz")), abs=0.1)


def test_the_report_overview_shows_the_actions() -> None:
    """The report's first section (Overview) carries the "What to do next" panel with the same actions, in the
    same order and with the same figures as the JSON."""
    from tracelens.renderers.page import build_report

    trace = tracelens.load("traces/h200/block/eager_block.json.gz")
    results = analyze(trace)
    document = build_report([(trace, results)])
    overview = document.sections[0]
    panel = next(p for p in overview.panels if p.id.endswith("actions"))
    assert panel.table is not None and results.actions is not None
    assert [row[0] for row in panel.table.rows] == [a.action for a in results.actions.actions]
    assert panel.table.rows[0][2] == f"{results.actions.actions[0].predicted_step_us:,.1f}"


def test_the_host_only_work_is_each_calls_overlap_with_the_dataloader_ranges() -> None:
    """`_host_only_work_ns` (numpy) against a loop over each call and each `HOST_ONLY` range of its thread, read
    from the graph's lists: the CPU work before a call that lies inside `enumerate(DataLoader)#` ranges, on every
    step of the DataLoader loop (resnet_kineto, where those ranges exist)."""
    from tests.conftest import anchor
    from tracelens.analyses.actions import HOST_ONLY, _host_only_work_ns
    from tracelens.analyses.critical_path import build_graph
    from tracelens.analyses.window import select_window
    from tracelens.model.events import Kind

    trace = tracelens.load(anchor("other/facebookresearch__param/resnet_kineto.json.gz"))
    ev = trace.events
    ranges: dict[int, list[tuple[int, int]]] = {}
    for row in range(len(ev)):
        if ev.kind[row] == Kind.USER_ANNOTATION and ev.names[ev.name[row]].startswith(HOST_ONLY):
            start = int(ev.ts_ns[row])
            ranges.setdefault(int(ev.track[row]), []).append((start, start + int(ev.dur_ns[row])))
    assert ranges
    nonzero = 0
    for index in select_window(trace).step_indices.tolist():
        graph = build_graph(trace, index)
        if graph is None:
            continue
        expected = []
        for i, (thread, start) in enumerate(zip(graph.call_thread, graph.call_start_ns, strict=True)):
            prev = graph.call_prev[i]
            since = graph.start_ns if prev < 0 else graph.call_start_ns[prev] + graph.call_dur_ns[prev]
            overlap = sum(max(0, min(end, start) - max(begin, since)) for begin, end in ranges.get(thread, ()))
            expected.append(min(overlap, graph.call_work_ns[i]))
        assert _host_only_work_ns(trace, graph).tolist() == expected
        nonzero += sum(1 for ns in expected if ns > 0)
    assert nonzero > 0  # some launches do wait on the DataLoader


DATA_LOADING_TRACES = (
    "other/facebookresearch__param/resnet_kineto.json.gz",  # an anchor: steps inferred from the DataLoader
    "h200/dataloader/train_eager.json.gz",
    "h200/dataloader/train_compiled.json.gz",
    "h200/dataloader/train_eager_nostep.json.gz",
    *(f"h200/dataloader_twins/dl_workers{n}{pin}.json.gz" for n in (0, 2, 8) for pin in ("", "_pin")),
)


@pytest.mark.parametrize("name", DATA_LOADING_TRACES)
def test_the_dataloader_time_is_the_independent_one(name: str) -> None:
    """`actions.summary.data_loading_us` is the mean over the replayed steps of the time inside the DataLoader's
    annotations within each step's CPU range, as tests/independent/data_loading.py reads it from the raw events
    (the replayed steps are every step on these traces, ProfilerSteps or inferred, less a first step the critical
    path leaves out of its means as warm-up: tests/test_critical_path_warmup.py checks that rule)."""
    from tests.conftest import anchor
    from tests.independent.data_loading import per_step_us

    path = anchor(name) if name.startswith("other/") else recorded_trace(name)
    expected = per_step_us(str(path))
    results = analyze(tracelens.load(path))
    result, path_steps = results.actions, results.critical_path.steps
    assert len(path_steps) == len(expected)
    expected = [v for v, step in zip(expected, path_steps, strict=True) if step.in_means]
    assert result is not None and result.summary.steps == len(expected)
    assert result.summary.data_loading_us == pytest.approx(sum(expected) / len(expected), abs=0.01)
    assert result.summary.step_us is not None and 0 < result.summary.data_loading_us < result.summary.step_us


def test_no_dataloader_no_figure_and_the_line_says_it() -> None:
    """None (not 0) where the trace has no DataLoader range; where it has, the summary's head line gives it."""
    from tests.conftest import anchor
    from tracelens.renderers.analyses.actions import actions_parts

    eager = analyze(tracelens.load(recorded_trace("h200/eager_mlp.json.gz"))).actions
    assert eager is not None and eager.summary.data_loading_us is None
    results = analyze(tracelens.load(anchor("other/facebookresearch__param/resnet_kineto.json.gz")))
    assert results.actions is not None
    head = str(actions_parts(results.actions, results)[0])
    # of the time from each step's CPU start (the mean span, 322,186.7 µs, plus the lead): 203,159.4 / 432,403.4
    assert "DataLoader: next batch 203,159.4 µs/step, 47.0 % from CPU start; actions keep it" in head


def test_the_dataloader_twins_move_the_wait_into_the_copy() -> None:
    """Why there is no `data_loading` action (docs/actions.md#the-dataloaders-next-batch), from the raw events of
    traces/h200/dataloader_twins and the run's log: workers shrink the DataLoader's time per step, the batch's
    `aten::copy_` grows by more, and the CUDA-event step barely moves."""
    import ast
    import gzip
    import json
    import re

    from tests.independent.data_loading import per_step_us, step_ranges

    folder = TRACES / "h200/dataloader_twins"
    events_ms = {
        line.split(":")[0]: ast.literal_eval(re.search(r"\{.*\}", line).group(0))["median"]  # type: ignore[union-attr]
        for line in (folder / "record.log").read_text().splitlines()
    }
    for workers in (0, 2, 8):
        for pin in ("", "_pin"):
            path = folder / f"dl_workers{workers}{pin}.json.gz"
            with gzip.open(path, "rt") as handle:
                events = json.load(handle)["traceEvents"]
            steps = step_ranges(events)
            copy_ms = (
                sum(
                    e["dur"]
                    for e in events
                    if e.get("cat") == "cpu_op"
                    and e["name"] == "aten::copy_"
                    and any(a <= e["ts"] * 1000 < b for a, b in steps)
                )
                / len(steps)
                / 1000
            )
            loader_ms = sum(per_step_us(str(path))) / len(steps) / 1000
            if workers == 0:
                assert 8.1 <= loader_ms <= 8.7 and 0.5 <= copy_ms <= 0.6, (path, loader_ms, copy_ms)
            else:
                assert 0.05 <= loader_ms <= 0.75 and 9.1 <= copy_ms <= 11.55, (path, loader_ms, copy_ms)
    with_workers = [ms for name, ms in events_ms.items() if "workers0" not in name]
    assert 10.05 <= min(events_ms["dl_workers0"], events_ms["dl_workers0_pin"]) <= 10.25
    assert min(with_workers) >= 7.95 and max(with_workers) <= 10.2


def calibration_row(before: str, after: str, action: str) -> str:
    """The row of docs/actions.md#calibration-on-the-twins for one twin (`python tests/test_actions.py` prints
    them all)."""
    results = analyze(tracelens.load(recorded_trace(f"h200/{before}.json.gz")))
    assert results.actions is not None and results.actions.summary.step_us is not None
    (prediction,) = [a for a in results.actions.actions if a.action == action][:1]
    realized = raw_mean_span_us(recorded_trace(f"h200/{after}.json.gz"), without_capture=True)
    error = 100 * (prediction.predicted_step_us / realized - 1)
    error_text = f"{error:+.1f} %".replace("-", "−")
    return (
        f"| `{before}` → `{after}` | {action} | {prediction.limited_by} | {results.actions.summary.step_us:,.1f} | "
        f"{prediction.predicted_step_us:,.1f} ({prediction.low:,.0f}–{prediction.high:,.0f}) | {realized:,.1f} | "
        f"{'**' + error_text + '**' if abs(error) > 20 else error_text} |"
    )


@pytest.mark.parametrize(("before", "after", "action"), TWINS, ids=lambda v: str(v).split("/")[-1])
def test_the_calibration_table_is_the_recomputed_one(before: str, after: str, action: str) -> None:
    row = calibration_row(before, after, action)
    assert row in (Path(__file__).parent.parent / "docs" / "actions.md").read_text(encoding="utf-8"), row


if __name__ == "__main__":
    for twin in TWINS:
        print(calibration_row(*twin))


def test_no_action_lengthens_the_program_without_the_profiler() -> None:
    """In every golden document: an action predicted not to lengthen the profiled step
    (`saved_us` ≥ 0) predicts no profiler-free step above the trace's own (`per_step.profiler_free_step_us`), and
    none below 0."""
    import gzip
    import json

    checked = 0
    for golden in sorted((Path(__file__).parent / "golden").rglob("*.json.gz")):
        with gzip.open(golden, "rt") as handle:
            document = json.load(handle)
        free = (document.get("per_step") or {}).get("profiler_free_step_us")
        for action in (document.get("actions") or {}).get("actions") or []:
            predicted = action.get("predicted_profiler_free_step_us")
            if free is None or predicted is None:
                continue
            checked += 1
            assert predicted >= 0, (golden.name, action["action"])
            assert action["saved_us"] < 0 or predicted <= free, (golden.name, action["action"], predicted, free)
    assert checked > 500


@pytest.mark.parametrize(
    ("name", "named"), [("h200/truth/gemm_gpu_ahead.json.gz", True), ("h200/eager_mlp.json.gz", False)]
)
def test_the_summary_names_the_step_its_profiler_free_time_is_for(
    name: str, named: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary's step is the mean span, the profiler-free time the median step's: where they are more than 5 %
    apart (stdlib: the mean span from the raw events against the median ProfilerStep duration), the summary names
    the median step beside it."""

    from tests.conftest import run_cli

    path = Path(__file__).parent.parent / "traces" / name
    spans = rawtrace.steps([e for e in rawtrace.events(path) if not str(e.get("cat", "")).startswith("gpu_")])
    median = statistics.median(end - start for _, start, end in spans)
    apart = abs(raw_mean_span_us(path) / median - 1) > 0.05
    out, _ = run_cli(capsys, "analyze", str(path), "--summary")
    assert apart == named == ("(for the median step, " in out or "; median step: " in out)


def test_section_actions_lists_every_action_and_summary_only_the_summary() -> None:
    """`--section actions` ends with a table of every action (those the summary leaves out and those predicted
    to lengthen the step included); `--summary` prints the summary alone, whose "(N more in “Every action”:
    --section actions)" hint points at that table."""
    import subprocess
    import sys

    path = str(TRACES / "h200" / "eager_mlp.json.gz")
    results = analyze(tracelens.load(path))
    assert results.actions is not None
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin"}

    def run(*flags: str) -> str:
        command = [sys.executable, "-m", "tracelens", "analyze", path, "--no-cache", *flags]
        return subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout

    section, summary = run("--section", "actions"), run("--summary")
    assert "more in “Every action”: --section actions)" in summary and "Every action (" not in summary
    assert len(summary.splitlines()) <= 15
    table = section.split("Every action", 1)[1]
    for rank, action in enumerate(results.actions.actions, 1):
        assert re.search(rf"│ {rank} │ {action.action} ", table), action.action
    assert section.startswith(summary)
