"""Regenerate the golden analyze results under tests/golden/ for every corpus and recorded trace.

    PYTHONPATH=. python scripts/regen_golden.py            # all traces
    PYTHONPATH=. python scripts/regen_golden.py control    # only paths containing "control"
    PYTHONPATH=. python scripts/regen_golden.py --diff     # what would change against HEAD; writes nothing

Each golden file is `<trace name>.json.gz`: the indented JSON text, gzip-compressed with fixed settings (level 9,
mtime 0, no file name), so the same text gives the same bytes on one zlib. A file whose text is unchanged is not
rewritten, so another zlib (whose bytes may differ) never touches an unchanged file either. For every file that
changed the script prints what changed (dotted paths, old → new, the first few of each file), which is what to
review before committing: every changed number must be explained by the change. `git diff tests/golden` shows
the text too once `git config diff.gzip.textconv "gzip -dc"` is set (.gitattributes names the files).
A `<trace name>.json` left from before the files were compressed is replaced by its `.json.gz` and removed.
tests/test_golden.py compares against these files.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden"
TRACES = REPO / "traces"
SUFFIX = ".json.gz"
LEGACY_SUFFIX = ".json"  # the uncompressed files of before, removed as they are converted
LEVEL = 9
SHOWN = 8  # changed values printed per file
sys.path.insert(0, str(REPO))  # tests/anchors.py: where the corpus traces are
from tests import anchors  # noqa: E402

ANCHORS = anchors.primary()


def corpus() -> dict[str, Path]:
    """Golden name (relative path under tests/golden, without .json.gz) → trace file, sorted by name."""
    found: dict[str, Path] = {}
    for relative, path in anchors.traces().items():
        found[f"anchor_traces/{relative}"] = path
    if TRACES.exists():
        for path in TRACES.rglob("*.json*"):
            if _is_trace(path) and not anchors.REPLICA.search(path.as_posix()):  # one golden per alternated program
                found[f"traces/{path.relative_to(TRACES).as_posix()}"] = path
    return dict(sorted(found.items()))


def _is_trace(path: Path) -> bool:
    return anchors.is_trace(path)


def golden_document(path: Path) -> dict[str, Any]:
    """The analyze JSON of `path`, every section (summary, dispatch, bound, fusion, roofline, compiled), without
    the absolute path."""
    from tracelens.analyses import analyze
    from tracelens.loader import load_trace
    from tracelens.renderers.jsonout import analyze_dict

    document = analyze_dict(analyze(load_trace(path)))
    frozen = dict(document)
    frozen["trace"] = {key: value for key, value in frozen["trace"].items() if key != "path"}
    return frozen


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}{SUFFIX}"


def legacy_path(name: str) -> Path:
    return GOLDEN / f"{name}{LEGACY_SUFFIX}"


def encode(text: str) -> bytes:
    """The bytes of a golden file: `text` as UTF-8, gzip level 9, mtime 0 and no file name in the header (the
    header GzipFile writes is the same on every Python version; gzip.compress's is not since 3.11)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=LEVEL, fileobj=buffer, mtime=0) as stream:
        stream.write(text.encode("utf-8"))
    return buffer.getvalue()


def decode(data: bytes) -> str:
    return gzip.decompress(data).decode("utf-8")


def read_golden(name: str) -> str | None:
    """The stored text of golden `name` (its .json.gz, else a .json left from before), None if neither exists."""
    path = golden_path(name)
    if path.exists():
        return decode(path.read_bytes())
    legacy = legacy_path(name)
    return legacy.read_text(encoding="utf-8") if legacy.exists() else None


def committed_golden(name: str, revision: str = "HEAD") -> str | None:
    """The text of golden `name` at `revision` (its .json.gz, else its .json), None if it has neither."""
    for path, gzipped in ((golden_path(name), True), (legacy_path(name), False)):
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{revision}:{path.relative_to(REPO).as_posix()}"],
            capture_output=True,
            check=False,
        )
        if shown.returncode == 0:
            return decode(shown.stdout) if gzipped else shown.stdout.decode("utf-8")
    return None


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return text if len(text) <= 60 else text[:59] + "…"


