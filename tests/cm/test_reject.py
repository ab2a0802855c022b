"""irdma_cm_reject and its variants (irdma_reject, irdma_send_mpa_reject, irdma_handle_ack_pkt in
FIN_WAIT1), both sides."""

from __future__ import annotations

import errno
from errno import ECONNRESET, EINVAL

import pytest
from helpers.cm_harness import IP_A, IP_P, PORT, S_NS, Pair, answer, make_pair
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent
from mpa_emu.stacks.irdma.config import CmConfig, Quirks
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire import mpa
from mpa_emu.wire.segment import ACK, FIN, RST


def requested(pair: Pair) -> tuple[int, int]:
    lid = pair.p.create_listen(IP_P, PORT)
    conn = pair.a.connect(IP_A, IP_P, PORT, now_ns=0)
    pair.pump()
    [req] = pair.events("P")
    assert req.event is IwEvent.CONNECT_REQUEST
    assert pair.p.listener(lid) is not None
    return conn, req.conn


def test_reject_after_peer_reset_frees_silently(pair: Pair) -> None:
    _conn, pconn = requested(pair)
    view = pair.p.node(pconn)
    assert view is not None
    pair.drop = lambda s: True
    mpareq = pair.frames("A")[-1].seg
    pair.p.receive(answer(pair.frames("P")[-1].seg, flags=RST | ACK, seq=mpareq.seq,
                          ack=view.loc_seq_num), 0)
    assert pair.p.node(pconn).passive_state == 1  # type: ignore[union-attr]
    pair.p.reject(pconn, private_data=b"late", now_ns=0)
    assert pair.p.frames_to_send() == []
    assert pair.p.node(pconn) is None


def test_accept_after_peer_reset_returns_econnreset_and_frees(pair: Pair) -> None:
    # irdma_accept: passive_state 2 -> ret = -ECONNRESET; error: irdma_rem_ref_cm_node
    _conn, pconn = requested(pair)
    view = pair.p.node(pconn)
    assert view is not None
    pair.p.receive(answer(pair.frames("P")[-1].seg, flags=RST, seq=1, ack=0), 0)
    with pytest.raises(CmError) as err:
        pair.p.accept(pconn, now_ns=0)
    assert err.value.errno == ECONNRESET
    assert pair.p.frames_to_send() == [] and pair.p.next_event() is None
    assert pair.p.node(pconn) is None


def test_reject_after_listener_destroyed_frees_without_a_packet(pair: Pair) -> None:
    _conn, pconn = requested(pair)
    pair.drop = lambda s: True
    pair.p.destroy_listen(1, now_ns=0)
    [rst] = pair.p.frames_to_send()
    assert rst.segment.flags == RST | ACK
    assert "irdma_dec_refcnt_listen MPAREQ_RCVD -> LISTENER_DESTROYED" in rst.comment
    assert pair.p.node(pconn).state is CmState.LISTENER_DESTROYED  # type: ignore[union-attr]
    assert pair.p.listener(1) is not None  # held by the node
    pair.p.reject(pconn, now_ns=0)
    assert pair.p.frames_to_send() == [] and pair.p.node(pconn) is None
    assert pair.p.listener(1) is None  # the last child released it


def test_accept_after_listener_destroyed_returns_einval_and_frees(pair: Pair) -> None:
    # irdma_accept: LISTENER_DESTROYED -> ret = -EINVAL; error: irdma_rem_ref_cm_node
    _conn, pconn = requested(pair)
    pair.drop = lambda s: True
    pair.p.destroy_listen(1, now_ns=0)
    pair.p.frames_to_send()
    with pytest.raises(CmError) as err:
        pair.p.accept(pconn, now_ns=0)
    assert err.value.errno == EINVAL
    assert pair.p.frames_to_send() == [] and pair.p.next_event() is None
    assert pair.p.node(pconn) is None and pair.p.listener(1) is None


def test_reject_on_an_active_node_does_nothing(pair: Pair) -> None:
    conn, _ = requested(pair)
    before = pair.a.node(conn)
    pair.a.reject(conn, private_data=b"x", now_ns=0)
    assert pair.a.frames_to_send() == [] and pair.a.node(conn) == before


