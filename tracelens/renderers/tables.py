"""Tables that fit the terminal: one place for the column widths of every `tracelens` text table.

`fit(table)` wraps a rich `Table` so that, when printed, it is laid out for the console's width:

- **numbers are never cut**: a column whose cells are all numbers (digits, separators, units such as "%",
  "—" for unknown; no letters) gets exactly the width of its widest cell, `no_wrap=True, overflow="fold"`;
- **text columns take the squeeze**: their cells are wrapped on word boundaries, and a word wider than the
  column (a kernel name) is broken after `_`, `,`, `<`, `/`, `.`, `:`, `(` or `-` — a name longer than
  `MAX_NAME_LINES` lines is shortened in the middle with "…" placed after a separator, never after a digit;
- **a name stays on one line** in a column declared with `name_lines(...)`: a cell's first line (a kernel's
  name) is never wrapped; wider than the column, it is shortened in the middle (`shorten_middle`: its head and
  tail around "…"), so the whole name shows at a wider `--width` (and in JSON); the cell's other lines wrap;
- **columns are dropped by priority** when even the narrowest text columns would not fit: the table's
  `droppable(...)` headers first (in the order given), and the caption says which columns were left out and
  how to see them (`--width`).

The layout happens at print time (rich's `__rich_console__` protocol), so the analyses' text sections return
ordinary rich tables and never need to know the width; `console.print(fit(part))` does the rest.
"""

from __future__ import annotations

import dataclasses
import re
import typing
import weakref
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Column, Table
from rich.text import Text

from tracelens.model.kernel_names import short_name
from tracelens.renderers.textsafe import safe_renderable
from tracelens.units import without_marker

MIN_TEXT_WIDTH = 10  # a text column is never squeezed below this (or below its widest cell, if narrower)
NAME_WIDTH = 24  # the first text column keeps this width while declared droppable columns remain
NAME_LINE_WIDTH = 40  # ... this one where it is a `name_lines` column (a name shortened more tells too little)
MAX_CELL_CHARS = 2000  # a cell longer than this is abbreviated (its head, "…", its tail) before any layout
MAX_NAME_LINES = 4  # a single name (no spaces) wraps to at most this many lines, then shortens in the middle
_BREAK_AFTER = "_,</.:(-"
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")

_drop_orders: weakref.WeakKeyDictionary[Table, tuple[str, ...]] = weakref.WeakKeyDictionary()
_name_lines: weakref.WeakKeyDictionary[Table, tuple[str, ...]] = weakref.WeakKeyDictionary()


def droppable(table: Table, *headers: str) -> Table:
    """Declare which columns of `table` may be left out when the console is too narrow, first dropped first
    (headers as given to `add_column`). Columns not named are dropped only as a last resort (rightmost first),
    so that a number is never cut."""
    _drop_orders[table] = headers
    return table


def name_lines(table: Table, *headers: str) -> Table:
    """Declare the columns of `table` (headers as given to `add_column`) whose cells begin with a name on a line
    of its own: that line is kept whole where it fits and shortened in the middle where it does not, never
    wrapped (see the module docstring)."""
    _name_lines[table] = headers
    return table


def fit(part: RenderableType) -> RenderableType:
    """`part` laid out for the console's width when printed (tables only; anything else is returned as is)."""
    return FittedTable(part) if isinstance(part, Table) else typing.cast(RenderableType, safe_renderable(part))


