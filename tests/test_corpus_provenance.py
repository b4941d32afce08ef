"""The third-party traces in tests/corpus/: each one unchanged (its sha256 is the one written down in
PROVENANCE.md), listed there with its source, and under a licence file of its folder; the traces that may not
be redistributed are not in the repository."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests import anchors
from tests.conftest import optional_corpus

PROVENANCE = anchors.CORPUS / "PROVENANCE.md"
NOTES = {"PROVENANCE.md", "LICENSE", "UPSTREAM_README.md"}


def _recorded_sha256() -> dict[str, str]:
    block = PROVENANCE.read_text(encoding="utf-8").split("## Checksums", 1)[1]
    return {name: digest for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", block, flags=re.MULTILINE)}


def _copied_files() -> list[str]:
    return sorted(
        p.relative_to(anchors.CORPUS).as_posix()
        for p in anchors.CORPUS.rglob("*")
        if p.is_file() and p.name not in NOTES
    )


RECORDED = _recorded_sha256()


def test_every_copied_file_is_unchanged_listed_and_licensed() -> None:
    table = PROVENANCE.read_text(encoding="utf-8").split("## Not copied here", 1)[0]
    copied = _copied_files()
    assert len(copied) == 17
    for name in copied:
        path = anchors.CORPUS / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == RECORDED[name], f"{name} differs from upstream"
        assert Path(name).name in table, f"{name} has no row in PROVENANCE.md"
        licences = [folder / "LICENSE" for folder in path.parents if folder.is_relative_to(anchors.CORPUS)]
        assert any(licence.is_file() for licence in licences), f"{name}: no LICENSE in its folders"


def test_no_trace_without_a_redistribution_licence_is_in_the_repository() -> None:
    assert anchors.OPTIONAL
    for name in anchors.OPTIONAL:
        assert not (anchors.CORPUS / name).exists(), name
        assert name in RECORDED, f"{name}: no checksum in PROVENANCE.md"


@pytest.mark.parametrize("name", [pytest.param(name, marks=optional_corpus(name)) for name in sorted(anchors.OPTIONAL)])
def test_an_optional_trace_found_is_the_upstream_file(name: str) -> None:
    path = anchors.find(name)
    if path is None:
        pytest.skip(anchors.missing_reason(name))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == RECORDED[name]
