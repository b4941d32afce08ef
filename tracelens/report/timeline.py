"""The timeline: CPU threads (ops nested by depth) and GPU streams (kernels coloured by category).

Contract: `timeline_panel(trace, gpu, max_slices=..., focus_step=None) -> Panel`, pure. One step (`focus_step`,
else the complete step of median length) is drawn slice by slice, at most `max_slices` slices (GPU activity
first, then CPU events from the outermost level in); everything else is merged into grey blocks per lane, and
the panel note says how much was merged. In the figure, slices are thick line segments (x = start, end, gap);
the page draws them as filled rectangles, one SVG path per colour group. Hover points sit at slice centres, and
launch → kernel links are line segments.

Levels of detail: the figure holds every slice at full resolution, and its bar/hover traces carry
`meta = {"lod": "bars"|"hover", "group": N}` (blocks too; bars also `"half"`, their half height in lanes). The
HTML page (`renderers/html.py`) redraws them for the visible range on load and after every zoom: slices closer
than a pixel merge into one band (hover: count and busy µs), every band is at least one pixel wide, so no work
ever disappears from view; zoomed in, slices are drawn and hovered one by one. The critical path's outlines
(`meta = {"lod": "outline"}`) merge the same way. Each GPU stream also has a utilization strip (a one-row heatmap
across the top of its lane, `meta = {"lod": "util", "lane": y}`: busy fraction per bin of the visible range,
recomputed on zoom).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from tracelens.analyses import AnalysisResults
from tracelens.analyses.actions import helpful
from tracelens.analyses.critical_path import CriticalPath
from tracelens.analyses.window import merge_intervals
from tracelens.errors import TracelensError
from tracelens.model.events import GPU_ACTIVITY_KINDS, I64, Kind, kind_mask
from tracelens.model.kernel_names import CATEGORIES, short_name
from tracelens.model.steps import STEP_PREFIX, WHOLE_TRACE, step_words
from tracelens.model.trace import Trace
from tracelens.naming import trace_stem
from tracelens.report.document import FindingLink, Panel, chart_text
from tracelens.report.lanes import (
    COLLAPSE_ABOVE_LEVELS,
    DEFAULT_LEVELS,
    Lanes,
    default_levels,
    gap_for_blocks,
    lay_out,
    merge_into_blocks,
)
from tracelens.report.palette import AGGREGATED_COLOR, CPU_COLORS, LINK_COLOR, category_color
from tracelens.units import NS_PER_US

MAX_SLICES = 40_000
MAX_BLOCKS = 3_000
MAX_LINKS = 4_000
VISIBLE_LINKS = 300  # more links than this start hidden (toggle in the legend)
MAX_STEP_BUTTONS = 40
HALF_HEIGHT = 0.4
LANE_PX = 20
MAX_HEIGHT_PX = 1600
MIN_HEIGHT_PX = 440
MARGIN_TOP_PX = 40
MARGIN_BOTTOM_PX = 50
TEXT_CHARS = 120
CRITICAL_COLOR = "#111111"  # an outline, never a fill: distinct from every category colour (fused is red)
BAR_FILL = 0.75  # of a lane's height
UTIL_BINS = 400  # utilization strip bins across the default view
UTIL_HEIGHT = 0.1  # of a lane


@dataclass(frozen=True)
class _Selection:
    lanes: Lanes
    detailed: np.ndarray  # bool over lanes.rows
    focus: int | None  # step index drawn in full


def timeline_panel(
    trace: Trace,
    gpu: pd.DataFrame,
    max_slices: int = MAX_SLICES,
    focus_step: int | None = None,
    panel_id: str = "timeline",
    highlight_rows: list[int] | None = None,
    row_notes: dict[int, list[str]] | None = None,
) -> Panel:
    """The timeline panel of `trace`; `gpu` is `summary.gpu_activity_frame(trace)`. `highlight_rows`: event rows
    outlined in black on their lanes (the critical path), where they are drawn one by one. A kernel's title and full
    name are stored once per distinct name and the page's script puts them in each hover (`_full_names`); a figure
    shown without the page takes them in its texts with `bake_page_hovers`."""
    selection = _select(trace, max_slices, focus_step)
    lanes, detailed = selection.lanes, selection.detailed
    category = _category_of_rows(trace, gpu)
    op_of_row = np.full(len(trace.events), -1, dtype=np.int64)
    op_of_row[gpu["row"].to_numpy()] = gpu["op_row"].to_numpy()
    counter_keys = trace.counters.lane_keys()
    n_rows = lanes.n_lanes + len(counter_keys)
    height = int(min(MAX_HEIGHT_PX, max(MIN_HEIGHT_PX, MARGIN_TOP_PX + MARGIN_BOTTOM_PX + LANE_PX * n_rows)))
    bar_px = round(BAR_FILL * (height - MARGIN_TOP_PX - MARGIN_BOTTOM_PX) / max(n_rows, 1), 2)
    fig = go.Figure()
    group = 0
    gpu_drawn = lanes.rows[detailed & kind_mask(trace.events.kind[lanes.rows], GPU_ACTIVITY_KINDS)]
    scopes = dict(zip(gpu_drawn.tolist(), module_scopes(trace, gpu_drawn), strict=True))
    for label, color, mask in _groups(trace, lanes, category):
        chosen = mask & detailed
        if chosen.any():
            picks = np.flatnonzero(chosen)
            _add_slices(
                fig, trace, lanes, picks, label, color, op_of_row, bar_px, category, group, row_notes or {}, scopes
            )
            group += 1
    links = _add_links(fig, trace, lanes, detailed)
    blocks = _add_blocks(fig, trace, lanes, ~detailed, bar_px, group)
    _add_utilization(fig, trace, lanes, selection.focus)
    highlighted = _add_highlight(fig, trace, lanes, detailed, highlight_rows or [], bar_px)
    _add_label_trace(fig)
    counter_ticks = _add_counters(fig, trace, counter_keys, lanes.n_lanes)
    _lay_out_figure(fig, trace, lanes, selection.focus, height, counter_ticks)
    note = _note(trace, selection, blocks, links)
    if highlighted:
        note += (
            f" The critical path ({highlighted:,} slices, black outline) is drawn over its step: toggle it in the"
            " legend."
        )
    if counter_ticks:
        note += (
            f" {len(counter_ticks)} counter lane{'s' if len(counter_ticks) > 1 else ''} (ph C events) below the GPU "
            "lanes: each series scaled to its lane, from its minimum to its maximum (hover for values)."
        )
    return Panel(id=panel_id, title="Timeline", figure=fig, note=note)


# ---------------------------------------------------------------- what is drawn one by one


def focus_step_index(trace: Trace, focus_step: int | None = None) -> int | None:
    """Index of the step drawn in full: `focus_step` if given, else the complete step of median length."""
    steps = trace.steps
    if focus_step is not None:
        index = trace.step_index(focus_step)
        if index is None:
            raise TracelensError(f"no step {focus_step} in {trace.path}")
        return index
    candidates = np.flatnonzero(steps.complete)
    if candidates.size == 0:
        candidates = np.arange(len(steps))
    if candidates.size == 0:
        return None
    order = np.argsort(steps.duration_ns[candidates], kind="stable")
    return int(candidates[order[(order.size - 1) // 2]])


def _select(trace: Trace, max_slices: int, focus_step: int | None) -> _Selection:
    lanes = lay_out(trace)
    focus = focus_step_index(trace, focus_step)
    n = lanes.rows.size
    if n <= max_slices:
        return _Selection(lanes, np.ones(n, dtype=bool), focus)
    ev = trace.events
    in_focus = trace.links.step[lanes.rows] == focus if focus is not None else np.ones(n, dtype=bool)
    candidates = np.flatnonzero(in_focus)
    is_gpu = kind_mask(ev.kind[lanes.rows[candidates]], GPU_ACTIVITY_KINDS)
    depth = trace.links.depth[lanes.rows[candidates]]
    order = np.lexsort((ev.ts_ns[lanes.rows[candidates]], depth, ~is_gpu))
    detailed = np.zeros(n, dtype=bool)
    detailed[candidates[order[:max_slices]]] = True
    return _Selection(lanes, detailed, focus)


def _category_of_rows(trace: Trace, gpu: pd.DataFrame) -> np.ndarray:
    """Category code (index into CATEGORIES) of each GPU activity row, -1 elsewhere."""
    codes = np.full(len(trace.events), -1, dtype=np.int64)
    index = {name: i for i, name in enumerate(CATEGORIES)}
    codes[gpu["row"].to_numpy()] = [index.get(c, index["other"]) for c in gpu["category"]]
    return codes


def _groups(trace: Trace, lanes: Lanes, category: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """(legend label, colour, mask over lanes.rows) per colour group, in a fixed order."""
    kind = trace.events.kind[lanes.rows]
    cat = category[lanes.rows]
    groups = [
        ("CPU op", CPU_COLORS["CPU op"], kind == Kind.CPU_OP),
        ("user annotation", CPU_COLORS["user annotation"], kind == Kind.USER_ANNOTATION),
        ("runtime / driver call", CPU_COLORS["runtime / driver call"], (kind == Kind.RUNTIME) | (kind == Kind.DRIVER)),
    ]
    groups += [(f"GPU: {name}", category_color(name), cat == i) for i, name in enumerate(CATEGORIES)]
    return groups


# ---------------------------------------------------------------- traces


def _add_slices(
    fig: go.Figure,
    trace: Trace,
    lanes: Lanes,
    picks: np.ndarray,
    label: str,
    color: str,
    op_of_row: np.ndarray,
    bar_px: float,
    category: np.ndarray,
    group: int,
    row_notes: dict[int, list[str]],
    scopes: dict[int, str],
) -> None:
    rows = lanes.rows[picks]
    y = lanes.y[picks]
    start = trace.events.ts_ns[rows] / NS_PER_US
    end = start + trace.events.dur_ns[rows] / NS_PER_US
    fig.add_trace(_bars(start, end, y, color, bar_px, name=label, legendgroup=label, meta=_lod("bars", group)))
    full_names, full_name_index = _full_names(trace, rows)
    untitled = full_name_index >= 0
    meta = {**_lod("hover", group), "names": full_names} if full_names else _lod("hover", group)
    meta.update(_scope_table([scopes.get(row, "") for row in rows.tolist()]))
    fig.add_trace(
        go.Scatter(
            meta=meta,
            customdata=full_name_index if full_names else None,
            x=(start + end) / 2,
            y=_lane_array(y),
            mode="none",
            line={"width": 0, "color": color},
            showlegend=False,
            text=_hover_texts(trace, rows, op_of_row, category, row_notes, untitled),
            hoverinfo="text",
            name=label,
            legendgroup=label,
        )
    )


def _add_label_trace(fig: go.Figure) -> None:
    """The (empty) text trace the page fills with the labels of the slices wide enough at the current zoom: the
    bold title of each slice's hover (short kernel name, CPU name), with its µs when they fit."""
    fig.add_trace(
        go.Scatter(
            x=[],
            y=[],
            text=[],
            mode="text",
            textposition="middle center",
            textfont={"size": 10, "color": "#111111"},
            hoverinfo="skip",
            showlegend=False,
            name="labels",
            meta={"lod": "labels"},
        )
    )


