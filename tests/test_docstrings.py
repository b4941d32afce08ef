"""Docstrings and comments in tracelens/ state contracts, not measurements: a measured time ("~0.7 ms",
"37 + 37 ms", "15-25 ms of start-up"), a measured speed-up ("~10× faster") or a size a figure was measured on
("on 72 MB") goes stale with the next change of the code or the machine, so it belongs in docs/benchmarks.md
(tables, with the run that measured it). A number with a unit that defines something (a threshold, a default, a
tolerance) is a contract and stays; the few sentences the patterns below would mistake for a measurement are
listed in `ALLOWED`, each with why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tracelens"

_NUMBER = r"(?<![\w.*])\d[\d,]*(?:\.\d+)?"
_TIME = rf"{_NUMBER}(?:\s?(?:[-–+→]|to)\s?{_NUMBER})?\s?(?:ns|µs|us|ms|s|sec|seconds|min)\b"
_SIZE = rf"{_NUMBER}\s?(?:kB|KB|MB|GB|KiB|MiB|GiB)\b"
# what makes a figure a measurement: a tilde, or a word of measuring in the same sentence
_MEASURING = re.compile(
    r"~|\bmeasured\b|\bcosts?\b|\btook\b|\btakes?\b|\bspent\b|\bstart-?up\b|\bfaster\b|\bslower\b|\bsaves?\b"
    r"|\binstead of\b|→|\bof CPU\b|\bwall\b|\bper (?:range|chunk|run|call)\b",
    re.IGNORECASE,
)
PATTERNS = {  # the first three count only in a sentence with a word of measuring
    "a measured time": re.compile(_TIME),
    "a measured size": re.compile(_SIZE),
    "a measured share": re.compile(r"(?<![\w.*])\d+(?:\.\d+)?\s?%"),
    "a measured error": re.compile(r"(?<![\w.])[+−]\d+(?:\.\d+)?\s?%"),
    "an approximate figure": re.compile(rf"~\s?{_NUMBER}"),
    "a measured speed-up": re.compile(rf"(?:~\s?{_NUMBER}|{_NUMBER}(?:\.\d+)?)\s?[×x]\s(?:faster|slower|cheaper)"),
    "a size a figure was measured on": re.compile(rf"\b(?:on|of|per) (?:a |one |the )?{_SIZE}"),
}
_IN_CONTEXT = ("a measured time", "a measured size", "a measured share")
# (file relative to tracelens/, what the pattern found, a text of the sentence): definitions, not measurements
ALLOWED = {
    # the what-if of the bound and the critical path is *defined* as "all CPU work 2× faster"
    ("analyses/bound.py", "a measured speed-up", "2× faster saves"),
    ("analyses/critical_path.py", "a measured speed-up", "2× faster"),
    # the size of a huge page and the allocation size from which numpy asks for them are constants, not figures
    ("loader/columns.py", "a measured size", "numpy asks the kernel for huge pages"),
    # the page script's constant for the width of a label's character (a font metric, defined there)
    ("renderers/html.py", "an approximate figure", "px per 10 px character"),
}


def _sentences(text: str) -> list[str]:
    """`text` cut into sentences (at a full stop or semicolon followed by a space)."""
    flat = re.sub(r"\s+", " ", text)
    return [part for part in re.split(r"(?<=[.;])\s", flat) if part.strip()]


_TRIPLE_QUOTED = re.compile(r"""(?<![\w"'])[rbuRBU]?("{3}|'{3})(.*?)\1""", re.S)


def prose(source: str) -> list[tuple[int, str]]:
    """Every docstring (and other triple-quoted text) and comment of a module's source, with its line; read by
    pattern, not `ast`/`tokenize` (which take seconds over the package)."""
    found = [(source.count("\n", 0, m.start()) + 1, m.group(2)) for m in _TRIPLE_QUOTED.finditer(source)]
    for number, line in enumerate(source.splitlines(), 1):
        at = line.find("#")
        while at >= 0:
            before = line[:at]
            if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:  # not inside a one-line string
                found.append((number, line[at:]))
                break
            at = line.find("#", at + 1)
    return found


def measurements(text: str) -> list[tuple[str, str]]:
    """(what, sentence) for each kind of measured figure each sentence of `text` holds."""
    out = []
    for sentence in _sentences(text):
        for what, pattern in PATTERNS.items():
            match = pattern.search(sentence)
            if match and (what not in _IN_CONTEXT or _MEASURING.search(sentence)):
                out.append((what, sentence))
    return out


def offences() -> tuple[list[str], set[tuple[str, str, str]]]:
    """The measured figures in tracelens/ (file:line: what: sentence) and the `ALLOWED` entries that matched."""
    found: list[str] = []
    used: set[tuple[str, str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for line, text in prose(path.read_text()):
            for what, sentence in measurements(text):
                allowed = {entry for entry in ALLOWED if entry[:2] == (relative, what) and entry[2] in sentence}
                used |= allowed
                if not allowed:
                    found.append(f"{relative}:{line}: {what}: {sentence}")
    return found, used


def test_no_docstring_or_comment_embeds_a_measurement() -> None:
    found, used = offences()
    assert found == [], "move the figure to docs/benchmarks.md and leave the contract:\n" + "\n".join(found)
    assert used == ALLOWED, f"allow-list entries that match nothing any more: {sorted(ALLOWED - used)}"


@pytest.mark.parametrize(
    "text",
    [
        "a frozen dataclass costs ~0.7 ms, and ~95 of them were imported",
        "(37 + 37 ms one at a time, instead of 44 + 40)",
        "the collections cost 15-25 ms of a 72 MB trace's half second",
        "What a recursive `asdict` gives, ~10× faster.",
        "checking a trace entry of 20 MB costs half the wall time",
        "merge 13 ms on 72 MB",
        "a fresh 4 MB buffer per range cost ~1,000 page faults",
        "small chunks stay in CPU caches (measured faster than 8 or 16 MB)",
        "small memsets beat DRAM bandwidth (measured: 127 % of an RTX 4090 D's 1 TB/s)",
        "compile over 11 pairs (sweep t64: +25.9 %, the rest within 13 %)",
        "a fresh page costs a page fault on first write (~1.5 µs each, measured)",
    ],
)
def test_the_check_finds_a_measurement(text: str) -> None:
    assert measurements(text), text


@pytest.mark.parametrize(
    "text",
    [
        "`KERNEL_WAIT_NS` (30 µs, HTA's default `consecutive_kernel_delay`)",
        "a child may overhang its parent's end by up to 1 µs",
        "widened by a tenth of its width on each side (at least 2 µs)",
        "exact below 2**53 ns",
        "Bytes in binary units, labelled (`1.50 GiB`, `3.2 MiB`, `12 B`)",
        "if X were k× faster, the step would shrink by Y µs",
        "gpu when busy >= 85 % of the window",
    ],
)
def test_the_check_leaves_definitions_alone(text: str) -> None:
    assert measurements(text) == [], text
