"""The matrix's HTML page in headless Chromium: the grid shows the same outcome as the
JSON for the same cell, and a cell's link opens its details with the ladder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mpa_emu.cli import main

pytestmark = pytest.mark.browser


def test_matrix_page_tells_what_the_json_tells_and_opens_a_cells_ladder(
        chromium: Any, tmp_path: Path) -> None:
    html, out = tmp_path / "m.html", tmp_path / "m.json"
    assert main(["matrix", "--side", "irdma", "--side", "siw", "--scenario", "connect",
                 "--captures", str(tmp_path / "caps"), "--json", str(out),
                 "--html", str(html)]) == 0
    cells = {(c["initiator"], c["responder"]): c for c in json.loads(out.read_text())["cells"]}
    page = chromium.open(html)
    grid = page.evaluate(
        "Array.from(document.querySelectorAll('table')[0].rows).slice(1).map(r => "
        "Array.from(r.cells).map(c => c.textContent))")
    heads = page.evaluate(
        "Array.from(document.querySelectorAll('table')[0].rows[0].cells).map(c => "
        "c.textContent)")
    assert heads[1:] == ["irdma", "siw"]
    shown = {(row[0], heads[i]): row[i] for row in grid for i in range(1, len(row))}
    # siw's default request has no P2P: an irdma responder resets it and siw reports
    # CONNECT_REPLY -ECONNRESET, which cma_iw_handler turns into REJECTED.
    assert cells[("siw", "irdma")]["initiator_event"] == "RDMA_CM_EVENT_REJECTED"
    assert shown[("siw", "irdma")] == "rej ECONNRESET"
    assert cells[("irdma", "siw")]["initiator_event"] == "RDMA_CM_EVENT_ESTABLISHED"
    assert shown[("irdma", "siw")] == "est"
    page.evaluate("document.querySelector(\"a[href='#connect--siw--irdma']\").click()")
    opened = page.evaluate("document.getElementById('connect--siw--irdma').open")
    assert opened is True
    details = page.evaluate("document.getElementById('connect--siw--irdma').innerText")
    assert "RDMA_CM_EVENT_REJECTED" in details and "CONNECT_REPLY -104" in details
    assert "SYN" in details  # the ladder
