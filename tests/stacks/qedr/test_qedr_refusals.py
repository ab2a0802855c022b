"""qedr's refusal rules (mpa_emu/stacks/qedr/refusals.py), each frame built to break one.

Expected values come from qed_iwarp.c: a passive failure ends in
qed_iwarp_tcp_connect_unsuccessful, which returns the ep to the free list and tells qedr
nothing (qed_iwarp_connect_complete: "If connect failed - upper layer doesn't know about
it"), with DP_NOTICE "%s(0x%x) MPA not supported VER" for
IWARP_CONN_ERROR_MPA_NOT_SUPPORTED_VER and "%s(0x%x) MPA Invalid Packet" for
IWARP_CONN_ERROR_MPA_INVALID_PACKET; an active one ends in qed_iwarp_mpa_complete, whose
switch gives -ECONNREFUSED for MPA_INVALID_PACKET, MPA_RTR_MISMATCH and MPA_INSUF_IRD and
-ECONNRESET (``default``, no line) for MPA_NOT_SUPPORTED_VER. The frame checks that give
the codes are the firmware's, as docs/stacks/qedr.md reads them: rev above 2, rev 0,
PD_Length over the 512-byte in_pdata (QED_MAX_PRIV_DATA_LEN, qed_iwarp_mpa_offload's
incoming_ulp_buffer), S with fewer than 4 bytes, a P2P reply sharing no RTR type with the
request, a reply IRD below the request's ORD.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers.inspect_builders import Conversation, write_pcap
from helpers.real_like_captures import KEY_REQ
from helpers.stack_captures import LINUX_SYN, block, mpa

from mpa_emu.cli import main
from mpa_emu.judge.profile import parse_profiles
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.qedr import refusals
from mpa_emu.stacks.refusals import Received
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.inspection import inspect_capture
from mpa_emu.views.inspection.report import MpaInfo

C, S, R, M = 0x40, 0x10, 0x20, 0x80

# qed_iwarp_connect with qed_iwarp_setup's constants: P2P, Send | Write | Read, C | S
QEDR_REQUEST = MpaInfo(frame=4, request=True, rev=2, flags=C | S, pd_length=9, ird=16,
                       ord=16, p2p=True, zero_len_send=True, write_rtr=True, read_rtr=True)


def _req(**kw: object) -> MpaInfo:
    fields = dict(frame=4, request=True, rev=2, flags=C | S, pd_length=9, ird=16, ord=16,
                  p2p=True, zero_len_send=False, write_rtr=True, read_rtr=True)
    fields.update(kw)
    return MpaInfo(**fields)  # type: ignore[arg-type]


def _rep(**kw: object) -> MpaInfo:
    fields = dict(frame=6, request=False, rev=2, flags=C | S, pd_length=6, ird=16, ord=16,
                  p2p=True, zero_len_send=False, write_rtr=False, read_rtr=True)
    fields.update(kw)
    return MpaInfo(**fields)  # type: ignore[arg-type]


def _responder(frame: MpaInfo, trailing: int = 0) -> list[tuple[str, str, int | None]]:
    found = refusals.responder(Received(frame, None, 20 + frame.pd_length, trailing))
    assert all(r.stack == "qedr" and r.role == "responder" for r in found)
    return [(r.rule, r.fn, r.status) for r in found]


def _initiator(reply: MpaInfo, request: MpaInfo = QEDR_REQUEST
               ) -> list[tuple[str, str, int | None]]:
    found = refusals.initiator(Received(reply, request, 20 + reply.pd_length, 0))
    assert all(r.stack == "qedr" and r.role == "initiator" for r in found)
    return [(r.rule, r.fn, r.status) for r in found]


PASSIVE = "qed_iwarp_tcp_connect_unsuccessful"
ACTIVE = "qed_iwarp_mpa_complete"


def test_the_registry_carries_these_rules() -> None:
    st = STACKS["qedr"]
    assert st.refusals.responder is refusals.responder
    assert st.refusals.initiator is refusals.initiator


@pytest.mark.parametrize(("frame", "rule", "line"), [
    (_req(rev=3), "revision", "MPA not supported VER"),  # MPA_NOT_SUPPORTED_VER
    (_req(rev=0), "revision", "MPA Invalid Packet"),  # MPA_INVALID_PACKET
    # 517 = the block and 513 bytes: one over in_pdata's 512
    (_req(pd_length=517), "pd-over-limit", "MPA Invalid Packet"),
    # S with 2 bytes: no room for the RFC 6581 block
    (_req(pd_length=2, ird=None, ord=None, p2p=None, write_rtr=None, read_rtr=None),
     "revision", "MPA Invalid Packet"),
])
def test_the_responder_refuses_and_the_ulp_hears_nothing(frame: MpaInfo, rule: str,
                                                         line: str) -> None:
    found = refusals.responder(Received(frame, None, 20 + frame.pd_length, 0))
    assert [(r.rule, r.fn, r.status) for r in found] == [(rule, PASSIVE, None)]
    assert f"Passive(0x%x) {line}" in found[0].log
    assert "RST" in found[0].reply and "no upcall" in found[0].reply


def test_a_rev_3_request_over_the_limit_breaks_both_rules() -> None:
    assert _responder(_req(rev=3, pd_length=600)) == [
        ("revision", PASSIVE, None), ("pd-over-limit", PASSIVE, None)]


@pytest.mark.parametrize("frame", [
    _req(pd_length=512),  # exactly in_pdata
    _req(rev=1, flags=C, ird=None, ord=None, p2p=None, write_rtr=None, read_rtr=None),
    _req(flags=C, ird=None, ord=None, p2p=None, write_rtr=None, read_rtr=None),  # rev 2, no S
    _req(flags=C | S | M),  # the firmware model takes M (no markers setting to refuse by)
    _req(p2p=True, write_rtr=False, read_rtr=False, zero_len_send=False),
])
def test_what_the_responder_takes(frame: MpaInfo) -> None:
    assert _responder(frame) == []


def test_bytes_after_the_request_are_not_refused() -> None:
    # the firmware reads the stream: what follows the frame is the RTR or the first FPDU
    assert _responder(_req(), trailing=24) == []


def test_a_reply_the_firmware_cannot_read_is_an_active_complete_error() -> None:
    # MPA_INVALID_PACKET: -ECONNREFUSED with "MPA Invalid Packet"
    found = refusals.initiator(Received(_rep(pd_length=600), QEDR_REQUEST, 620, 0))
    assert [(r.rule, r.fn, r.status) for r in found] == [
        ("pd-over-limit", ACTIVE, -errno.ECONNREFUSED)]
    assert "Active(0x%x) MPA Invalid Packet" in found[0].log


def test_a_rev_3_reply_falls_to_the_default_case() -> None:
    # MPA_NOT_SUPPORTED_VER has no case in qed_iwarp_mpa_complete: -ECONNRESET, no line
    found = refusals.initiator(Received(_rep(rev=3), QEDR_REQUEST, 26, 0))
    assert [(r.rule, r.fn, r.status) for r in found] == [
        ("revision", ACTIVE, -errno.ECONNRESET)]
    assert found[0].log.startswith("no line")


def test_a_reply_sharing_no_rtr_type_is_rtr_mismatch() -> None:
    # a qedr(rtr_type=2) request: P2P, Write only; the reply offers Read
    request = _req(write_rtr=True, read_rtr=False, zero_len_send=False)
    found = refusals.initiator(Received(_rep(read_rtr=True), request, 26, 0))
    assert [(r.rule, r.status) for r in found] == [("rtr-mismatch", -errno.ECONNREFUSED)]
    assert "MPA RTR MISMATCH" in found[0].log


def test_a_reply_sharing_one_type_is_taken() -> None:
    # qedr's own reply carries every type both offer: Send, Write and Read
    both = _rep(zero_len_send=True, write_rtr=True, read_rtr=True)
    assert _initiator(both) == []
    assert _initiator(_rep(read_rtr=True)) == []


def test_a_reply_without_p2p_is_not_checked_for_an_rtr() -> None:
    # fw_check_reply looks at the RTR types only when the reply has P2P (no RTR is sent)
    assert _initiator(_rep(p2p=False, read_rtr=False)) == []


def test_a_reply_ird_below_the_request_ord_is_insufficient_ird() -> None:
    found = refusals.initiator(Received(_rep(ird=8), QEDR_REQUEST, 26, 0))
    assert [(r.rule, r.status) for r in found] == [("ird-ord", -errno.ECONNREFUSED)]
    assert "MPA insufficient ird" in found[0].log
    assert _initiator(_rep(ird=16)) == []


@pytest.mark.parametrize("reply", [
    _rep(flags=C | S | R, ird=0, read_rtr=False),  # a reject: MPA_ERROR_REJECT
    _rep(rev=1, flags=C, ird=None, ord=None, p2p=None, read_rtr=None, write_rtr=None),
])
def test_a_reject_or_a_basic_reply_is_no_refusal(reply: MpaInfo) -> None:
    assert _initiator(reply) == []


# ---- a capture: a rev 3 request to a qedr responder --------------------------------

QEDR_SYNACK = [("MSS", 1460), ("NOP", None), ("NOP", None), ("Timestamp", (2000, 1000)),
               ("NOP", None), ("WScale", 3)]
"""The model's firmware SYN-ACK (docs/stacks/qedr.md: MSS, NOP NOP TS, NOP WS 3)."""


