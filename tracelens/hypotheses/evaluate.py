"""Evaluate hypotheses over analyze documents: each one HELD or WRONG, with the measured value and the evidence.

Contract: `evaluate(hypotheses, documents) -> list[Verdict]`; pure. A hypothesis that cannot be evaluated
(unknown trace, metric path not in the document, a comparison that does not fit the value) raises
`HypothesisError` (exit status 2): that is a malformed guess, not a wrong one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from tracelens.hypotheses.document import TraceDocument
from tracelens.hypotheses.fusion import REGEX_PREFIX, coverage_source
from tracelens.hypotheses.parse import MEMBERSHIP_OPS, ORDERING_OPS, Hypothesis, HypothesisError, Reference, Subject
from tracelens.hypotheses.paths import MetricPathError, close_keys, program_shape, resolve
from tracelens.hypotheses.regex import subject
from tracelens.naming import trace_stem
from tracelens.records import replace
from tracelens.variants import (
    QUEUED_NOTE_PCT,
    Launches,
    error_pct,
    gemm_drift_us,
    launch_table,
    not_checked,
    possible_actions,
    taken_action,
    taken_note,
    taken_words,
)

SECTIONS = {"kernel": "kernels", "cpu_op": "cpu_ops", "api_call": "api_calls"}
MAX_EVIDENCE = 8
_EVIDENCE_SECTION = {
    "kernels": "kernels",
    "gpu_kernel_us": "kernels",
    "gpu_busy_us": "kernels",
    "launches": "api_calls",
    "cpu_ops": "cpu_ops",
    "cpu_us": "cpu_ops",
}


class Verdict(msgspec.Struct, frozen=True):
    """The outcome of one hypothesis on one trace: HELD, WRONG, or N/A (`applies` False: a prediction for an action
    the trace did not take; `held` is then False and counts as neither)."""

    hypothesis: Hypothesis
    trace: str  # label of the trace it was measured on
    held: bool
    measured: Any  # what the trace says
    expected: Any  # the value it was compared with (after `than` and `factor`), or None
    evidence: tuple[str, ...]  # which kernels, ops, steps or paths the measurement came from
    # `==` with a number as `value`: (value ÷ measured − 1) × 100 (`tracelens.variants.error_pct`); else None
    error_pct: float | None = None
    applies: bool = True
    # with the hypothesis' `action`: the action the trace took relative to its `before` (None: cannot be told) and
    # that in words (`tracelens.variants.taken_note`); "" without `action`
    taken_action: str | None = None
    taken: str = ""
    took: str = ""  # what the trace took in a few words (`tracelens.variants.taken_words`); "" without `action`
    # with the hypothesis' `before_value`: whether that value (no change at all) would have held too; else None
    no_change_holds: bool | None = None
    # False where the trace gives no value to compare (`null` in its document: the figure cannot be computed
    # there): UNKNOWN, neither held nor wrong
    known: bool = True
    # with the hypothesis' `action` and `before`, on a GPU-limited trace: how much longer the same GEMM kernels ran
    # per step on it than on `before`'s (`tracelens.variants.gemm_drift_us`: the GPU's clock, not the action)
    gemm_drift_us: float | None = None

    @property
    def weak(self) -> bool:
        """HELD, but no change would have held too: the check cannot tell the action's effect from none."""
        return self.applies and self.held and bool(self.no_change_holds)

    @property
    def status(self) -> str:
        """HELD, WRONG, UNKNOWN (no value to compare) or N/A."""
        if not self.applies:
            return "N/A"
        if not self.known:
            return "UNKNOWN"
        return "HELD" if self.held else "WRONG"

    @property
    def reason(self) -> str:
        """Why it is N/A (what the trace took, and what the hypothesis predicts); else what the trace took
        relative to `before` ("" without `action`)."""
        return f"{self.taken}: this predicts {self.hypothesis.action}" if not self.applies else self.taken


