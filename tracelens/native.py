"""The C extension `tracelens._native` (source: tracelens/_native.c, types: tracelens/_native.pyi), built by
`setup.py` when tracelens is installed; an install without it fails (it needs a C compiler, which the README's
fresh-machine commands have).

Each of its functions computes exactly what a Python twin beside its caller computes, faster. The twins are the
tests' oracle, not a second way to run: `TRACELENS_NO_NATIVE=1` makes every caller run them (`ENABLED` is then
False), and tests/unit/test_native_*.py compare both on the same inputs. Callers hold the module as
`from tracelens.native import extension as _native` and call it where `native.ENABLED`, so mypy checks each call
against the stub. Importing tracelens from a copy whose extension was never built raises
`ExtensionMissingError` (one `tracelens: error:` line from the CLI), unless the twins were asked for."""

from __future__ import annotations

import os

from tracelens.errors import TracelensError

__all__ = ["ENABLED", "ORACLE_VARIABLE", "ExtensionMissingError", "extension"]

ORACLE_VARIABLE = "TRACELENS_NO_NATIVE"  # set to anything but "" or "0": the Python twins run (tests only)

ENABLED: bool = os.environ.get(ORACLE_VARIABLE, "").strip() in ("", "0")
"""Whether callers use the C extension (True unless `TRACELENS_NO_NATIVE` is set)."""


class ExtensionMissingError(TracelensError):
    """tracelens was imported from a copy whose C extension was never built."""


try:
    from tracelens import _native as extension
except ImportError as exc:
    if ENABLED:
        raise ExtensionMissingError(
            f"the C extension tracelens._native is not built ({exc}); install tracelens with `pip install .` "
            f"(it needs a C compiler and the Python headers), or set {ORACLE_VARIABLE}=1 to run its slower "
            "Python twins (the tests' oracle)"
        ) from exc
    extension = None  # type: ignore[assignment]  # the twins' run: ENABLED is False, so no caller reaches it