def _bars(start: np.ndarray, end: np.ndarray, y: np.ndarray, color: str, bar_px: float, **common: object) -> go.Scatter:
    """Horizontal bars as thick line segments: x = (start, end, gap) per bar, one SVG path for all of them.
    The y axis is fixed, so a lane has a known height in pixels and `bar_px` fills most of it."""
    nan = np.full(start.size, np.nan)
    lane = _lane_array(y)
    return go.Scatter(
        x=np.stack([start, end, nan], axis=1).ravel(),
        y=np.stack([lane, lane, lane], axis=1).ravel(),  # the NaN in x breaks the line
        mode="lines",
        line={"width": bar_px, "color": color},
        hoverinfo="skip",
        **common,
    )


def _lane_array(y: np.ndarray) -> np.ndarray:
    """Lane numbers as the smallest integer type (sent to the browser as a compact typed array)."""
    return y.astype(np.int16 if y.size == 0 or int(y.max()) < 2**15 else np.int32)


def _hover_texts(
    trace: Trace,
    rows: I64,
    op_of_row: np.ndarray,
    category: np.ndarray,
    row_notes: dict[int, list[str]] | None = None,
    untitled: np.ndarray | None = None,
) -> list[str]:
    """Each slice's hover: name, category · duration, grid × block, launching op, shapes, and the findings that
    name it (`row_notes`); a kernel's module scope follows, from a table stored once (`_scope_table`). The full
    kernel name is not repeated per slice (the 10 MB page budget of the corpus' biggest report has no room for
    it): each is stored once per trace (`_full_names`) and the page's script puts it in the hover, with the
    title: rows where `untitled` is True get no title line here."""
    notes = row_notes or {}
    no_title = untitled.tolist() if untitled is not None else [False] * len(rows)
    ev = trace.events
    names = ev.names_at(rows)
    ops = op_of_row[rows]
    op_names = ev.names_at(ops)
    dims_rows = np.where(ops >= 0, ops, rows)
    texts = []
    for row, name, op_row, op_name, dims_row, bare in zip(
        rows.tolist(), names, ops.tolist(), op_names, dims_rows.tolist(), no_title, strict=True
    ):
        title = short_name(name) if op_row >= 0 or ev.kind[row] == Kind.KERNEL else name
        duration = f"{ev.dur_ns[row] / NS_PER_US:,.3f} µs"
        code = int(category[row])
        parts = [f"<b>{_escape(title)}</b>"] if not bare else []
        parts.append(f"{CATEGORIES[code]} · {duration}" if code >= 0 else duration)
        grid, block = int(ev.grid_blocks[row]), int(ev.block_threads[row])
        if grid >= 0 and block >= 0:
            parts.append(f"grid {grid:,} × block {block:,}")
        if op_row >= 0:
            parts.append(f"launched by: {_escape(op_name)}")
        shapes = _shapes(ev.input_dims[dims_row])
        if shapes:
            parts.append(f"shapes: {shapes}")
        parts.extend(f"finding: {_escape(note)}" for note in notes.get(row, ()))
        texts.append("<br>".join(parts))
    return texts


