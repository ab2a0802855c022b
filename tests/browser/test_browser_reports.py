"""The HTML reports of replay, inspect and run (``--html``) rendered by Chromium: the page
loads without console errors and fetches nothing, the highlighted frame is on screen and
red in the screenshot, expected and actual sit side by side, pointing at or clicking a
frame shows its decoded fields, and no ladder text leaves its lane."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.rendered import colour_count, inside_viewport, overflow, viewport_box

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser

HIGHLIGHT_FILL = (0xFF, 0xD6, 0xD1)
"""The highlighted row's background (page.py's g.row.hl rect), as the screenshot shows it."""


def _sidecar(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "pcaps" / f"{name}.json").read_text())
    return data


def _failing_scenario(tmp_path: Path) -> Path:
    # The reject scenario, expecting other private data than bob's policy sends.
    text = (ROOT / "scenarios" / "reject_with_private_data.toml").read_text()
    wrong = text.replace('flags = "FA"\nprivate_data = "it\'s not you"',
                         'flags = "FA"\nprivate_data = "try later"')
    assert wrong != text
    path = tmp_path / "reject_wrong_pdata.toml"
    path.write_text(wrong)
    return path


def _loaded(chromium: Any, html: Path) -> Any:
    page = chromium.open(html)
    assert page.console_errors == []
    assert page.requests == [html.resolve().as_uri()]  # nothing fetched but the page
    assert page.evaluate("document.documentElement.getAttribute('data-ready')") == "1"
    return page


def _panel(page: Any) -> dict[str, str]:
    rows: list[list[str]] = page.evaluate(
        "[...document.querySelectorAll('#fields tr')].map(tr =>"
        " [tr.children[0].textContent, tr.children[1].textContent])")
    return dict((name, value) for name, value in rows)


def _assert_highlight_on_screen(page: Any) -> None:
    box = viewport_box(page, "g.row.hl")
    assert box is not None and inside_viewport(box), box
    total, inked, histogram = colour_count(page.screenshot())
    assert inked > total // 50 and len(histogram) > 50
    assert histogram.get(HIGHLIGHT_FILL, 0) > 2000  # the red row is painted


def _sides(page: Any) -> tuple[dict[str, float], dict[str, float]]:
    expected = viewport_box(page, "#highlight .side.expected")
    actual = viewport_box(page, "#highlight .side.actual")
    assert expected is not None and actual is not None
    assert expected["width"] > 200 and actual["width"] > 200
    assert expected["right"] <= actual["left"]  # side by side, expected first
    assert abs(expected["top"] - actual["top"]) < 1
    return expected, actual


def test_replay_report_shows_the_divergent_synack_side_by_side(chromium: Any,
                                                               tmp_path: Path) -> None:
    fixture = _sidecar("divergent_linux_synack")
    replay = fixture["replays"][0]
    html = tmp_path / "replay.html"
    code = main(["replay", str(ROOT / "pcaps" / fixture["capture"]), "--emulate",
                 replay["emulate"], "--html", str(html)])
    assert code == replay["expect"]["exit"] == 1
    page = _loaded(chromium, html)
    _assert_highlight_on_screen(page)
    first = str(replay["expect"]["first_divergence_frame"])
    assert page.evaluate("document.querySelector('g.row.hl').dataset.frame") == first
    # Opened on the divergent frame: the Linux SYN-ACK's own window and options.
    panel = _panel(page)
    assert panel["frame"] == first and panel["TCP flags"] == "[SYN, ACK]"
    assert panel["window"] == "64240"
    assert panel["TCP options"].startswith("MSS 1460, WS 7, SACK, TS")
    _sides(page)
    differing = page.evaluate("[...document.querySelectorAll('#highlight .side tr.diff th')]"
                              ".map(th => th.textContent)")
    assert "window" in differing and "TCP options" in differing
    actual = page.evaluate("document.querySelector('#highlight .side.actual').textContent")
    assert "65535" in actual  # irdma's SYN-ACK window (the sidecar's why)
    assert overflow(page, "#ladder svg")["bad"] == []


def test_replay_report_of_a_match_explains_a_frame_under_the_pointer(chromium: Any,
                                                                    tmp_path: Path) -> None:
    html = tmp_path / "match.html"
    assert main(["replay", str(ROOT / "pcaps" / "v2_accept.pcap"), "--emulate",
                 "192.168.10.2", "--html", str(html)]) == 0
    page = _loaded(chromium, html)
    assert page.evaluate("document.querySelectorAll('g.row.hl').length") == 0
    assert page.evaluate("document.querySelector('#verdict').textContent").startswith("MATCH")
    box = viewport_box(page, 'g.row[data-frame="1"]')
    assert box is not None and inside_viewport(box)
    page.mouse("mouseMoved", box["left"] + box["width"] / 2, box["top"] + box["height"] / 2)
    panel = _panel(page)
    # Frame 1 of the fixture: A's SYN from port 40001 (pcaps/README.md, addresses).
    assert panel["frame"] == "1" and panel["TCP flags"] == "[SYN]"
    assert panel["from"] == "192.168.10.1:40001" and panel["to"] == "192.168.10.2:31000"


def test_inspect_report_highlights_the_request_with_pd_length_513(chromium: Any,
                                                                  tmp_path: Path) -> None:
    html = tmp_path / "inspect.html"
    assert main(["inspect", str(ROOT / "pcaps" / "parse_pd_over_512.pcap"),
                 "--html", str(html)]) == 1
    page = _loaded(chromium, html)
    _assert_highlight_on_screen(page)
    panel = _panel(page)
    assert panel["PD_Length"] == "513" and panel["MPA"] == "request, revision 2"
    assert page.evaluate("document.querySelectorAll('g.row.hl').length") == 1
    findings = page.evaluate("document.querySelector('#connection-1').textContent")
    assert "512" in findings
    assert overflow(page, "#ladder svg")["bad"] == []


def test_run_report_puts_the_failed_expectation_beside_what_happened(chromium: Any,
                                                                     tmp_path: Path) -> None:
    html = tmp_path / "run.html"
    assert main(["run", "-q", str(_failing_scenario(tmp_path)), "--html", str(html)]) == 1
    page = _loaded(chromium, html)
    _assert_highlight_on_screen(page)
    expected, actual = (page.evaluate(f"document.querySelector('#highlight .side.{side}')"
                                      ".textContent") for side in ("expected", "actual"))
    assert "try later" in expected and "it's not you" in actual
    _sides(page)
    # The highlighted frame is the reject bob's policy sent (the scenario's own values).
    panel = _panel(page)
    assert panel["MPA"] == "reject, revision 2" and panel["private data"] == '"it\'s not you"'
    assert panel["sender"] == "bob"
    # Clicking another frame pins its fields: the first frame is alice's SYN.
    page.evaluate("document.querySelector('g.row[data-frame=\"1\"]')"
                  ".scrollIntoView({block: 'center'})")
    box = viewport_box(page, 'g.row[data-frame="1"]')
    assert box is not None and inside_viewport(box)
    page.click(box["left"] + box["width"] / 2, box["top"] + box["height"] / 2)
    panel = _panel(page)
    assert panel["frame"] == "1" and panel["TCP flags"] == "[SYN]" and panel["sender"] == "alice"
    sections = page.evaluate("document.querySelector('#upcalls').textContent"
                             " + document.querySelector('#trace-records').textContent")
    assert "CONNECT_REPLY -ECONNREFUSED" in sections and "irdma_send_mpa_reject" in sections
    assert overflow(page, "#ladder svg")["bad"] == []
