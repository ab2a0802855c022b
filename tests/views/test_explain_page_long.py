"""explain --html on a capture of many connections: the page is written as it is made
(views/html/streamed.py) and past the first 100 connections one section holds the rest,
each connection still under its own anchor."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.long_captures import write_copies

from mpa_emu.cli import main
from mpa_emu.views.explain import OWN_SECTIONS


def test_connections_past_the_first_share_one_section(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture, page = tmp_path / "long.pcapng", tmp_path / "page.html"
    frames = write_copies(capture, OWN_SECTIONS + 5)
    assert main(["explain", str(capture), "--html", str(page)]) == 0
    capsys.readouterr()
    html = page.read_text(encoding="utf-8")
    assert html.count('<section id="connection-') == OWN_SECTIONS
    assert f"Connections {OWN_SECTIONS + 1} to {OWN_SECTIONS + 5} (one section" in html
    for index in range(OWN_SECTIONS + 1, OWN_SECTIONS + 6):
        assert f'<h3 id="connection-{index}">Connection {index}: ok</h3>' in html
    # Every frame's fields are on the page, as capture_fields reads them.
    assert f'"{frames}":[["frame","{frames}"]' in html
    assert html.count('" data-frame="') == frames  # one ladder row per frame
