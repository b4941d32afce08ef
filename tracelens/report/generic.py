"""A fallback view of any analysis result (a record): its scalar fields as a table, or its longest list
of record rows as a table. Used for results that have no dedicated chart yet; with the lookups the panels of the
first analyses share (`finding`, `MISSING`: they read their result from the report by name, so that the page
works with any version of it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracelens.records import field_names, is_record, shallow_dict
from tracelens.report.document import Panel, Table, unavailable
from tracelens.units import MISSING as UNKNOWN

if TYPE_CHECKING:
    from tracelens.analyses import AnalysisResults

MAX_ROWS = 30
MISSING = "this version of tracelens does not compute it"


def finding(results: AnalysisResults, field: str) -> Any:
    """The optional analysis result `field` of `results`, or None."""
    return getattr(results, field, None)


def generic_panel(result: Any, panel_id: str, title: str) -> Panel:
    """A panel of `result`'s `result_table`, or one that says the analysis found nothing to show."""
    table = result_table(result)
    if table is None:
        return unavailable(panel_id, title, "the analysis found nothing to show")
    return Panel(id=panel_id, title=title, table=table)


def result_table(result: Any) -> Table | None:
    """A table of `result` (a record instance); None when it has nothing tabular."""
    if not is_record(result):
        return None
    values = shallow_dict(result)
    lists = {k: v for k, v in values.items() if isinstance(v, list | tuple) and v and _is_row(v[0])}
    if lists:
        name = max(lists, key=lambda k: len(lists[k]))
        rows = lists[name][:MAX_ROWS]
        columns = tuple(name for name in field_names(rows[0]) if _scalar(getattr(rows[0], name)))
        return Table(columns, tuple(tuple(format_value(getattr(r, c)) for c in columns) for r in rows))
    scalars = [(k, v) for k, v in values.items() if _scalar(v)]
    if not scalars:
        return None
    return Table(("field", "value"), tuple((k, format_value(v)) for k, v in scalars))


def _is_row(value: Any) -> bool:
    return is_record(value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def format_value(value: Any) -> str:
    """Numbers with thousands separators and at most 3 decimals; None (unknown) as "—"."""
    if value is None:
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    return str(value)
