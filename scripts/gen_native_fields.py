"""Write tracelens/_native_fields.h, the C extension's field table, from the declaration (`loader/schema.py:Args`,
through `loader/fields.py:native_header`; then rebuild: `python setup.py build_ext --inplace`)."""

from __future__ import annotations

from pathlib import Path

from tracelens.loader.fields import NATIVE_HEADER, native_header

if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "tracelens" / NATIVE_HEADER
    target.write_text(native_header())
    print(f"wrote {target}")
