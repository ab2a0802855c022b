"""The HTML pages in Chromium show what the text reports say, on the captures users found
wrong: a capture taken on its client (TX checksum offload artefacts, pcaps/real) and a
semantic replay. What a page must show comes from the sidecars and the text report."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.rendered import inside_viewport, overflow, viewport_box

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "pcaps" / "real"
pytestmark = pytest.mark.browser


def _loaded(chromium: Any, html: Path) -> Any:
    page = chromium.open(html)
    assert page.console_errors == []
    assert page.evaluate("document.documentElement.getAttribute('data-ready')") == "1"
    return page


def _panel_after_pointing(page: Any, frame: int) -> dict[str, str]:
    page.evaluate(f"document.querySelector('g.row[data-frame=\"{frame}\"]')"
                  ".scrollIntoView({block: 'center'})")
    box = viewport_box(page, f'g.row[data-frame="{frame}"]')
    assert box is not None and inside_viewport(box)
    page.mouse("mouseMoved", box["left"] + box["width"] / 2, box["top"] + box["height"] / 2)
    rows: list[list[str]] = page.evaluate(
        "[...document.querySelectorAll('#fields tr')].map(tr =>"
        " [tr.children[0].textContent, tr.children[1].textContent])")
    return dict((name, value) for name, value in rows)


@pytest.mark.parametrize("mode", ["offload", "strict"])
def test_inspect_page_decodes_the_capturing_hosts_frames(chromium: Any, tmp_path: Path,
                                                         mode: str) -> None:
    facts = json.loads((REAL / "real_peer_v2.json").read_text())
    html = tmp_path / "inspect.html"
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        main(["inspect", str(REAL / "real_peer_v2.pcap"), "--checksums", mode, "--html",
              str(html)])
    page = _loaded(chromium, html)
    partial = facts["checksums"]["offload_partial"][0]
    panel = _panel_after_pointing(page, partial)
    assert "not decoded" not in panel
    assert panel["frame"] == str(partial) and panel["TCP flags"] == "[SYN]"
    assert panel["TCP checksum"] == ("TX checksum offload: not verified" if mode == "offload"
                                     else "TX offload partial sum: an error with "
                                          "--checksums strict")
    # The page's verdict is the text report's first line's count of errors.
    first = text.getvalue().splitlines()[0]
    errors = first.rsplit(", ", 1)[1].split()[0]
    assert f", {errors} error(s)" in page.evaluate(
        "document.querySelector('#verdict').textContent")
    assert overflow(page, "#ladder svg")["bad"] == []


def test_semantic_replay_page_opens_on_the_difference_in_outcome(chromium: Any,
                                                                 tmp_path: Path) -> None:
    facts = json.loads((REAL / "real_peer_v2.json").read_text())
    case = next(r for r in facts["replays"] if r["args"] == ["--semantic"]
                and r["emulate"] == "192.0.2.2")
    html = tmp_path / "replay.html"
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        main(["replay", str(REAL / "real_peer_v2.pcap"), "--emulate", case["emulate"],
              "--semantic", "--html", str(html)])
    page = _loaded(chromium, html)
    first = case["expect"]["first_divergence_frame"]
    hl = page.evaluate("[...document.querySelectorAll('g.row.hl')].map(g => g.dataset.frame)")
    assert hl == [str(first)]
    assert page.evaluate(f"document.querySelector('g.row[data-frame=\"{first}\"]')"
                         ".classList.contains('ok')") is False
    box = viewport_box(page, "g.row.hl")
    assert box is not None and inside_viewport(box)
    why = page.evaluate("document.querySelector('#outcome-why').textContent")
    line = next(x for x in text.getvalue().splitlines() if x.startswith("first divergence:"))
    assert why == line.removeprefix("first divergence: ")
    sides = page.evaluate("[...document.querySelectorAll('#highlight .side h3')]"
                          ".map(h => h.textContent)")
    assert sides == ["Expected (the recorded host)", "Actual (irdma)"]
    # The one difference is in the MPA reply (the sidecar's frame is the reply): that row
    # is marked on both sides, and no other (OFFLOADED's frame alone is no difference).
    marked = page.evaluate("[...document.querySelectorAll('#highlight tr.diff th')]"
                           ".map(th => th.textContent)")
    assert marked == ["MPA sent", "MPA sent"]
    assert overflow(page, "#ladder svg")["bad"] == []