SCOPE_LEVELS = 4  # a kernel's hover names at most this many of its scopes (the innermost)
MODULE_PREFIX = "nn.Module: "


def _scope_table(scopes: list[str]) -> dict[str, object]:
    """A hover trace's module scopes stored once each: `{"scopes": [distinct scope], "scope_index": [index per
    slice, -1: none]}`, or {} when no slice has one. The page's script (and `page_hovers`) ends each slice's hover
    with `scope: <its scope>`."""
    table: dict[str, int] = {}
    index = [table.setdefault(scope, len(table)) if scope else -1 for scope in scopes]
    return {"scopes": list(table), "scope_index": index} if table else {}


def module_scopes(trace: Trace, rows: I64) -> list[str]:
    """Per GPU activity row: its module scope, the scopes enclosing the CPU call that launched it (`Links.launch`,
    then `Links.parent` up to the thread's outermost event): `record_function` annotations (user annotations other
    than `ProfilerStep#N`) and `nn.Module: X` Python events (traces recorded with stacks and modules), outermost
    first, the innermost `SCOPE_LEVELS` of them joined by " › " ("… › " first when there are more), escaped for
    a hover; "" where there is no launch or no scope."""
    ev, parent = trace.events, trace.links.parent
    is_step = np.array([n.startswith(STEP_PREFIX) for n in ev.names] + [False], dtype=bool)
    is_module = np.array([n.startswith(MODULE_PREFIX) for n in ev.names] + [False], dtype=bool)
    marked = ((ev.kind == Kind.USER_ANNOTATION) & ~is_step[ev.name]) | ((ev.kind == Kind.PYTHON) & is_module[ev.name])
    launch = trace.links.launch[rows].astype(np.int64)
    current = np.where(launch >= 0, parent[np.maximum(launch, 0)], -1).astype(np.int64)
    chains: list[list[int]] = [[] for _ in range(rows.size)]  # innermost first
    active = np.flatnonzero(current >= 0)
    while active.size:
        at = current[active]
        hit = marked[at]
        for i, event in zip(active[hit].tolist(), at[hit].tolist(), strict=True):
            chains[i].append(event)
        current[active] = parent[at]
        active = active[current[active] >= 0]
    out = []
    for chain in chains:
        names = [_escape(ev.names[ev.name[event]]) for event in reversed(chain[:SCOPE_LEVELS])]
        out.append(("… › " if len(chain) > SCOPE_LEVELS else "") + " › ".join(names))
    return out


