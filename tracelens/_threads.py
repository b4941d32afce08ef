"""Imported first by the `tracelens` command, before numpy: numpy's OpenBLAS starts a thread per CPU when it is
imported (CPU time on the cores the trace decoders need: docs/benchmarks.md), and tracelens does no linear
algebra. A value the user set is kept; library users (`import tracelens`) are not affected."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
