"""Time units, defined once for the whole package: tables hold integer nanoseconds (`*_ns`), trace files and
reports speak microseconds (`*_us`)."""

from __future__ import annotations

NS_PER_US = 1000.0  # nanoseconds per microsecond (a float: divisions give float µs)
