"""Per-rank work on a real dask.distributed LocalCluster of several worker processes gives the local result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import anchor
from tracelens.cli import main
from tracelens.parallel import rank_files, run_ranks

distributed = pytest.importorskip("dask.distributed")

DLRM = "other/facebookresearch__param/dlrm_kineto.tar.gz"


@pytest.mark.slow
def test_dask_local_cluster_equals_local_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(tmp_path / "cache"))
    paths = rank_files(anchor(DLRM), tmp_path)
    local, local_failed = run_ranks(paths, workers=1)
    with (
        distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 3
        remote, remote_failed = run_ranks(paths, scheduler=cluster.scheduler_address)
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == 3  # three separate worker processes
    assert remote == local and remote_failed == local_failed == []
    assert sorted(f.rank for f in remote) == list(range(8))  # path (archive member) order


def test_cli_scheduler_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRACELENS_CACHE_DIR", str(tmp_path / "cache"))
    archive = str(anchor(DLRM))
    assert main(["analyze", archive, "--format", "json", "--no-cache", "--workers", "1"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["analyze", archive, "--format", "json", "--no-cache", "--scheduler", "local", "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == local


@pytest.mark.slow
def test_unreachable_scheduler_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACELENS_DASK_TIMEOUT_S", "2")
    code = main(["analyze", str(anchor(DLRM)), "--scheduler", "tcp://127.0.0.1:9", "--no-cache"])
    assert code == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err
