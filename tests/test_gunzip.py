"""The loader's gunzip (python-isal where installed, a dependency; zlib otherwise) gives the standard library's
bytes: whole files, several gzip members, a file cut short, corrupt data."""

from __future__ import annotations

import gzip
import io
import types
import zlib

import pytest

from tests.conftest import anchor
from tracelens.errors import UnusableTraceError
from tracelens.loader import source

TRACES = ["hta/trace_filter/sampled_rank-0.json.gz", "other/pytorch__kineto/worker0.1623143089861.pt.trace.json.gz"]


def _gunzip(module: types.ModuleType, data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bool]:
    with monkeypatch.context() as patch:
        patch.setattr(source, "_gzip_module", module)
        reader = source.Gunzip(io.BytesIO(data), "t.json.gz")
        return b"".join(reader), reader.truncated


def _modules() -> list[types.ModuleType]:
    try:
        from isal import isal_zlib
    except ImportError:
        return [zlib]
    return [zlib, isal_zlib]


def test_isal_is_the_gunzip_when_installed() -> None:
    isal_zlib = pytest.importorskip("isal.isal_zlib", reason="python-isal not installed")
    assert source._gzip_module is isal_zlib


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("relative", TRACES)
def test_whole_files_give_the_stdlib_bytes(
    relative: str, module: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = anchor(relative).read_bytes()
    assert _gunzip(module, data, monkeypatch) == (gzip.decompress(data), False)


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_members_cuts_and_corruption_as_zlib_reads_them(
    module: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = gzip.decompress(anchor(TRACES[0]).read_bytes())
    first, second = gzip.compress(text[:100_000]), gzip.compress(text[100_000:])
    assert _gunzip(module, first + second, monkeypatch) == (text, False)
    cut = first + second[: len(second) // 2]
    out, truncated = _gunzip(module, cut, monkeypatch)
    assert truncated and text.startswith(out) and len(out) > 100_000
    with gzip.GzipFile(fileobj=io.BytesIO(cut)) as stdlib, pytest.raises(EOFError):
        stdlib.read()  # the standard library refuses the cut file; the loader keeps what is complete
    corrupt = first[:20] + bytes(len(first) - 20)
    with pytest.raises(UnusableTraceError, match="corrupt gzip data"):
        _gunzip(module, corrupt, monkeypatch)
