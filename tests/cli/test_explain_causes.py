"""``mpa-emu explain``: every catalogue cause on a capture built for it.

Each capture is written byte by byte after the kernel source its builder cites
(tests/helpers/stack_captures.py); the expected cause, events and statuses come from that
source and from cma_iw_handler (drivers/infiniband/core/cma.c): CONNECT_REPLY 0 ->
ESTABLISHED, -ECONNRESET/-ECONNREFUSED -> REJECTED, -ETIMEDOUT -> UNREACHABLE, any other
-> CONNECT_ERROR.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import stack_captures as caps
from helpers.inspect_builders import Conversation, write_pcap

from mpa_emu.cli import main

REQUEST = "RDMA_CM_EVENT_CONNECT_REQUEST"
ESTABLISHED = "RDMA_CM_EVENT_ESTABLISHED"
REJECTED = "RDMA_CM_EVENT_REJECTED"
UNREACHABLE = "RDMA_CM_EVENT_UNREACHABLE"
CONNECT_ERROR = "RDMA_CM_EVENT_CONNECT_ERROR"
DISCONNECTED = "RDMA_CM_EVENT_DISCONNECTED"


def explain(path: Path, capsys: pytest.CaptureFixture[str], *args: str,
            code: int = 1) -> dict[str, Any]:
    assert main(["explain", str(path), "--json", "-", *args]) == code
    (conn,) = json.loads(capsys.readouterr().out)["connections"]
    return conn  # type: ignore[no-any-return]


CASES: dict[str, tuple[Callable[[], Conversation], tuple[str, ...], dict[str, Any]]] = {
    # siw_reject: R with the application's data; siw_proc_mpareply: "got mpa reject",
    # CONNECT_REPLY -ECONNRESET.
    "rejected": (caps.rejected_by_siw_application, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET,
        "responder_events": [REQUEST], "evidence": [4, 6],
        "private_data": b"no resources".hex()}),
    # irdma_negotiate_mpa_v2_ird_ord: -EOPNOTSUPP, RST, no upcall on irdma's side; siw
    # sees the peer close in AWAIT_MPAREP: CONNECT_REPLY -ECONNRESET.
    "no-p2p": (caps.siw_request_to_irdma, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET,
        "responder_events": [], "evidence": [4, 5]}),
    # siw_proc_mpareply: Terminate (no matching RTR), CONNECT_REPLY -EINVAL.
    "rtr-mismatch": (caps.rtr_mismatch_to_siw, ("--profile", "10.0.1.1=siw"), {
        "initiator_event": CONNECT_ERROR, "initiator_status": -errno.EINVAL}),
    # irdma_negotiate_mpa_v2_ird_ord: own IRD 2 < peer ORD 8: -EINVAL, RST,
    # irdma_event_connect_error: CONNECT_REPLY -ECONNRESET.
    "ird-ord": (caps.ird_insufficient_for_irdma, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET,
        "responder_events": [REQUEST], "evidence": [4, 6, 7]}),
    # siw_recv_mpa_rr: PD_Length 304 > 256, -EPROTO, no upcall; the irdma initiator
    # retries at rev 1 (irdma_handle_rst_pkt): no upcall for this attempt.
    "pd-over-limit": (caps.pdata_over_siw_limit, ("--profile", "10.0.1.2=siw"), {
        "initiator_event": "", "responder_events": [], "evidence": [4, 5]}),
    # siw_proc_mpareply: an enhanced request needs a rev 2 enhanced reply: -ECONNRESET.
    "revision": (caps.revision_1_reply_to_siw, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET}),
    # siw_proc_mpareq rejects M; the irdma initiator then reads a rev 2 reject whose block
    # lacks P2P: negotiation fails, -ECONNRESET instead of -ECONNREFUSED.
    "markers": (caps.markers_to_siw, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET,
        "responder_events": []}),
    # irdma_parse_mpa reads one segment: the 10 bytes of frame 4 are not a frame.
    "split-frame": (caps.split_request_to_irdma, (), {
        "responder_events": []}),
    # A RST from an unknown responder: siw's SIW_CM_WORK_PEER_CLOSE, -ECONNRESET.
    "reset": (caps.reset_during_exchange, (), {
        "initiator_event": REJECTED, "initiator_status": -errno.ECONNRESET,
        "evidence": [4, 5]}),
    "terminate": (caps.terminate_protection, (), {
        "initiator_event": ESTABLISHED, "initiator_status": 0,
        # The Terminate (9) and the tagged segment whose header it quotes (8).
        "responder_events": [REQUEST, ESTABLISHED, DISCONNECTED], "evidence": [8, 9]}),
    "rx-overflow": (caps.receive_overflow, (), {
        "initiator_event": ESTABLISHED, "evidence": [4, 6, 9]}),
    "zero-length-rtr-refused": (caps.rtr_refused, (), {
        "initiator_event": ESTABLISHED, "evidence": [4, 6, 7, 8]}),
}


@pytest.mark.parametrize("cause", sorted(CASES))
def test_cause(cause: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build, args, expected = CASES[cause]
    path = write_pcap(tmp_path / f"{cause}.pcap", build())
    conn = explain(path, capsys, *args)
    assert (conn["verdict"], conn["cause"]) == ("failed", cause)
    for key, value in expected.items():
        assert conn[key] == value, key
    assert conn["fix"]


def test_terminate_names_layer_type_code_and_the_quoted_header(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = explain(write_pcap(tmp_path / "t.pcap", caps.terminate_protection()), capsys)
    # RFC 5040 section 7.4: layer RDMAP (0), Remote Protection Error (1), Invalid STag.
    assert "layer RDMAP (0), type Remote Protection Error (1), code 0x00 Invalid STag" \
        in conn["summary"]
    # RFC 5040 section 4.8: the quoted header (STag 0x1234, TO 0) names frame 8.
    assert "answering frame 8 (the client's RDMA Write, STag 0x1234 TO 0x0)" \
        in conn["summary"]
    assert "the Terminate quotes 16 bytes of the header it answers: 000e8041" \
        in conn["notes"][0]


def test_crc_mismatch_from_the_terminate(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from helpers.real_like_captures import v2_crc_errors

    conn = explain(v2_crc_errors(tmp_path / "crc.pcap"), capsys)
    assert (conn["verdict"], conn["cause"]) == ("failed", "crc-mismatch")
    assert "MPA CRC error" in conn["summary"]


def test_siw_mpa_timeout_after_ten_seconds(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # siw_cm.h MPAREQ_TIMEOUT (HZ * 10): CONNECT_REPLY -ETIMEDOUT -> UNREACHABLE.
    path = caps.write_timed(tmp_path / "t.pcap", caps.siw_timeout(), {6: 10.0})
    conn = explain(path, capsys)
    assert (conn["verdict"], conn["cause"]) == ("failed", "mpa-timeout")
    assert (conn["initiator_event"], conn["initiator_status"]) == (UNREACHABLE,
                                                                   -errno.ETIMEDOUT)
    assert "10.0 s" in conn["summary"] and "MPAREQ_TIMEOUT" in conn["summary"]
    assert conn["evidence"] == [4, 6]


def test_a_close_that_is_no_timer_is_the_application(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = caps.write_timed(tmp_path / "t.pcap", caps.siw_timeout(), {6: 3.0})
    conn = explain(path, capsys)
    assert (conn["verdict"], conn["cause"]) == ("failed", "reset")
    assert conn["initiator_event"] == ""


def test_data_after_fin_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = explain(write_pcap(tmp_path / "f.pcap", caps.data_after_fin()), capsys, code=0)
    assert (conn["verdict"], conn["cause"]) == ("warning", "data-after-fin")
    assert conn["evidence"] == [10]


def test_port_decoded_as_another_protocol_is_a_note_with_the_tshark_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conn = explain(write_pcap(tmp_path / "n.pcap", caps.nvme_port()), capsys, code=0)
    assert (conn["verdict"], conn["cause"]) == ("ok", "ok")
    # The connection carries SMB Direct's negotiate, so explain also names that upper
    # protocol (found by its first message, not by the port).
    note, upper = conn["notes"]
    assert note.startswith("port-decoded-as-other: Wireshark decodes port 4420 as NVMe/TCP")
    assert "-o tcp.try_heuristic_first:TRUE" in note
    assert upper.startswith("upper protocol: SMB Direct (by first message)")


def test_no_p2p_where_the_initiator_requires_it(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    conn = explain(write_pcap(tmp_path / "p.pcap", caps.reply_without_p2p_to_irdma()),
                   capsys)
    assert (conn["verdict"], conn["cause"]) == ("failed", "no-p2p")
    assert (conn["initiator_event"], conn["initiator_status"]) == (REJECTED,
                                                                   -errno.ECONNRESET)
    # The responder, judged siw, chose no RTR: siw_accept raises ESTABLISHED at once
    # (no wait_for_peer_rts); the initiator's RST then closes it.
    assert conn["stacks"]["server"] == "siw"
    assert conn["responder_events"] == [REQUEST, ESTABLISHED, DISCONNECTED]
    assert "irdma_negotiate_mpa_v2_ird_ord" in conn["summary"]


def test_cxgb4_mpa_timeout_after_sixty_seconds(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # ep_timeout_secs (60 by default): process_timeout, connect_reply_upcall(-ETIMEDOUT).
    path = caps.write_timed(tmp_path / "c.pcap", caps.cxgb4_timeout(), {6: 60.0})
    conn = explain(path, capsys)
    assert conn["stacks"]["client"] == "cxgb4"
    assert (conn["verdict"], conn["cause"]) == ("failed", "mpa-timeout")
    assert (conn["initiator_event"], conn["initiator_status"]) == (UNREACHABLE,
                                                                   -errno.ETIMEDOUT)
    assert "ep_timeout_secs" in conn["summary"] and "60.0 s" in conn["summary"]


def test_siw_responder_timeout_after_five_seconds(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # MPAREP_TIMEOUT (HZ * 5) in AWAIT_MPAREQ: the socket is released, no upcall.
    path = caps.write_timed(tmp_path / "s.pcap", caps.siw_responder_timeout(), {4: 5.0})
    conn = explain(path, capsys, "--profile", "10.0.5.4=siw")
    assert (conn["verdict"], conn["cause"]) == ("failed", "mpa-timeout")
    assert "5.0 s" in conn["summary"] and "MPAREP_TIMEOUT" in conn["summary"]
    assert conn["responder_events"] == [] and conn["initiator_event"] == ""
