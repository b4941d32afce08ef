"""`forked.run_forked`: results in job order from forked children, their exceptions raised here, nothing left
behind (no child, no temp folder)."""

from __future__ import annotations

import os
import signal
import tempfile
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
    calls: list[str] = []
    results = forked.run_forked(list(range(7)), 3, _square, arrived.append, lambda: calls.append("meanwhile"))
    assert [value for value, _ in results] == [0, 1, 4, 9, 16, 25, 36]
    pids = [pid for _, pid in results]
    assert os.getpid() not in pids and len(set(pids)) <= 3  # children did every job, each job once
    assert sorted(arrived) == list(range(7)) and calls == ["meanwhile"]
    assert list(private_tmp.iterdir()) == []
    forked.reap_exited(block=True)  # children still exiting when the results were all here are reaped later
    assert forked._EXITING == []
    for pid in set(pids):
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left


def test_children_left_exiting_are_reaped_by_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that has delivered everything is not waited for; the next call (or interpreter exit) reaps it,
    through a pidfd (never by a pid that may have been reused)."""
    forked.reap_exited(block=True)
    real_waitpid = os.waitpid
    # as if each child were still freeing its memory when its last result arrived
    monkeypatch.setattr(
        forked.os, "waitpid", lambda pid, options: (0, 0) if options == os.WNOHANG else real_waitpid(pid, options)
    )
    pids = {pid for _, pid in forked.run_forked(list(range(4)), 2, _square)}
    assert len(forked._EXITING) == 2  # both children, one maybe without a job
    monkeypatch.setattr(forked.os, "waitpid", real_waitpid)
    forked.run_forked([5], 1, _square)  # reaps what the previous call left, then runs
    forked.reap_exited(block=True)
    assert forked._EXITING == []
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _mark_run(job: tuple[str, int]) -> int:
    folder, index = job
    with open(os.path.join(folder, f"{index}-{os.getpid()}-{os.urandom(4).hex()}"), "w"):
        pass
    return index


@pytest.mark.slow
def test_no_job_runs_twice_and_no_folder_is_left_when_children_end_late(private_tmp: Path, tmp_path: Path) -> None:
    """The folder is renamed before it is removed: a child still looking for jobs when the results are all here
    finds no folder, instead of re-claiming a job whose claim file the removal had deleted (seen in ~3 % of calls
    before: a job ran twice, after the call had returned, and left its files in tmpfs)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    for call in range(200):
        jobs = [(str(marks), index) for index in range(16)]
        assert forked.run_forked(jobs, 3, _mark_run, work_here=call % 2 == 1) == list(range(16))
    forked.reap_exited(block=True)
    runs = sorted(name.split("-")[0] for name in os.listdir(marks))
    assert runs == sorted(str(index) for index in range(16) for _ in range(200))  # each job once per call
    assert [p for p in private_tmp.iterdir() if p != marks] == []


def test_with_work_here_this_process_claims_jobs_after_meanwhile(private_tmp: Path) -> None:
    """`work_here`: once `meanwhile` ran, this process claims jobs as a child does; every job is done once, the
    children's results come back through files, this process's own without one."""
    calls: list[str] = []
    arrived: list[int] = []

    def work(job: int) -> tuple[int, int]:
        if os.getpid() == parent:
            calls.append(f"job {job}")
        return _slow_in_first_child(job)

    parent = os.getpid()
    results = forked.run_forked(
        list(range(6)), 1, work, arrived.append, lambda: calls.append("meanwhile"), work_here=True
    )
    assert [job for job, _ in results] == list(range(6)) and sorted(arrived) == list(range(6))
    pids = [pid for _, pid in results]
    assert calls[0] == "meanwhile" and len(calls) > 1  # this process worked, after meanwhile
    assert pids.count(parent) == len(calls) - 1 and len(set(pids)) == 2  # one child did the rest
    assert pids.count(pids[0]) == 1  # whichever process claimed job 0 was held up by it: the other did the rest
    assert list(private_tmp.iterdir()) == []


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


def _slow_in_first_child(job: int) -> tuple[int, int]:
    if job == 0:
        import time

        time.sleep(0.4)  # the child that claimed job 0 is busy: the other claims the rest
    return job, os.getpid()


def test_a_child_slowed_down_does_fewer_jobs() -> None:
    """Jobs are claimed, not dealt out: while one child is held up, the other takes the jobs left."""
    results = forked.run_forked(list(range(6)), 2, _slow_in_first_child)
    assert [job for job, _ in results] == list(range(6))
    assert [pid for _, pid in results].count(results[0][1]) == 1