FULL_NAME_LINE_CHARS = 100  # a full kernel name is broken into lines this long in its hover
FULL_NAME_CHARS = 2_000  # and cut ("…") past this many characters


def _full_names(trace: Trace, rows: I64) -> tuple[list[list[str]], np.ndarray]:
    """The kernels among `rows` whose hover title is a short name (`short_name`): each distinct one once, as
    [title, full name] (escaped; the full name in lines of `FULL_NAME_LINE_CHARS`), and per row the index of its
    entry (-1: none). The page's script starts the slice's hover with both (`renderers/html.py`), so the page
    holds each name once and an int8/int16 per slice instead of a title per slice."""
    ev = trace.events
    codes = ev.name[rows]
    kernel = ev.kind[rows] == Kind.KERNEL
    distinct = np.unique(codes[kernel])
    names: list[list[str]] = []
    index_of: dict[int, int] = {}
    for code in distinct.tolist():
        name = ev.names[code]
        if short_name(name) == name:
            continue
        cut = name if len(name) <= FULL_NAME_CHARS else name[: FULL_NAME_CHARS - 1] + "…"
        lines = [cut[i : i + FULL_NAME_LINE_CHARS] for i in range(0, len(cut), FULL_NAME_LINE_CHARS)]
        index_of[code] = len(names)
        names.append([f"<b>{_escape(short_name(name))}</b>", "<br>".join(chart_text(line) for line in lines)])
    lookup = np.full(len(ev.names) + 1, -1, dtype=np.int32)
    for code, position in index_of.items():
        lookup[code] = position
    dtype = np.int8 if len(names) < 2**7 else np.int16 if len(names) < 2**15 else np.int32
    return names, np.where(kernel, lookup[codes], -1).astype(dtype)


def bake_page_hovers(fig: go.Figure) -> go.Figure:
    """`fig` with each hover trace's text as the page shows it (`page_hovers`), its names table and indexes
    dropped, and without the "CPU depth" menu and its `layout.meta`, which only the page's script acts on: for a
    figure shown without that script (`plot.timeline`), every CPU lane shown."""
    fig.layout.updatemenus = [menu for menu in fig.layout.updatemenus if all(b.method != "skip" for b in menu.buttons)]
    fig.layout.meta = None
    for trace in fig.data:
        meta = trace.meta
        if isinstance(meta, dict) and (meta.get("names") or meta.get("scopes")):
            trace.text = page_hovers(
                trace.text, meta.get("names"), trace.customdata, meta.get("scopes"), meta.get("scope_index")
            )
            trace.customdata = None
            trace.meta = {key: value for key, value in meta.items() if key not in ("names", "scopes", "scope_index")}
    return fig


def page_hovers(text: Any, names: Any, index: Any, scopes: Any = None, scope_index: Any = None) -> list[str]:
    """The hovers the page shows for a hover trace's `text`, `meta["names"]` and `customdata` (what the page's
    script `tlWithFullNames` builds: an indexed kernel's hover starts with its title and full name), and with
    `meta["scopes"]` and `meta["scope_index"]` given, ends with its module scope."""
    out = [str(t) for t in text]
    if scopes and scope_index is not None:
        out = [
            f"{t}<br>scope: {scopes[i]}" if 0 <= i < len(scopes) else t for t, i in zip(out, scope_index, strict=True)
        ]
    if not names or index is None:
        return out
    if isinstance(index, dict):  # plotly's base64 form of a typed array ({"dtype": "i1", "bdata": ...})
        import base64

        index = np.frombuffer(base64.b64decode(index["bdata"]), dtype=np.dtype(index["dtype"]))
    for k, i in enumerate(np.asarray(index).tolist()):
        if 0 <= i < len(names):
            out[k] = f"{names[i][0]}<br>{names[i][1]}<br>{out[k]}"
    return out


def _escape(text: str) -> str:
    cut = text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
    return chart_text(cut)


def _shapes(raw: bytes | None) -> str:
    """`Input Dims` raw JSON → `[8, 512], [512, 512]` (empty entries for non-tensors dropped)."""
    if not raw:
        return ""
    try:
        dims = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    if not isinstance(dims, list):
        return ""
    text = ", ".join(str(d) for d in dims if d not in ([], "", None))
    return _escape(text)


