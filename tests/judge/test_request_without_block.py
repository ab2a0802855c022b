"""A request without the RFC 6581 block answered by a reply with one.

The irdma initiator's IRD check in irdma_negotiate_mpa_v2_ird_ord compares the reply's
ORD with its own ``cm_node->ird_size``, which the capture shows only in the request's
block; without one that check is unknown, and the judge must say what it can (the
reply's revision, P2P and RTR) instead of failing. Expected values from
drivers/infiniband/hw/irdma/cm.c: irdma_parse_mpa refuses a reply whose rev is above the
request's (-EINVAL), the initiator resets and irdma_event_connect_error gives
CONNECT_REPLY -ECONNRESET (cma_iw_handler: RDMA_CM_EVENT_REJECTED).
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap
from helpers.real_like_captures import KEY_REP, KEY_REQ
from helpers.stack_captures import IRDMA_SYN, block, mpa

from mpa_emu.cli import main
from mpa_emu.judge.rules import Received, initiator_refusals


def _rev1_request_rev2_reply() -> Conversation:
    """An irdma initiator's rev 1 request (C, no private data) answered by a rev 2 reply
    with the block (P2P, IRD 16, ORD 8, Read RTR); the initiator resets."""
    conv = Conversation(client="10.0.1.4", server="10.0.1.5", cport=41190)
    conv.handshake(IRDMA_SYN, IRDMA_SYN)
    conv.client_sends(mpa(KEY_REQ, 0x40, 1, b"")).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x50, 2, block(16, 8, p2p=True, read=True)))
    return conv.client_sends(b"", flags="RA")


def test_explain_names_the_revision(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "noblock.pcap", _rev1_request_rev2_reply())
    assert main(["explain", str(path), "--json", "-"]) == 1
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    assert (conn["verdict"], conn["cause"]) == ("failed", "revision")
    assert (conn["initiator_event"], conn["initiator_status"]) == (
        "RDMA_CM_EVENT_REJECTED", -errno.ECONNRESET)
    assert "irdma_parse_mpa" in conn["summary"]


def test_inspect_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pcap(tmp_path / "noblock.pcap", _rev1_request_rev2_reply())
    code = main(["inspect", "--json", str(path)])
    out = capsys.readouterr().out
    assert code in (0, 1)
    (conn,) = json.loads(out)["connections"]
    assert any("irdma_parse_mpa" in json.dumps(f) for f in conn["findings"])


class _Frame:
    """The fields the judge reads (mpa_emu.judge.shapes.MpaFrameLike) of a decoded
    frame, with the RFC 6581 block read only when S is set."""

    def __init__(self, raw: bytes, frame: int) -> None:
        # RFC 5044 section 7.1: key (16), flags, rev, PD_Length, private data
        self.frame = frame
        self.request = raw[:16] == KEY_REQ
        self.flags, self.rev = raw[16], raw[17]
        self.private_data = raw[20:]
        self.pd_length = len(self.private_data)
        self.reject = bool(self.flags & 0x20)
        self.has_block = bool(self.flags & 0x10) and self.pd_length >= 4
        self.legacy = None
        ird_word = int.from_bytes(self.private_data[:2], "big") if self.has_block else None
        ord_word = int.from_bytes(self.private_data[2:4], "big") if self.has_block else None
        self.ird = None if ird_word is None else ird_word & 0x3FFF
        self.ord = None if ord_word is None else ord_word & 0x3FFF
        self.p2p = None if ird_word is None else bool(ird_word & 0x8000)
        self.write_rtr = None if ord_word is None else bool(ord_word & 0x8000)
        self.read_rtr = None if ord_word is None else bool(ord_word & 0x4000)

    def rtr_names(self) -> list[str]:
        return [n for n, on in (("write", self.write_rtr), ("read", self.read_rtr)) if on]


@pytest.mark.parametrize("stack", ["irdma", "siw", "cxgb4"])
def test_every_initiator_rule_takes_a_request_without_block(stack: str) -> None:
    # rev 2 without S: no block in the request; the reply chooses no RTR at all, which
    # irdma_negotiate_mpa_v2_ird_ord refuses (-EOPNOTSUPP) whatever the initiator's IRD.
    req = _Frame(mpa(KEY_REQ, 0x40, 2, b""), 4)
    rep = _Frame(mpa(KEY_REP, 0x50, 2, block(16, 8, p2p=True)), 6)
    refusals = initiator_refusals(stack, Received(rep, req, 24, 0))  # type: ignore[arg-type]
    if stack == "irdma":
        assert [r.rule for r in refusals] == ["rtr-mismatch"]
        assert refusals[0].fn == "irdma_negotiate_mpa_v2_ird_ord"
    else:
        # siw_proc_mpareply reads the reply's block only for an enhanced request;
        # process_mpa_reply checks the RTR only when it asked for P2P
        assert refusals == []
