"""The HTML report's inline style sheet and script (:mod:`corrective_rag.runs.reports.html`).

Constants, so that the page's Content-Security-Policy can name the script by its hash: the
browser then runs this script and nothing else, whatever text a document smuggles into the page.
The script holds no data from the runs; it only sorts the table and opens a question's details.
"""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
:root { --fg:#1d2330; --muted:#5d6678; --line:#d9dee8; --bg:#f6f7fa; --card:#fff;
  --keep:#1b7f3b; --drop:#b3261e; --ungr:#8a6d00; --accent:#2856c6; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header, main { max-width: 1200px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
.muted { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 12px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; }
.bars { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 12px; }
.bar { display: grid; grid-template-columns: 160px 1fr 60px; gap: 8px; align-items: center;
  margin: 3px 0; }
.bar i { display: block; height: 12px; background: var(--accent); border-radius: 3px; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left;
  vertical-align: top; }
th { background: #eef1f7; position: sticky; top: 0; }
#runs th { cursor: pointer; user-select: none; white-space: nowrap; }
#runs th[aria-sort=ascending]::after { content: " \\25B2"; }
#runs th[aria-sort=descending]::after { content: " \\25BC"; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.error td { color: var(--drop); }
details.run { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  margin: 10px 0; padding: 0 12px; }
details.run > summary { cursor: pointer; padding: 10px 0; font-weight: 600; }
ol.timeline { list-style: none; padding: 0 0 0 18px; margin: 6px 0 12px;
  border-left: 3px solid var(--line); }
ol.timeline > li { position: relative; margin: 0 0 14px; padding-left: 10px; }
ol.timeline > li::before { content: ""; position: absolute; left: -26px; top: 4px; width: 13px;
  height: 13px; border-radius: 50%; background: var(--accent); }
ol.timeline > li.stop::before { background: var(--fg); }
.q { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; background: #f1f3f8;
  padding: 1px 4px; border-radius: 3px; white-space: pre-wrap; word-break: break-word; }
.tag { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 9px;
  border: 1px solid var(--line); color: var(--muted); margin-left: 4px; }
.kept { color: var(--keep); font-weight: 600; }
.dropped { color: var(--drop); }
.ungraded { color: var(--ungr); }
.text { white-space: pre-wrap; word-break: break-word; max-height: 12em; overflow: auto;
  background: #fafbfd; border: 1px solid var(--line); padding: 6px; border-radius: 4px; }
pre.diff { background: #fafbfd; border: 1px solid var(--line); padding: 8px; overflow: auto; }
pre.diff .add { color: var(--keep); }
pre.diff .del { color: var(--drop); }
pre.diff .chg { color: var(--ungr); }
"""

SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) { return; }
  var head = table.tHead.rows[0];
  function value(cell, numeric) {
    var v = cell.getAttribute("data-v");
    if (!numeric) { return (v === null ? cell.textContent : v).toLowerCase(); }
    var n = parseFloat(v);
    return isNaN(n) ? -Infinity : n;
  }
  function sortBy(key, dir) {
    var col = -1;
    for (var i = 0; i < head.cells.length; i++) {
      if (head.cells[i].getAttribute("data-key") === key) { col = i; }
      head.cells[i].removeAttribute("aria-sort");
    }
    if (col < 0) { return; }
    var numeric = head.cells[col].classList.contains("num");
    var sign = dir === "desc" ? -1 : 1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a.cells[col], numeric), y = value(b.cells[col], numeric);
      if (x < y) { return -sign; }
      if (x > y) { return sign; }
      return a.getAttribute("data-i") - b.getAttribute("data-i");
    });
    rows.forEach(function (row) { body.appendChild(row); });
    head.cells[col].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
    table.setAttribute("data-sorted", key + ":" + dir);
  }
  Array.prototype.forEach.call(head.cells, function (cell) {
    cell.addEventListener("click", function () {
      var again = cell.getAttribute("aria-sort") === "ascending";
      sortBy(cell.getAttribute("data-key"), again ? "desc" : "asc");
    });
  });
  function follow() {
    var hash = decodeURIComponent(location.hash.slice(1));
    var m = /^sort=([a-z_]+):(asc|desc)$/.exec(hash);
    if (m) { sortBy(m[1], m[2]); return; }
    var target = hash && document.getElementById(hash);
    if (target && target.tagName === "DETAILS") { target.open = true; target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", follow);
  follow();
  table.setAttribute("data-ready", "1");
})();
"""