def _add_links(fig: go.Figure, trace: Trace, lanes: Lanes, detailed: np.ndarray) -> int:
    """Segments from each drawn launch call to the GPU activity it launched; returns how many."""
    ev, launch = trace.events, trace.links.launch
    drawn = lanes.rows[detailed]
    y_of_row = np.full(len(ev), -1, dtype=np.int64)
    y_of_row[drawn] = lanes.y[detailed]
    gpu = drawn[kind_mask(ev.kind[drawn], GPU_ACTIVITY_KINDS)]
    source = launch[gpu]
    ok = source >= 0
    ok[ok] = y_of_row[source[ok]] >= 0
    gpu, source = gpu[ok][:MAX_LINKS], source[ok][:MAX_LINKS]
    if gpu.size == 0:
        return 0
    nan = np.full(gpu.size, np.nan)
    x0 = ev.ts_ns[source] / NS_PER_US
    x1 = ev.ts_ns[gpu] / NS_PER_US
    y0, y1 = y_of_row[source].astype(np.float64), y_of_row[gpu] - HALF_HEIGHT
    fig.add_trace(
        go.Scatter(
            x=np.stack([x0, x1, nan], axis=1).ravel(),
            y=np.stack([y0, y1, nan], axis=1).ravel(),
            mode="lines",
            line={"width": 0.7, "color": LINK_COLOR},
            name="launch → GPU",
            hoverinfo="skip",
            visible=True if gpu.size <= VISIBLE_LINKS else "legendonly",
            meta={"lod": "links"},
        )
    )
    return int(gpu.size)


def _lod(role: str, group: int) -> dict[str, object]:
    """The `meta` tag the page's level-of-detail script looks for; a bars trace also gives its half height in
    lanes (the page draws it as filled rectangles of that height)."""
    return {"lod": role, "group": group, "half": BAR_FILL / 2} if role == "bars" else {"lod": role, "group": group}


def _add_blocks(fig: go.Figure, trace: Trace, lanes: Lanes, rest: np.ndarray, bar_px: float, group: int) -> int:
    """Grey blocks for events not drawn one by one; returns the number of blocks."""
    if not rest.any():
        return 0
    ev = trace.events
    rows = lanes.rows[rest]
    start, end = ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows]
    blocks = merge_into_blocks(lanes.y[rest], start, end, gap_ns=gap_for_blocks(lanes.y[rest], start, end, MAX_BLOCKS))
    s, e = blocks.start_ns / NS_PER_US, blocks.end_ns / NS_PER_US
    y = _lane_array(blocks.y)
    label = "merged (not drawn one by one)"
    fig.add_trace(
        _bars(s, e, blocks.y, AGGREGATED_COLOR, bar_px, name=label, legendgroup=label, meta=_lod("bars", group))
    )
    texts = [
        f"{count:,} merged events<br>{busy / NS_PER_US:,.1f} µs summed"
        for count, busy in zip(blocks.count.tolist(), blocks.busy_ns.tolist(), strict=True)
    ]
    fig.add_trace(
        go.Scatter(
            meta=_lod("hover", group),
            x=(s + e) / 2,
            y=y,
            mode="none",
            line={"width": 0, "color": AGGREGATED_COLOR},
            text=texts,
            hoverinfo="text",
            showlegend=False,
            name=label,
            legendgroup=label,
        )
    )
    return len(blocks)


def _add_highlight(
    fig: go.Figure, trace: Trace, lanes: Lanes, detailed: np.ndarray, rows: list[int], bar_px: float
) -> int:
    """A black outline around each highlighted slice that is drawn one by one; returns how many."""
    if not rows:
        return 0
    lane_of = np.full(len(trace.events), -1, dtype=np.int64)
    lane_of[lanes.rows[detailed]] = lanes.y[detailed]
    picked = np.asarray(rows, dtype=np.int64)
    picked = picked[lane_of[picked] >= 0]
    if picked.size == 0:
        return 0
    start = trace.events.ts_ns[picked] / NS_PER_US
    end = start + trace.events.dur_ns[picked] / NS_PER_US
    lane = lane_of[picked].astype(np.float64)
    edge = BAR_FILL / 2  # a bar fills BAR_FILL of its lane: the outline runs along its top and bottom edges
    nan = np.full(picked.size, np.nan)
    x = np.stack([start, end, end, start, start, nan], axis=1).ravel()
    y = np.stack([lane - edge, lane - edge, lane + edge, lane + edge, lane - edge, nan], axis=1).ravel()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            mode="lines",
            line={"width": 1.5, "color": CRITICAL_COLOR},
            hoverinfo="skip",
            name="critical path",
            meta={"lod": "outline"},
        )
    )
    return int(picked.size)


def _add_utilization(fig: go.Figure, trace: Trace, lanes: Lanes, focus: int | None) -> None:
    """A one-row heatmap across the top of each GPU stream's lane: the busy fraction of each of `UTIL_BINS` bins
    of the default view (the page recomputes it for the visible range after each zoom)."""
    ev = trace.events
    gpu_rows = kind_mask(ev.kind[lanes.rows], GPU_ACTIVITY_KINDS)
    if not gpu_rows.any():
        return
    if focus is not None and len(trace.steps) > 1:
        low, high = (value * NS_PER_US for value in _step_range(trace, focus))
    else:
        low, high = float(ev.ts_ns.min()), float((ev.ts_ns + ev.dur_ns).max())
    edges_ns = np.linspace(low, high, UTIL_BINS + 1)
    for lane in np.unique(lanes.y[gpu_rows]).tolist():
        rows = lanes.rows[gpu_rows & (lanes.y == lane)]
        busy = _busy_per_bin(ev.ts_ns[rows], ev.ts_ns[rows] + ev.dur_ns[rows], edges_ns)
        fig.add_trace(
            go.Heatmap(
                x=np.round(edges_ns / NS_PER_US, 3),
                y=[lane - 0.5, lane - 0.5 + UTIL_HEIGHT],
                z=[np.round(busy, 3)],
                zmin=0,
                zmax=1,
                colorscale=[[0.0, "rgba(255,255,255,0)"], [1.0, "#111827"]],
                showscale=False,
                name="GPU utilization",
                hovertemplate="GPU utilization %{z:.0%}<extra></extra>",
                meta={"lod": "util", "lane": lane},
            )
        )


