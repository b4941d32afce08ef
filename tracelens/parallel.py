"""Running per-rank work: find the rank traces of a directory or tar archive, and compute each rank's figures
in forked worker processes (`loader.forked.run_forked`: default signal handlers, killed with the parent, a
stall timeout) or on a Dask cluster; the reduction happens in the caller.

Dask (optional extra `tracelens-kineto[dask]`): `scheduler="local"` starts a LocalCluster of `workers`
processes; `scheduler="tcp://host:port"` uses a running cluster, whose workers must be able to read the trace
paths (a shared filesystem).
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelens.analyses.ranks import RankFigures, rank_figures
from tracelens.errors import TracelensError, warn
from tracelens.loader.forked import STALL_S, ChildDied, ChildStalled, run_forked
from tracelens.loader.source import is_trace_name
from tracelens.settings import env_seconds

if TYPE_CHECKING:
    from tracelens._cache import Cache


def is_archive(path: Path) -> bool:
    """Whether `path` is a tar archive of traces (plain or compressed); a file that cannot be read as one (a
    truncated gzip, say) is not, and is left to the loader, which says what is wrong with it."""
    if not path.is_file() or is_trace_name(path.name):
        return False
    try:
        return tarfile.is_tarfile(path)
    except (EOFError, OSError, tarfile.TarError):
        return False


MAX_RANKS = 2048  # traces of one run folder or archive analysed; beyond this the first MAX_RANKS, with a warning


def _capped(source: Path, items: list[Any]) -> list[Any]:
    """The first `MAX_RANKS` of `items` (the traces of `source`), with a warning when there were more."""
    if len(items) <= MAX_RANKS:
        return items
    warn(f"{source}: {len(items):,} trace files; analysing the first {MAX_RANKS:,} only")
    return items[:MAX_RANKS]


def rank_files(source: Path, scratch: Path) -> list[Path]:
    """Trace files of a directory (recursively) or a tar archive (extracted into `scratch`), sorted; at most
    `MAX_RANKS` of them (the first, with a warning)."""
    if source.is_dir():
        files = _capped(source, sorted(p for p in source.rglob("*") if p.is_file() and is_trace_name(p.name)))
    elif is_archive(source):
        files = _extract(source, scratch)
    else:
        raise TracelensError(f"{source}: neither a trace, a directory nor a tar archive", exit_code=2)
    if not files:
        raise TracelensError(f"{source}: no .json or .json.gz traces in it", exit_code=2)
    return files


def _extract(archive: Path, scratch: Path) -> list[Path]:
    return sorted(path for path, _ in extract_members(archive, scratch))


def extract_members(archive: Path, scratch: Path) -> list[tuple[Path, str]]:
    """Extract the trace files of a tar archive into `scratch` (one numbered folder each, so members with the
    same file name in different folders stay apart): (extracted file, member name in the archive), in
    archive order; at most `MAX_RANKS` of them (the first, with a warning)."""
    extracted: list[tuple[Path, str]] = []
    try:
        with tarfile.open(archive) as tar:
            members = _capped(archive, [m for m in tar.getmembers() if m.isfile() and is_trace_name(m.name)])
            for index, member in enumerate(members):
                source = tar.extractfile(member)
                if source is None:
                    continue
                target = scratch / f"{index:05d}" / Path(member.name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                with source, target.open("wb") as out:
                    while block := source.read(8 << 20):
                        out.write(block)
                extracted.append((target, member.name))
    except (tarfile.TarError, OSError) as exc:
        raise TracelensError(f"{archive}: cannot read the archive ({exc})", exit_code=2) from exc
    return extracted


def figures_for(path: str, cache: Cache | None = None) -> RankFigures | str:
    """One rank's figures, or "path: error" when the trace is unusable (never raises for bad input).
    `cache`: where traces are cached (None: not at all)."""
    from tracelens._cache import Cache

    cache = cache if cache is not None else Cache(Path(), enabled=False)
    try:
        trace = cache.load_trace(Path(path), workers=1)
        return rank_figures(trace)
    except TracelensError as exc:
        return f"{Path(path).name}: {exc}"


def default_workers(n_jobs: int) -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, n_jobs))


def run_ranks(
    paths: list[Path],
    workers: int | None = None,
    scheduler: str | None = None,
    cache: Cache | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> tuple[list[RankFigures], list[str]]:
    """Figures of every path (in path order) and the errors of unusable ones. `cache`: where traces are
    cached (None: not at all); workers write their entries themselves."""
    names = [str(p) for p in paths]
    n_workers = workers or default_workers(len(names))
    if scheduler:
        results = _run_dask(names, n_workers, scheduler, cache)
    elif n_workers == 1 or len(names) == 1:
        results = []
        for done, name in enumerate(names, 1):
            results.append(figures_for(name, cache))
            if on_done:
                on_done(done, len(names))
    else:
        results = _run_forked(paths, n_workers, cache, on_done)
    figures = [r for r in results if isinstance(r, RankFigures)]
    failed = [r for r in results if isinstance(r, str)]
    return figures, failed


def _run_forked(
    paths: list[Path], workers: int, cache: Cache | None, on_done: Callable[[int, int], None] | None
) -> list[RankFigures | str]:
    """`figures_for` of every path by `workers` forked children; a child that dies or stalls ends the command
    with one error line instead of a hang. A rank may take `STALL_S` plus a second per MB of its file."""
    done = [0]

    def arrived(_: int) -> None:
        done[0] += 1
        if on_done:
            on_done(done[0], len(paths))

    largest = max((_size(path) for path in paths), default=0)
    stall_s = STALL_S + largest / 1e6
    jobs = [(str(path), cache) for path in paths]
    try:
        return run_forked(jobs, workers, _figures_job, arrived, stall_s=stall_s)
    except ChildStalled as exc:
        raise TracelensError(f"per-rank workers stopped making progress ({exc}); try --workers 1") from exc
    except ChildDied as exc:
        raise TracelensError(f"a per-rank worker died ({exc}); out of memory? try --workers 1") from exc


def _figures_job(job: tuple[str, Cache | None]) -> RankFigures | str:
    return figures_for(*job)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _run_dask(names: list[str], workers: int, scheduler: str, cache: Cache | None) -> list[Any]:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise TracelensError(
            "--scheduler needs dask.distributed: pip install 'tracelens-kineto[dask]'", exit_code=2
        ) from exc
    if scheduler == "local":
        with (
            LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,  # type: ignore[no-untyped-call]
        ):
            return _gather(client, names, cache)
    try:
        client = Client(scheduler, timeout=f"{_connect_timeout_s()}s")  # type: ignore[no-untyped-call]
    except OSError as exc:
        raise TracelensError(f"cannot reach the Dask scheduler at {scheduler} ({exc})", exit_code=2) from exc
    with client:
        return _gather(client, names, cache)


def _connect_timeout_s() -> float:
    return env_seconds("TRACELENS_DASK_TIMEOUT_S", 20.0, 1.0, 3600.0)


def _gather(client: Any, names: list[str], cache: Cache | None) -> list[Any]:
    futures = client.map(figures_for, names, cache=cache, pure=False)
    return list(client.gather(futures))