class FittedTable:
    """A rich renderable: the wrapped table, laid out for `options.max_width` (see the module docstring)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield layout(self.table, options.max_width)


def layout(table: Table, max_width: int) -> Table:
    """A copy of `table` whose columns fit `max_width` cells (see the module docstring). Cells longer than
    `MAX_CELL_CHARS` characters are abbreviated first, so that the layout's work is linear in the text."""
    declared = table  # the drop order is registered for the table as built
    table = _copy(table, table.columns)
    for column in table.columns:
        column._cells = [typing.cast(RenderableType, safe_renderable(abbreviate_cell(c))) for c in column._cells]
        column.header = typing.cast(RenderableType, safe_renderable(column.header))
    table.title = typing.cast(str | Text | None, safe_renderable(table.title))
    table.caption = typing.cast(str | Text | None, safe_renderable(table.caption))
    columns = list(table.columns)
    kinds = [_is_numeric(column) for column in columns]
    natural = [_natural_width(column) for column in columns]
    compact = [  # a number column whose header wraps on its spaces
        max(_cells_width(column), _header_width(column)) if kinds[i] else natural[i] for i, column in enumerate(columns)
    ]
    floor = [
        compact[i] if kinds[i] else min(natural[i], max(MIN_TEXT_WIDTH, _header_width(columns[i])))
        for i in range(len(columns))
    ]
    names = {_header_text(column) for column in columns} & set(_name_lines.get(declared, ()))
    name = next((i for i in range(len(columns)) if not kinds[i]), None)  # the name a row is about
    if name is not None:  # kept readable while declared columns can go
        cap = NAME_LINE_WIDTH if _header_text(columns[name]) in names else NAME_WIDTH
        floor[name] = max(floor[name], min(natural[name], cap))
    order = _drop_order(declared, columns)
    keep = list(range(len(columns)))
    dropped: list[str] = []
    while sum(floor[i] for i in keep) + _overhead(table, len(keep)) > max_width and len(keep) > 1:
        victim = next((i for i in order if i in keep and i != keep[0]), None)
        if victim is None and name is not None and floor[name] > MIN_TEXT_WIDTH:
            floor[name] = min(natural[name], max(MIN_TEXT_WIDTH, _header_width(columns[name])))
            continue
        if victim is None:
            victim = keep[-1]
        keep.remove(victim)
        dropped.append(_header_text(columns[victim]).replace("\n/", "/").replace("\n", " "))
    room = max_width - _overhead(table, len(keep))
    text_floor = sum(floor[i] for i in keep if not kinds[i])
    if sum(natural[i] for i in keep if kinds[i]) + text_floor > room:
        natural = [compact[i] if kinds[i] else natural[i] for i in range(len(columns))]
    widths = _widths([natural[i] for i in keep], [floor[i] for i in keep], room, kinds, keep)
    fitted = _copy(table, [columns[i] for i in keep])
    fitted.title_justify = fitted.caption_justify = "left"
    for column, width, index in zip(fitted.columns, widths, keep, strict=True):
        numeric = kinds[index]
        column.width = width
        column.min_width = None
        column.max_width = None
        column.no_wrap = numeric
        column.overflow = "fold"
        column.header = _wrap_cell(column.header, width)
        if not numeric:
            one_line = _header_text(column) in names
            column._cells = [_wrap_cell(cell, width, one_line) for cell in column._cells]
    if dropped:
        note = f"left out at {max_width} columns: {', '.join(dropped)} (--width N or COLUMNS=N shows more)"
        fitted.caption = f"{table.caption}\n{note}" if table.caption else note
    return fitted