def _busy_per_bin(start_ns: np.ndarray, end_ns: np.ndarray, edges_ns: np.ndarray) -> np.ndarray:
    """Fraction of each bin [edges[i], edges[i+1]) covered by the union of the intervals."""
    merged = merge_intervals(start_ns.astype(np.int64), end_ns.astype(np.int64))
    covered = np.zeros(edges_ns.size, dtype=np.float64)
    if merged.shape[0]:
        starts, ends = merged[:, 0].astype(np.float64), merged[:, 1].astype(np.float64)
        before = np.concatenate(([0.0], np.cumsum(ends - starts)[:-1]))
        i = np.searchsorted(starts, edges_ns, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(edges_ns - starts[j], 0.0, ends[j] - starts[j])
        covered = np.where(i >= 0, before[j] + inside, 0.0)
    width = np.diff(edges_ns)
    return np.divide(np.diff(covered), width, out=np.zeros(width.size), where=width > 0)


# ---------------------------------------------------------------- layout and note


def _add_counters(
    fig: go.Figure, trace: Trace, keys: list[tuple[int, int, int]], first_lane: int
) -> list[tuple[float, str]]:
    """A lane per counter series (`Trace.counters`), below the other lanes: the samples as a step line scaled
    into the lane (lowest value at the lane's bottom, highest at its top), hover giving the real value. Returns
    the lanes' (y, label) ticks. Their `meta = {"lod": "counter"}`: the page moves them (only) when a CPU band is
    folded or unfolded."""
    counters = trace.counters
    ticks = []
    for offset, (pid, name, series) in enumerate(keys):
        y = first_lane + offset
        rows = np.flatnonzero((counters.pid == pid) & (counters.name == name) & (counters.series == series))
        values = counters.value[rows]
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) / (high - low) if high > low else np.full(values.size, 0.5)
        label = f"{counters.names[name]}: {counters.series_names[series]}"
        if len(counters.pids) > 1:
            label = f"{counters.pids[pid]} {label}"
        fig.add_trace(
            go.Scatter(
                x=np.round(counters.ts_ns[rows] / NS_PER_US, 3),
                y=y + HALF_HEIGHT - 2 * HALF_HEIGHT * scaled,
                customdata=values,
                mode="lines+markers" if rows.size < 200 else "lines",
                line={"shape": "hv", "width": 1.5},
                marker={"size": 4},
                name=_escape(label),
                hovertemplate=f"{_escape(label)}: %{{customdata:,.6g}} at %{{x:,.1f}} µs<extra></extra>",
                meta={"lod": "counter"},
            )
        )
        ticks.append((float(y), _escape(label[:40])))
    return ticks


def _lay_out_figure(
    fig: go.Figure,
    trace: Trace,
    lanes: Lanes,
    focus: int | None,
    height: int,
    counter_ticks: list[tuple[float, str]] | None = None,
) -> None:
    extra = counter_ticks or []
    steps = trace.steps
    buttons = [{"label": "whole trace", "method": "relayout", "args": [{"xaxis.autorange": True}]}]
    for index in range(min(len(steps), MAX_STEP_BUTTONS)):
        label = f"step {int(steps.number[index])}" if steps.per_step else "trace window"
        buttons.append({"label": label, "method": "relayout", "args": [{"xaxis.range": _step_range(trace, index)}]})
    xaxis: dict[str, object] = {"title": {"text": "time since trace start (µs)"}, "showgrid": True}
    if focus is not None and len(steps) > 1:
        xaxis["range"] = _step_range(trace, focus)
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 10, "r": 10, "t": MARGIN_TOP_PX, "b": MARGIN_BOTTOM_PX},
        hovermode="closest",
        hoverdistance=40,
        xaxis=xaxis,
        yaxis={
            "tickvals": [t for t, _ in lanes.ticks] + [t for t, _ in extra],
            "ticktext": [chart_text(label) for _, label in lanes.ticks] + [chart_text(label) for _, label in extra],
            "range": [lanes.n_lanes + len(extra) - 0.5, -0.5],
            "showgrid": False,
            "zeroline": False,
            "fixedrange": True,
        },
        legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top", "font": {"size": 11}},
        updatemenus=[
            {
                "type": "dropdown",
                "buttons": buttons,
                "x": 0,
                "xanchor": "left",
                "y": 1.02,
                "yanchor": "bottom",
                "active": 1 + focus if focus is not None and len(steps) > 1 and focus < MAX_STEP_BUTTONS else 0,
            },
            *_depth_menu(lanes),
        ],
        meta={"tl_depth": depth_meta(lanes, len(extra))},
    )


DEPTH_CHOICES: tuple[tuple[object, str], ...] = (
    ("all", "CPU depth: all levels"),
    (1, "CPU depth: top level"),
    (2, "CPU depth: 2 levels"),
    (3, "CPU depth: 3 levels"),
    ("threads", "CPU depth: per thread (label clicks)"),
)


