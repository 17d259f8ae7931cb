"""The fixed parts of ``replay --html``'s page: its head and style, and its one script.

The script only reads the page and hides runs a filter leaves out: it makes no element and sets
no markup, so nothing recorded can reach the parser through it. The page's
Content-Security-Policy admits it by its digest (``replay_html._csp``).
"""

from __future__ import annotations

HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: 1px 8px; text-align: left; vertical-align: top; }}
#summary tr:nth-child(even) {{ background: #f4f4f4; }}
#filters {{ position: sticky; top: 0; background: #fff; padding: 6px 0; }}
#filters label {{ margin-right: 1em; }}
.run {{ border-top: 1px solid #ccc; margin-top: 1em;
  content-visibility: auto; contain-intrinsic-size: auto 40em; }}
.calls {{ font-size: 12px; }}
.chunk {{ content-visibility: auto; contain-intrinsic-size: auto 200em; }}
.calls td:nth-child(5)::before {{ content: "tokens so far: "; color: #888; }}
code {{ white-space: pre-wrap; word-break: break-all; }}
q {{ color: #555; }}
.chart, .strip {{ display: block; width: 100%; max-width: 900px; }}
.chart {{ height: 90px; background: #fafafa; }}
.strip {{ height: 14px; margin: 4px 0; }}
.line {{ fill: none; stroke: #246; stroke-width: 1.5; vector-effect: non-scaling-stroke; }}
rect.after, rect.unrun {{ fill: #ddd; }}
rect.ok {{ fill: #8bc48b; }}
.warning {{ color: #a60; fill: #e0a020; stroke: #e0a020; }}
.critical {{ color: #c40; fill: #f06020; stroke: #f06020; }}
.blocked {{ color: #c00; fill: #d02020; stroke: #d02020; }}
.aborted {{ color: #800; fill: #800; stroke: #800; font-weight: bold; }}
tr.unrun {{ color: #999; }}
</style></head><body>"""

SCRIPT = """(function () {
  "use strict";
  var q = document.getElementById("q");
  var detector = document.getElementById("detector");
  var verdict = document.getElementById("verdict");
  var shown = document.getElementById("shown");
  var cards = Array.prototype.slice.call(document.querySelectorAll("section[data-run]"));
  var rows = {};
  Array.prototype.forEach.call(document.querySelectorAll("tr[data-run]"), function (row) {
    rows[row.getAttribute("data-run")] = row;
  });
  var texts = null;
  function apply() {
    var text = q.value.toLowerCase();
    var d = detector.value;
    var v = verdict.value;
    if (text && texts === null) {
      texts = cards.map(function (card) { return card.textContent.toLowerCase(); });
    }
    var count = 0;
    cards.forEach(function (card, i) {
      var ok = (!d || card.getAttribute("data-detectors").split(" ").indexOf(d) >= 0) &&
        (!v || card.getAttribute("data-verdict") === v) &&
        (!text || texts[i].indexOf(text) >= 0);
      card.hidden = !ok;
      rows[card.getAttribute("data-run")].hidden = !ok;
      if (ok) { count += 1; }
    });
    shown.textContent = count + " of " + cards.length + " shown";
  }
  q.addEventListener("input", apply);
  detector.addEventListener("change", apply);
  verdict.addEventListener("change", apply);
}());"""
