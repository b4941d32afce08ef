"""The event fields the loader reads are declared once (`loader/schema.py:Args`, and the event attributes in
`loader/fields.py`); the C extension's field table is generated from that declaration and must be current."""

from __future__ import annotations

from pathlib import Path

import msgspec

from tracelens.loader import fields
from tracelens.loader.schema import Args, Event

PACKAGE = Path(fields.__file__).resolve().parent.parent


def test_the_c_field_table_is_generated_from_the_declaration() -> None:
    header = (PACKAGE / fields.NATIVE_HEADER).read_text()
    assert header == fields.native_header(), "run: PYTHONPATH=. python scripts/gen_native_fields.py, then rebuild"
    assert f'#include "{fields.NATIVE_HEADER}"' in (PACKAGE / "_native.c").read_text()
    source = (PACKAGE / "_native.c").read_text()
    for table in ("EVENT_FIELDS", "INT_FIELDS", "DIM_FIELDS", "RAW_FIELDS"):
        assert f"*{table}[" not in source and f"#define N_{table}" not in source  # declared nowhere else


def test_every_declared_field_is_a_field_of_the_decoded_structs() -> None:
    args = {f.name for f in msgspec.structs.fields(Args)}
    assert set(fields.INT_ARGS + fields.DIM_ARGS + fields.RAW_ARGS) <= args
    assert set(fields.EVENT_ATTRS) <= {f.name for f in msgspec.structs.fields(Event)}


def test_the_header_follows_a_change_of_the_declaration(monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    last = fields.RAW_ARGS[-1]
    monkeypatch.setattr(fields, "RAW_ARGS", (*fields.RAW_ARGS, "toy"))
    header = fields.native_header()
    assert f"#define N_RAW_FIELDS {len(fields.RAW_ARGS)}" in header and f'"{last}", "toy"}}' in header
