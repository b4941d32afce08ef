"""Run independent jobs in forked child processes; results come back through files in a private folder (in
tmpfs where there is one), not pipes.

Why not `multiprocessing.Pool`: its workers hand each result through a pipe (64 kB on Linux, a fraction of a
result) that a thread of this process must drain, and while this process works (it imports the analyses during a
load) that thread gets the interpreter only rarely, so the workers stall; a pool is also slow to start. Here each
process claims the next job nobody has claimed (`claims`: whoever creates its claim file first), so a process
that starts late (this one, which imports the analyses first) or is slowed down does fewer jobs; each child writes
each result to its own file and never waits for the parent, which picks the results up whenever it looks.
`start_forked` forks and returns at once (the caller works while the children do); `Forked.finish` gathers the
results.

A result file is a pickle (protocol 5) whose buffers (numpy arrays) lie out of band after it (`write_result`);
the parent maps each large one (`read_result`), so that the arrays it unpickles are views of the file's pages: no
copy, no fresh memory; the file is removed at once (an array's pages live as long as it does).
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from tracelens.settings import env_count

Job = TypeVar("Job")
Result = TypeVar("Result")

POLL_S = 0.05  # how often the parent looks for finished results while children run
STALL_S = 120.0  # no result and no child ending for this long: the children are killed (`ChildStalled`)


class ChildDied(RuntimeError):
    """A child process ended without a result and without an exception to hand back (killed by a signal)."""


class ChildStalled(ChildDied):
    """No child delivered a result or ended within `STALL_S` seconds (they are killed; the caller decides)."""


MAX_WORKERS_SETTING = 1 << 20  # TRACELENS_WORKERS above this is refused (then capped at the CPUs)


def auto_workers() -> int:
    """Worker processes (the loader's range decoders): $TRACELENS_WORKERS if set
    (an integer >= 1, at most the CPUs this process may run on), else up to 4 of those CPUs; 1 where forking is
    unsafe or unavailable. A malformed setting raises TracelensError (exit 2)."""
    setting = env_count("TRACELENS_WORKERS", 1, MAX_WORKERS_SETTING)
    cpus = _usable_cpus()
    if setting is not None:
        return min(setting, cpus)
    if not hasattr(os, "fork") or _in_pool_worker():
        return 1
    if threading.active_count() > 1:  # forking a threaded process can deadlock the child
        return 1
    return max(1, min(cpus, 4))


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _in_pool_worker() -> bool:
    """Whether this process is a multiprocessing worker (then it does not fork workers of its own); a process
    that never imported multiprocessing is not one."""
    process = sys.modules.get("multiprocessing.process")
    return process is not None and process.parent_process() is not None


class Forked(Generic[Job, Result]):
    """Jobs being computed by forked children (`start_forked`): `finish` gathers every result, `close` ends what
    is left. A job belongs to the process that claims it (`claims`; this process claims too, in `finish`, with
    `work_here`): a claim is made once, so no job can run twice."""

    def __init__(
        self, jobs: Sequence[Job], workers: int, work: Callable[[Job], Result], stall_s: float, work_here: bool
    ) -> None:
        self.jobs, self.work, self.stall_s = jobs, work, stall_s
        n_children = min(workers, len(jobs))
        self.processes = n_children + (1 if work_here else 0)
        self.folder = scratch_folder()
        self.children: dict[int, int] = {}  # pid -> child number
        self.results: dict[int, Result] = {}
        self.arrivals, signal_fd = os.pipe()  # a child writes a byte to `signal_fd` after each result it leaves
        try:
            for number in range(n_children):
                pid = os.fork()
                if pid == 0:  # pragma: no cover - runs in the child, which never returns
                    os.close(self.arrivals)
                    _child(number, jobs, work, self.folder, signal_fd)
                self.children[pid] = number
        except BaseException:
            os.close(signal_fd)
            self.close()
            raise
        os.close(signal_fd)

    def finish(self, on_result: Callable[[int], None] | None = None) -> list[Result]:
        """`[work(job) for job in jobs]`: the jobs this process claims computed here (with `work_here`, the garbage
        collector off, as in the children), then the children's results as they arrive; `on_result(index)` as each
        comes (in any order). A child's exception is raised here; ChildStalled after `stall_s` seconds without a
        result or a child ending; ChildDied when children ended short of a result. Every child is reaped and the
        scratch folder removed before this returns or raises."""
        try:
            if self.processes > len(self.children):
                with collector_off():
                    for index in claims(self.folder, len(self.jobs)):
                        self.results[index] = self.work(self.jobs[index])
                        if on_result is not None:
                            on_result(index)
            _wait(self.children, self.folder, self.results, on_result, self.stall_s, len(self.jobs), self.arrivals)
            _collect(self.folder, self.results, on_result)
            missing = [index for index in range(len(self.jobs)) if index not in self.results]
            if missing:  # the children ended (reaped where SIGCHLD is ignored: status unknown) short of a result
                raise ChildDied(f"worker processes ended without the result of job {missing[0]}")
            return [self.results[index] for index in range(len(self.jobs))]
        finally:
            self.close()

    def close(self) -> None:
        """Kill (SIGKILL) the children that have not delivered everything, reap every child, remove the folder;
        idempotent."""
        complete = len(self.results) == len(self.jobs)
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                if not complete:
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)  # a child that delivered everything is only exiting
            del self.children[pid]
        if self.arrivals >= 0:
            os.close(self.arrivals)
            self.arrivals = -1
        shutil.rmtree(self.folder, ignore_errors=True)


def start_forked(
    jobs: Sequence[Job],
    workers: int,
    work: Callable[[Job], Result],
    stall_s: float = STALL_S,
    work_here: bool = False,
) -> Forked[Job, Result]:
    """Fork `workers` children (at most one per job) that start claiming and computing the jobs of `[work(job) for
    job in jobs]` at once; with `work_here` this process claims the jobs left when `finish` is called. Children
    start with default SIGTERM/SIGINT handlers and die with this process."""
    return Forked(jobs, workers, work, stall_s, work_here)


def run_forked(
    jobs: Sequence[Job],
    workers: int,
    work: Callable[[Job], Result],
    on_result: Callable[[int], None] | None = None,
    stall_s: float = STALL_S,
    work_here: bool = False,
) -> list[Result]:
    """`start_forked(...).finish(on_result)`: `[work(job) for job in jobs]` by forked children (and this process,
    with `work_here`)."""
    return start_forked(jobs, workers, work, stall_s, work_here).finish(on_result)


def scratch_folder() -> str:
    """A new private folder in tmpfs (/dev/shm) where it is writable, else in the default temporary directory."""
    error: OSError | None = None
    for parent in scratch_parents():
        try:
            return new_scratch_folder(parent)
        except OSError as exc:
            error = exc
    raise error or OSError("no folder for scratch files")


def scratch_parents() -> list[str]:
    """Where scratch folders go, in order of preference: tmpfs (memory) when writable, the temporary directory."""
    shm = "/dev/shm"
    parents = [shm] if os.path.isdir(shm) and os.access(shm, os.W_OK) else []
    return [*parents, tempfile.gettempdir()]


def new_scratch_folder(parent: str) -> str:
    """A new private folder in `parent`. Its name carries this process's pid; folders of processes that are gone
    (killed before they could clean up: tmpfs is memory) are removed first."""
    _remove_orphans(parent)
    return tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=parent)


FOLDER_PREFIX = "tracelens-"


def _remove_orphans(parent: str) -> None:
    try:
        names = [name for name in os.listdir(parent) if name.startswith(FOLDER_PREFIX)]
    except OSError:
        return
    for name in names:
        owner = name[len(FOLDER_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _child(number: int, jobs: Sequence[Any], work: Callable[[Any], Any], folder: str, signal_fd: int) -> None:
    """The child's whole life: the jobs it claims, a file per result (renamed into place when complete, then a
    byte to `signal_fd` to wake the parent), then `_exit` (no interpreter teardown, no flushing of the parent's
    buffers). It runs with the garbage collector off: a job's objects are freed by reference counting (jobs make
    no reference cycles they need freed before the child ends)."""
    status = 0
    gc.disable()
    try:
        reset_signals()
        _die_with_parent()
        for index in claims(folder, len(jobs)):
            result = work(jobs[index])
            partial = os.path.join(folder, f".{index}")
            write_result(partial, result)
            os.rename(partial, os.path.join(folder, str(index)))
            os.write(signal_fd, b"r")
    except BaseException as exc:  # handed to the parent
        status = 1
        try:
            payload = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an exception that does not pickle: its text
            payload = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
        with open(os.path.join(folder, f"error-{number}"), "wb") as handle:
            handle.write(payload)
    finally:
        os._exit(status)


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The garbage collector off for the block (as it was after): the jobs' objects are freed by reference counting,
    and collections would only walk them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def claims(folder: str, n_jobs: int) -> Iterator[int]:
    """The jobs of `n_jobs` this process claims, in order, each as it asks for the next: a job belongs to the
    process that creates its claim file in `folder` first. The files live as long as the folder, which is removed
    only once every child is reaped, so a job is claimed once."""
    for index in range(n_jobs):
        try:
            os.close(os.open(os.path.join(folder, f"claim-{index}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue
        yield index


def reset_signals() -> None:
    """In a forked child: SIGTERM and SIGINT back to their defaults (end the process). Handlers inherited from
    the parent (the command's SIGTERM handler raises SystemExit) would run the parent's cleanup in the child,
    or leave it blocked on a lock the parent held when it forked."""
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)


def _die_with_parent() -> None:
    """Linux: have the kernel kill this child if the parent dies (even by SIGKILL); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not Linux
        pass


def _wait(
    children: dict[int, int],
    folder: str,
    results: dict[int, Any],
    on_result: Callable[[int], None] | None,
    stall_s: float,
    n_jobs: int,
    arrivals: int,
) -> None:
    """Until every job's result is here or every child has ended: pick up finished results (woken by a byte on
    `arrivals`, or by a child's end); raise a child's exception, or ChildStalled when nothing happens for `stall_s`
    seconds (a child blocked forever must not block this process)."""
    pending = dict(children)
    exit_fds = _exit_fds(pending)
    last_event = time.monotonic()
    try:
        while pending and len(results) < n_jobs:
            if exit_fds is not None:
                ready = select.select([arrivals, *exit_fds.values()], [], [], POLL_S)[0]
            else:  # pragma: no cover - no pidfd (not Linux)
                ready = select.select([arrivals], [], [], POLL_S / 10)[0]
            if arrivals in ready:
                os.read(arrivals, 1 << 16)  # the bytes only wake this process: the files are the results
            if _collect(folder, results, on_result):
                last_event = time.monotonic()
            elif time.monotonic() - last_event > stall_s:
                raise ChildStalled(f"worker processes delivered nothing for {stall_s:.0f} s")
            for pid in list(pending):
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # already reaped by the kernel (SIGCHLD ignored): ended, status unknown
                    done, status = pid, -1
                if done:
                    last_event = time.monotonic()
                    number = pending.pop(pid)
                    del children[pid]
                    if exit_fds is not None:
                        os.close(exit_fds.pop(pid))
                    if status != 0:
                        _raise_for(folder, number, status, unknown=status == -1)
    finally:
        for fd in (exit_fds or {}).values():
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    """A pidfd of process `pid` (readable once it has ended); None where unsupported (not Linux 5.3+) or
    refused."""
    if not hasattr(os, "pidfd_open"):  # pragma: no cover - not Linux
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _exit_fds(pids: dict[int, int]) -> dict[int, int] | None:
    """A file descriptor per child that becomes readable when it exits (`_pidfd`); None where unsupported."""
    fds: dict[int, int] = {}
    for pid in pids:
        handle = _pidfd(pid)
        if handle is None:
            for fd in fds.values():
                os.close(fd)
            return None
        fds[pid] = handle
    return fds


def _collect(folder: str, results: dict[int, Any], on_result: Callable[[int], None] | None) -> int:
    """Load (and delete) every finished result file; how many there were."""
    collected = 0
    for name in os.listdir(folder):
        if not name.isdigit():
            continue
        path = os.path.join(folder, name)
        results[int(name)] = read_result(path)
        os.remove(path)
        collected += 1
        if on_result is not None:
            on_result(int(name))
    return collected


_HEAD = struct.Struct("<QQ")  # pickle bytes, out-of-band buffers; then one u64 length per buffer
MAPPED_BYTES = 64 << 10  # buffers this large are mapped from the file; smaller ones are read
_ALIGN_BYTES = 64


def write_result(path: str, result: object) -> None:
    """Write `result` to a new file `path`: the layout header, the pickle, then each out-of-band buffer (the
    arrays' bytes, written from where they lie) at a multiple of 64 bytes."""
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
    views = [buffer.raw() for buffer in buffers]
    with open(path, "wb") as handle:
        handle.write(_HEAD.pack(len(data), len(views)))
        handle.write(struct.pack(f"<{len(views)}Q", *(view.nbytes for view in views)))
        handle.write(data)
        for view in views:
            handle.write(bytes(-handle.tell() % _ALIGN_BYTES))
            handle.write(view)


def read_result(path: str) -> object:
    """The object `write_result` wrote to `path`. Its arrays of `MAPPED_BYTES` or more are views of one private
    (copy-on-write) mapping of the file, which stays valid after the file is removed and is unmapped once none of
    them is used; smaller ones are read (so that keeping one, a chunk's memory events, keeps no mapping). Pages
    are mapped as they are read, 16 at a time (the kernel's fault-around: measured cheaper than MAP_POPULATE, one
    by one). Where the file cannot be mapped (no more mappings allowed), it is read."""
    with open(path, "rb") as handle:
        data_bytes, n_buffers = _HEAD.unpack(handle.read(_HEAD.size))
        lengths = struct.unpack(f"<{n_buffers}Q", handle.read(8 * n_buffers))
        data = handle.read(data_bytes)
        mapped = _mapping(handle) if any(length >= MAPPED_BYTES for length in lengths) else None
        views: list[memoryview | bytearray] = []
        offset = _HEAD.size + 8 * n_buffers + data_bytes
        for length in lengths:
            offset += -offset % _ALIGN_BYTES
            if mapped is not None and length >= MAPPED_BYTES:
                views.append(mapped[offset : offset + length])
            else:
                handle.seek(offset)
                views.append(bytearray(handle.read(length)))
            offset += length
    return pickle.loads(data, buffers=views)


def _mapping(handle: Any) -> memoryview | None:
    """A private writable mapping of the whole open file; None where the system refuses one."""
    try:
        size = os.fstat(handle.fileno()).st_size
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        return memoryview(mmap.mmap(handle.fileno(), size, flags=mmap.MAP_PRIVATE, prot=prot))
    except (OSError, ValueError):
        return None


def _raise_for(folder: str, number: int, status: int, unknown: bool = False) -> None:
    """Raise the exception child `number` handed back, or ChildDied for its exit `status`; with `unknown` (it
    was reaped by the kernel), nothing when it left no exception (the caller checks that every result came)."""
    path = os.path.join(folder, f"error-{number}")
    try:
        with open(path, "rb") as handle:
            error = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError):
        error = None
    if isinstance(error, BaseException):
        raise error
    if unknown:
        return
    signal_number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    raise ChildDied(
        f"a worker process ended without a result ({f'signal {signal_number}' if signal_number else status})"
    )