class CheckResult(msgspec.Struct, frozen=True):
    """What `tracelens check` reports: the hypotheses file, the traces and one verdict per check."""

    source: str
    traces: Sequence[TraceDocument]
    verdicts: Sequence[Verdict]

    @property
    def wrong(self) -> int:
        return sum(v.applies and v.known and not v.held for v in self.verdicts)

    @property
    def unknown(self) -> int:
        return sum(v.applies and not v.known for v in self.verdicts)

    @property
    def held(self) -> int:
        return sum(v.applies and v.held for v in self.verdicts)

    @property
    def weak(self) -> int:
        """Of the held: those no change would have held too (`Verdict.weak`)."""
        return sum(v.weak for v in self.verdicts)

    @property
    def not_applicable(self) -> int:
        return sum(not v.applies for v in self.verdicts)


class Measurement(msgspec.Struct, frozen=True):
    value: Any
    evidence: tuple[str, ...]
    found: bool = True  # False when a pattern matched nothing


def evaluate(hypotheses: Sequence[Hypothesis], documents: Sequence[TraceDocument]) -> list[Verdict]:
    """One verdict per hypothesis and trace it applies to (its `trace`, or every trace when it names none).
    Raises one `HypothesisError` whose `problems` name every hypothesis that cannot be evaluated (an unknown
    trace, a metric path the document lacks, an op that cannot compare the values)."""
    if not documents:
        raise ValueError("evaluate needs at least one trace document")
    verdicts: list[Verdict] = []
    launches = launch_table([(h.action, h.launches_per_step) for h in hypotheses])  # tells fuse from gemm_epilogue
    problems: list[str] = []  # every hypothesis that cannot be evaluated, reported together
    for hypothesis in hypotheses:
        try:
            targets = [find_document(hypothesis, hypothesis.trace, documents)] if hypothesis.trace else documents
            verdicts.extend(evaluate_one(hypothesis, target, documents, launches) for target in targets)
        except HypothesisError as exc:
            problems += exc.problems
    if problems:
        source = hypotheses[0].source
        message = problems[0] if len(problems) == 1 else f"{source}: {len(problems)} problems: " + "; ".join(problems)
        raise HypothesisError(message, problems)
    return verdicts


def find_document(hypothesis: Hypothesis, name: str, documents: Sequence[TraceDocument]) -> TraceDocument:
    hits = [d for d in documents if d.answers_to(name)]
    if len(hits) > 1:  # a file stem names one file: it wins over variants recorded in other traces
        hits = [d for d in hits if trace_stem(d.path) == name] or hits
    if len(hits) == 1:
        return hits[0]
    labels = [d.label for d in documents]
    if hits:
        paths = ", ".join(d.path for d in hits)
        raise hypothesis.error(f'trace "{name}" is ambiguous: {paths}')
    raise hypothesis.error(f'no trace named "{name}" among the traces given ({", ".join(labels)})')


def evaluate_one(
    hypothesis: Hypothesis, target: TraceDocument, documents: Sequence[TraceDocument], launches: Launches | None = None
) -> Verdict:
    """The verdict of `hypothesis` on `target`; with an `action`, N/A where `target` is another program or cannot
    have taken it relative to the hypothesis' `before` (`possible_actions`, `fuse` and `gemm_epilogue` told apart
    by the predictions' `launches`; it is measured all the same: a malformed one fails either way)."""
    verdict = _measured(hypothesis, target, documents)
    if hypothesis.action is None or hypothesis.before is None:
        return verdict
    after = program_shape(target.document)
    if after is None:
        note = f"{target.label}: the action taken is unknown (its document has no compiled section)"
        return replace(verdict, taken=note, took="unknown")
    before = hypothesis.before
    skipped = not_checked(before, after)
    if skipped is not None:
        took, why = skipped
        note = f"{target.label}: {why}"
        return replace(verdict, held=False, evidence=(), error_pct=None, applies=False, taken=note, took=took)
    taken, note = taken_action(before, after, launches), taken_note(target.label, before, after, launches)
    took = taken_words(before, after, launches)
    if hypothesis.action in possible_actions(before, after, launches):
        drift = gemm_drift_us(before, after) if _gpu_limited(target) else None  # else the GEMMs do not set it
        return replace(verdict, taken_action=taken, taken=note, took=took, gemm_drift_us=drift)
    return replace(
        verdict, held=False, evidence=(), error_pct=None, applies=False, taken_action=taken, taken=note, took=took
    )


