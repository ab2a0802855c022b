"""The HTML reports of a long capture in Chromium: the page opens on its verdict (the
highlighted row thousands of pixels down the ladder is reached by scrolling the ladder's
own box, never the page), the fields panel stays on screen and decodes FPDUs with the
words ``inspect --fpdus`` prints, explain's verdict sits above the ladder with its lines
wrapped, and ``replay --profile auto`` shows every profile's answer.

The capture is built byte by byte (helpers.long_fpdu_capture): what the panel must say
comes from the bytes written there and the RFCs' names of the Terminate's fields."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from helpers.long_fpdu_capture import FRAMES, READ, long_terminate
from helpers.rendered import inside_viewport, viewport_box

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser
NEXT_FRAMES = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
"""Waits two frames: scroll events (and what the page does on them) come with them."""


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return long_terminate(tmp_path_factory.mktemp("long") / "long.pcap")


def _loaded(chromium: Any, html: Path) -> Any:
    page = chromium.open(html)
    assert page.console_errors == []
    assert page.requests == [html.resolve().as_uri()]
    assert page.evaluate("document.documentElement.getAttribute('data-ready')") == "1"
    return page


def _panel(page: Any) -> dict[str, str]:
    rows: list[list[str]] = page.evaluate(
        "[...document.querySelectorAll('#fields tr')].map(tr =>"
        " [tr.children[0].textContent, tr.children[1].textContent])")
    return dict((name, value) for name, value in rows)


def _point_at(page: Any, frame: int) -> dict[str, str]:
    for _ in range(2):  # the first scroll of the page gives the ladder its full height
        page.evaluate(f"document.querySelector('g.row[data-frame=\"{frame}\"]')"
                      ".scrollIntoView({block: 'center'})")
        page.evaluate(NEXT_FRAMES)
    box = viewport_box(page, f'g.row[data-frame="{frame}"]')
    assert box is not None and inside_viewport(box)
    page.click(box["left"] + box["width"] / 2, box["top"] + box["height"] / 2)
    return _panel(page)


def _fpdu_lines(capture: Path) -> dict[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["inspect", "--fpdus", str(capture)])
    lines = {}
    for line in out.getvalue().splitlines():
        words = line.strip().split(" ", 2)
        if words[0] == "frame" and words[2].startswith(("client: ", "server: ")):
            lines[int(words[1])] = words[2]
    return lines


def _assert_opens_on_the_verdict(page: Any) -> None:
    assert page.evaluate("window.scrollY") == 0
    verdict = viewport_box(page, "#verdict")
    assert verdict is not None and inside_viewport(verdict)
    # The ladder is longer than a screen: its highlighted row is reached inside its box.
    assert page.evaluate("document.querySelector('#ladder svg').getBoundingClientRect()"
                         ".height") > 3000
    hl = viewport_box(page, "g.row.hl")
    assert hl is not None and inside_viewport(hl), hl
    fields = viewport_box(page, "#fields")
    assert fields is not None and fields["top"] < fields["viewHeight"]


def test_inspect_page_opens_on_its_verdict_and_decodes_fpdus_as_inspect(
        chromium: Any, tmp_path: Path, capture: Path) -> None:
    html = tmp_path / "inspect.html"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["inspect", str(capture), "--html", str(html)]) == 1
    page = _loaded(chromium, html)
    _assert_opens_on_the_verdict(page)
    # The error (DDP version 0, RFC 5041 section 4.2) is the last Send.
    assert page.evaluate("document.querySelector('g.row.hl').dataset.frame") \
        == str(FRAMES["last_send"])
    panel = _panel(page)
    assert panel["DDP"] == f"untagged, QN 0 MSN {FRAMES['last_send'] - FRAMES['reply']} MO 0"
    assert "DDP version 0" in panel["FPDU"]
    lines = _fpdu_lines(capture)
    # The Read Request: sink and source STag/TO as written, the FPDU as inspect words it.
    panel = _point_at(page, FRAMES["read_request"])
    assert lines[FRAMES["read_request"]].startswith(panel["FPDU"] + ", ")
    assert panel["DDP"] == "untagged, QN 1 MSN 1 MO 0"
    assert panel["Read sink"] == f"STag 0x{READ['sink_stag']:x} TO 0x{READ['sink_to']:x}"
    assert panel["Read source"] == f"STag 0x{READ['src_stag']:x} TO 0x{READ['src_to']:x}"
    assert panel["Read size"] == f"{READ['size']} bytes"
    # The Terminate: RFC 5040 section 4.8's layout, RFC 5041 section 7.2's names.
    panel = _point_at(page, FRAMES["terminate"])
    assert lines[FRAMES["terminate"]].startswith(panel["FPDU"] + ", ")
    assert panel["Terminate layer"] == "DDP (1)"
    assert panel["Terminate type"] == "Untagged Buffer Error (2)"
    assert panel["Terminate code"] == "0x06 Invalid DDP version"
    assert panel["DDP"] == "untagged, QN 2 MSN 1 MO 0"


def test_fields_panel_stays_on_screen_when_the_page_scrolls(chromium: Any, tmp_path: Path,
                                                            capture: Path) -> None:
    html = tmp_path / "inspect.html"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["inspect", str(capture), "--html", str(html)])
    page = _loaded(chromium, html)
    before = viewport_box(page, "#fields")
    assert before is not None
    page.evaluate(f"window.scrollBy(0, {before['top'] + 200})")
    page.evaluate(NEXT_FRAMES)
    after = viewport_box(page, "#fields")
    assert after is not None and page.evaluate("window.scrollY") > before["top"]
    assert 0 <= after["top"] <= 20  # stuck to the top while its ladder is on screen


def test_explain_page_puts_its_verdict_above_the_ladder_wrapped(chromium: Any,
                                                                tmp_path: Path,
                                                                capture: Path) -> None:
    html = tmp_path / "explain.html"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["explain", str(capture), "--html", str(html)]) == 1
    page = _loaded(chromium, html)
    assert page.evaluate("window.scrollY") == 0
    explained = viewport_box(page, "#connection-1")
    ladder = viewport_box(page, "#ladder")
    assert explained is not None and ladder is not None
    assert inside_viewport(explained) and explained["bottom"] <= ladder["top"]
    # Its lines wrap inside the box: nothing to scroll sideways.
    assert page.evaluate("(() => { const p = document.querySelector('#connection-1 pre');"
                         " return p.scrollWidth <= p.clientWidth; })()") is True
    assert "FAILED" in page.evaluate("document.querySelector('#connection-1').textContent")
    panel = _point_at(page, FRAMES["terminate"])
    assert panel["Terminate code"] == "0x06 Invalid DDP version"


def test_replay_profile_auto_page_shows_every_profile(chromium: Any, tmp_path: Path) -> None:
    html = tmp_path / "auto.html"
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["replay", str(ROOT / "pcaps" / "real" / "real_v1_crc_on.pcap"),
                     "--emulate", "192.0.2.1", "--semantic", "--profile", "auto",
                     "--html", str(html)]) == 0
    page = _loaded(chromium, html)
    box = viewport_box(page, "#profiles")
    assert box is not None and box["top"] < box["viewHeight"]
    rows: list[list[str]] = page.evaluate(
        "[...document.querySelectorAll('#profiles tbody tr')].map(tr =>"
        " [...tr.children].map(td => td.textContent))")
    # Each stack's line of the text report: its name, then its answer.
    printed = text.getvalue().splitlines()
    tried = printed[1:1 + len(rows)]
    assert [" ".join(line.split()) for line in tried] \
        == [" ".join(f"{name} {answer}".split()) for name, answer in rows]
    assert any(answer == "same outcome" for _name, answer in rows)


def test_semantic_replay_page_opens_on_the_verdict_and_the_difference(
        chromium: Any, tmp_path: Path, capture: Path) -> None:
    # The server (198.51.100.20, helpers.third_party_captures.SERVER) replayed as siw:
    # the first difference in outcome is at the Terminate's end of the capture.
    html = tmp_path / "replay.html"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["replay", str(capture), "--emulate", "198.51.100.20", "--semantic",
              "--profile", "siw", "--html", str(html)])
    page = _loaded(chromium, html)
    _assert_opens_on_the_verdict(page)
    assert int(page.evaluate("document.querySelector('g.row.hl').dataset.frame")) \
        >= FRAMES["last_send"]
    box = viewport_box(page, "#highlight")
    assert box is not None and inside_viewport(box)
