"""The matrix's terminal table, JSON contract and HTML page, on cells the test writes."""

from __future__ import annotations

import errno

from mpa_emu.matrix.cell import CellResult
from mpa_emu.matrix.output import cell_text, html_page, status_text, table, to_json


def _cells() -> list[CellResult]:
    ok = CellResult("irdma", "siw", "connect", initiator_event="RDMA_CM_EVENT_ESTABLISHED",
                    initiator_status=0, responder_events=["RDMA_CM_EVENT_CONNECT_REQUEST",
                                                          "RDMA_CM_EVENT_ESTABLISHED"],
                    rtr="read", capture="x.pcapng", ladder="1  SYN -->")
    rej = CellResult("siw", "irdma", "connect", initiator_event="RDMA_CM_EVENT_REJECTED",
                     initiator_status=-errno.ECONNRESET)
    na = CellResult("siw", "siw", "connect", status="n/a", reason="siw has no setting")
    return [ok, rej, na]


def test_status_text_uses_the_kernels_errno_names() -> None:
    assert status_text(-errno.ECONNREFUSED) == "-ECONNREFUSED"
    assert status_text(-95) == "-EOPNOTSUPP"  # include/uapi/asm-generic/errno.h
    assert status_text(0) == "0"
    assert status_text(None) == ""


def test_cell_text_is_short_and_names_the_status() -> None:
    ok, rej, na = _cells()
    assert cell_text(ok) == "est"
    assert cell_text(rej) == "rej ECONNRESET"
    assert cell_text(na) == "n/a"


def test_table_puts_initiators_down_and_responders_across() -> None:
    text = table(_cells())
    lines = text.splitlines()
    # The "who talks to whom" summary comes first (tests/matrix/test_matrix_summary.py).
    lines = lines[lines.index("connect"):]
    header = lines[1].split()
    assert header[-2:] == ["siw", "irdma"]
    irdma_row = next(line for line in lines if line.strip().startswith("irdma"))
    assert "est" in irdma_row
    assert all(len(line) <= 100 for line in lines[:-1])


def test_json_keeps_the_contract_keys() -> None:
    doc = to_json(_cells())
    cell = doc["cells"][0]
    for key in ("initiator", "responder", "scenario", "initiator_event",
                "initiator_status", "responder_events", "rtr", "capture"):
        assert key in cell
    assert cell["responder_events"] == ["RDMA_CM_EVENT_CONNECT_REQUEST",
                                        "RDMA_CM_EVENT_ESTABLISHED"]
    assert "ladder" not in cell


def test_html_cells_link_to_their_ladders() -> None:
    page = html_page(_cells())
    assert "href='#connect--irdma--siw'" in page
    assert "id='connect--irdma--siw'" in page
    assert "1  SYN --&gt;" in page
