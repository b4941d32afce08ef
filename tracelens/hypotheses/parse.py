"""Hypotheses files: TOML `[[hypothesis]]` tables → validated, typed `Hypothesis` objects.

Contract: `load_hypotheses(path) -> list[Hypothesis]` and `parse_hypotheses(data, source)`; a malformed file
raises `HypothesisError` (exit status 2), whatever the file holds: a UTF-8 byte-order mark is accepted; arrays
nested too deep, integers too long for Python to read (over 4,300 digits) or too large for a float (a
comparison needs one) and files over `MAX_FILE_BYTES` are refused with one line. Every problem of the file is
found in one run: the error's `problems` lists them all, one line each naming the file and line, the entry and
what is wrong with it (a TOML syntax error stops only the `[[hypothesis]]` block it is in).

Names: `kernel`, `cpu_op` and `api_call` match a name exactly (case-insensitive) unless they are a glob
(`nvjet_*`) or `"re:REGEX"` (searched in the name); `fuses` ops match whole op words (see
`tracelens.hypotheses.fusion`) or `"re:REGEX"`.
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from tracelens.errors import TracelensError
from tracelens.hypotheses.regex import unsafe_reason
from tracelens.records import field_names, replace
from tracelens.variants import ACTIONS, ProgramShape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

OPS = ("==", "!=", "<", "<=", ">", ">=", "contains", "not-contains")
ORDERING_OPS = ("<", "<=", ">", ">=")
MEMBERSHIP_OPS = ("contains", "not-contains")
SUBJECTS = ("metric", "kernel", "cpu_op", "api_call", "fuses")
PATTERN_SUBJECTS = ("kernel", "cpu_op", "api_call")
MEASURES = ("calls_per_step", "us_per_step", "mean_us", "calls", "total_us")
PREDICTION_KEYS = (
    "action",
    "before",
    "launches_per_step",
    "before_value",
)  # a prediction for one action (docs/check.md#predictions-of-actions)
HYPOTHESIS_KEYS = ("name", "trace", *SUBJECTS, "measure", "op", "value", "than", "tolerance", "note", *PREDICTION_KEYS)
THAN_KEYS = ("trace", "metric", "kernel", "cpu_op", "api_call", "measure", "factor")

Scalar = float | int | str | bool
MAX_FILE_BYTES = 16 << 20  # a hypotheses file is written by hand: a few KB
MAX_TARGET_CHARS = 1000  # a metric path or a name pattern longer than this is not a guess anyone wrote


class HypothesisError(TracelensError):
    """A malformed hypotheses file or entry (exit status 2); `problems`: every problem found, one line each."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems) or [message]


class Subject(msgspec.Struct, frozen=True):
    """What is measured: a metric path, or calls/times of the kernels, CPU ops or API calls matching a pattern."""

    kind: str  # "metric", "kernel", "cpu_op" or "api_call"
    target: str  # the dotted path or the glob pattern
    measure: str = "calls_per_step"  # for pattern subjects

    def describe(self) -> str:
        if self.kind == "metric":
            return self.target
        return f"{self.kind} {self.target!r} {self.measure}"


class Reference(msgspec.Struct, frozen=True):
    """`than = {...}`: the value to compare against, measured on (another) trace, times `factor`."""

    trace: str | None
    subject: Subject
    factor: float = 1.0


class Tolerance(msgspec.Struct, frozen=True):
    """`|measured - expected| <= max(absolute, relative * |expected|)` counts as equal; with `below`/`above`
    (an asymmetric range, as `analyze --predict` writes) `expected - below <= measured <= expected + above`
    does, and `absolute`/`relative` are 0."""

    absolute: float = 0.0
    relative: float = 0.0
    below: float | None = None
    above: float | None = None

    def allows(self, measured: float, expected: float) -> bool:
        if self.below is not None and self.above is not None:
            return expected - self.below - 1e-12 <= measured <= expected + self.above + 1e-12
        return abs(measured - expected) <= max(self.absolute, self.relative * abs(expected)) + 1e-12

    def describe(self) -> str:
        if self.below is not None and self.above is not None:
            return f"−{self.below:g}/+{self.above:g}"
        parts = [f"±{self.relative * 100:g}%" if self.relative else "", f"±{self.absolute:g}" if self.absolute else ""]
        return " or ".join(p for p in parts if p)