@pytest.mark.parametrize(("quirks", "length", "sent"), [
    (Quirks(), 255, 255),
    # irdma_reject(..., u8 pdata_len) as rdma_reject and iw_cm_reject: the length wraps
    # mod 256 and the "pdata_len + 24 > 544" check can never fire
    (Quirks(), 256, 0),
    (Quirks(), 512, 0),
    (Quirks(), 513, 1),
    (Quirks(reject_pdata_u8=False), 520, 520),
    (Quirks(reject_pdata_u8=False), 521, None),  # 521 + 24 > 544: -EINVAL
])
def test_reject_private_data_limit(quirks: Quirks, length: int, sent: int | None) -> None:
    pair = make_pair(cfg_p=CmConfig(quirks=quirks))
    _, pconn = requested(pair)
    before = pair.p.node(pconn)
    data = bytes(range(256)) * 3
    if sent is None:
        with pytest.raises(CmError) as info:
            pair.p.reject(pconn, private_data=data[:length], now_ns=0)
        assert info.value.errno == errno.EINVAL
        assert pair.p.frames_to_send() == [] and pair.p.node(pconn) == before
        return
    pair.p.reject(pconn, private_data=data[:length], now_ns=0)
    [rej] = pair.p.frames_to_send()
    payload = rej.segment.payload
    # an ordinary reject: key, R, PD_Length = RTR block (4) + the wrapped length
    assert len(payload) == 24 + sent and payload[16] & 0x20
    assert int.from_bytes(payload[18:20], "big") == 4 + sent
    assert payload[24:] == data[:sent]
    wraps = list(pair.p.trace.of_kind("pdata_len_wrapped"))  # type: ignore[union-attr]
    assert [w.fields["length"] for w in wraps] == ([sent] if sent != length else [])


def test_unacknowledged_reject_is_resent_identically_then_reset() -> None:
    pair = make_pair(cfg_p=CmConfig(retrans=8))
    _, pconn = requested(pair)
    pair.drop = lambda s: s.src == "A" or s.src == "P"
    pair.p.reject(pconn, private_data=b"bye", now_ns=0)
    pair.pump()
    pair.at(100 * S_NS)
    sent = [s for s in pair.frames("P") if s.seg.payload[:16] == mpa.KEY_REP]
    assert [s.time_ns // S_NS for s in sent] == [0, 1, 3, 7, 15, 27, 39, 51, 63]
    assert len({s.seg for s in sent}) == 1
    last = pair.frames("P")[-1]
    assert last.seg.flags == RST | ACK and last.time_ns == 75 * S_NS
    assert "irdma_retrans_expired FIN_WAIT1 -> CLOSED" in last.tx.comment
    assert pair.p.node(pconn) is None


def test_peer_that_never_sends_its_fin_leaves_fin_wait2_forever(pair: Pair) -> None:
    _, pconn = requested(pair)
    pair.drop = lambda s: s.src == "A" and bool(s.seg.flags & FIN)
    pair.p.reject(pconn, now_ns=0)
    pair.pump()
    a_ack = [s for s in pair.frames("A") if s.seg.flags == ACK][-1].seg
    # an ACK of the FIN that the harness lets through by hand
    rej = pair.frames("P")[-1].seg
    pair.p.receive(answer(rej, flags=ACK, seq=a_ack.seq,
                          ack=rej.seq + len(rej.payload) + 1), 0)
    assert pair.p.node(pconn).state is CmState.FIN_WAIT2  # type: ignore[union-attr]
    pair.drop = lambda s: s.src == "A"  # nothing more from A: not its FIN, not its RST
    pair.run_out()
    report = pair.p.leak_report()
    assert [(c, s) for c, s, _ in report] == [(pconn, CmState.FIN_WAIT2)]
    assert "FIN_WAIT2 has no timer" in (report[0][2] or "")
    assert pair.p.get_timer() is None


def test_reject_of_a_v1_request_answers_in_v1() -> None:
    pair = make_pair(cfg_a=CmConfig(mpa_rev=1))
    _, pconn = requested(pair)
    pair.p.reject(pconn, private_data=b"v1", now_ns=0)
    [rej] = pair.p.frames_to_send()
    assert rej.segment.payload == mpa.KEY_REP + b"\x60\x01\x00\x02v1"
    assert rej.segment.flags == ACK | FIN


def test_misuse_of_reject_and_accept_changes_nothing(pair: Pair) -> None:
    conn, pconn = requested(pair)
    pair.p.reject(pconn, now_ns=0)
    pair.pump()
    with pytest.raises(CmError):
        pair.p.reject(pconn, now_ns=0)  # TIME_WAIT: nothing pending
    with pytest.raises(CmError):
        pair.p.accept(pconn, now_ns=0)
    with pytest.raises(CmError):
        pair.a.accept(conn + 99, now_ns=0)