def _gpu_limited(target: TraceDocument) -> bool:
    """Whether the trace's steps are GPU-limited (its `critical_path.limit`, the `Limit:` line): only there does
    the GEMM kernels' time set the step."""
    path = target.document.get("critical_path")
    return isinstance(path, dict) and path.get("limit") == "gpu"


def _measured(hypothesis: Hypothesis, target: TraceDocument, documents: Sequence[TraceDocument]) -> Verdict:
    if hypothesis.subject is None:
        return _fusion_verdict(hypothesis, target)
    measured = measure(hypothesis, hypothesis.subject, target)
    if hypothesis.op is None:
        return Verdict(hypothesis, target.label, measured.found, measured.value, None, measured.evidence)
    if _unknown(hypothesis.subject, measured.value, hypothesis.op):  # the trace cannot give this figure
        return Verdict(hypothesis, target.label, False, None, None, measured.evidence, known=False)
    expected, reference_evidence = _expected(hypothesis, target, documents)
    if expected is NO_VALUE:  # nor the reference's trace
        return Verdict(hypothesis, target.label, False, measured.value, None, measured.evidence, known=False)
    held = compare(hypothesis, measured.value, hypothesis.op, expected)
    evidence = measured.evidence[:1] + reference_evidence[:1] + measured.evidence[1:] + reference_evidence[1:]
    error = _error(hypothesis, measured.value)
    unchanged = hypothesis.before_value
    no_change = None if unchanged is None else compare(hypothesis, unchanged, hypothesis.op, expected)
    return Verdict(hypothesis, target.label, held, measured.value, expected, evidence, error, no_change_holds=no_change)


def _error(hypothesis: Hypothesis, measured: Any) -> float | None:
    """`error_pct` of an `==` hypothesis whose `value` and measured value are numbers; else None."""
    value = hypothesis.value
    if hypothesis.op != "==" or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return error_pct(value, measured) if _is_number(measured) else None


NO_VALUE = object()  # `_expected` of a reference whose metric is `null` on its trace: the verdict is UNKNOWN


def _unknown(subject: Subject, value: Any, op: str) -> bool:
    """Whether a metric path's value is `null` in the document: the trace cannot give the figure (UNKNOWN). A
    pattern that matches nothing is an answer (none), never unknown; membership ops decide on None as they are."""
    return subject.kind == "metric" and value is None and op not in MEMBERSHIP_OPS


def _expected(
    hypothesis: Hypothesis, target: TraceDocument, documents: Sequence[TraceDocument]
) -> tuple[Any, tuple[str, ...]]:
    reference = hypothesis.than
    if reference is None:
        return hypothesis.value, ()
    other = find_document(hypothesis, reference.trace, documents) if reference.trace else target
    measured = measure(hypothesis, reference.subject, other)
    value = measured.value
    if hypothesis.op is not None and _unknown(reference.subject, value, hypothesis.op):
        return NO_VALUE, measured.evidence
    if not _is_number(value):
        if reference.factor != 1.0 or hypothesis.op in ORDERING_OPS:
            raise hypothesis.error(f"than: {reference.subject.describe()} on {other.label} is {value!r}, not a number")
        return value, (f"reference on {other.label}: {value!r}", *measured.evidence)
    scaled = round(float(value) * reference.factor, 6)
    return scaled, (_reference_line(reference, other.label, value, scaled), *measured.evidence)


def _reference_line(reference: Reference, label: str, value: Any, scaled: float) -> str:
    factor = f" × {reference.factor:g} = {scaled:g}" if reference.factor != 1.0 else ""
    return f"reference: {reference.subject.describe()} on {label} = {value:g}{factor}"


# ---------------------------------------------------------------- measuring


def measure(hypothesis: Hypothesis, subject: Subject, target: TraceDocument) -> Measurement:
    if subject.kind == "metric":
        return _measure_metric(hypothesis, subject.target, target)
    return _measure_pattern(hypothesis, subject, target)


def _measure_metric(hypothesis: Hypothesis, path: str, target: TraceDocument) -> Measurement:
    try:
        value = resolve(target.document, path)
    except MetricPathError as exc:
        raise hypothesis.error(f'metric "{path}" on {target.label}: {exc}') from None
    if isinstance(value, dict):
        raise hypothesis.error(
            f'metric "{path}" on {target.label} is a table; pick one of its keys{close_keys("", list(value))}'
        )
    return Measurement(value, (f"{path} = {_short(value)}", *_metric_evidence(path, target.document)))


