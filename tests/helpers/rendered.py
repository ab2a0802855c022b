"""Checks run inside the page by the browser tests: text that leaves its lane, the
visible box of the highlighted row, and what a screenshot holds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mpa_emu_browser_tool",
                                                  ROOT / "tools" / "browser.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


browser_tool = _tool()

OVERFLOW_JS = """
(() => {
  const svg = document.querySelector(%s);
  const lanes = [...svg.querySelectorAll("line.lane")]
    .map(l => Number(l.getAttribute("x1"))).sort((a, b) => a - b);
  const width = svg.viewBox.baseVal.width;
  const nearest = x => lanes.reduce((best, l) => Math.abs(l - x) < Math.abs(best - x) ? l : best);
  const bad = [];
  let checked = 0;
  for (const g of svg.querySelectorAll("g.row")) {
    const arrow = g.querySelector("line.arrow, line.lost");
    let lo, hi;
    if (arrow) {
      const a = nearest(Number(arrow.getAttribute("x1")));
      const b = nearest(Number(arrow.getAttribute("x2")));
      lo = Math.min(a, b); hi = Math.max(a, b);
    } else {
      const dot = g.querySelector("circle");
      lo = dot ? Number(dot.getAttribute("cx")) : 0;
      const next = lanes.find(l => l > lo);
      hi = next === undefined ? width : next;
    }
    for (const t of g.querySelectorAll("text")) {
      if (t.classList.contains("t")) { continue; }
      const box = t.getBBox();
      checked++;
      if (box.width <= 0 || box.x < lo - 0.5 || box.x + box.width > hi + 0.5) {
        bad.push({text: t.textContent, x: box.x, right: box.x + box.width, lo: lo, hi: hi});
      }
    }
  }
  return {checked: checked, bad: bad};
})()
"""


def overflow(page: Any, selector: str = "svg") -> dict[str, Any]:
    """Texts of the ladder's rows and those outside their lanes (arrow texts between the
    arrow's two lanes, notes between their lane and the next one or the picture's edge),
    measured with the browser's own font metrics (getBBox)."""
    import json

    result: dict[str, Any] = page.evaluate(OVERFLOW_JS % json.dumps(selector))
    return result


def viewport_box(page: Any, selector: str) -> dict[str, float] | None:
    """The on-screen box of the first element matching ``selector`` and the viewport."""
    result: dict[str, float] | None = page.evaluate(f"""
    (() => {{
      const e = document.querySelector({selector!r});
      if (!e) {{ return null; }}
      const r = e.getBoundingClientRect();
      return {{top: r.top, bottom: r.bottom, left: r.left, right: r.right,
               width: r.width, height: r.height,
               viewWidth: window.innerWidth, viewHeight: window.innerHeight}};
    }})()""")
    return result


def inside_viewport(box: dict[str, float]) -> bool:
    return (box["width"] > 0 and box["height"] > 0 and box["top"] >= 0 and box["left"] >= 0
            and box["bottom"] <= box["viewHeight"] and box["right"] <= box["viewWidth"])


def pixels(png: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Decoded screenshot: width, height, RGB(A) pixels."""
    result: tuple[int, int, list[tuple[int, ...]]] = browser_tool.decode_png(png)
    return result


def colour_count(png: bytes) -> tuple[int, int, dict[tuple[int, int, int], int]]:
    """Pixels, non-white pixels and the histogram of RGB colours of a screenshot."""
    width, height, px = pixels(png)
    histogram: dict[tuple[int, int, int], int] = {}
    for p in px:
        key = (p[0], p[1], p[2])
        histogram[key] = histogram.get(key, 0) + 1
    white = histogram.get((255, 255, 255), 0)
    return width * height, width * height - white, histogram