def abbreviate(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """`text` itself when at most `limit` characters; otherwise each longer line cut to its first and last
    `limit // 2` characters joined by "…", so that no single name can make the layout slow (the wrapping
    below then shortens what is left in the middle, as for any long name)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return "\n".join(line if len(line) <= limit else f"{line[:half]}…{line[-half:]}" for line in text.splitlines())


def abbreviate_cell(cell: RenderableType) -> RenderableType:
    """`cell` with its text abbreviated (see `abbreviate`); a non-text renderable is returned as is."""
    if isinstance(cell, str):
        return abbreviate(cell)
    if isinstance(cell, Text) and len(cell.plain) > MAX_CELL_CHARS:
        return Text(abbreviate(cell.plain), style=cell.style, justify=cell.justify, overflow=cell.overflow)
    return cell


def _copy(table: Table, columns: Sequence[Column]) -> Table:
    fitted = Table.__new__(Table)
    fitted.__dict__.update(table.__dict__)
    fitted.columns = [dataclasses.replace(column, _cells=list(column._cells)) for column in columns]
    for index, column in enumerate(fitted.columns):
        column._index = index
    return fitted


def _drop_order(table: Table, columns: Sequence[Column]) -> list[int]:
    headers = [_header_text(c) for c in columns]
    named = [headers.index(h) for h in _drop_orders.get(table, ()) if h in headers]
    return named


def _overhead(table: Table, count: int) -> int:
    """Cells a table of `count` columns spends on borders and padding."""
    if count == 0:
        return 0
    extra = (2 if table.box and table.show_edge else 0) + (count - 1 if table.box else 0)
    _, pad_right, _, pad_left = table.padding
    padding = (pad_left + pad_right) * count
    if not table.pad_edge:
        padding -= pad_left + pad_right
    return extra + padding


def _widths(natural: list[int], floor: list[int], room: int, kinds: list[bool], keep: list[int]) -> list[int]:
    """Numbers get their natural width; text columns share what is left, each at least its floor and at most
    its natural width, the spare room given in proportion to what each still lacks."""
    widths = list(natural)
    if sum(natural) <= room:
        return widths
    text = [j for j, index in enumerate(keep) if not kinds[index]]
    for j in text:
        widths[j] = floor[j]
    spare = room - sum(widths)
    lacking = {j: natural[j] - floor[j] for j in text}
    weight = {j: lacking[j] * (2 if k == 0 else 1) for k, j in enumerate(text)}  # the first text column (the
    total = sum(weight.values())  # name a row is about) gets twice its share
    if spare > 0 and total > 0:
        for j in text:
            widths[j] += min(lacking[j], spare * weight[j] // total)
        leftover = room - sum(widths)
        for j in text:
            extra = min(leftover, natural[j] - widths[j])
            widths[j] += extra
            leftover -= extra
    return widths


def _plain(cell: RenderableType) -> str | None:
    if isinstance(cell, str):
        return cell
    if isinstance(cell, Text):
        return cell.plain
    return None


def _cells(column: Column) -> Iterable[str]:
    for cell in column._cells:
        plain = _plain(cell)
        if plain is not None:
            yield plain


def _header_text(column: Column) -> str:
    return _plain(column.header) or ""


def _header_width(column: Column) -> int:
    """The widest word of the header (headers wrap on spaces; a word never breaks)."""
    return max((cell_len(word) for word in _header_text(column).split()), default=0)


def _cells_width(column: Column) -> int:
    return max((cell_len(line) for cell in _cells(column) for line in cell.splitlines()), default=1) or 1


def _natural_width(column: Column) -> int:
    header = _header_text(column).splitlines()
    return max([_cells_width(column), *(cell_len(line) for line in header)])


def _is_numeric(column: Column) -> bool:
    """All cells are numbers (no letters; at least one digit in the column): such a column is never cut."""
    cells = [c for c in _cells(column) if c.strip()]
    if not cells or not any(_DIGIT.search(c) for c in cells):
        return False
    return all(not _LETTER.search(without_marker(c.strip())) for c in cells)


def _wrap_cell(cell: RenderableType, width: int, name_line: bool = False) -> RenderableType:
    """`cell` in lines of at most `width` cells (`wrap`); with `name_line`, its first line shortened in the
    middle instead (`shorten_middle`), never wrapped."""
    plain = _plain(cell)
    if plain is None or all(cell_len(line) <= width for line in plain.splitlines()):
        return cell
    lines = plain.splitlines()
    wrapped = "\n".join(
        shorten_middle(line, width) if name_line and i == 0 else wrap(line, width) for i, line in enumerate(lines)
    )
    if isinstance(cell, Text):
        return Text(wrapped, style=cell.style, justify=cell.justify, overflow=cell.overflow)
    return wrapped


def wrap(text: str, width: int) -> str:
    """`text` broken into lines of at most `width` cells: on spaces, and inside a word after a separator
    (`_`, `,`, `<`, ...); a word that would take more than `MAX_NAME_LINES` lines is shortened in the middle."""
    width = max(width, 4)
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        if not word:
            continue
        candidate = f"{current} {word}" if current else word
        if cell_len(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
            current = ""
        if cell_len(word) <= width:
            current = word
            continue
        pieces = _break_word(word, width)
        lines += pieces[:-1]
        current = pieces[-1]
    if current:
        lines.append(current)
    return "\n".join(lines)


def _break_word(word: str, width: int) -> list[str]:
    pieces = _pieces(word, width)
    if len(pieces) <= MAX_NAME_LINES:
        return pieces
    return _pieces(shorten_middle(word, width * MAX_NAME_LINES - MAX_NAME_LINES), width)


def _pieces(word: str, width: int) -> list[str]:
    """`word` cut into lines of at most `width`, each ending after a separator when one is in reach."""
    pieces = []
    rest = word
    while cell_len(rest) > width:
        cut = _last_break(rest, width) + 1
        if cut < width // 3:  # no separator in the second two thirds of the line: cut at the width
            cut = width
            while cut > 1 and rest[cut - 1].isdigit() and rest[cut].isdigit():  # never split a number
                cut -= 1
            if cut <= 1:
                cut = width
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return [*pieces, rest] if rest else pieces


def _last_break(text: str, width: int) -> int:
    """Index of the last separator in `text[:width]` a line may end after (-1: none): one of `_BREAK_AFTER`
    or an en dash (a range), but never a "," or "." between two digits (inside a number)."""
    for i in range(min(width, len(text)) - 1, -1, -1):
        char = text[i]
        if char not in _BREAK_AFTER and char != "–":
            continue
        inside_number = char in ",." and 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()
        if not inside_number:
            return i
    return -1


def shorten_middle(name: str, length: int) -> str:
    """`name` in at most `length` characters: its head and tail around "…", the head ending after a separator
    (or a letter) so that "…" never follows a digit or a comma."""
    if cell_len(name) <= length:
        return name
    keep = max(length - 1, 2)
    head_len = (keep + 1) // 2
    tail = name[len(name) - (keep - head_len) :]
    head = name[:head_len]
    while head and (head[-1].isdigit() or head[-1] == ","):
        head = head[:-1]
    return f"{head}…{tail}"


def display_name(kernel: str) -> str:
    """A kernel's readable name for a table cell, never cut (`short_name` cuts at 60 characters with "…",
    possibly right after a digit): the table wraps it, or shortens it in the middle where a digit is safe."""
    return short_name(kernel, 100_000)


def count(value: float | None) -> str:
    """A count for people: an integer when it is one (`4`, not `4.0` or `4e+06`), else one decimal (a median
    or mean of counts); None (cannot be computed) is "—"."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
