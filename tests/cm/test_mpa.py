"""irdma_parse_mpa in the kernel's order, irdma_negotiate_mpa_v2_ird_ord as a matrix, the
frames irdma builds, and the reaction of each side to a bad frame (irdma_build_mpa_v1/v2,
irdma_parse_mpa; RFC 5044 section 7.1)."""

from __future__ import annotations

import errno
from errno import ECONNREFUSED, ECONNRESET

import pytest
from helpers.cm_harness import IP_A, IP_P, MAC_A, MAC_P, PORT, answer, syn_rcvd, to_host
from helpers.mpa_bytes import frame
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.mpa_policy import (
    MpaParams,
    MpaParseError,
    Negotiated,
    NegotiationError,
    ParsedMpa,
    Rdma0Op,
    build_mpa_frame,
    negotiate_mpa_v2_ird_ord,
    parse_mpa,
)
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, RST, SYN

READ = Rdma0Op.READ_ZERO
WRITE = Rdma0Op.WRITE_ZERO




def parse(payload: bytes, *, node_rev: int = 2, initiator: bool = False,
          tail: str = "zeros") -> ParsedMpa | MpaParseError:
    return parse_mpa(payload, node_rev=node_rev, initiator=initiator, ird_size=127,
                     ord_size=255, mpav2_ird_ord=0, send_rdma0_op=READ, tail=tail)


@pytest.mark.parametrize(("payload", "node_rev", "initiator", "step", "err"), [
    (frame()[:19], 2, False, 1, errno.EINVAL),
    (frame(pd_length=513), 2, False, 2, errno.EOVERFLOW),
    (frame(rev=3), 2, False, 3, errno.EINVAL),
    (frame(rev=0), 2, False, 3, errno.EINVAL),
    (frame(rev=2), 1, False, 4, errno.EINVAL),  # fell back to v1, gets a v2 frame
    (frame(key=mpa.KEY_REP), 2, False, 5, errno.EINVAL),  # passive expects Req
    (frame(key=mpa.KEY_REQ), 2, True, 5, errno.EINVAL),  # initiator expects Rep
    (frame(key=b"MPA ID Xyz Frame"), 2, False, 5, errno.EINVAL),
    (frame(pd_length=40), 2, False, 6, errno.EOVERFLOW),  # split frame, no reassembly
    (frame(pdata=bytes(500)) + bytes(30), 2, False, 7, errno.EOVERFLOW),  # > 544 bytes
    (frame(ctrl=(0x0010, 0xC010)), 2, False, 8, errno.EOPNOTSUPP),  # no P2P
])
def test_each_parse_check_fails_in_kernel_order(payload: bytes, node_rev: int,
                                                initiator: bool, step: int,
                                                err: int) -> None:
    res = parse(payload, node_rev=node_rev, initiator=initiator)
    assert isinstance(res, MpaParseError)
    assert (res.step, res.errno) == (step, err)


def test_512_bytes_of_pd_length_pass_but_the_v2_user_limit_is_508() -> None:
    ok = parse(frame(pdata=bytes(508)))
    assert isinstance(ok, ParsedMpa) and ok.pd_length == 512
    assert isinstance(parse(frame(pdata=bytes(509))), MpaParseError)


def test_bytes_after_the_frame_are_ignored_up_to_544() -> None:
    # +4 quirk: PD_Length (7) bytes copied from offset 24 reach 4 bytes past the frame.
    # The kernel reports whatever its receive buffer holds there; the emulator reports
    # zeros, or with tail="segment" the segment's next bytes.
    res = parse(frame(pdata=b"abc") + b"trailing")
    assert isinstance(res, ParsedMpa)
    assert res.private_data == b"abc\0\0\0\0" and res.user_data == b"abc"
    res = parse(frame(pdata=b"abc") + b"trailing", tail="segment")
    assert isinstance(res, ParsedMpa)
    assert res.private_data == b"abctrai" and res.user_data == b"abc"
    res = parse(frame(pdata=b"abc") + b"tr", tail="segment")  # the segment ends first
    assert isinstance(res, ParsedMpa) and res.private_data == b"abctr\0\0"