class Hypothesis(msgspec.Struct, frozen=True):
    """One guess. `subject` is None for `fuses`; `op` is None for an existence statement."""

    index: int  # 1-based position in the file
    name: str
    trace: str | None
    subject: Subject | None
    fuses: tuple[str, ...]
    op: str | None
    value: Scalar | None
    than: Reference | None
    tolerance: Tolerance | None
    note: str = ""
    source: str = "hypotheses"  # the file it came from, for error messages
    # a prediction for the program changed by `action` from a program of shape `before` (both or neither): checked
    # only on a trace that took `action` relative to `before`, or whose action cannot be told (docs/check.md)
    action: str | None = None
    before: ProgramShape | None = None
    # with `action`: the kernel launches per step the action leaves (optional: `fuse` and `gemm_epilogue` are told
    # apart by it where both may apply)
    launches_per_step: float | None = None
    # with `action`: the metric's value on the program before the change (optional): where it lies in the range
    # too, no change would have held as well (`Verdict.no_change_holds`), and the change is measured against it
    before_value: float | None = None

    def error(self, message: str) -> HypothesisError:
        """An exit-2 error naming this entry, for problems found while evaluating it."""
        return HypothesisError(f'{self.source}: hypothesis {self.index} ("{self.name}"): {message}')

    def statement(self) -> str:
        """The claim in one line, e.g. `per_step.kernels == 4`."""
        if self.subject is None:
            return "a kernel fuses " + " + ".join(self.fuses)
        if self.op is None:
            return f"{self.subject.kind} {self.subject.target!r} exists"
        right = _describe_reference(self.than) if self.than is not None else repr(self.value)
        tolerance = f" ({self.tolerance.describe()})" if self.tolerance else ""
        return f"{self.subject.describe()} {self.op} {right}{tolerance}"

    def readable_statement(self) -> str:
        """`statement()` for people: an asymmetric range (as `analyze --predict` writes) as the range itself,
        `critical_path.step_us == 1,613.3 (range 1,331.7–1,903.7)`, with the digits that tell its ends apart
        from the value; otherwise `statement()`."""
        tolerance, value = self.tolerance, self.value
        if self.subject is None or self.than is not None or tolerance is None or not isinstance(value, int | float):
            return self.statement()
        if isinstance(value, bool) or tolerance.below is None or tolerance.above is None:
            return self.statement()
        low, high = value - tolerance.below, value + tolerance.above
        step = min((d for d in (tolerance.below, tolerance.above) if d > 0), default=0.0)
        decimals = 1 if step >= 1 or step == 0 else min(9, 1 - math.floor(math.log10(step)))
        shown = [f"{v:,.{decimals}f}" for v in (value, low, high)]
        return f"{self.subject.describe()} {self.op} {shown[0]} (range {shown[1]}–{shown[2]})"


def _describe_reference(reference: Reference) -> str:
    where = reference.trace or "same trace"
    factor = f"{reference.factor:g} × " if reference.factor != 1.0 else ""
    return f"{factor}{reference.subject.describe()} of {where}"


