"""The "who talks to whom" summary above the matrix's grids: on a small matrix of two
stacks, what it says of each ordered pair is what the pair's connect cell says, and the
text, the JSON and the HTML say the same."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest

from mpa_emu.cli import main
from mpa_emu.matrix.cell import CellResult
from mpa_emu.matrix.output import GridEntry, summary_of, table


def test_summary_of_two_stacks_agrees_with_their_connect_cells(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, html = tmp_path / "m.json", tmp_path / "m.html"
    assert main(["matrix", "--stacks", "irdma,siw", "--scenario", "connect",
                 "--scenario", "v1-responder", "--captures", str(tmp_path / "caps"),
                 "--json", str(out), "--html", str(html)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    cells = [c for c in doc["cells"] if c["scenario"] == "connect"]
    summary = doc["who_talks_to_whom"]
    assert summary["scenario"] == "connect"
    assert [s["initiator"] for s in summary["initiators"]] == \
        list(dict.fromkeys(c["initiator"] for c in cells))
    page = html.read_text()
    lines = text.splitlines()
    assert lines[0].startswith("who talks to whom")
    # The summary comes before the first grid, on the page as in the terminal.
    assert page.index("who talks to whom") < page.index("<table>")
    for line in summary["initiators"]:
        mine = [c for c in cells if c["initiator"] == line["initiator"]]
        assert line["talks_to"] == [c["responder"] for c in mine
                                    if c["initiator_event"] == "RDMA_CM_EVENT_ESTABLISHED"]
        refused = {c["responder"]: c for c in mine
                   if c["initiator_event"] != "RDMA_CM_EVENT_ESTABLISHED"}
        assert [n["responder"] for n in line["not_to"]] == list(refused)
        for n in line["not_to"]:
            assert n["refused_by"] == refused[n["responder"]]["refused_by"]
        printed = next(x.strip() for x in lines[1:]
                       if x.strip().startswith(line["initiator"] + " talks to"))
        assert escape(printed) in page
        for responder in line["talks_to"]:
            assert responder in printed.split("; not to")[0]
        refusals = printed.split("; not to ", 1)[1].split("; ") if line["not_to"] else []
        for n in line["not_to"]:
            # The entry that names this responder gives its outcome and refusal.
            entry = next(e for e in refusals
                         if n["responder"] in e.split(": ", 1)[0].split(", "))
            assert entry.split(": ", 1)[1] == n["outcome"] + (
                f" ({n['refused_by']})" if n["refused_by"] else "")


def test_a_refused_pair_names_the_kernel_function_its_cell_knows() -> None:
    ok = CellResult("irdma", "irdma", "connect", initiator_event="RDMA_CM_EVENT_ESTABLISHED",
                    initiator_status=0)
    rej = CellResult("siw", "irdma", "connect", initiator_event="RDMA_CM_EVENT_REJECTED",
                     initiator_status=-104,
                     refused_by="irdma responder: irdma_negotiate_mpa_v2_ird_ord")
    other = CellResult("siw", "irdma", "close", initiator_event="RDMA_CM_EVENT_REJECTED")
    talks = summary_of([GridEntry.of(c) for c in (ok, rej, other)])
    assert [t.text() for t in talks] == [
        "irdma talks to irdma",
        "siw talks to no side; not to irdma: rej ECONNRESET (irdma responder: "
        "irdma_negotiate_mpa_v2_ird_ord)"]
    assert table([ok, rej]).startswith("who talks to whom")


def test_responders_refused_alike_share_one_entry() -> None:
    cells = [CellResult("siw", r, "connect", initiator_event="RDMA_CM_EVENT_REJECTED",
                        initiator_status=-104, refused_by="erdma responder: erdma_recv_mpa_rr")
             for r in ("erdma", "erdma(cc=1)")]
    (talk,) = summary_of([GridEntry.of(c) for c in cells])
    assert talk.text() == ("siw talks to no side; not to erdma, erdma(cc=1): rej ECONNRESET "
                           "(erdma responder: erdma_recv_mpa_rr)")
    assert [n["responder"] for n in talk.to_json()["not_to"]] == ["erdma", "erdma(cc=1)"]


def test_no_connect_cells_no_summary() -> None:
    cell = CellResult("irdma", "siw", "close", initiator_event="RDMA_CM_EVENT_ESTABLISHED")
    assert table([cell]).startswith("close")
