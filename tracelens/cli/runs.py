"""Run folders and tar archives of rank traces, for every command.

Contract:
- `is_run_source(path)`: a directory, or a tar archive that is not itself a trace.
- `open_run(source, cache, workers, scheduler)`: a context manager giving a `Run`: the traces found (extracted
  into a scratch folder that lives as long as the context), each rank's figures (`tracelens.parallel`) and
  the cross-rank report (`analyses.ranks.analyze_ranks`), whose `one_run` says whether the traces are ranks
  of one job (see `analyses/ranks.py`).
- Labels: `rank0`, `rank1`, ... for the ranks of one run; otherwise the file stems (`naming.unique_labels`),
  so traces that are not one job are never labelled as ranks.
- `Run.pick(rank)`: the trace of one rank (`--rank N`), one error line when there is none.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tracelens.atomic import scratch_prefix, sweep_stale_folders
from tracelens.errors import TracelensError, warn
from tracelens.loader.source import is_trace_name
from tracelens.naming import trace_stem, unique_labels
from tracelens.records import replace

if TYPE_CHECKING:
    from tracelens._cache import Cache
    from tracelens.analyses.ranks import RanksResults

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


class RunMember(msgspec.Struct, frozen=True):
    """One trace of a run folder or archive."""

    label: str  # "rank3" for a rank of one run, else the file stem (told apart)
    name: str  # its path inside the folder, or its member file name in the archive
    path: Path  # the file to load (in the scratch folder for an archive)
    rank: int | None


class Run(msgspec.Struct, frozen=True):
    """The traces of a folder or archive and their cross-rank report."""

    source: Path
    members: tuple[RunMember, ...]  # usable traces: by rank for one run, else by name
    report: RanksResults

    @property
    def one_run(self) -> bool:
        return self.report.one_run

    def pick(self, rank: int) -> RunMember:
        """The trace of `rank`; refused when the traces are not ranks of one run or the rank is absent."""
        self.require_one_run("--rank")
        for member in self.members:
            if member.rank == rank:
                return member
        ranks = ", ".join(str(m.rank) for m in self.members)
        raise TracelensError(f"{self.source}: no rank {rank} in it (ranks: {ranks})")

    def require_one_run(self, what: str) -> None:
        if not self.one_run and len(self.members) > 1:
            raise TracelensError(
                f"{self.source}: its {len(self.members)} traces are not ranks of one run "
                f"({self.report.separate_reason}); {what} needs the ranks of one job: pass the trace files instead"
            )

    def focus(self) -> tuple[RunMember, str]:
        """The rank a report shows in full, and why: the straggler (the rank the others wait for; the one
        that waits least when there are several), else the rank with the slowest step time."""
        if len(self.members) == 1:
            return self.members[0], "the only trace"
        self.require_one_run("a report")
        rows = {row.rank: row for row in self.report.rows}
        if self.report.stragglers:
            rank = min(self.report.stragglers, key=lambda r: (rows[r].waiting_us, r))
            why = "the straggler: the rank the others wait for at collectives (least waiting)"
        elif self.report.slowest_rank is not None:
            rank, why = self.report.slowest_rank, "the slowest rank by median step time (no straggler found)"
        else:
            rank, why = self.members[0].rank or 0, "the first rank (no step times to compare)"
        return self.pick(rank), why


class Input(msgspec.Struct, frozen=True):
    """One trace a multi-trace command works on: a trace file given as such, or a trace of a run."""

    path: Path
    label: str | None  # the run's label ("rank3"); None: the command's own (variant or file stem)
    shown: str  # the path to show: the file, or `RUN/member` for a trace of a folder or archive


def expand_inputs(stack: ExitStack, paths: list[Path], rank: int | None, cache: Cache) -> list[Input]:
    """`paths` with every run folder or archive replaced by its traces (only rank `rank` of it when given),
    opened in `stack` (its scratch folder lives as long as the stack). Traces of a folder that are not ranks of
    one run keep their file stems as labels; `--rank` needs a run and is refused without one."""
    inputs: list[Input] = []
    runs = 0
    for path in paths:
        if not is_run_source(path):
            inputs.append(Input(path, None, str(path)))
            continue
        runs += 1
        run = stack.enter_context(open_run(path, cache))
        members = [run.pick(rank)] if rank is not None else list(run.members)
        if not run.one_run and len(members) > 1:
            warn(
                f"{path}: not ranks of one run ({run.report.separate_reason}); its traces are taken as separate traces"
            )
        inputs += [Input(m.path, m.label if run.one_run else None, f"{path}/{m.name}") for m in members]
    if rank is not None and not runs:
        raise TracelensError("--rank picks a rank of a run folder or tar archive, not of trace files")
    return inputs


def add_rank_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--rank", type=int, metavar="N", help=help_text)


def is_run_source(path: Path) -> bool:
    """A directory or a tar archive of traces (a trace file itself is never one)."""
    if path.is_dir():
        return True
    if is_trace_name(path.name):
        return False
    from tracelens.parallel import is_archive

    return is_archive(path)


def run_stem(source: Path) -> str:
    """`runs/dlrm_kineto.tar.gz` → `dlrm_kineto`; a folder → its name."""
    name = source.resolve().name if source.is_dir() else source.name
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return trace_stem(name)


@contextmanager
def open_run(
    source: Path, cache: Cache | None, workers: int | None = None, scheduler: str | None = None
) -> Iterator[Run]:
    """The traces of `source` with their figures (see the module docstring); the scratch folder of an
    archive's extracted traces is removed when the context ends."""
    from tracelens.analyses.ranks import analyze_ranks
    from tracelens.parallel import run_ranks

    if workers is not None and workers < 1:
        raise TracelensError("--workers must be at least 1")
    sweep_stale_folders(Path(tempfile.gettempdir()), "ranks")  # of runs killed before they could clean up
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("ranks")) as scratch:
        paths, names = _files(source, Path(scratch))
        print(f"tracelens: reading {len(paths)} file(s) of {source}", file=sys.stderr)
        figures, failed = run_ranks(paths, workers, scheduler, cache)
        if not figures:
            raise TracelensError(f"{source}: none of its {len(paths)} traces is usable: {'; '.join(failed)}")
        located = {names[f.path]: Path(f.path) for f in figures}
        figures = [replace(f, path=names.get(f.path, f.path)) for f in figures]
        results = analyze_ranks(figures, str(source), failed)
        yield Run(source, _members(results, located), results)