def test_v1_request_keeps_its_private_data_and_flags() -> None:
    res = parse(frame(flags=0x40 | 0x80, rev=1, ctrl=None, pdata=b"v1"))
    assert isinstance(res, ParsedMpa)
    assert (res.rev, res.private_data, res.markers, res.negotiated) == (1, b"v1", True,
                                                                       None)


def negotiate(ctrl_ird: int, ctrl_ord: int, *, initiator: bool, ird: int = 127,
              ord_: int = 255, prefer: Rdma0Op = READ) -> Negotiated | NegotiationError:
    return negotiate_mpa_v2_ird_ord(ctrl_ird, ctrl_ord, initiator=initiator, ird_size=ird,
                                    ord_size=ord_, mpav2_ird_ord=0, send_rdma0_op=READ,
                                    prefer=prefer)


P2P, RD, WR = 0x8000, 0x4000, 0x8000


@pytest.mark.parametrize(("ctrl", "initiator", "own", "want"), [
    # responder (state != MPAREQ_SENT)
    ((P2P | 16, RD | WR | 16), False, (127, 255), (127, 16, 0, READ)),
    ((P2P | 16, WR | 16), False, (127, 255), (127, 16, 0, WRITE)),
    ((P2P | 16, RD | 0), False, (127, 255), (1, 16, 0, READ)),  # peer ORD 0 + READ
    ((P2P | 300, RD | 4), False, (127, 255), (127, 255, 0, READ)),
    ((P2P | 0x3FFF, RD | 4), False, (127, 255), (127, 255, 0x3FFF, READ)),
    ((P2P | 8, 0x3FFF), False, (127, 255), (127, 255, 0x3FFF, READ)),  # no RTR bit
    # initiator (MPAREQ_SENT)
    ((P2P | 4, RD | 16), True, (16, 16), (16, 4, 0, READ)),
    ((P2P | 127, WR | 16), True, (16, 16), (16, 16, 0, WRITE)),
    ((P2P | 0x3FFF, RD | 0x3FFF), True, (16, 16), (16, 16, 0x3FFF, READ)),
])
def test_ird_ord_negotiation_matrix(ctrl: tuple[int, int], initiator: bool,
                                    own: tuple[int, int],
                                    want: tuple[int, int, int, Rdma0Op]) -> None:
    if ctrl[1] == 0x3FFF:  # ORD word 0x3FFF carries no RTR bit: that fails at step 5
        res = negotiate(*ctrl, initiator=initiator, ird=own[0], ord_=own[1])
        assert isinstance(res, NegotiationError) and res.errno == errno.EOPNOTSUPP
        return
    res = negotiate(*ctrl, initiator=initiator, ird=own[0], ord_=own[1])
    assert isinstance(res, Negotiated)
    assert (res.ird_size, res.ord_size, res.mpav2_ird_ord, res.send_rdma0_op) == want


@pytest.mark.parametrize(("ctrl", "initiator", "err"), [
    ((16, RD | WR | 16), False, errno.EOPNOTSUPP),  # P2P required
    ((P2P | 16, 16), False, errno.EOPNOTSUPP),  # no RDMA0 op offered
    ((P2P | 0, RD | 4), True, errno.EOPNOTSUPP),  # peer IRD 0 with READ
    ((P2P | 16, RD | 32), True, errno.EINVAL),  # own IRD 16 < peer ORD 32
])
def test_negotiation_failures(ctrl: tuple[int, int], initiator: bool, err: int) -> None:
    res = negotiate(*ctrl, initiator=initiator, ird=16, ord_=16)
    assert isinstance(res, NegotiationError) and res.errno == err