def depth_meta(lanes: Lanes, n_counters: int) -> dict[str, object]:
    """What the page needs to fold CPU call depth (`renderers/html.py`, `tlDepth*`): per band (in lane order)
    `[first lane, lanes, 1 if a GPU stream]`, the lanes each band shows at load (`default_levels`), the number of
    counter lanes below them, and the figure's height rule (`LANE_PX` per lane, margins, bounds)."""
    levels = lanes.band_levels()
    return {
        "bands": [[first, n, int(gpu)] for (first, _), n, gpu in zip(lanes.ticks, levels, lanes.gpu, strict=True)],
        "default": [default_levels(n, gpu) for n, gpu in zip(levels, lanes.gpu, strict=True)],
        "n_lanes": lanes.n_lanes,
        "counters": n_counters,
        "lane_px": LANE_PX,
        "margin_px": MARGIN_TOP_PX + MARGIN_BOTTOM_PX,
        "min_px": MIN_HEIGHT_PX,
        "max_px": MAX_HEIGHT_PX,
    }


def _depth_menu(lanes: Lanes) -> list[dict[str, object]]:
    """The "CPU depth" menu (when a CPU thread has more than one level): every thread at all its levels, or at
    its outermost 1, 2 or 3, or as at load ("default", listed when it differs from all levels); its last entry
    names the state after a click on a thread's label folded or unfolded one thread (choosing it changes nothing).
    Its buttons do nothing in plotly (`method: skip`); the page's script reads `args[0]["cpu_depth"]`."""
    levels = lanes.band_levels()
    if not any(n > 1 and not gpu for n, gpu in zip(levels, lanes.gpu, strict=True)):
        return []
    folded = any(default_levels(n, gpu) < n for n, gpu in zip(levels, lanes.gpu, strict=True))
    default = ("default", f"CPU depth: default (deeper than {COLLAPSE_ABOVE_LEVELS}: top {DEFAULT_LEVELS})")
    choices: tuple[tuple[object, str], ...] = ((default,) if folded else ()) + DEPTH_CHOICES
    return [
        {
            "type": "dropdown",
            "buttons": [{"label": label, "method": "skip", "args": [{"cpu_depth": value}]} for value, label in choices],
            "x": 1,
            "xanchor": "right",
            "y": 1.02,
            "yanchor": "bottom",
            "active": 0,
        }
    ]


def _step_range(trace: Trace, index: int) -> list[float]:
    """The x range (µs, 1 % padding) of a step's view: its CPU range together with the span of the GPU work it
    launched (first start to last end of the GPU activities whose launching call lies in the step), so that the
    step's own kernels are on screen even when the GPU runs behind the CPU."""
    from tracelens.analyses.activity import gpu_activity

    start_ns, end_ns = int(trace.steps.start_ns[index]), int(trace.steps.end_ns[index])
    gpu = gpu_activity(trace)
    launched = gpu.step == index
    if launched.any():
        start_ns = min(start_ns, int(gpu.ts_ns[launched].min()))
        end_ns = max(end_ns, int((gpu.ts_ns + gpu.dur_ns)[launched].max()))
    start, end = start_ns / NS_PER_US, end_ns / NS_PER_US
    pad = (end - start) * 0.01
    return [round(start - pad, 3), round(end + pad, 3)]


def _note(trace: Trace, selection: _Selection, blocks: int, links: int) -> str:
    lanes, detailed = selection.lanes, selection.detailed
    n, drawn = lanes.rows.size, int(detailed.sum())
    parts = []
    if drawn < n:
        where = step_words(int(trace.steps.number[selection.focus])) if selection.focus is not None else "the trace"
        parts.append(
            f"{drawn:,} of {n:,} slices are drawn one by one (from {where}: GPU activity first, then CPU events from "
            f"the outermost level in); the other {n - drawn:,} are merged into {blocks:,} grey blocks per lane "
            "(hover a block for its count)."
        )
    else:
        parts.append(f"All {n:,} slices are drawn one by one.")
    python = int((trace.events.kind == Kind.PYTHON).sum())
    if python:
        parts.append(f"{python:,} Python stack events are not drawn.")
    if lanes.clamped:
        parts.append(f"{lanes.clamped:,} CPU events nested deeper than 12 levels share their thread's last lane.")
    if links:
        parts.append(f"{links:,} launch → GPU links drawn (toggle them in the legend).")
    parts.append("Use the menu to zoom to a step; drag to zoom, double-click to reset.")
    if _depth_menu(lanes):
        parts.append(
            "CPU call depth folds: the CPU depth menu shows every thread's top 1, 2 or 3 levels or all of them, and a "
            "click on a thread's label folds it to its top level (▸) or unfolds it (▾)"
            + (
                f"; threads deeper than {COLLAPSE_ABOVE_LEVELS} levels start at their top {DEFAULT_LEVELS}."
                if any(default_levels(n, g) < n for n, g in zip(lanes.band_levels(), lanes.gpu, strict=True))
                else "."
            )
        )
    name = trace.path.name if trace.path is not None else "TRACE"
    written = f"./{trace_stem(name)}.tracelens.pftrace"  # annotate's default output (cli.annotate.default_output)
    parts.append(
        f"The same places in Perfetto: `tracelens annotate {name} --format perfetto` writes {written}; "
        "open it at ui.perfetto.dev, click a slice of the tracelens › steps (CPU range), critical path, fusion "
        "opportunities or idle tracks (or search a name such as step N or fuse #1) and press F to zoom to it."
    )
    return " ".join(parts)