def _metric_evidence(path: str, document: dict[str, Any]) -> tuple[str, ...]:
    """For per_step.X: the value of every analyzed step, and the kernels / ops / API calls behind it. For
    critical_path.step_us where each step's CPU starts at least `QUEUED_NOTE_PCT` % of its time before earlier
    steps' GPU work ends: by how much (not in the span), and the step's period (per_step.step_us)."""
    head, _, key = path.partition(".")
    if path == "critical_path.step_us":
        return _queued_evidence(document)
    if head != "per_step" or not key:
        return ()
    lines: list[str] = []
    rows = [row for row in document.get("step_table", []) if isinstance(row, dict) and key in row]
    if rows:
        values = ", ".join(_short(row[key]) for row in rows)
        lines.append(f"median of {len(rows)} step(s) #{rows[0]['number']}..#{rows[-1]['number']}: {values}")
    section = _EVIDENCE_SECTION.get(key)
    if section:
        lines.extend(_entry_line(section, entry) for entry in document.get(section, [])[:MAX_EVIDENCE])
    return tuple(lines)


def _queued_evidence(document: dict[str, Any]) -> tuple[str, ...]:
    path = document.get("critical_path") or {}
    lead, share = path.get("queued_us"), path.get("queued_pct")
    period = (document.get("per_step") or {}).get("step_us")
    if not isinstance(lead, int | float) or not isinstance(share, int | float) or not isinstance(period, int | float):
        return ()
    if lead <= 0 or share < QUEUED_NOTE_PCT:
        return ()
    return (
        f"each step's CPU starts {lead:,.1f} µs before earlier steps' GPU work ends (the span starts where that work "
        f"ends); the step's period is {period:,.1f} µs (per_step.step_us)",
    )


def _measure_pattern(hypothesis: Hypothesis, subject: Subject, target: TraceDocument) -> Measurement:
    section = SECTIONS[subject.kind]
    entries = target.document.get(section)
    if not isinstance(entries, list):
        raise hypothesis.error(f'{target.label} has no "{section}" section to match {subject.kind} patterns against')
    hits = [e for e in entries if _matches(e, subject.target)]
    steps = max(int(target.document.get("steps") or 0), 1)
    calls = sum(int(e.get("calls", 0)) for e in hits)
    total_us = round(sum(float(e.get("total_us", 0.0)) for e in hits), 3)
    values: dict[str, Any] = {
        "calls": calls,
        "calls_per_step": round(sum(float(e.get("calls_per_step", 0.0)) for e in hits), 3),
        "total_us": total_us,
        "us_per_step": round(total_us / steps, 3),
        "mean_us": round(total_us / calls, 3) if calls else None,
    }
    if hits:
        evidence = tuple(_entry_line(section, e) for e in hits[:MAX_EVIDENCE])
        if len(hits) > MAX_EVIDENCE:
            evidence += (f"… and {len(hits) - MAX_EVIDENCE} more",)
    else:
        names = [str(e.get("name", "")) for e in entries]
        evidence = (f"no {subject.kind} matches {subject.target!r}{close_keys(subject.target, names, limit=5)}",)
    return Measurement(values[subject.measure], evidence, found=bool(hits))


def _matches(entry: Any, pattern: str) -> bool:
    """`pattern` names the entry: the exact name (case-insensitive), a glob (`nvjet_*`), or `re:REGEX`
    searched in the name."""
    if not isinstance(entry, dict):
        return False
    names = [name for name in (str(entry.get("name", "")), str(entry.get("short_name", ""))) if name]
    if pattern.startswith(REGEX_PREFIX):
        regex = re.compile(pattern[len(REGEX_PREFIX) :], re.I)
        return any(regex.search(subject(name)) for name in names)
    return any(fnmatch.fnmatchcase(name.lower(), pattern.lower()) for name in names)


def _entry_line(section: str, entry: dict[str, Any]) -> str:
    name = entry.get("short_name") or entry.get("name")
    line = f"{name}: {_short(entry.get('calls_per_step'))}/step, mean {_short(entry.get('mean_us'))} µs"
    if section == "kernels" and entry.get("op"):
        line += f", launched by {entry['op']}"
    return line