@pytest.mark.parametrize(("ctrl", "initiator", "partial"), [
    ((16, RD | WR | 16), False, None),  # P2P checked before anything changes
    ((P2P | 0, RD | 4), True, None),  # returns before the ORD limit
    # the initiator lowers its ORD to the peer's IRD, then finds its IRD too small
    ((P2P | 8, RD | 32), True, (16, 8, 0, READ)),
    # negotiate_done after the responder limits: peer ORD 0 with no RTR bit
    ((P2P | 4, 0), False, (16, 4, 0, READ)),
    # IETF_NO_IRD_ORD is recorded before negotiate_done finds no RTR bit
    ((P2P | 0x3FFF, 8), True, (16, 16, 0x3FFF, READ)),
])
def test_negotiation_failure_reports_what_it_already_changed(
        ctrl: tuple[int, int], initiator: bool,
        partial: tuple[int, int, int, Rdma0Op] | None) -> None:
    # irdma_negotiate_mpa_v2_ird_ord writes cm_node in place before some of its returns
    res = negotiate(*ctrl, initiator=initiator, ird=16, ord_=16)
    assert isinstance(res, NegotiationError)
    got = None if res.partial is None else (res.partial.ird_size, res.partial.ord_size,
                                            res.partial.mpav2_ird_ord,
                                            res.partial.send_rdma0_op)
    assert got == partial


def test_siw_like_profile_prefers_write_when_both_are_offered() -> None:
    res = negotiate(P2P | 16, RD | WR | 16, initiator=False, prefer=WRITE)
    assert isinstance(res, Negotiated) and res.send_rdma0_op is WRITE


def test_built_frames_carry_irdma_flags_and_rtr_words() -> None:
    p = MpaParams(rev=2, ird_size=127, ord_size=300, mpav2_ird_ord=0, send_rdma0_op=READ)
    assert build_mpa_frame(p, request=True, private_data=b"x") == frame(
        ctrl=(0x8000 | 127, 0xC000 | 300), pdata=b"x")
    assert build_mpa_frame(p, request=False, private_data=b"", reject=True) == frame(
        key=mpa.KEY_REP, flags=0x70, ctrl=(0x8000 | 127, 0x4000 | 300))
    none = MpaParams(rev=2, ird_size=127, ord_size=255, mpav2_ird_ord=0x3FFF,
                     send_rdma0_op=WRITE)
    assert build_mpa_frame(none, request=False, private_data=b"") == frame(
        key=mpa.KEY_REP, ctrl=(0xBFFF, 0xBFFF))
    v1 = MpaParams(rev=1, ird_size=1, ord_size=1, mpav2_ird_ord=0, send_rdma0_op=READ)
    assert build_mpa_frame(v1, request=True, private_data=b"ab") == (
        mpa.KEY_REQ + b"\x40\x01\x00\x02ab")
    bad = MpaParams(rev=3, ird_size=1, ord_size=1, mpav2_ird_ord=0, send_rdma0_op=READ)
    assert build_mpa_frame(bad, request=True, private_data=b"") == b""


# ---- the reactions on a core ------------------------------------------------------

def passive(cfg: CmConfig | None = None) -> tuple[CmCore, int, int]:
    core, synack = syn_rcvd(cfg, seed=4)
    core.receive(answer(synack, flags=ACK, seq=101, ack=synack.seq + 1), 0)
    return core, core.conns()[0], synack.seq + 1


def test_bad_request_gets_a_reset_and_no_upcall() -> None:
    core, conn, pseq = passive()
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq,
                         payload=frame(pd_length=40), src_mac=MAC_A), 0)
    [rst] = core.frames_to_send()
    assert rst.segment.flags == RST | ACK and rst.segment.seq == pseq
    assert rst.segment.ack == 101 + 24  # rcv_nxt = seq + datasize before the parse
    assert core.next_event() is None and core.node(conn) is None
    dropped = [r.fields["reason"] for r in core.trace.of_kind("segment_dropped")]  # type: ignore[union-attr]
    assert any(r.startswith("step 6:") for r in dropped)


def test_mpa_request_split_over_two_segments_fails() -> None:
    core, conn, pseq = passive()
    whole = frame(pdata=b"0123456789")
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq,
                         payload=whole[:18], src_mac=MAC_A), 0)
    assert core.frames_to_send()[0].segment.flags == RST | ACK
    assert core.node(conn) is None


