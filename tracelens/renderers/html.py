"""One self-contained HTML page for a `ReportDocument`: plotly.js inlined (works offline, loads nothing from
the network), fixed element ids and a fixed order, so the same report gives byte-identical HTML."""

from __future__ import annotations

import html
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from tracelens import __version__
from tracelens.report.document import Panel, ReportDocument, Section, Table
from tracelens.units import without_marker

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": True}
# plotly.js' "cartesian" partial bundle (npm plotly.js-cartesian-dist-min, MIT, of the same version as the full
# bundle that the plotly package ships; scripts/vendor_plotly.py refreshes it): smaller and faster to evaluate
# than the full bundle (docs/benchmarks.md#figures-behind-choices-in-the-code), because it registers only these
# trace types. A page whose figures use only these gets it; any other page the
# full bundle.
CARTESIAN_BUNDLE = Path(__file__).parent / "vendor" / "plotly-cartesian.min.js"
CARTESIAN_TYPES = frozenset(
    {"bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour", "image", "pie"}
    | {"scatter", "scatterternary", "violin"}
)
DEFAULT_HEIGHT_PX = 450

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #f6f7f9; }
header { background: #1f2937; color: #f9fafb; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 4px 0 0; font-size: 13px; color: #cbd5e1; }
nav { padding: 8px 24px; background: #e5e7eb; font-size: 13px; position: sticky; top: 0; z-index: 10; }
nav a { margin-right: 14px; color: #1f2937; }
main { padding: 8px 24px 40px; }
section h2 { font-size: 17px; margin: 22px 0 8px; border-bottom: 1px solid #d1d5db; padding-bottom: 4px; }
.panels { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.panel { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: 10px 12px; flex: 1 1 520px;
  min-width: 0; box-sizing: border-box; overflow-x: auto; }
.panel.wide { flex-basis: 100%; }
.panel h3 { font-size: 14px; margin: 0 0 6px; }
.panel summary { font-size: 12px; color: #555; cursor: pointer; }
.note { font-size: 12px; color: #555; margin: 0 0 6px; }
.unavailable { color: #888; font-style: italic; }
.warnings { background: #fff7ed; border: 1px solid #fed7aa; padding: 6px 12px; margin: 10px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
footer { font-size: 12px; color: #777; padding: 0 24px 24px; }
"""


class HtmlReportRenderer:
    """Renders a `ReportDocument` to one HTML page with plotly.js inlined."""

    def render(self, result: ReportDocument) -> str:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{_esc(result.title)}</title>",
            f"<style>{STYLE}</style>",
            '<script type="text/javascript">window.PlotlyConfig = {MathJaxConfig: "local"};</script>',
            f'<script type="text/javascript">{plotly_js(result)}</script>',
            "</head>",
            "<body>",
            f"<header><h1>{_esc(result.title)}</h1><p>{_esc(result.subtitle)}</p></header>",
            _nav(result.sections),
            "<main>",
        ]
        if result.warnings:
            items = "".join(f"<li>{_esc(w)}</li>" for w in result.warnings)
            parts.append(f'<div class="warnings"><b>Warnings</b><ul>{items}</ul></div>')
        parts += [_section(section) for section in result.sections]
        parts += [
            "</main>",
            _plot_script(result),
            f"<footer>Written by tracelens {_esc(__version__)}. Self-contained: works offline.</footer>",
            "</body>",
            "</html>",
            "",
        ]
        return "\n".join(parts)


def plotly_js(document: ReportDocument) -> str:
    """The plotly.js the page inlines: the cartesian bundle when every trace of the page's figures is of a type
    it has (`CARTESIAN_TYPES`) and it is of the plotly package's plotly.js version, else the full bundle."""
    types = {str(trace.type) for _, figure in document.figures() for trace in figure.data}
    partial = cartesian_bundle()
    if partial is not None and types <= CARTESIAN_TYPES:
        return partial
    return str(get_plotlyjs())


@cache
def cartesian_bundle() -> str | None:
    """The vendored cartesian bundle's text, or None when it is missing or of another plotly.js version than
    the plotly package's (its header says `plotly.js (cartesian - minified) vX.Y.Z`)."""
    try:
        text = CARTESIAN_BUNDLE.read_text(encoding="utf-8")
    except OSError:
        return None
    header = re.search(r"plotly\.js \(cartesian - minified\) v(\S+)", text[:500])
    return text if header is not None and header.group(1) == get_plotlyjs_version() else None


def _nav(sections: tuple[Section, ...]) -> str:
    links = "".join(f'<a href="#{_esc(s.id)}">{_esc(s.title)}</a>' for s in sections)
    return f"<nav>{links}</nav>"


def _section(section: Section) -> str:
    notes = "".join(f'<p class="note">{_esc(n)}</p>' for n in section.notes)
    panels = "\n".join(_panel(p) for p in section.panels)
    return (
        f'<section id="{_esc(section.id)}"><h2>{_esc(section.title)}</h2>{notes}'
        f'<div class="panels">\n{panels}\n</div></section>'
    )


def _panel(panel: Panel) -> str:
    wide = (panel.figure is not None and "timeline" in panel.id) or (
        panel.table is not None and len(panel.table.columns) >= 6
    )
    head = f'<div class="panel{" wide" if wide else ""}" id="panel-{_esc(panel.id)}"><h3>{_esc(panel.title)}</h3>'
    note_class = "note unavailable" if panel.figure is None and panel.table is None else "note"
    note = f'<p class="{note_class}">{_esc(panel.note)}</p>' if panel.note else ""
    body = ""
    if panel.figure is not None:
        body = chart_div(panel.figure, f"chart-{panel.id}")
    elif panel.table is not None:
        body = _table(panel.table)
    body += _links(panel)
    if panel.folded:
        return f"{head}<details><summary>{_esc(panel.folded)}</summary>{note}{body}</details></div>"
    return f"{head}{note}{body}</div>"


def _links(panel: Panel) -> str:
    """The panel's finding links: a button per finding that zooms the timeline to it (the page's click handler
    on `.tl-zoom`), and its Perfetto hint."""
    if not panel.links:
        return ""
    items = "".join(
        f'<li><button type="button" class="tl-zoom" data-chart="chart-{_esc(panel.id)}" data-x0="{link.x0_us!r}"'
        f' data-x1="{link.x1_us!r}">show: {_esc(link.label)}</button> <span class="note">{_esc(link.perfetto)}</span>'
        "</li>"
        for link in panel.links
    )
    return f'<p class="note">Findings on the timeline:</p><ul class="finding-links">{items}</ul>'


def chart_div(figure: go.Figure, div_id: str) -> str:
    """The empty element a chart is drawn into (by the script at the end of the page)."""
    height = figure.layout.height or DEFAULT_HEIGHT_PX
    return f'<div id="{_esc(div_id)}" class="plotly-graph-div" style="height:{int(height)}px; width:100%;"></div>'


def _plot_script(document: ReportDocument) -> str:
    """Each figure as a JSON data block (`<script type="application/json">`: the browser's JSON.parse reads it
    several times faster than it compiles the same text as a JavaScript literal), then one script after every
    panel exists (so each chart gets its final width) that draws the charts, with the timeline's level-of-detail
    redraw (`LOD_SCRIPT`): those up to the first timeline (the first screen) at once, in page order; each later
    one when it comes within `DRAW_AHEAD_PX` of the window (`tlDrawWhenSeen`), or before the page is printed."""
    config = json.dumps(PLOTLY_CONFIG, sort_keys=True)
    figures = document.figures()
    data = "\n".join(
        f'<script type="application/json" id="figure-{_esc(panel_id)}">{_figure_json(figure)}</script>'
        for panel_id, figure in figures
    )
    timelines = [i for i, (panel_id, _) in enumerate(figures) if "timeline" in panel_id]
    first_screen = timelines[0] + 1 if timelines else len(figures)
    now = "\n".join(_draw(panel_id, config) + "();" for panel_id, _ in figures[:first_screen])
    later = ",\n".join(
        f'["chart-{_esc(panel_id)}", {_draw(panel_id, config)}]' for panel_id, _ in figures[first_screen:]
    )
    return (
        f'{data}\n<script type="text/javascript">\n{LOD_SCRIPT}\n{now}\n'
        f"tlDrawWhenSeen([\n{later}\n], {DRAW_AHEAD_PX});\n</script>"
    )


DRAW_AHEAD_PX = 400  # a chart below the first screen is drawn when it comes this close to the window


def _draw(panel_id: str, config: str) -> str:
    return (
        f'(function () {{ var f = JSON.parse(document.getElementById("figure-{_esc(panel_id)}").textContent);'
        f' var held = tlHold(f.data), depth = tlDepthInit(f, "chart-{_esc(panel_id)}");'
        f' Plotly.newPlot("chart-{_esc(panel_id)}", f.data, f.layout, {config})'
        f".then(function (gd) {{ gd._tlHeld = held; gd._tlDepth = depth; return tlWatch(gd); }}); }})"
    )


# Level of detail for charts whose traces carry `meta.lod` (report/timeline.py says what the tags mean): on load
# and after every zoom, the slices in the visible range are merged per lane where they are closer than a pixel,
# every band is drawn at least a pixel wide, and each GPU utilization strip is recomputed for the range.
LOD_SCRIPT = """
// The slices of `lod` bar/hover traces are held back from the first plot (drawing tens of thousands of segments
// that the level of detail replaces at once took seconds on big traces): the chart is drawn with them empty, and
// tlLod draws what the visible range needs.
function tlArray(v) {
  if (!v || v.bdata === undefined) return v;
  var bin = atob(v.bdata), bytes = new Uint8Array(bin.length);
  for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  var T = {f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array, i1: Int8Array, u1: Uint8Array,
           u2: Uint16Array, u4: Uint32Array}[v.dtype];
  return new T(bytes.buffer);
}
var tlTitles = new Map(), tlArea = null;
function tlTitle(text) {  // a hover's bold title as plain text (the slice's label); each distinct title is
  var m = /^<b>(.*?)<\\/b>/.exec(String(text));  // unescaped once (through a textarea) and remembered
  if (!m) return "";
  var plain = tlTitles.get(m[1]);
  if (plain === undefined) {
    tlArea = tlArea || document.createElement("textarea");
    tlArea.innerHTML = m[1];
    plain = tlArea.value;
    tlTitles.set(m[1], plain);
  }
  return plain;
}
function tlWithFullNames(text, names, index, scopes, scopeIndex) {  // a kernel's hover starts with its title
  var out = Array.prototype.slice.call(text);  // and full name, stored once per distinct name ([title, full name])
  if (scopes && scopes.length && scopeIndex) {  // and given by index, and ends with its module scope (likewise)
    for (var j = 0; j < out.length; j++) {
      var si = +scopeIndex[j];
      if (si >= 0 && si < scopes.length) out[j] += "<br>scope: " + scopes[si];
    }
  }
  if (!names || !names.length || !index) return out;
  for (var k = 0; k < out.length; k++) {
    var i = +index[k];
    if (i >= 0 && i < names.length) out[k] = names[i][0] + "<br>" + names[i][1] + "<br>" + out[k];
  }
  return out;
}
// Bars are drawn as filled rectangles (x: start, end, end, start, gap), one SVG path per colour group: plotly
// draws a `lines` trace as one path per run between gaps, and thousands of paths cost most of each redraw.
function tlJoinLines(m) {  // a hover trace's texts from its line table (renderers/html.py `_line_tables`)
  var counts = tlArray(m.line_count), at = tlArray(m.line_index), out = new Array(counts.length), p = 0;
  for (var k = 0; k < counts.length; k++) {
    var text = m.lines[at[p++]];
    for (var j = 1; j < counts[k]; j++) text += "<br>" + m.lines[at[p++]];
    out[k] = text;
  }
  return out;
}
function tlHold(data) {
  var held = {};
  data.forEach(function (t, i) {
    if (!t.meta || (t.meta.lod !== "bars" && t.meta.lod !== "hover" && t.meta.lod !== "outline")) return;
    if (t.meta.lines) {
      t.text = tlJoinLines(t.meta);
      delete t.meta.lines; delete t.meta.line_count; delete t.meta.line_index;
    }
    held[i] = {x: tlArray(t.x), y: tlArray(t.y), text: t.text, customdata: t.customdata ? tlArray(t.customdata) : null};
    t.x = []; t.y = [];
    if (t.text) t.text = [];
    if (t.meta.lod === "bars") {
      t.mode = "none"; t.fill = "toself"; t.fillcolor = t.line.color; t.line = {width: 0, color: t.line.color};
    }
  });
  return held;
}
var TL_BINS = 400, TL_CHAR_PX = 6.5, TL_MAX_LABELS = 3000;  // labels: ~6.5 px per 10 px character
function tlOriginals(gd) {
  var groups = {}, utils = [], o = {groups: [], utils: [], lanes: {}};
  gd.data.forEach(function (t, i) {
    var m = t.meta;
    if (!m || !m.lod) return;
    if (m.lod === "util") { utils.push(i); return; }
    if (m.lod === "labels") { o.labels = i; return; }
    if (m.lod === "outline") { o.outline = i; return; }
    if (m.lod === "links" || m.lod === "counter") return;  // moved by tlDepthUpdate only
    (groups[m.group] = groups[m.group] || {})[m.lod] = i;
  });
  var full = {};  // decoded arrays: those held back from the first plot, else plotly's (gd.data may still hold
  gd._fullData.forEach(function (t) { full[t.index] = t; });  // the base64 typed-array form)
  Object.keys(gd._tlHeld || {}).forEach(function (i) { full[i] = gd._tlHeld[i]; });
  Object.keys(groups).forEach(function (g) {
    var b = full[groups[g].bars], h = full[groups[g].hover], n = h.x.length;
    var s = new Float64Array(n), e = new Float64Array(n), y = new Int32Array(n), idx = new Array(n);
    for (var k = 0; k < n; k++) { s[k] = +b.x[3 * k]; e[k] = +b.x[3 * k + 1]; y[k] = +b.y[3 * k]; idx[k] = k; }
    idx.sort(function (a, c) { return (y[a] - y[c]) || (s[a] - s[c]); });
    var hm = gd.data[groups[g].hover].meta || {}, fullIndex = h.customdata;
    var text = h.text ? tlWithFullNames(h.text, hm.names, fullIndex, hm.scopes, hm.scope_index) : null;
    o.groups.push({s: s, e: e, y: y, idx: idx, text: text, label: text ? text.map(tlTitle) : null,
                   name: String(gd.data[groups[g].bars].name || ""), half: +gd.data[groups[g].bars].meta.half,
                   bars: groups[g].bars, hover: groups[g].hover});
  });
  if (o.outline !== undefined) o.outlines = tlOutlines(full[o.outline]);
  utils.forEach(function (i) { o.utils.push(i); o.lanes[gd.data[i].meta.lane] = []; });
  o.groups.forEach(function (g) {
    for (var k = 0; k < g.s.length; k++) { var l = o.lanes[g.y[k]]; if (l) l.push([g.s[k], g.e[k]]); }
  });
  Object.keys(o.lanes).forEach(function (lane) {
    var merged = [];
    o.lanes[lane].sort(function (a, c) { return a[0] - c[0]; }).forEach(function (iv) {
      var last = merged[merged.length - 1];
      if (last && iv[0] <= last[1]) { last[1] = Math.max(last[1], iv[1]); } else { merged.push([iv[0], iv[1]]); }
    });
    o.lanes[lane] = merged;
  });
  return o;
}
document.addEventListener("click", function (ev) {  // a finding's button: zoom its timeline to the finding
  var b = ev.target.closest && ev.target.closest(".tl-zoom");
  if (!b) return;
  var gd = document.getElementById(b.dataset.chart);
  if (!gd) return;
  gd.scrollIntoView({block: "center"});
  Plotly.relayout(gd, {"xaxis.range": [+b.dataset.x0, +b.dataset.x1]});
});
function tlOutlines(t) {  // the critical path's outlines (x: s, e, e, s, s, gap; y: top, top, bottom, bottom, ...)
  var n = Math.floor(t.x.length / 6), s = new Float64Array(n), e = new Float64Array(n), top = new Float64Array(n);
  var bottom = new Float64Array(n), idx = new Array(n);
  for (var k = 0; k < n; k++) {
    s[k] = +t.x[6 * k]; e[k] = +t.x[6 * k + 1]; top[k] = +t.y[6 * k]; bottom[k] = +t.y[6 * k + 2]; idx[k] = k;
  }
  idx.sort(function (a, c) { return (top[a] - top[c]) || (s[a] - s[c]); });
  return {s: s, e: e, top: top, bottom: bottom, idx: idx};
}
function tlOutlineLod(c, x0, x1, px, map) {  // outlines closer than a pixel on a lane merge, each at least a
  var x = [], y = [], cur = null;  // pixel wide; those on a folded lane (`map`: tlDepthState) are not drawn
  function flush() {
    if (!cur) return;
    var end = Math.max(cur.e, cur.s + px), lane = Math.round((cur.t + cur.b) / 2), shift = map ? map[lane] - lane : 0;
    x.push(cur.s, end, end, cur.s, cur.s, null);
    y.push(cur.t + shift, cur.t + shift, cur.b + shift, cur.b + shift, cur.t + shift, null);
  }
  for (var j = 0; j < c.idx.length; j++) {
    var k = c.idx[j];
    if (c.e[k] < x0 - px || c.s[k] > x1 + px) continue;
    if (map && map[Math.round((c.top[k] + c.bottom[k]) / 2)] < 0) continue;
    if (cur && cur.t === c.top[k] && c.s[k] - cur.e < px) { cur.e = Math.max(cur.e, c.e[k]); continue; }
    flush(); cur = {s: c.s[k], e: c.e[k], t: c.top[k], b: c.bottom[k]};
  }
  flush();
  return [x, y];
}
function tlLod(gd, layout) {  // `layout`: a relayout to make in the same redraw (tlSetDepth), else none
  var o = gd._tlOriginals || (gd._tlOriginals = tlOriginals(gd));
  if (!o.groups.length) return;
  var map = gd._tlDepth ? gd._tlDepth.state.map : null;  // original lane -> lane drawn (-1: folded away)
  var xa = gd._fullLayout.xaxis, x0 = xa.range[0], x1 = xa.range[1];
  var px = (x1 - x0) / Math.max(xa._length, 1);
  var update = {x: [], y: [], text: [], z: []}, indices = [];
  var lx = [], ly = [], lt = [];
  o.groups.forEach(function (g) {
    var bx = [], by = [], hx = [], hy = [], ht = [], cur = null, half = g.half;
    function flush() {
      if (!cur) return;
      var end = Math.max(cur.e, cur.s + px);
      if (cur.n === 1 && g.label && lt.length < TL_MAX_LABELS) {
        var chars = Math.floor((cur.e - cur.s) / px / TL_CHAR_PX), dur = (cur.e - cur.s).toFixed(1) + " µs";
        var text = g.label[cur.k] + " " + dur;
        if (text.length > chars) text = g.label[cur.k];
        if (text.length > chars) text = chars >= 4 ? text.slice(0, chars - 1) + "…" : "";
        if (text) { lx.push((cur.s + cur.e) / 2); ly.push(cur.y); lt.push(text); }
      }
      bx.push(cur.s, end, end, cur.s, null); by.push(cur.y - half, cur.y - half, cur.y + half, cur.y + half, null);
      hx.push((cur.s + end) / 2); hy.push(cur.y);
      ht.push(cur.n === 1 && g.text ? g.text[cur.k] : cur.n.toLocaleString() + " slices merged at this zoom<br>"
        + cur.busy.toFixed(1) + " µs summed over " + (cur.e - cur.s).toFixed(1) + " µs<br>zoom in to see each one");
      cur = null;
    }
    for (var j = 0; j < g.idx.length; j++) {
      var k = g.idx[j], s = g.s[k], e = g.e[k], y = map ? map[g.y[k]] : g.y[k];
      if (e < x0 - px || s > x1 + px || y < 0) continue;
      if (cur && cur.y === y && s - cur.e < px) { cur.e = Math.max(cur.e, e); cur.n += 1; cur.busy += e - s; }
      else { flush(); cur = {s: s, e: e, y: y, n: 1, busy: e - s, k: k}; }
    }
    flush();
    update.x.push(bx, hx); update.y.push(by, hy); update.text.push(undefined, ht); update.z.push(undefined, undefined);
    indices.push(g.bars, g.hover);
  });
  if (o.labels !== undefined) {
    update.x.push(lx); update.y.push(ly); update.text.push(lt); update.z.push(undefined); indices.push(o.labels);
  }
  if (o.outlines) {
    var outline = tlOutlineLod(o.outlines, x0, x1, px, map);
    update.x.push(outline[0]); update.y.push(outline[1]); update.text.push(undefined); update.z.push(undefined);
    indices.push(o.outline);
  }
  tlUtil(gd, o, x0, x1, update, indices, map);
  if (layout) tlDepthUpdate(gd._tlDepth, gd.data, update, indices);
  var done = layout ? Plotly.update(gd, update, layout, indices) : Plotly.restyle(gd, update, indices);
  tlTotals(gd, o, x0, x1);  // one redraw (undefined: that trace keeps the attribute)
  return done;
}
function tlUtil(gd, o, x0, x1, update, indices, map) {  // each GPU stream's busy fraction per bin of the range
  var edges = [];
  for (var b = 0; b <= TL_BINS; b++) edges.push(x0 + (x1 - x0) * b / TL_BINS);
  o.utils.forEach(function (i) {
    var lane = gd.data[i].meta.lane, merged = o.lanes[lane] || [], z = new Array(TL_BINS).fill(0);
    var w = (x1 - x0) / TL_BINS;
    merged.forEach(function (iv) {
      if (iv[1] < x0 || iv[0] > x1 || w <= 0) return;
      var first = Math.max(0, Math.floor((iv[0] - x0) / w)), last = Math.min(TL_BINS - 1, Math.floor((iv[1] - x0) / w));
      for (var bin = first; bin <= last; bin++) {
        var lo = Math.max(iv[0], edges[bin]), hi = Math.min(iv[1], edges[bin + 1]);
        if (hi > lo) z[bin] += (hi - lo) / w;
      }
    });
    var y = gd.data[i].y, at = map ? map[lane] - 0.5 : +y[0];
    update.x.push(edges); update.y.push([at, at + (+y[1] - +y[0])]); update.text.push(undefined); update.z.push([z]);
    indices.push(i);
  });
}
// Totals of the visible range (drag to select a range, as Perfetto's area selection): GPU time clipped to the
// range, by category (the colour groups "GPU: <category>") and by kernel (short name), under the chart.
function tlTotals(gd, o, x0, x1) {
  var byCat = {}, byKernel = {}, total = 0;
  o.groups.forEach(function (g) {
    if (g.name.indexOf("GPU: ") !== 0) return;
    var cat = g.name.slice(5);
    for (var k = 0; k < g.s.length; k++) {
      var d = Math.min(g.e[k], x1) - Math.max(g.s[k], x0);
      if (d <= 0) continue;
      byCat[cat] = (byCat[cat] || 0) + d; total += d;
      var name = g.label ? g.label[k] : cat, entry = byKernel[name] || (byKernel[name] = [0, 0]);
      entry[0] += d; entry[1] += 1;
    }
  });
  var box = document.getElementById(gd.id + "-range");
  if (!box) {
    box = document.createElement("div"); box.id = gd.id + "-range"; box.className = "note range-totals";
    gd.parentNode.insertBefore(box, gd.nextSibling);
  }
  function us(v) { return v.toLocaleString("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1}) + " µs"; }
  var cats = Object.keys(byCat).sort(function (a, b) { return byCat[b] - byCat[a]; });
  var kernels = Object.keys(byKernel).sort(function (a, b) { return byKernel[b][0] - byKernel[a][0]; });
  box.textContent = "Visible range " + us(x0) + " – " + us(x1) + " (" + us(x1 - x0) + "; drag to select another): "
    + "GPU time of the slices drawn one by one, summed over streams: "
    + us(total) + (cats.length ? " = " + cats.map(function (c) { return c + " " + us(byCat[c]); })
    .join(" + ") : "") + (kernels.length ? ". By kernel: " + kernels.slice(0, 8).map(function (n) {
      return n + " " + us(byKernel[n][0]) + " (×" + byKernel[n][1] + ")"; }).join(" · ")
    + (kernels.length > 8 ? " · " + (kernels.length - 8) + " more" : "") : "") + ".";
  box.dataset.gpuUs = total.toFixed(3);
}
// Charts below the first screen: each drawn when it comes within `ahead` px of the window (drawing them all at
// load took about a third of a second on the corpus' biggest report), all of them before printing.
function tlDrawWhenSeen(pending, ahead) {
  var left = {};
  pending.forEach(function (p) { left[p[0]] = p[1]; });
  function draw(id) { var f = left[id]; if (f) { delete left[id]; f(); } }
  window.addEventListener("beforeprint", function () { Object.keys(left).forEach(draw); });
  if (!("IntersectionObserver" in window)) { pending.forEach(function (p) { draw(p[0]); }); return; }
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target.id); } });
  }, {rootMargin: ahead + "px 0px"});
  pending.forEach(function (p) { var el = document.getElementById(p[0]); if (el) seen.observe(el); else draw(p[0]); });
}
function tlWatch(gd) {
  if (!gd.data.some(function (t) { return t.meta && t.meta.lod; })) return;
  tlLod(gd);
  if (gd._tlDepth) tlDepthWatch(gd);
  gd.on("plotly_relayout", function (ev) {
    if (Object.keys(ev).some(function (key) { return key.indexOf("xaxis") === 0; })) tlLod(gd);
  });
}
// CPU call depth (report/timeline.py `depth_meta`, layout.meta.tl_depth): each CPU thread's band shows its outermost
// `shown[b]` levels, one lane each, and the bands below move up (re-packed); GPU streams always show their lane.
// The figure's slices keep their original lanes: the level of detail maps them (`map`, -1 where folded away); the
// launch links whose call is folded away start from the deepest lane shown of its thread (`host`: the enclosing
// call drawn there spans the launch); counter lanes move up with the lanes above them.
function tlDepthState(m, shown) {
  var map = new Int32Array(m.n_lanes).fill(-1), host = new Int32Array(m.n_lanes), first = [], offset = 0;
  m.bands.forEach(function (b, i) {
    var k = b[2] ? b[1] : Math.max(1, Math.min(b[1], shown[i]));
    first.push(offset);
    for (var j = 0; j < b[1]; j++) {
      map[b[0] + j] = j < k ? offset + j : -1;
      host[b[0] + j] = offset + Math.min(j, k - 1);
    }
    offset += k;
  });
  return {map: map, host: host, first: first, lanes: offset};
}
function tlDepthLayout(d) {  // height, lane ticks (a folded thread's label starts with ▸, an unfolded one's with ▾)
  var m = d.meta, st = d.state, rows = st.lanes + m.counters, vals = st.first.slice(), text = [];
  m.bands.forEach(function (b, i) {
    text.push((b[2] || b[1] < 2 ? "" : d.shown[i] < b[1] ? "▸ " : "▾ ") + d.text[i]);
  });
  for (var c = 0; c < m.counters; c++) { vals.push(st.lanes + c); text.push(d.text[m.bands.length + c]); }
  var height = Math.round(Math.min(m.max_px, Math.max(m.min_px, m.margin_px + m.lane_px * rows)));
  return {height: height, "yaxis.tickvals": vals, "yaxis.ticktext": text, "yaxis.range": [rows - 0.5, -0.5]};
}
function tlDepthY(d, t, y) {  // a links or counter trace's y for the depth state, from its original y
  var st = d.state, out = new Float64Array(y.length);
  if (t.meta.lod === "counter") {
    for (var k = 0; k < y.length; k++) out[k] = y[k] + st.lanes - d.meta.n_lanes;
    return out;
  }
  for (var j = 0; j < y.length; j++) {
    var lane = Math.round(y[j]);
    out[j] = isNaN(y[j]) ? NaN : st.host[lane] + (y[j] - lane);
  }
  return out;
}
function tlDepthUpdate(d, data, update, indices) {  // the links and counter traces' y into a restyle
  Object.keys(d.statics).forEach(function (i) {
    update.x.push(undefined); update.y.push(tlDepthY(d, data[i], d.statics[i])); update.text.push(undefined);
    update.z.push(undefined); indices.push(+i);
  });
}
function tlDepthInit(f, id) {  // before the first plot: the bands as at load (`default`), the figure laid out so
  // (its height, lane ticks, and the links, counter and utilization traces moved); the original y kept
  var m = f.layout.meta && f.layout.meta.tl_depth;
  if (!m || !m.bands) return null;
  var d = {meta: m, shown: m.default.slice(), text: Array.from(f.layout.yaxis.ticktext || [], String), statics: {}};
  f.data.forEach(function (t, i) {
    if (!t.meta || (t.meta.lod !== "links" && t.meta.lod !== "counter")) return;
    d.statics[i] = Float64Array.from(tlArray(t.y), Number);
  });
  d.state = tlDepthState(m, d.shown);
  Object.keys(d.statics).forEach(function (i) { f.data[i].y = tlDepthY(d, f.data[i], d.statics[i]); });
  f.data.forEach(function (t) {
    if (!t.meta || t.meta.lod !== "util") return;
    var at = d.state.map[t.meta.lane] - 0.5;
    t.y = [at, at + (+t.y[1] - +t.y[0])];
  });
  var lay = tlDepthLayout(d);
  f.layout.height = lay.height;
  f.layout.yaxis.tickvals = lay["yaxis.tickvals"]; f.layout.yaxis.ticktext = lay["yaxis.ticktext"];
  f.layout.yaxis.range = lay["yaxis.range"];
  var div = document.getElementById(id);
  if (div) div.style.height = lay.height + "px";
  return d;
}
function tlSetDepth(gd, shown, extra) {  // fold / unfold: one redraw of the slices in view, lanes re-packed
  var d = gd._tlDepth;
  d.shown = shown; d.state = tlDepthState(d.meta, shown);
  var lay = Object.assign(tlDepthLayout(d), extra || {});
  gd.style.height = lay.height + "px";
  return tlLod(gd, lay);
}
function tlDepthBand(gd, ev) {  // the CPU band whose label (left of the plot) is under the pointer, or -1
  var d = gd._tlDepth, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  var px = ev.clientX - box.left, py = ev.clientY - box.top;
  if (px >= xa._offset || py < ya._offset || py > ya._offset + ya._length) return -1;
  var lane = ya.p2l(py - ya._offset), st = d.state;
  for (var b = 0; b < d.meta.bands.length; b++) {
    var band = d.meta.bands[b], n = (b + 1 < st.first.length ? st.first[b + 1] : st.lanes) - st.first[b];
    if (!band[2] && band[1] > 1 && lane >= st.first[b] - 0.5 && lane < st.first[b] + n - 0.5) return b;
  }
  return -1;
}
function tlDepthChoice(d, v) {  // the levels each band shows for a menu entry's `cpu_depth` (null: per thread)
  if (v === "threads") return null;
  return d.meta.bands.map(function (b, i) {
    return v === "default" ? d.meta.default[i] : v === "all" || b[2] ? b[1] : Math.min(b[1], +v);
  });
}
function tlDepthWatch(gd) {  // the "CPU depth" menu, and a click on a thread's label folds / unfolds that thread
  var d = gd._tlDepth, menus = gd.layout.updatemenus || [];
  var menu = menus.findIndex(function (m) {
    return (m.buttons || []).some(function (b) { return b.args && b.args[0] && b.args[0].cpu_depth !== undefined; });
  });
  gd.on("plotly_buttonclicked", function (ev) {
    var a = ev.button && ev.button.args && ev.button.args[0];
    if (!a || a.cpu_depth === undefined) return;
    var shown = tlDepthChoice(d, a.cpu_depth);
    if (shown) tlSetDepth(gd, shown);
  });
  gd.addEventListener("click", function (ev) {
    var b = tlDepthBand(gd, ev);
    if (b < 0) return;
    var shown = d.shown.slice(), levels = d.meta.bands[b][1];
    shown[b] = shown[b] < levels ? levels : 1;
    var extra = {};
    if (menu >= 0) {  // the menu names the entry the new state is, else "per thread"
      var buttons = menus[menu].buttons, active = buttons.length - 1;
      buttons.forEach(function (button, i) {
        var same = tlDepthChoice(d, button.args[0].cpu_depth);
        if (same && active === buttons.length - 1 && same.join() === shown.join()) active = i;
      });
      extra["updatemenus[" + menu + "].active"] = active;
    }
    tlSetDepth(gd, shown, extra);
  });
  gd.addEventListener("mousemove", function (ev) {
    var over = tlDepthBand(gd, ev) >= 0;
    if (over !== !!d.pointer) { d.pointer = over; gd.style.cursor = over ? "pointer" : ""; }
  });
}
"""


def _figure_json(figure: go.Figure) -> str:
    """The figure as JSON safe inside a script element (plotly escapes `<`, `>` and `/`), its hover texts as line
    tables (`_line_tables`)."""
    return str(pio.to_json(_line_tables(figure.to_plotly_json()), validate=False))


def _line_tables(figure: dict[str, Any]) -> dict[str, Any]:
    """`figure` (a plotly dict) with each level-of-detail hover trace's `text` stored as a table of its distinct
    lines (`meta.lines`) with, per text, its number of lines (`meta.line_count`) and their positions in the table
    (`meta.line_index`, all texts' lines in a row); the page's script (`tlHold`) joins each text back exactly
    (lines are split and joined at `<br>`). The xdit Flux page's 17,000 hovers hold 57,000 lines, 6,600 distinct:
    2.4 MB of text in the page becomes about 0.3 MB."""
    for trace in figure.get("data", []):
        meta, texts = trace.get("meta"), trace.get("text")
        if not isinstance(meta, dict) or meta.get("lod") != "hover" or not isinstance(texts, (list, tuple)):
            continue
        table: dict[str, int] = {}
        counts: list[int] = []
        positions: list[int] = []
        for text in texts:
            lines = str(text).split("<br>")
            counts.append(len(lines))
            positions.extend(table.setdefault(line, len(table)) for line in lines)
        trace["meta"] = {
            **meta,
            "lines": list(table),
            "line_count": np.asarray(counts, dtype=np.uint8 if max(counts, default=0) < 2**8 else np.uint32),
            "line_index": np.asarray(positions, dtype=np.uint16 if len(table) < 2**16 else np.uint32),
        }
        del trace["text"]
    return figure


def _table(table: Table) -> str:
    numeric = [all(_looks_numeric(row[i]) for row in table.rows) and table.rows for i in range(len(table.columns))]
    head = "".join(
        f'<th class="num">{_esc(c)}</th>' if numeric[i] else f"<th>{_esc(c)}</th>" for i, c in enumerate(table.columns)
    )
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{_esc(v)}</td>' if numeric[i] else f"<td>{_esc(v)}</td>" for i, v in enumerate(row))
        + "</tr>"
        for row in table.rows
    )
    header = f"<thead><tr>{head}</tr></thead>" if any(table.columns) else ""
    return f"<table>{header}<tbody>{body}</tbody></table>"


def _looks_numeric(text: str) -> bool:
    stripped = without_marker(text).replace(",", "").replace(".", "", 1).lstrip("-")
    return stripped.isdigit()


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