# ---------------------------------------------------------------- fusion


def _fusion_verdict(hypothesis: Hypothesis, target: TraceDocument) -> Verdict:
    kernels = [k for k in target.document.get("kernels", []) if isinstance(k, dict)]
    launchers = _launching_ops(target.document)
    covering: list[str] = []
    evidence: list[str] = []
    for kernel in kernels:
        name = str(kernel.get("name", ""))
        ops = launchers.get(name, []) or [str(kernel.get("op", ""))]
        source = coverage_source(hypothesis.fuses, name, str(kernel.get("short_name", "")), ops)
        if source:
            covering.append(name)
            evidence.append(f"{_entry_line('kernels', kernel)} ({source})")
    if not covering:
        evidence = [_separate_kernels(op, kernels, launchers) for op in hypothesis.fuses]
    measured = covering[0] if len(covering) == 1 else (covering or "no single kernel")
    return Verdict(hypothesis, target.label, bool(covering), measured, None, tuple(evidence[:MAX_EVIDENCE]))


def _launching_ops(document: dict[str, Any]) -> dict[str, list[str]]:
    """kernel name → every op that launched it (from the op → kernels section)."""
    launchers: dict[str, list[str]] = {}
    for op in document.get("ops", []):
        for kernel in op.get("kernels", []) if isinstance(op, dict) else []:
            launchers.setdefault(str(kernel.get("name", "")), []).append(str(op.get("name", "")))
    return launchers


def _separate_kernels(op: str, kernels: list[dict[str, Any]], launchers: dict[str, list[str]]) -> str:
    """Where one of the ops ran instead: the kernels that cover it alone."""
    alone = [
        str(k.get("short_name") or k.get("name"))
        for k in kernels
        if coverage_source(
            [op], str(k.get("name", "")), str(k.get("short_name", "")), launchers.get(str(k.get("name")), [])
        )
    ]
    return f"{op}: " + (", ".join(alone[:3]) if alone else "no kernel names it")


# ---------------------------------------------------------------- comparing


def compare(hypothesis: Hypothesis, measured: Any, op: str, expected: Any) -> bool:
    """Apply `op`; raise `HypothesisError` when it cannot apply to these values."""
    if op in MEMBERSHIP_OPS:
        return _contains(hypothesis, measured, expected) == (op == "contains")
    if isinstance(measured, list):
        raise hypothesis.error(f'op "{op}" cannot compare a list ({_short(measured)}); use contains / not-contains')
    if op in ("==", "!="):
        return _equal(hypothesis, measured, expected) == (op == "==")
    if measured is None:
        return False
    if not _is_number(measured):
        raise hypothesis.error(f'op "{op}" needs a number; {hypothesis.statement()} measured {measured!r}')
    m, e = float(measured), float(expected)
    return {"<": m < e, "<=": m <= e, ">": m > e, ">=": m >= e}[op]


def _equal(hypothesis: Hypothesis, measured: Any, expected: Any) -> bool:
    if _is_number(measured) and _is_number(expected):
        if hypothesis.tolerance is not None:
            return hypothesis.tolerance.allows(float(measured), float(expected))
        return float(measured) == float(expected)
    if hypothesis.tolerance is not None and measured is not None:
        raise hypothesis.error(f"tolerance needs numbers; measured {measured!r}")
    return bool(measured == expected) and type(measured) is type(expected)


def _contains(hypothesis: Hypothesis, measured: Any, expected: Any) -> bool:
    if isinstance(measured, str):
        needle = str(expected)
        return fnmatch.fnmatchcase(measured, needle) if _is_glob(needle) else needle in measured
    if isinstance(measured, list):
        if isinstance(expected, str) and _is_glob(expected):
            return any(isinstance(item, str) and fnmatch.fnmatchcase(item, expected) for item in measured)
        return any(item == expected for item in measured)
    raise hypothesis.error(f"contains needs a list or a string; measured {measured!r}")


def _is_glob(text: str) -> bool:
    return any(char in text for char in "*?[")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _short(value: Any, limit: int = 80) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    if len(text) <= limit:
        return text
    head = text[: limit - 1].rstrip("0123456789,.")  # never leave a cut-off number before the "…"
    return head + "…"
