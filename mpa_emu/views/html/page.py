"""The frame of every HTML report: one self-contained page (inline CSS, script and SVG,
nothing fetched) with a summary, the ladder diagram, a panel explaining the frame under
the pointer or clicked, and the report's own sections below.

Rows of the ladder are marked by class: ``hl`` (the divergence or failed expectation:
red and selected when the page opens), ``rel`` (related: amber) and ``ok`` (matched:
green). The page opens at its top (the verdict and the box above the ladder on the first
screen); the ladder scrolls in a box of its own, at most a screen high, and opens scrolled
to the first ``hl`` row, with the fields panel beside it (sticky when the page scrolls).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Protocol, TextIO

from mpa_emu.views.diagram import RowMarks, lane_gap, write_svg
from mpa_emu.views.html.fields import Fields
from mpa_emu.views.ladder import Row

MARKS = ("hl", "rel", "ok")


class LadderLike(Protocol):
    """What a page draws: lane titles and rows (a
    :class:`~mpa_emu.views.diagram.Ladder`, or rows read again from a run's records
    each time they are asked for: the page reads them twice)."""

    @property
    def columns(self) -> Sequence[str]:
        """One title per lane."""

    @property
    def rows(self) -> Iterable[Row]:
        """The rows, in order."""


@dataclass(slots=True)
class Section:
    """A titled part of the report below the ladder: ``body`` is HTML, or writes its
    HTML into the page as the page is written (a table of a long run's rows)."""

    title: str
    body: str | Callable[[TextIO], None]
    anchor: str = ""


@dataclass(slots=True)
class Page:
    """What a report shows; :meth:`html` renders it."""

    title: str
    verdict: str
    failed: bool
    ladder: LadderLike
    frames: Mapping[int, Fields] | Iterable[tuple[int, Fields]]
    """Decoded fields by frame number, shown when a ladder row is pointed at or clicked
    (a mapping, or pairs read as the page is written)."""
    marks: Mapping[int, str] | RowMarks = field(default_factory=dict)
    """Row index (in ``ladder.rows``) -> one of :data:`MARKS`; or a function of the
    row's index and the row giving its mark (or None)."""
    top: str = ""
    """HTML between the verdict and the ladder (the divergence, side by side)."""
    sections: list[Section] = field(default_factory=list)

    def html(self) -> str:
        """The page as one HTML document."""
        out = io.StringIO()
        self.write(out)
        return out.getvalue()

    def write(self, out: TextIO) -> None:
        """Write the page into ``out`` as it is made: the ladder's rows, the sections'
        tables and the frames' fields are read while written, never all held."""
        nav = "".join(f'<a href="#{escape(s.anchor or _anchor(s.title))}">{escape(s.title)}</a>'
                      for s in self.sections)
        verdict_class = "verdict bad" if self.failed else "verdict good"
        out.write("\n".join([
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(self.title)}</title>",
            f"<style>{CSS}</style></head><body>",
            f"<header><h1>{escape(self.title)}</h1>",
            f'<p class="{verdict_class}" id="verdict">{escape(self.verdict)}</p>',
            f"<nav>{nav}</nav></header>",
            self.top,
            '<div class="main"><div class="ladder" id="ladder">', ""]))
        marks = self.marks
        by_row: RowMarks = marks if callable(marks) else lambda number, _row: marks.get(number)
        # Two passes over the rows (read again, never held): the lanes' spacing first.
        # Inline SVG takes no XML declaration.
        columns = self.ladder.columns
        gap = lane_gap(self.ladder.rows, len(columns))
        write_svg(self.ladder.rows, columns, out, gap, marks=by_row, declaration=False)
        out.write("\n".join([
            "", "</div>",
            '<aside id="fields"><h2>Frame</h2><p class="hint">Point at a frame in the '
            "ladder to see its fields; click to keep them here.</p></aside></div>", ""]))
        for s in self.sections:
            out.write(f'<section id="{escape(s.anchor or _anchor(s.title))}">'
                      f"<h2>{escape(s.title)}</h2>")
            if callable(s.body):
                s.body(out)
            else:
                out.write(s.body)
            out.write("</section>")
        out.write('\n<script type="application/json" id="report-data">')
        _write_frames(self.frames, out)
        out.write("\n".join(["</script>", f"<script>{SCRIPT}</script>", "</body></html>", ""]))


