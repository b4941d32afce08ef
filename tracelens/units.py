"""Time units, defined once for the whole package: tables hold integer nanoseconds (`*_ns`), trace files and
reports speak microseconds (`*_us`); and the one set of formatters for numbers in text (`us_text`, `ms_text`,
`pct_text`, `rate_text`, `bytes_text`: unknown (None, NaN) shows as `MISSING`)."""

from __future__ import annotations

NS_PER_US = 1000.0  # nanoseconds per microsecond (a float: divisions give float µs)

# ---------------------------------------------------------------- numbers in text: the one set of formatters

MISSING = "—"  # what text shows for a figure that cannot be computed (null in JSON)
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def marked(text: str, marker: str) -> str:
    """A figure with a one-letter marker after it (`1,503.4 e`: where it comes from, said in the table's
    caption): a table column of such cells is still a column of numbers (`without_marker`)."""
    assert len(marker) == 1 and marker.isalpha(), marker
    return f"{text} {marker}"


def without_marker(text: str) -> str:
    """`text` less a trailing `marked` marker (`1,503.4 e` → `1,503.4`); other text as it is."""
    return text[:-2] if len(text) > 2 and text[-2] == " " and text[-1].isalpha() and text[-3].isdigit() else text


def us_text(value_us: float | None) -> str:
    """Microseconds with thousands separators and one decimal (`1,403.7`; `0.0`, never `-0.0`); `MISSING` when
    unknown."""
    return MISSING if value_us is None or value_us != value_us else f"{_no_negative_zero(value_us, 1):,.1f}"


def change_text(value: float, digits: int = 1) -> str:
    """A change with its sign, thousands separators and `digits` decimals (`+20.5`, `-129.7`; `+0.0` where it
    rounds to zero, never `-0.0`)."""
    return f"{_no_negative_zero(value, digits):+,.{digits}f}"


def _no_negative_zero(value: float, digits: int) -> float:
    """`value` rounded to `digits` decimals, a negative zero made 0.0 (adding 0.0 to -0.0 gives 0.0)."""
    return round(value, digits) + 0.0


def ms_text(value_us: float | None) -> str:
    """Microseconds shown as milliseconds with three decimals (`1.404`); `MISSING` when unknown."""
    return MISSING if value_us is None or value_us != value_us else f"{value_us / 1000:,.3f}"


def pct_text(value: float | None) -> str:
    """A percentage with one decimal and its unit (`12.5 %`); `MISSING` when unknown."""
    return MISSING if value is None or value != value else f"{value:.1f} %"


def whole_text(value: float | None) -> str:
    """A count rounded to a whole number with thousands separators (`1,204`); `MISSING` when unknown."""
    return MISSING if value is None or value != value else f"{value:,.0f}"


def rate_text(value: float | None) -> str:
    """A count per step with one decimal where it has one (`5`, `2.5`, `1,204`); `MISSING` when unknown."""
    return MISSING if value is None or value != value else f"{value:,.1f}".removesuffix(".0")


def bytes_text(value: float | None) -> str:
    """Bytes in binary units, labelled (`1.50 GiB`, `3.2 MiB`, `12 B`); `MISSING` when unknown."""
    if value is None or value != value:
        return MISSING
    if abs(value) >= GIB:
        return f"{value / GIB:,.2f} GiB"
    if abs(value) >= MIB:
        return f"{value / MIB:,.1f} MiB"
    if abs(value) >= KIB:
        return f"{value / KIB:,.1f} KiB"
    return f"{value:,.0f} B"


def count_text(n: int, noun: str) -> str:
    """`n` and `noun` in the number `n` takes: "1 step", "3 steps" (nouns that add "s")."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
