"""erdma's registry facts beyond the frames (replay, matrix, texts, outcomes) and its
refusals, each from erdma_cm.c and erdma_cm.h: the judge applies the refusals, explain
names them, replay plays a stack whose revision is fixed."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from helpers.cxgb4_lab import IP_RAW, PORT, make_net, raw_send

from mpa_emu.cli import main
from mpa_emu.net.network import Network
from mpa_emu.replay.stacks import auto_candidates, choose
from mpa_emu.stacks import STACKS
from mpa_emu.stacks.base import ESTABLISHED_AT_REPLY, OVERLAY_CRC_OFF
from mpa_emu.stacks.erdma import refusals
from mpa_emu.stacks.refusals import Received
from mpa_emu.views.inspection.report import MpaInfo
from mpa_emu.wire import erdma_mpa

ERDMA = STACKS["erdma"]
S = 1_000_000_000


def frame(*, request: bool = True, rev: int = 129, flags: int = 0, pd_length: int = 0
          ) -> MpaInfo:
    return MpaInfo(frame=4, request=request, rev=rev, flags=flags, pd_length=pd_length,
                   erdma_cookie=0x1234 if rev == 129 else None)


def received(m: MpaInfo, trailing: int = 0) -> Received:
    """``trailing`` counted as the judge counts it: from 20 bytes plus PD_Length."""
    ext = erdma_mpa.EXT_SIZE if m.rev == 129 else 0
    return Received(m, None, 20 + m.pd_length + ext + trailing, ext + trailing)


# ---- facts -------------------------------------------------------------------------------

def test_timers_read_backwards_in_erdma_cm_h() -> None:
    # erdma_cm_queue_work: MPAREP_TIMEOUT (HZ * 10) for an endpoint in AWAIT_MPAREP (set
    # by erdma_newconn_connected before it queues the timer), MPAREQ_TIMEOUT (HZ * 20)
    # otherwise (erdma_accept_newconn: AWAIT_MPAREQ)
    assert (ERDMA.texts.reply_timer_s, ERDMA.texts.request_timer_s) == (10, 20)
    assert ERDMA.lifecycle.reply_timeout_s == ERDMA.texts.reply_timer_s


def test_erdma_cm_c_writes_no_log_line() -> None:
    assert ERDMA.texts.logs == {}
    assert "logs nothing" in ERDMA.texts.debug_log.format(fn="erdma_proc_mpareq")


def test_outcomes_of_a_non_blocking_connect() -> None:
    o = ERDMA.outcomes
    # erdma_connect: O_NONBLOCK; TCP_CLOSE -> PEER_CLOSE in CONNECTING: -ECONNRESET;
    # CONNECTTIMEOUT in CONNECTING: -ETIMEDOUT
    assert (o.syn_refused, o.syn_timeout) == (-errno.ECONNRESET, -errno.ETIMEDOUT)
    assert "10 s" in o.connect_note
    # erdma_accept: IW_CM_EVENT_ESTABLISHED right after erdma_send_mpareqrep
    assert o.responder_established == ESTABLISHED_AT_REPLY
    assert (o.rst_retry, o.tcp_findings) == ("", ())


def test_matrix_has_the_cc_set_and_no_overlay_but_crc_off() -> None:
    m = ERDMA.matrix
    assert tuple(dict(s) for s in m.named_sets) == ({"cc": 1},)
    assert {k: dict(v) for k, v in m.overlays.items()} == {OVERLAY_CRC_OFF: {}}
    # erdma_dev_attrs_init: ERDMA_MAX_IRD / ERDMA_MAX_ORD
    assert m.max_ird(ERDMA.defaults()) == 128


def test_replay_of_a_fixed_revision() -> None:
    assert ERDMA.replay.rev_param == ""
    # erdma_newconn_connected: MPA_REVISION_EXT_1 always
    assert choose("erdma").mpa_rev == 129
    with pytest.raises(ValueError, match="erdma has no MPA revision to set"):
        choose("erdma", 1)
    assert {"erdma", "erdma(cc=1)"} <= {c.label for c in auto_candidates()}
    assert not any(c.stack == "erdma" for c in auto_candidates(1))


def test_replay_refuses_mpa_rev_for_erdma_in_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cap = tmp_path / "x.pcapng"
    cap.write_bytes(b"")
    assert main(["replay", str(cap), "--emulate", "192.0.2.2", "--profile", "erdma",
                 "--mpa-rev", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "erdma has no MPA revision to set" in err[0]


# ---- the responder's refusals (erdma_recv_mpa_rr, erdma_proc_mpareq) ---------------------

@pytest.mark.parametrize("rev", [1, 2])
def test_an_rfc_request_is_refused_at_the_header(rev: int) -> None:
    (r,) = refusals.responder(received(frame(rev=rev, flags=0x40, pd_length=4)))
    # the revision before anything else: C is never looked at
    assert (r.rule, r.fn, r.status) == ("revision", "erdma_recv_mpa_rr", None)
    assert "RST" in r.reply


def test_a_bare_v1_header_is_released_with_a_fin() -> None:
    (r,) = refusals.responder(received(frame(rev=1)))
    assert "FIN" in r.reply and "RST (bytes left unread)" not in r.reply


def test_pd_length_over_256() -> None:
    (r,) = refusals.responder(received(frame(pd_length=257)))
    assert (r.rule, r.fn) == ("pd-over-limit", "erdma_recv_mpa_rr")
    assert refusals.responder(received(frame(pd_length=256))) == []


@pytest.mark.parametrize(("flags", "rule"), [(0x40, "crc-mismatch"), (0x80, "markers"),
                                             (0xC0, "markers")])
def test_markers_or_crc_get_a_reject(flags: int, rule: str) -> None:
    (r,) = refusals.responder(received(frame(flags=flags, pd_length=3)))
    assert (r.rule, r.fn, r.status) == (rule, "erdma_proc_mpareq", None)
    assert "reject (R)" in r.reply and "-EOPNOTSUPP" in r.reply


def test_the_reply_key_in_a_request() -> None:
    (r,) = refusals.responder(received(frame(request=False, flags=0x40)))
    # erdma_proc_mpareq: the key before the flags
    assert (r.rule, r.fn) == ("wrong-key", "erdma_proc_mpareq")


def test_the_extension_is_part_of_the_frame() -> None:
    assert refusals.responder(received(frame(pd_length=5))) == []


@pytest.mark.parametrize(("pd_length", "extra", "words"), [
    (5, 1, "-EPROTO"),   # a read of to_rcv + 4 bytes that returns more than to_rcv
    (0, 4, "-EPROTO"),   # the 4-byte probe read complete
    (0, 3, "-EAGAIN"),   # __recv_mpa_hdr: -EAGAIN with rcvd non-zero
])
def test_bytes_after_the_request(pd_length: int, extra: int, words: str) -> None:
    (r,) = refusals.responder(received(frame(pd_length=pd_length), extra))
    assert (r.rule, r.fn) == ("extra-bytes", "erdma_recv_mpa_rr")
    assert r.reply.startswith(words)
    if words == "-EAGAIN":
        assert "20 s (MPAREQ_TIMEOUT)" in r.reply


# ---- the initiator's refusals (erdma_proc_mpareply) --------------------------------------

def test_an_rfc_reject_is_einval() -> None:
    # erdma_recv_mpa_rr fails before R is read: out_err, CONNECT_REPLY -EINVAL
    (r,) = refusals.initiator(received(frame(request=False, rev=2, flags=0x20)))
    assert (r.rule, r.fn, r.status) == ("revision", "erdma_recv_mpa_rr", -errno.EINVAL)
    assert "checked before R" in r.text


def test_an_erdma_reject_is_no_refusal() -> None:
    assert refusals.initiator(received(frame(request=False, flags=0x20))) == []


def test_a_reply_with_crc_is_econnrefused() -> None:
    (r,) = refusals.initiator(received(frame(request=False, flags=0x40)))
    assert (r.rule, r.fn, r.status) == ("crc-mismatch", "erdma_proc_mpareply",
                                        -errno.ECONNREFUSED)


def test_fpdus_behind_the_reply() -> None:
    (r,) = refusals.initiator(received(frame(request=False, pd_length=7), 24))
    assert (r.rule, r.status) == ("extra-bytes", -errno.EINVAL)
    (stall,) = refusals.initiator(received(frame(request=False), 2))
    assert stall.status == -errno.ETIMEDOUT and "10 s (MPAREP_TIMEOUT)" in stall.reply


# ---- explain names the refusal -----------------------------------------------------------

def test_explain_names_a_crc_reject(tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    net = make_net(3)
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    raw = net.add_host("raw", IP_RAW)
    b.listen(PORT)
    sock = raw.connect(b, PORT)
    net.run_for(S // 100)
    raw_send(net, raw, sock, erdma_mpa.build(request=True, flags=0x40, cookie=7, cc=0,
                                             private_data=b"hi"))
    net.run_for(S)
    replies = [erdma_mpa.parse(f.segment.payload) for f in net.frames
               if f.sender == "b" and erdma_mpa.looks_like_erdma(f.segment.payload)]
    # erdma_proc_mpareq, reject_conn: R set, C cleared, no private data, the
    # request's extension echoed
    assert [(x.flags, x.private_data, x.cookie) for x in replies] == [(0x20, b"", 7)]
    assert b.upcalls == []
    path = tmp_path / "crc.pcapng"
    net.write_pcapng(path)
    assert main(["explain", str(path), "--profile", "192.0.2.2=erdma"]) != 0
    out = capsys.readouterr().out
    assert "crc-mismatch: the erdma responder refuses the request: request sets C" in out
    assert "erdma_proc_mpareq" in out


def test_explain_names_the_revision_an_rfc_initiator_sends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = Network(seed=5)
    a = net.add_host("a", "192.0.2.1", stack="siw")
    b = net.add_host("b", "192.0.2.2", stack="erdma")
    b.listen(31000)
    a.connect(b, 31000, private_data=b"hello")
    net.run_for(S)
    path = tmp_path / "siw.pcapng"
    net.write_pcapng(path)
    main(["explain", str(path), "--profile", "192.0.2.2=erdma"])
    out = capsys.readouterr().out
    assert "revision: the erdma responder refuses the request: MPA rev 2" in out
    assert "erdma_recv_mpa_rr" in out
