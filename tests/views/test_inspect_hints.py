"""What only another stack would refuse is a hint where the side is judged a known kernel
stack (shown with ``inspect --verbose``), and a note where its stack is uncertain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
V2_ACCEPT = ROOT / "pcaps" / "v2_accept.pcap"
# pcaps/README.md: A 192.168.10.1 (initiator) and B 192.168.10.2, both irdma. irdma's
# reply chose the read RTR; a cxgb4 initiator that asked for write would refuse it
# (process_mpa_reply), which is no concern of an irdma initiator.
CXGB4_NOTE = "a cxgb4 initiator would refuse RTR mismatch"


def test_irdma_to_irdma_prints_no_hypothetical_refusals(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(V2_ACCEPT)]) == 0
    out = capsys.readouterr().out
    assert "would refuse" not in out
    assert main(["inspect", "-v", str(V2_ACCEPT)]) == 0
    verbose = capsys.readouterr().out
    hints = [line for line in verbose.splitlines() if line.startswith("  hint        ")]
    assert f"  hint        frame 6: {CXGB4_NOTE}" in [h[:len(CXGB4_NOTE) + 23] for h in hints]
    # erdma_recv_mpa_rr takes MPA_REVISION_EXT_1 (129) only: an erdma side would refuse
    # the rev 2 request (frame 4) and the rev 2 reply (frame 6) at the header.
    assert any(h.startswith("  hint        frame 4: an erdma responder would refuse MPA rev 2")
               for h in hints)
    assert any(h.startswith("  hint        frame 6: an erdma initiator would refuse MPA rev 2")
               for h in hints)
    assert (f"hints       {len(hints)} note(s) on what stacks other than the sides' own do "
            "(--verbose shows them)") in out
    assert main(["inspect", "--json", str(V2_ACCEPT)]) == 0
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    assert [f["severity"] for f in conn["findings"] if CXGB4_NOTE in f["text"]] == ["hint"]


def test_an_uncertain_side_keeps_the_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(V2_ACCEPT), "--profile", "192.168.10.1=unknown"]) == 0
    out = capsys.readouterr().out
    assert f"note        frame 6: {CXGB4_NOTE}" in out