def differences(old: Any, new: Any, where: str = "") -> Iterator[str]:
    """Every place where `new` differs from `old`, in document order: `path: old → new` for a changed value
    (1 → 1.0 and 0 → false count), `path: added …` / `path: removed (was …)` for a key in one only, `path: list
    of N → M` for a list of another length (then its common items, compared in order)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key, value in old.items():
            if key in new:
                yield from differences(value, new[key], f"{where}.{key}")
            else:
                yield f"{where}.{key}: removed (was {_shown(value)})"
        for key, value in new.items():
            if key not in old:
                yield f"{where}.{key}: added {_shown(value)}"
        return
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield f"{where}: list of {len(old)} → {len(new)}"
        for index, (was, now) in enumerate(zip(old, new, strict=False)):
            yield from differences(was, now, f"{where}[{index}]")
        return
    if old != new or type(old) is not type(new):
        yield f"{where}: {_shown(old)} → {_shown(new)}"


def summary(old_text: str, new_text: str, shown: int = SHOWN) -> list[str]:
    """The lines that say what changed from `old_text` to `new_text` (two golden JSON texts that differ): the
    first `shown` differences, then how many in all and in which top-level sections."""
    found = list(differences(json.loads(old_text), json.loads(new_text)))
    if not found:
        return ["same values, other text (formatting or key order)"]
    lines = found[:shown]
    if len(found) > shown:
        sections = Counter(line[1:].split(":", 1)[0].split(".", 1)[0].split("[", 1)[0] for line in found)
        counted = ", ".join(f"{section} {count}" for section, count in sections.most_common())
        lines.append(f"… {len(found)} differences in all ({counted})")
    return lines


def _report(label: str, name: str, old: str | None, text: str) -> None:
    print(f"{label:9}  {golden_path(name).relative_to(REPO)}")
    if old is not None and old != text:
        for line in summary(old, text):
            print(f"             {line}")


def _convert_leftovers(done: set[str]) -> None:
    """Compress, text unchanged, every .json golden not regenerated (its trace absent here), and remove it."""
    for legacy in sorted(GOLDEN.rglob(f"*{LEGACY_SUFFIX}")):
        name = legacy.relative_to(GOLDEN).as_posix()[: -len(LEGACY_SUFFIX)]
        if name in done:
            continue
        target = golden_path(name)
        if target.exists():  # converted before: the .json is a stale copy
            print(f"removed    {legacy.relative_to(REPO)} (stale: {target.name} exists)")
        else:
            target.write_bytes(encode(legacy.read_text(encoding="utf-8")))
            print(f"converted  {target.relative_to(REPO)} (trace not found here: its text kept as it was)")
        legacy.unlink()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="only the traces whose golden name contains one of these")
    parser.add_argument("--diff", action="store_true", help="compare with the committed files; write nothing")
    parser.add_argument("--against", default="HEAD", metavar="REV", help="the revision --diff compares with")
    args = parser.parse_args(argv)
    selected = {name: path for name, path in corpus().items() if not args.names or any(a in name for a in args.names)}
    if not selected:
        print(f"no trace matched (anchors in {anchors.roots()}, recorded traces at {TRACES})", file=sys.stderr)
        return 2
    changed = 0
    for name, path in selected.items():
        text = dumps(golden_document(path))
        if args.diff:
            old = committed_golden(name, args.against)
            label = "unchanged" if old == text else "new" if old is None else "CHANGED"
        else:
            old = read_golden(name)
            target = golden_path(name)
            legacy = legacy_path(name)
            label = "unchanged" if old == text else "new" if old is None else "CHANGED"
            if old != text or not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(encode(text))
                if old == text:
                    label = "converted"  # from a .json, same text
            if legacy.exists():
                legacy.unlink()
        changed += label in ("CHANGED", "new")
        _report(label, name, old, text)
    if not args.diff and not args.names:
        _convert_leftovers(set(selected))
    how = f"differ from {args.against}" if args.diff else "new or changed"
    print(f"{changed} of {len(selected)} golden files {how}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