def load_hypotheses(path: str | Path) -> list[Hypothesis]:
    """Read and validate a hypotheses TOML file."""
    path = Path(path)
    source = str(path)
    text = _read_text(path, source)
    lines = _entry_lines(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems = _syntax_problems(text, source) or [f"{source}: not valid TOML: {exc}"]
        raise _all(source, problems) from None
    except RecursionError:
        raise HypothesisError(f"{source}: not usable: arrays or tables nested too deeply") from None
    except ValueError as exc:  # an integer over Python's 4,300-digit limit for reading one
        raise HypothesisError(f"{source}: not usable: a number too long to read ({_first_line(exc)})") from None
    return parse_hypotheses(data, source, lines)


def _read_text(path: Path, source: str) -> str:
    """The file's text (UTF-8, with or without a byte-order mark); at most `MAX_FILE_BYTES`."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open, /dev/zero never end
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise HypothesisError(f"{source}: {kind}; pass a hypotheses .toml file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise HypothesisError(f"{source}: no such file") from None
    except OSError as exc:
        raise HypothesisError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise HypothesisError(f"{source}: over {MAX_FILE_BYTES >> 20} MB; not a hypotheses file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HypothesisError(f"{source}: not UTF-8 text (byte {exc.start + 1})") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).split(";")[0].splitlines()[0] if str(exc) else type(exc).__name__


_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*hypothesis[ \t]*\]\]", re.M)


def _entry_lines(text: str) -> list[int]:
    """The 1-based line of each `[[hypothesis]]` header, in order."""
    return [text.count("\n", 0, match.start()) + 1 for match in _HEADER.finditer(text)]


def _syntax_problems(text: str, source: str) -> list[str]:
    """Every problem of a file that is not valid TOML: each `[[hypothesis]]` block (and the part before the
    first) parsed on its own, the line numbers those of the file; a block that parses is also validated."""
    starts = [0, *(match.start() for match in _HEADER.finditer(text)), len(text)]
    problems = []
    for index, (begin, end) in enumerate(itertools.pairwise(starts)):  # index 0: before the first header
        if begin == end:
            continue
        first_line = text.count("\n", 0, begin)
        try:
            data = tomllib.loads(text[begin:end])
        except tomllib.TOMLDecodeError as exc:
            message = re.sub(r"\(at line (\d+), column (\d+)\)", "", str(exc)).strip()
            at = re.search(r"at line (\d+)", str(exc))
            line = first_line + int(at.group(1)) if at else first_line + 1
            problems.append(f"{source}:{line}: not valid TOML: {message}")
            continue
        except (RecursionError, ValueError):
            problems.append(f"{source}:{first_line + 1}: not usable: nested too deeply or a number too long")
            continue
        entries = data.get("hypothesis")
        if index and isinstance(entries, list) and len(entries) == 1:
            try:
                _parse_entry(entries[0], index, source)
            except HypothesisError as exc:
                problems.append(str(exc).replace(source, f"{source}:{first_line + 1}", 1))
    return problems


def _all(source: str, problems: list[str]) -> HypothesisError:
    if len(problems) == 1:
        return HypothesisError(problems[0], problems)
    return HypothesisError(f"{source}: {len(problems)} problems: " + "; ".join(problems), problems)


def parse_hypotheses(
    data: Mapping[str, Any], source: str = "hypotheses", lines: Sequence[int] = ()
) -> list[Hypothesis]:
    """Validate decoded TOML (`{"hypothesis": [{...}, ...]}`); `lines`: the line of each entry's header, for
    messages. Raises one `HypothesisError` listing every problem; a file without entries is one, unless it says
    `hypothesis = []` (no hypotheses, on purpose)."""
    unknown = [key for key in data if key != "hypothesis"]
    if unknown:
        raise HypothesisError(
            f"{source}: unknown top-level key {_shown(unknown[0])}; write hypotheses as [[hypothesis]]"
        )
    entries = data.get("hypothesis")
    if entries == []:  # `hypothesis = []`, written on purpose: `analyze --predict` where it predicts nothing
        return []
    if not isinstance(entries, list):
        raise HypothesisError(f"{source}: no [[hypothesis]] entries")
    hypotheses: list[Hypothesis] = []
    problems: list[str] = []

    def at(index: int) -> str:
        return f"{source}:{lines[index - 1]}" if index - 1 < len(lines) else source

    for i, entry in enumerate(entries, start=1):
        try:
            hypotheses.append(_parse_entry(entry, i, source))
        except HypothesisError as exc:
            problems.append(str(exc).replace(source, at(i), 1))
    seen: dict[str, int] = {}
    for hypothesis in hypotheses:
        if hypothesis.name in seen:
            message = str(
                _EntryError(source, hypothesis.index, hypothesis.name).error(
                    f"duplicate name (also hypothesis {seen[hypothesis.name]})"
                )
            )
            problems.append(message.replace(source, at(hypothesis.index), 1))
        seen.setdefault(hypothesis.name, hypothesis.index)
    if problems:
        raise _all(source, problems)
    return hypotheses


class _EntryError(msgspec.Struct, frozen=True):
    source: str
    index: int
    name: str | None

    def error(self, message: str) -> HypothesisError:
        label = f' ("{self.name}")' if self.name else ""
        return HypothesisError(f"{self.source}: hypothesis {self.index}{label}: {message}")


def _parse_entry(entry: Any, index: int, source: str) -> Hypothesis:
    if not isinstance(entry, dict):
        raise _EntryError(source, index, None).error("not a table")
    raw_name = entry.get("name")
    where = _EntryError(source, index, raw_name if isinstance(raw_name, str) else None)
    _check_keys(entry, HYPOTHESIS_KEYS, where, "")
    if not isinstance(raw_name, str) or not raw_name.strip():
        raise where.error('needs a name = "..." (a non-empty string)')
    trace = _optional_str(entry, "trace", where)
    subjects = [key for key in SUBJECTS if key in entry]
    if len(subjects) != 1:
        found = ", ".join(subjects) if subjects else "none"
        raise where.error(f"needs exactly one of {', '.join(SUBJECTS)} (found {found})")
    if subjects[0] == "fuses":
        return replace(_parse_fuses(entry, index, raw_name, trace, where), **_parse_action(entry, where))
    subject = _parse_subject(entry, subjects[0], where, "")
    op = _parse_op(entry, where)
    value, than = _parse_expected(entry, op, subject, where)
    tolerance = _parse_tolerance(entry.get("tolerance"), op, where)
    return Hypothesis(
        index=index,
        name=raw_name,
        trace=trace,
        subject=subject,
        fuses=(),
        op=op,
        value=value,
        than=than,
        tolerance=tolerance,
        note=_optional_str(entry, "note", where) or "",
        source=where.source,
        **_parse_action(entry, where),
    )


def _parse_action(entry: dict[str, Any], where: _EntryError) -> dict[str, Any]:
    """`action = "compile"` with `before = { compiled_regions = N, graph_replays = M }`: both or neither."""
    if "action" not in entry and "before" not in entry:
        for key in ("launches_per_step", "before_value"):
            if key in entry:
                raise where.error(f"{key} goes with action and before (the program the prediction starts from)")
        return {}
    if "action" not in entry or "before" not in entry:
        raise where.error(
            "action and before go together: the action predicted and the program it was predicted from, e.g. "
            'action = "compile", before = { compiled_regions = 0, graph_replays = 0 }'
        )
    action = entry["action"]
    if not isinstance(action, str) or action not in ACTIONS:
        raise where.error(
            f"unknown action {_shown(action)}{_suggest(str(action), ACTIONS)}; use one of {', '.join(ACTIONS)}"
        )
    parsed: dict[str, Any] = {"action": action, "before": _parse_before(entry["before"], where)}
    if "launches_per_step" in entry:
        value = entry["launches_per_step"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise where.error(f"launches_per_step must be a number ≥ 0, not {_shown(value)}")
        parsed["launches_per_step"] = float(value)
    if "before_value" in entry:
        value = entry["before_value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise where.error(f"before_value must be a number, not {_shown(value)}")
        parsed["before_value"] = float(value)
    return parsed


def _parse_before(raw: Any, where: _EntryError) -> ProgramShape:
    keys = field_names(ProgramShape)
    if not isinstance(raw, dict):
        raise where.error("before must be a table, e.g. before = { compiled_regions = 0, graph_replays = 0 }")
    _check_keys(raw, keys, where, "before: ")
    counts: dict[str, Any] = {}
    for key in ("compiled_regions", "graph_replays"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            shown = "nothing" if key not in raw else _shown(value)
            raise where.error(f"before: {key} must be a whole number ≥ 0, not {shown}")
        counts[key] = value
    if "launches_per_step" in raw:  # optional (files written before it was)
        value = raw["launches_per_step"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
            raise where.error(f"before: launches_per_step must be a number ≥ 0, not {_shown(value)}")
        counts["launches_per_step"] = float(value)
    if "device" in raw:
        if not isinstance(raw["device"], str):
            raise where.error(f"before: device must be a string (the GPU's name), not {_shown(raw['device'])}")
        counts["device"] = raw["device"]
    optional = ("gemm_gflop_per_step", "gemm_us_per_step", "inductor_calls_per_step", "kernels_per_step")
    for key in optional:  # finite ≥ 0 where given (files written before a field have none)
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise where.error(f"before: {key} must be a number ≥ 0, not {_shown(value)}")
            counts[key] = float(value)
    if "gemm_kernels" in raw:
        value = raw["gemm_kernels"]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise where.error(f"before: gemm_kernels must be a list of kernel names, not {_shown(value)}")
        counts["gemm_kernels"] = tuple(value)
    if "gemm_gflop_per_call" in raw:
        value = raw["gemm_gflop_per_call"]
        numbers = isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf") for v in value
        )
        if not numbers or not value:
            raise where.error(f"before: gemm_gflop_per_call must be a list of numbers ≥ 0, not {_shown(value)}")
        counts["gemm_gflop_per_call"] = tuple(float(v) for v in value)
    return ProgramShape(**counts)


def _parse_fuses(entry: dict[str, Any], index: int, name: str, trace: str | None, where: _EntryError) -> Hypothesis:
    extra = [key for key in ("measure", "op", "value", "than", "tolerance") if key in entry]
    if extra:
        raise where.error(f"{_shown(extra[0])} does not apply to fuses (it states that one kernel covers the ops)")
    ops = entry["fuses"]
    if not isinstance(ops, list) or len(ops) < 2 or not all(isinstance(o, str) and o.strip() for o in ops):
        raise where.error('fuses needs a list of at least two op names, e.g. fuses = ["gelu", "mul"]')
    return Hypothesis(
        index=index,
        name=name,
        trace=trace,
        subject=None,
        fuses=tuple(_fuses_op(o.strip(), where) for o in ops),
        op=None,
        value=None,
        than=None,
        tolerance=None,
        note=_optional_str(entry, "note", where) or "",
        source=where.source,
    )


def _fuses_op(op: str, where: _EntryError) -> str:
    if op.startswith("re:"):
        _check_regex(op, where, "fuses")
        return op
    return op.lower()


def _check_regex(pattern: str, where: _EntryError, what: str) -> None:
    try:
        reason = unsafe_reason(pattern[3:])
    except (re.error, RecursionError, OverflowError) as exc:
        raise where.error(f"{what}: bad regular expression {pattern!r}: {exc}") from None
    if reason:
        raise where.error(f"{what}: regular expression {pattern!r} refused: {reason}; see docs/check.md")


def _parse_subject(table: dict[str, Any], kind: str, where: _EntryError, prefix: str) -> Subject:
    target = table[kind]
    if not isinstance(target, str) or not target.strip():
        raise where.error(f"{prefix}{kind} must be a non-empty string")
    if len(target) > MAX_TARGET_CHARS:
        raise where.error(f"{prefix}{kind} is {len(target):,} characters long; at most {MAX_TARGET_CHARS:,}")
    measure = table.get("measure")
    if kind == "metric":
        if measure is not None:
            raise where.error(f"{prefix}measure applies to kernel, cpu_op and api_call, not to metric")
        return Subject(kind, target.strip())
    if target.strip().startswith("re:"):
        _check_regex(target.strip(), where, f"{prefix}{kind}")
    if measure is None:
        measure = "calls_per_step"
    if measure not in MEASURES:
        raise where.error(f"{prefix}unknown measure {_shown(measure)}{_suggest(str(measure), MEASURES)}")
    return Subject(kind, target.strip(), str(measure))


def _parse_op(entry: dict[str, Any], where: _EntryError) -> str | None:
    if "op" not in entry:
        return None
    op = entry["op"]
    if not isinstance(op, str) or op not in OPS:
        raise where.error(f'unknown op "{op}"; use one of {" ".join(OPS)}')
    return op


def _parse_expected(
    entry: dict[str, Any], op: str | None, subject: Subject, where: _EntryError
) -> tuple[Scalar | None, Reference | None]:
    has_value, has_than = "value" in entry, "than" in entry
    if op is None:
        if subject.kind == "metric":
            raise where.error("needs an op (one of " + " ".join(OPS) + ")")
        if has_value or has_than:
            raise where.error("value/than need an op")
        return None, None
    if has_value == has_than:
        raise where.error(f'op "{op}" needs exactly one of value = ... or than = {{...}}')
    if has_than:
        if op in MEMBERSHIP_OPS:
            raise where.error(f'op "{op}" compares with a value, not with than')
        return None, _parse_than(entry["than"], subject, where)
    value = entry["value"]
    if isinstance(value, float) and not math.isfinite(value):
        raise where.error("value must be finite")
    if isinstance(value, int) and not isinstance(value, bool) and not _fits_float(value):
        raise where.error(f"value is too large ({len(str(abs(value)))} digits); compare with a smaller number")
    if not isinstance(value, int | float | str | bool):
        raise where.error(f"value must be a number, string or boolean, not {type(value).__name__}")
    if op in ORDERING_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise where.error(f'op "{op}" needs a number as value, not {_shown(value)}')
    if op in MEMBERSHIP_OPS and not isinstance(value, str | int | float):
        raise where.error(f'op "{op}" needs a string or number as value')
    return value, None


def _parse_than(raw: Any, subject: Subject, where: _EntryError) -> Reference:
    if not isinstance(raw, dict):
        raise where.error('than must be a table, e.g. than = { trace = "eager_mlp" }')
    _check_keys(raw, THAN_KEYS, where, "than: ")
    kinds = [key for key in ("metric", *PATTERN_SUBJECTS) if key in raw]
    if len(kinds) > 1:
        raise where.error(f"than: at most one of metric, kernel, cpu_op, api_call (found {', '.join(kinds)})")
    if kinds:
        inherited = {"measure": subject.measure} if kinds[0] != "metric" and subject.kind != "metric" else {}
        other = _parse_subject({**inherited, **raw}, kinds[0], where, "than: ")
    elif "measure" in raw:
        other = _parse_subject({subject.kind: subject.target, "measure": raw["measure"]}, subject.kind, where, "than: ")
    else:
        other = subject
    trace = _optional_str(raw, "trace", where, "than: ")
    factor = raw.get("factor", 1.0)
    if (
        isinstance(factor, bool)
        or not isinstance(factor, int | float)
        or not _fits_float(factor)
        or not math.isfinite(factor)
        or factor <= 0
    ):
        raise where.error(f"than: factor must be a positive number, not {_shown(factor)}")
    if trace is None and other == subject and factor == 1.0:
        raise where.error("than compares with itself; name another trace, metric or a factor")
    return Reference(trace, other, float(factor))


def _parse_tolerance(raw: Any, op: str | None, where: _EntryError) -> Tolerance | None:
    if raw is None:
        return None
    if op not in ("==", "!="):
        raise where.error('tolerance applies to "==" and "!=" only')
    if isinstance(raw, str) and raw.strip().endswith("%"):
        relative = _non_negative(raw.strip()[:-1], where, "tolerance")
        return Tolerance(relative=relative / 100.0)
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return Tolerance(absolute=_non_negative(raw, where, "tolerance"))
    if isinstance(raw, dict) and ("below" in raw or "above" in raw):
        _check_keys(raw, ("below", "above"), where, "tolerance: ")
        if "below" not in raw or "above" not in raw:
            raise where.error("tolerance: give both below and above")
        return Tolerance(
            below=_non_negative(raw["below"], where, "tolerance.below"),
            above=_non_negative(raw["above"], where, "tolerance.above"),
        )
    if isinstance(raw, dict):
        _check_keys(raw, ("rel", "abs"), where, "tolerance: ")
        if not raw:
            raise where.error("tolerance: give rel and/or abs")
        return Tolerance(
            absolute=_non_negative(raw.get("abs", 0.0), where, "tolerance.abs"),
            relative=_non_negative(raw.get("rel", 0.0), where, "tolerance.rel"),
        )
    raise where.error(
        f'tolerance must be a number (absolute), "5%" (relative), {{ rel = ..., abs = ... }} or '
        f"{{ below = ..., above = ... }}, not {_shown(raw)}"
    )


def _non_negative(raw: Any, where: _EntryError, what: str) -> float:
    try:
        if isinstance(raw, bool):
            raise ValueError
        number = float(raw)
    except (TypeError, ValueError, OverflowError):
        raise where.error(f"{what} must be a number, not {_shown(raw)}") from None
    if not math.isfinite(number) or number < 0:
        raise where.error(f"{what} must be a finite number ≥ 0, not {_shown(raw)}")
    return number


def _shown(value: object, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters, for error lines."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fits_float(number: int | float) -> bool:
    """Whether `number` converts to a float (an int of 309 digits or more does not)."""
    try:
        float(number)
    except OverflowError:
        return False
    return True


def _optional_str(table: dict[str, Any], key: str, where: _EntryError, prefix: str = "") -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"{prefix}{key} must be a non-empty string")
    return value.strip()


def _check_keys(table: dict[str, Any], allowed: tuple[str, ...], where: _EntryError, prefix: str) -> None:
    for key in table:
        if key not in allowed:
            raise where.error(f"{prefix}unknown key {_shown(key)}{_suggest(key, allowed)}")


def _suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.7)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