def _members(results: RanksResults, located: dict[str, Path]) -> tuple[RunMember, ...]:
    rows = [row for row in results.rows if row.path in located]
    if results.one_run:
        labels = [f"rank{row.rank}" for row in rows]
    else:
        rows.sort(key=lambda row: row.path)
        labels = unique_labels([trace_stem(row.path) for row in rows])
    return tuple(
        RunMember(label, row.path, located[row.path], row.rank) for label, row in zip(labels, rows, strict=True)
    )


def _files(source: Path, scratch: Path) -> tuple[list[Path], dict[str, str]]:
    """The trace files of `source` (extracted into `scratch` for an archive), sorted, and the name each is shown
    by: its path in the folder; for an archive its member's file name, or its member path where file names
    repeat (`rank0/trace.json`, `rank1/trace.json`)."""
    from tracelens.parallel import extract_members, is_archive, rank_files

    if not is_archive(source):
        paths = rank_files(source, scratch)
        return paths, {str(p): str(p.relative_to(source)) for p in paths}
    extracted = extract_members(source, scratch)
    if not extracted:
        raise TracelensError(f"{source}: no .json or .json.gz traces in it", exit_code=2)
    base = [Path(member).name for _, member in extracted]
    repeated = len(set(base)) < len(base)
    names = {str(path): member if repeated else Path(member).name for path, member in extracted}
    return sorted(path for path, _ in extracted), names
