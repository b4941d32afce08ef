"""`python -m tracelens` and the `tracelens` command (the console script is `tracelens.__main__:main`).

The garbage collector is off while the command's modules are imported: the collections the imports would
trigger cost more than they free (a few hundred objects, cycles the imports leave, kept: the command ends with
`os._exit`; figures in docs/benchmarks.md). The objects imported are then moved out of its reach
(`gc.freeze`: later collections, and those of forked workers, never walk them) and it is turned on again before
the command runs.
"""

from __future__ import annotations

import gc
import sys

from tracelens.errors import TracelensError


def main() -> None:
    """Import the command with the collector off, then run it (`tracelens.cli.run`; the process exits there).
    `tracelens record` runs its launcher without the rest of the CLI, so that it works where only torch is
    installed (`tracelens.record.launcher`)."""
    if sys.argv[1:2] == ["record"]:
        from tracelens.record.launcher import main as record

        sys.exit(record(sys.argv[2:]))
    gc.disable()
    try:
        from tracelens.cli import run
    except TracelensError as exc:  # raised while importing: a copy without its C extension (tracelens.native)
        print(f"tracelens: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    finally:
        gc.freeze()
        gc.enable()
    run()


if __name__ == "__main__":
    main()