def _rev3(tmp_path: Path) -> Path:
    conv = Conversation(client="10.0.1.1", server="10.0.1.2", cport=42000, sport=31000)
    conv.handshake(LINUX_SYN, QEDR_SYNACK)
    conv.client_sends(mpa(KEY_REQ, C | S, 3, block(16, 16, p2p=True, write=True,
                                                   read=True)))
    conv.server_sends(b"", flags="RA")
    return write_pcap(tmp_path / "rev3.pcap", conv)


def test_explain_names_the_firmware_code_and_the_log_line(tmp_path: Path) -> None:
    (conn,) = inspect_capture(_rev3(tmp_path),
                              profiles=parse_profiles(["10.0.1.2=qedr"])).connections
    e = explain_connection(conn)
    assert e.cause == "revision"
    assert PASSIVE in e.summary and "MPA_NOT_SUPPORTED_VER" in e.summary
    assert "MPA not supported VER" in e.log
    assert e.responder_events == []


def test_the_emulated_responder_resets_and_tells_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["replay", "--profile", "qedr", "--emulate", "10.0.1.2", "--semantic",
          str(_rev3(tmp_path))])
    out = capsys.readouterr().out
    emulated = next(line for line in out.splitlines()
                    if line.strip().startswith("emulated"))
    assert "upcalls" not in emulated and "RST from the host" in emulated
