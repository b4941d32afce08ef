"""`forked.run_forked`: results in job order from forked children, their exceptions raised here, nothing left
behind (no child, no temp folder)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from tracelens.loader import forked


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Result folders go to tmp_path (not /dev/shm), so a test can see that they are removed."""
    real = tempfile.mkdtemp
    monkeypatch.setattr(forked.tempfile, "mkdtemp", lambda prefix, dir=None: real(prefix=prefix, dir=tmp_path))
    return tmp_path


def _square(job: int) -> tuple[int, int]:
    return job * job, os.getpid()


def _fail_on_five(job: int) -> int:
    if job == 5:
        raise ValueError(f"bad job {job}")
    return job


def _die_on_two(job: int) -> int:
    if job == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return job


def test_results_come_back_in_job_order_from_every_child(private_tmp: Path) -> None:
    arrived: list[int] = []
    results = forked.run_forked(list(range(7)), 3, _square, arrived.append)
    assert [value for value, _ in results] == [0, 1, 4, 9, 16, 25, 36]
    pids = [pid for _, pid in results]
    assert os.getpid() not in pids  # children did every job
    assert sorted(arrived) == list(range(7))
    assert list(private_tmp.iterdir()) == []
    for pid in set(pids):
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped before the call returned: no zombie, nothing left for later


def _mark_run(job: tuple[str, int]) -> int:
    folder, index = job
    with open(os.path.join(folder, f"{index}-{os.getpid()}-{os.urandom(4).hex()}"), "w"):
        pass
    return index


@pytest.mark.slow
def test_no_job_runs_twice_and_no_folder_is_left(private_tmp: Path, tmp_path: Path) -> None:
    """Each job runs once per call, whether or not this process has a share (claim files once let a child
    re-claim a job after the call returned: ~3 % of calls ran a job twice)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    for call in range(200):
        jobs = [(str(marks), index) for index in range(16)]
        assert forked.run_forked(jobs, 3, _mark_run, work_here=call % 2 == 1) == list(range(16))
    runs = sorted(name.split("-")[0] for name in os.listdir(marks))
    assert runs == sorted(str(index) for index in range(16) for _ in range(200))  # each job once per call
    assert [p for p in private_tmp.iterdir() if p != marks] == []


def test_with_work_here_this_process_claims_what_is_left_in_finish(private_tmp: Path) -> None:
    """`start_forked` returns with the children at work; this process claims the jobs no child has claimed in
    `finish`, after whatever the caller did in between (here the child is held up by its first job, so this
    process does all the others); its results never pass through a file."""
    calls: list[str] = []
    arrived: list[int] = []

    def work(job: int) -> tuple[int, int]:
        if os.getpid() == parent:
            calls.append(f"job {job}")
        return _slow_in_first_child(job)

    parent = os.getpid()
    started = forked.start_forked(list(range(6)), 1, work, work_here=True)
    calls.append("caller's own work")
    _wait_for(Path(started.folder, "claim-0"))  # the child has claimed job 0 (and is held up by it)
    results = started.finish(arrived.append)
    assert [job for job, _ in results] == list(range(6)) and sorted(arrived) == list(range(6))
    assert calls == ["caller's own work", "job 1", "job 2", "job 3", "job 4", "job 5"]
    pids = [pid for _, pid in results]
    assert pids[1:] == [parent] * 5 and pids[0] != parent
    assert list(private_tmp.iterdir()) == []


def test_a_child_held_up_does_fewer_jobs(private_tmp: Path) -> None:
    """Jobs go to whichever process is free: while the child that claimed job 0 is held up, the other child
    claims the rest."""
    results = forked.run_forked(list(range(6)), 2, _slow_in_first_child)
    assert [job for job, _ in results] == list(range(6))
    pids = [pid for _, pid in results]
    assert os.getpid() not in pids and pids[0] not in pids[1:] and len(set(pids[1:])) == 1
    assert list(private_tmp.iterdir()) == []


def test_an_abandoned_start_leaves_nothing(private_tmp: Path) -> None:
    started = forked.start_forked(list(range(4)), 2, _square)
    children = list(started.children)
    started.close()
    started.close()  # idempotent
    assert list(private_tmp.iterdir()) == []
    for pid in children:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_an_exception_here_with_work_here_kills_the_children(private_tmp: Path) -> None:
    with pytest.raises(ValueError, match="bad job 5"):
        forked.run_forked(list(range(8)), 1, _fail_on_five, work_here=True)
    assert list(private_tmp.iterdir()) == []


def test_an_exception_in_a_child_is_raised_here(private_tmp: Path) -> None:
    with pytest.raises(ValueError, match="bad job 5"):
        forked.run_forked(list(range(8)), 2, _fail_on_five)
    assert list(private_tmp.iterdir()) == []


def test_a_child_killed_by_a_signal_is_reported(private_tmp: Path) -> None:
    with pytest.raises(forked.ChildDied, match="signal 9"):
        forked.run_forked(list(range(4)), 2, _die_on_two)
    assert list(private_tmp.iterdir()) == []


def test_fewer_jobs_than_workers_forks_only_what_is_needed() -> None:
    assert [value for value, _ in forked.run_forked([3], 4, _square)] == [9]
    assert forked.run_forked([], 2, _square) == []


def test_folders_of_processes_that_are_gone_are_removed(tmp_path: Path) -> None:
    child = os.fork()
    if child == 0:  # pragma: no cover - a process that exits at once: its pid is then free
        os._exit(0)
    os.waitpid(child, 0)
    gone = tmp_path / f"tracelens-{child}-abc"
    mine = tmp_path / f"tracelens-{os.getpid()}-def"
    other = tmp_path / "tracelens-notapid"
    for folder in (gone, mine, other):
        folder.mkdir()
        (folder / "0").write_bytes(b"result")
    forked._remove_orphans(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other.name])


def test_a_result_file_round_trips_its_arrays_mapped_or_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`write_result` / `read_result`: large arrays come back as views of a mapping of the file (valid after the
    file is removed), small ones as copies; where mapping fails, every array is read."""
    import numpy as np

    big = np.arange(forked.MAPPED_BYTES // 8 + 3, dtype=np.int64)
    result = {"big": big, "small": np.arange(5, dtype=np.int8), "floats": big * 0.5, "names": ["a", "b"]}
    path = str(tmp_path / "result")
    for refuse_mapping in (False, True):
        forked.write_result(path, result)
        with monkeypatch.context() as patch:
            if refuse_mapping:
                patch.setattr(forked.mmap, "mmap", lambda *a, **k: (_ for _ in ()).throw(OSError("no more maps")))
            got = forked.read_result(path)
        os.remove(path)
        assert isinstance(got, dict) and got["names"] == ["a", "b"]
        for name in ("big", "small", "floats"):
            assert got[name].dtype == result[name].dtype and got[name].tolist() == result[name].tolist(), name
        assert type(_memory_of(got["big"])).__name__ == ("bytearray" if refuse_mapping else "mmap")
        assert type(_memory_of(got["small"])).__name__ == "bytearray"
        got["big"][0] = 99  # a private mapping: writable, and the file (removed) is unaffected


def _memory_of(array: object) -> object:
    """The object whose memory a numpy array (a view of views) uses."""
    while getattr(array, "base", None) is not None:
        array = array.base  # type: ignore[attr-defined]
    return array.obj if isinstance(array, memoryview) else array


def _wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.001)


def _slow_in_first_child(job: int) -> tuple[int, int]:
    if job == 0:
        time.sleep(0.4)  # the child that claimed job 0 is busy: the other claims the rest
    return job, os.getpid()