def test_markers_requested_enable_send_markers_unless_the_profile_refuses() -> None:
    core, conn, pseq = passive()
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq,
                         payload=frame(flags=0xD0), src_mac=MAC_A), 0)
    assert core.node(conn).state is CmState.MPAREQ_RCVD  # type: ignore[union-attr]
    siw, conn2, pseq2 = passive(CmConfig(accept_markers=False))
    siw.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq2,
                        payload=frame(flags=0xD0), src_mac=MAC_A), 0)
    assert siw.node(conn2) is None


def test_pdata_length_quirks_v2_plus4_and_u8_wrap() -> None:
    core, _, pseq = passive()
    core.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq,
                         payload=frame(pdata=bytes(252)), src_mac=MAC_A), 0)
    up = core.next_event()
    assert up is not None and up.private_data_len == 0  # 252 + 4 = 256 -> u8 0
    plain, _, pseq2 = passive(CmConfig(quirks=Quirks(v2_pdata_plus4=False,
                                                     pdata_len_u8=False)))
    plain.receive(to_host(MAC_P, IP_A, IP_P, 5000, PORT, flags=ACK, seq=101, ack=pseq2,
                          payload=frame(pdata=bytes(range(252))), src_mac=MAC_A), 0)
    up2 = plain.next_event()
    assert up2 is not None
    assert (up2.private_data_len, up2.private_data) == (252, bytes(range(252)))


def active_until_reply() -> tuple[CmCore, int, int, int]:
    core = CmCore("A", MAC_A, CmConfig(), seed=6, trace=Trace())
    core.add_address(IP_A)
    core.set_neighbour(IP_P, MAC_P)
    conn = core.connect(IP_A, IP_P, PORT, ird=16, ord=16, now_ns=0)
    [syn] = core.frames_to_send()
    core.receive(answer(syn.segment, flags=SYN | ACK, seq=900, ack=syn.segment.seq + 1), 0)
    _, req = core.frames_to_send()
    return core, conn, req.segment.seq + len(req.segment.payload), req.segment.ack


def test_reject_without_p2p_is_a_reset_not_a_refusal() -> None:
    core, conn, aseq, pseq = active_until_reply()
    bad = frame(key=mpa.KEY_REP, flags=0x70, ctrl=(16, RD | 16))
    core.receive(to_host(MAC_A, IP_P, IP_A, PORT, core.node(conn).loc_port,  # type: ignore[union-attr]
                         flags=ACK, seq=pseq, ack=aseq, payload=bad, src_mac=MAC_P), 0)
    assert [t.segment.flags for t in core.frames_to_send()] == [RST | ACK]
    up = core.next_event()
    assert up is not None and (up.event, up.status) == (IwEvent.CONNECT_REPLY, -ECONNRESET)
    assert core.node(conn) is None


def test_reject_with_p2p_is_a_refusal_with_its_private_data() -> None:
    core, conn, aseq, pseq = active_until_reply()
    rej = frame(key=mpa.KEY_REP, flags=0x70, ctrl=(P2P | 16, RD | 16), pdata=b"no")
    core.receive(to_host(MAC_A, IP_P, IP_A, PORT, core.node(conn).loc_port,  # type: ignore[union-attr]
                         flags=ACK, seq=pseq, ack=aseq, payload=rej, src_mac=MAC_P), 0)
    up = core.next_event()
    assert up is not None and up.status == -ECONNREFUSED
    assert up.private_data == b"no\0\0\0\0"
    assert core.node(conn).state is CmState.MPAREJ_RCVD  # type: ignore[union-attr]


def test_initiator_with_too_small_ird_resets_on_the_reply() -> None:
    core, conn, aseq, pseq = active_until_reply()
    rep = frame(key=mpa.KEY_REP, ctrl=(P2P | 16, RD | 64))  # peer ORD 64 > own IRD 16
    core.receive(to_host(MAC_A, IP_P, IP_A, PORT, core.node(conn).loc_port,  # type: ignore[union-attr]
                         flags=ACK, seq=pseq, ack=aseq, payload=rep, src_mac=MAC_P), 0)
    assert core.frames_to_send()[0].segment.flags == RST | ACK
    up = core.next_event()
    assert up is not None and up.status == -ECONNRESET