def _write_frames(frames: Mapping[int, Fields] | Iterable[tuple[int, Fields]],
                  out: TextIO) -> None:
    """``{"frames": {number: fields, ...}}`` as compact JSON, one frame at a time. "</"
    cannot end the script element early when written as "<\\/" (the same JSON); no
    piece boundary splits one, since every piece ends in JSON punctuation."""
    pairs = frames.items() if isinstance(frames, Mapping) else frames
    out.write('{"frames":{')
    for n, (number, fields) in enumerate(pairs):
        piece = json.dumps(str(number)) + ":" + json.dumps(fields, separators=(",", ":"))
        out.write(("," if n else "") + piece.replace("</", "<\\/"))
    out.write("}}")


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def cell(text: object) -> str:
    """Escaped table cell content."""
    return escape(str(text))


def frame_link(number: int | None) -> str:
    """A link selecting frame ``number`` in the ladder (plain text without a number)."""
    if number is None:
        return "-"
    return f'<a href="#ladder" class="goto" data-goto="{number}">frame {number}</a>'


def table(head: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "") -> str:
    """An HTML table; cells are HTML (escape text with :func:`cell`)."""
    out = io.StringIO()
    write_table(out, head, rows, cls=cls)
    return out.getvalue()


def write_table(out: TextIO, head: Sequence[str], rows: Iterable[Sequence[str]], *,
                cls: str = "") -> None:
    """:func:`table` written into ``out`` a row at a time."""
    started = False
    for row in rows:
        line = "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        if not started:
            th = "".join(f"<th>{escape(h)}</th>" for h in head)
            out.write(f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>')
            started = True
        out.write(line)
    out.write("</tbody></table>" if started else '<p class="none">none</p>')


def fields_table(fields: Fields, other: Fields | None = None,
                 alike: Collection[str] = ()) -> str:
    """A frame's fields; with ``other``, rows whose value differs there are marked
    (fields the other frame lacks are not compared, nor those named in ``alike``: a time
    inside replay's ``--time-tolerance`` is no difference)."""
    theirs = dict(other) if other is not None else None
    rows = []
    for name, value in fields:
        differs = (theirs is not None and name in theirs and theirs[name] != value
                   and name not in alike)
        cls = ' class="diff"' if differs else ""
        rows.append(f"<tr{cls}><th>{escape(name)}</th><td>{escape(value)}</td></tr>")
    return f'<table class="fields">{"".join(rows)}</table>'


def versus(title: str, expected_title: str, expected: str, actual_title: str,
           actual: str, extra: str = "") -> str:
    """A highlighted box: expected and actual side by side."""
    return (f'<section class="versus" id="highlight"><h2>{escape(title)}</h2>{extra}'
            f'<div class="sides"><div class="side expected"><h3>{escape(expected_title)}</h3>'
            f'{expected}</div><div class="side actual"><h3>{escape(actual_title)}</h3>'
            f"{actual}</div></div></section>")


CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 'DejaVu Sans', Helvetica, Arial, sans-serif; color: #222;
  background: #fafafa; }
header { padding: 12px 20px 6px; background: #fff; border-bottom: 1px solid #ddd; }
h1 { font-size: 20px; margin: 0 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 16px; margin: 0 0 8px; }
h3 { font-size: 14px; margin: 0 0 6px; }
nav a { margin-right: 14px; font-size: 13px; }
.verdict { font-weight: bold; padding: 6px 10px; border-radius: 4px; margin: 6px 0;
  overflow-wrap: anywhere; }
.verdict.good { background: #e3f5e1; color: #14501a; }
.verdict.bad { background: #fde4e1; color: #8a1408; }
section { margin: 14px 20px; padding: 12px 14px; background: #fff; border: 1px solid #ddd;
  border-radius: 4px; overflow-x: auto; }
section.versus { border: 2px solid #c62828; background: #fff8f7; }
section.explained.failed { border: 2px solid #c62828; }
section.explained.warning { border: 2px solid #e0a800; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.side { min-width: 0; }
.side.expected h3 { color: #1b5e20; } .side.actual h3 { color: #b71c1c; }
.main { display: grid; grid-template-columns: minmax(0, 1fr) 380px; gap: 12px;
  margin: 14px 20px; align-items: start; }
.ladder { background: #fff; border: 1px solid #ddd; overflow: auto;
  max-height: calc(100vh - 16px); }
.ladder svg { display: block; }
aside { position: sticky; top: 8px; background: #fff; border: 1px solid #ddd; padding: 10px;
  max-height: calc(100vh - 16px); overflow: auto; border-radius: 4px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left;
  vertical-align: top; }
thead th { background: #f2f2f2; }
table.fields { width: 100%; table-layout: fixed; }
table.fields th { width: 36%; font-weight: normal; color: #555; }
table.fields td { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px;
  overflow-wrap: anywhere; }
tr.diff td, tr.diff th { background: #ffe0b2; font-weight: bold; }
tr.bad td { background: #fde4e1; } tr.warn td { background: #fff4d6; }
pre.wrap { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; }
td.mono, .mono { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px; }
.hint, .none { color: #777; font-style: italic; }
g.row { cursor: pointer; }
g.row > rect.hit { fill: transparent; }
g.row:hover > rect.hit { fill: #eef3ff; }
g.row.ok > rect.hit { fill: #eaf7ea; }
g.row.rel > rect.hit { fill: #fff1c2; }
g.row.hl > rect.hit { fill: #ffd6d1; stroke: #c62828; stroke-width: 1.5; }
g.row.sel > rect.hit { stroke: #1a56c4; stroke-width: 2; }
"""

SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var svg = document.querySelector("#ladder svg");
  var panel = document.getElementById("fields");
  var pinned = null;
  var width = svg.viewBox.baseVal.width;
  function el(tag, text) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function show(g) {
    panel.textContent = "";
    var number = g.getAttribute("data-frame");
    var fields = number ? data.frames[number] : null;
    panel.appendChild(el("h2", number ? "Frame " + number : "Event"));
    if (!fields) {
      var texts = g.querySelectorAll("text");
      var words = [];
      for (var i = 0; i < texts.length; i++) { words.push(texts[i].textContent); }
      panel.appendChild(el("p", words.join(" ")));
      return;
    }
    var t = el("table");
    t.className = "fields";
    fields.forEach(function (f) {
      var tr = el("tr");
      tr.appendChild(el("th", f[0]));
      var td = el("td", f[1]);
      tr.appendChild(td);
      t.appendChild(tr);
    });
    panel.appendChild(t);
  }
  function select(g) {
    if (pinned) { pinned.classList.remove("sel"); }
    pinned = g;
    g.classList.add("sel");
    show(g);
  }
  var rows = svg.querySelectorAll("g.row");
  rows.forEach(function (g) {
    var box = g.getBBox();
    var hit = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    hit.setAttribute("class", "hit");
    hit.setAttribute("x", "2");
    hit.setAttribute("y", String(box.y - 2));
    hit.setAttribute("width", String(width - 4));
    hit.setAttribute("height", String(box.height + 4));
    g.insertBefore(hit, g.firstChild);
    g.addEventListener("mouseenter", function () { if (!pinned) { show(g); } });
    g.addEventListener("click", function () { select(g); });
  });
  document.querySelectorAll("a.goto").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      var g = svg.querySelector('g.row[data-frame="' + a.getAttribute("data-goto") + '"]');
      if (!g) { return; }
      ev.preventDefault();
      select(g);
      g.scrollIntoView({block: "center"});
    });
  });
  // Scroll the ladder's own box, never the page: the verdict above stays on screen.
  function reveal(g) {
    var ladder = document.getElementById("ladder");
    var lb = ladder.getBoundingClientRect();
    // Below a tall box above it, the ladder's box ends with the first screen (at least
    // 300 px high), so that the row it is scrolled to is on that screen.
    var room = window.innerHeight - lb.top - 8;
    if (room >= 300 && lb.height > room) {
      ladder.style.maxHeight = room + "px";
      lb = ladder.getBoundingClientRect();
      // Once the page scrolls, the box is a screen high again and the panel sticks.
      window.addEventListener("scroll", function () { ladder.style.maxHeight = ""; },
                              {once: true});
    }
    var gb = g.getBoundingClientRect();
    var bottom = Math.min(lb.bottom, window.innerHeight);
    if (gb.top >= Math.max(lb.top, 0) && gb.bottom <= bottom) { return; }
    var offset = Math.max(0, (bottom - lb.top - gb.height) / 2);
    ladder.scrollTop += gb.top - lb.top - offset;
  }
  var first = svg.querySelector("g.row.hl");
  if (first) {
    select(first);
    reveal(first);
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
"""