def findings_by_row(gpu: Any, results: AnalysisResults) -> dict[int, list[str]]:
    """The findings that name each GPU activity row, for its hover: the critical path it lies on, and each
    fusion opportunity whose kernels (short names, on its stream) include it."""
    out: dict[int, list[str]] = {}
    path = results.get(CriticalPath)
    if path is not None:
        for row in path.path_rows:
            out.setdefault(int(row), []).append(f"critical path ({step_words(path.step)})")
    fusion = getattr(results, "fusion", None)
    opportunities = list(getattr(fusion, "opportunities", None) or [])
    if opportunities:
        names = [short_name(name) for name in gpu["name"]]
        rows, streams = gpu["row"].tolist(), gpu["stream"].tolist()
        for rank, opportunity in enumerate(opportunities, start=1):
            members = set(opportunity.kernels)
            kind = "fusion" if getattr(opportunity, "kind", "chain") == "chain" else "GEMM-epilogue"
            text = f"{kind} #{rank}: " + " → ".join(opportunity.ops)  # its saving: in Findings
            for row, name, stream in zip(rows, names, streams, strict=True):
                if stream == opportunity.stream and name in members:
                    out.setdefault(int(row), []).append(text)
    return out


def finding_links(trace: Trace, gpu: Any, results: AnalysisResults, focus_step: int | None = None) -> list[FindingLink]:
    """A zoom for each finding that names kernels (`findings_by_row`): the critical path and each fusion or
    GEMM-epilogue opportunity; the range of its kernels in the timeline's drawn step (all its kernels when none
    is in that step), widened by a tenth of its width on each side (at least 2 µs), in the timeline's µs. The
    Perfetto hint names the `.pftrace` track or slice (`renderers/pftrace.py`, `renderers/perfetto.py`)."""
    by_finding: dict[str, list[int]] = {}
    for row, notes in findings_by_row(gpu, results).items():
        for note in notes:
            by_finding.setdefault(note, []).append(row)
    focus = focus_step_index(trace, focus_step)
    ev = trace.events
    out = []
    for note, rows in by_finding.items():
        picked = np.array(sorted(rows), dtype=np.int64)
        in_step = picked[trace.links.step[picked] == focus] if focus is not None else picked[:0]
        if in_step.size:
            picked = in_step
        start_us = float(ev.ts_ns[picked].min()) / NS_PER_US
        end_us = float((ev.ts_ns[picked] + ev.dur_ns[picked]).max()) / NS_PER_US
        pad = max((end_us - start_us) / 10, 2.0)
        if note.startswith("critical path"):
            hint = "in Perfetto: the 'critical path' track under 'tracelens'"
        else:
            rank = note.split(":", 1)[0].split("#", 1)[-1]
            prefix = "epilogue" if note.startswith("GEMM-epilogue") else "fuse"
            hint = f"in Perfetto: search '{prefix} #{rank}:' (track 'fusion opportunities' under 'tracelens')"
        kernels = int(np.count_nonzero(ev.kind[picked] == Kind.KERNEL))
        rest = len(picked) - kernels  # memsets, copies, the path's runtime calls
        what = f"{kernels:,} kernel{'s' if kernels != 1 else ''}" + (f" and {rest:,} other events" if rest else "")
        out.append(FindingLink(f"{note}: {what}", start_us - pad, end_us + pad, hint))
    return [*action_links(trace, results, focus), *out]


def action_links(trace: Trace, results: AnalysisResults, focus: int | None) -> list[FindingLink]:
    """A zoom for each action of "What to do next" (`results.actions`): the drawn step's span, from its origin
    (its CPU start, or where later the end of earlier steps' GPU work on its streams: `StepPath.queued_us` after
    it) to its CPU end or the end of the last GPU activity it launched, whichever is later, where the action's
    saving is predicted (each prediction is a replay of every analyzed step; the drawn one is the median-length
    step). The Perfetto hint names the step's `ProfilerStep#N` slice (or, for inferred steps, its number)."""
    actions = helpful(results.actions.actions) if results.actions is not None else []  # as the summary names them
    if focus is None or not actions:
        return []
    steps, ev = trace.steps, trace.events
    number = int(steps.number[focus])
    start_ns, end_ns = int(steps.start_ns[focus]), int(steps.end_ns[focus])
    path = results.critical_path
    lead_us = next((s.queued_us for s in path.steps if s.number == number), 0.0) if path is not None else 0.0
    start_ns += round(lead_us * NS_PER_US)
    launched = np.flatnonzero((trace.links.step == focus) & kind_mask(ev.kind, GPU_ACTIVITY_KINDS))
    if launched.size:
        end_ns = max(end_ns, int((ev.ts_ns[launched] + ev.dur_ns[launched]).max()))
    x0_us, x1_us = start_ns / NS_PER_US, end_ns / NS_PER_US
    pad = max((x1_us - x0_us) / 50, 2.0)
    if steps.source == "ProfilerStep":
        where = f"in Perfetto: the 'ProfilerStep#{number}' slice"
    elif number == WHOLE_TRACE:
        where = "in Perfetto: the whole trace"
    else:
        where = f"in Perfetto: step {number} ({steps.label})"
    return [
        FindingLink(
            f"action {rank}: {action.action}, saves {action.saved_us:,.1f} µs/step — {step_words(number)}",
            x0_us - pad,
            x1_us + pad,
            where,
        )
        for rank, action in enumerate(actions, start=1)
    ]
