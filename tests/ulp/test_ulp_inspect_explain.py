"""inspect and explain on captures of the four upper protocols written from their
specifications (helpers.ulp_captures): the protocol named, its negotiated values, the
upper-protocol cause with its evidence frames and numbers; text, JSON and HTML agree;
unknown private data stays unknown. Expected numbers are the bytes the helper packed
from [MS-SMBD], nvme-rdma.h, iscsi_iser.h and RFC 8797 / RFC 8166."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ulp_captures as caps

from mpa_emu.cli import main
from mpa_emu.views.explanation import explain_connection
from mpa_emu.views.inspection import format_report, inspect_capture


def _one(path: Path):  # type: ignore[no-untyped-def]
    report = inspect_capture(path)
    assert len(report.connections) == 1
    return report.connections[0]


def test_smbd_falloc_names_both_sizes_and_the_frames(tmp_path: Path) -> None:
    path = caps.smbd_falloc(tmp_path / "falloc.pcap")
    c = _one(path)
    assert c.ulp is not None and c.ulp.protocol == "smb-direct"
    assert c.ulp.negotiated["server_max_receive_size"] == 1364
    assert c.ulp.negotiated["client_max_receive_size"] == 8192
    e = explain_connection(c)
    assert e.cause == "smbd-send-over-max-receive" and e.verdict == "failed"
    f = caps.SMBD_FRAMES
    for frame in (f["negotiate_response"], f["write_first"], f["write_last"],
                  f["overflow_segment"], f["terminate"], f["rst"]):
        assert frame in e.evidence
    assert "16,520-byte Send" in e.summary and "1,364 bytes" in e.summary
    assert "SMB2 WRITE" in e.summary and "MO 7,120" in e.summary
    assert "12 segments" in e.summary
    assert any(n.startswith("iWARP level: rx-overflow") for n in e.notes)
    assert any(n.startswith("assumption (not in the capture)") for n in e.notes)


def test_smbd_healthy_fragments_are_fine(tmp_path: Path) -> None:
    c = _one(caps.smbd_healthy(tmp_path / "ok.pcap"))
    assert c.ulp is not None and not c.ulp.diagnoses
    kinds = [m.kind for m in c.ulp.messages]
    assert kinds[:2] == ["Negotiate Request", "Negotiate Response"]
    assert explain_connection(c).verdict == "ok"
    writes = [m for m in c.ulp.messages if m.fields.get("smb2_command_name") == "WRITE"]
    assert len(writes) == 2  # the request's first fragment and the response
    first = next(m for m in c.ulp.messages if m.fields.get("remaining_data_length"))
    assert first.fields["remaining_data_length"] == 2000 + 64 + 48 - 1340


def test_smbd_no_credit(tmp_path: Path) -> None:
    # The Negotiate Response grants 255; rewrite it to grant 1: the SMB2 NEGOTIATE uses
    # that credit, the server's answer grants 10, so only a client message after 11
    # more would break. Grant 0 instead: the first data message already has none.
    b = caps.PortBuilder(5445)
    b.handshake()
    b.add(True, "PA", caps.mpa_frame(caps.KEY_REQ, 0x10, 2, (16, 16), caps.SMBD_LEGACY))
    b.add(False, "PA", caps.mpa_frame(caps.KEY_REP, 0x10, 2, (16, 16), caps.SMBD_LEGACY))
    b.send(True, 1, caps.SMBD_NEG_REQ)
    resp = bytearray(caps.SMBD_NEG_RESP)
    resp[10:12] = (1).to_bytes(2, "little")  # CreditsGranted 1 ([MS-SMBD] 2.2.2 offset 10)
    neg = b.send(False, 1, bytes(resp))
    b.send(True, 2, caps.data_transfer(10, caps.smb2(0) + bytes(36)))
    late = b.send(True, 3, caps.data_transfer(10, caps.smb2(5) + bytes(36)))
    b.close()
    c = _one(b.write(tmp_path / "credit.pcap"))
    e = explain_connection(c)
    assert e.cause == "smbd-no-credit" and late in e.evidence and neg in e.evidence


def test_nvme_reject_names_status_and_sizes(tmp_path: Path) -> None:
    c = _one(caps.nvme_reject(tmp_path / "rej.pcap"))
    assert c.ulp is not None and c.ulp.protocol == "nvme-rdma"
    assert c.ulp.negotiated["hsqsize"] == 1023 and c.ulp.negotiated["qid"] == 1
    e = explain_connection(c)
    assert e.cause == "nvme-connect-rejected"
    assert "NVME_RDMA_CM_INVALID_HSQSIZE" in e.summary and "1024 entries" in e.summary
    assert e.evidence == [caps.NVME_FRAMES["request"], caps.NVME_FRAMES["reject"]]
    assert e.initiator_event == "RDMA_CM_EVENT_REJECTED"
    assert any("nvmet-rdma does not check" in n for n in e.notes)


def test_nvme_admin_queue_over_aq_depth_is_proven(tmp_path: Path) -> None:
    # nvmet_rdma_parse_cm_connect_req: qid 0 and hsqsize + 1 > NVME_AQ_DEPTH (32).
    c = _one(caps.nvme_reject(tmp_path / "aq.pcap", qid=0, hrqsize=64, hsqsize=63))
    e = explain_connection(c)
    assert "above NVME_AQ_DEPTH 32" in e.summary
    assert not any(n.startswith("assumption") for n in e.notes)


def test_nvme_capsules_named(tmp_path: Path) -> None:
    c = _one(caps.nvme_admin_accept(tmp_path / "adm.pcap"))
    assert c.ulp is not None and c.ulp.negotiated["crqsize"] == 32
    connect, response = c.ulp.messages
    assert connect.fields["name"] == "Fabrics Connect"
    assert connect.fields["queue"] == "admin" and connect.fields["inline_length"] == 1024
    assert response.kind == "NVMe response capsule" and response.fields["status"] == 0


def test_iser_login_and_unsupported_invalidate(tmp_path: Path) -> None:
    c = _one(caps.iser_login(tmp_path / "iser.pcap"))
    assert c.ulp is not None and c.ulp.protocol == "iser"
    assert c.ulp.negotiated["initiator_send_with_invalidate"] is False
    assert c.ulp.messages[0].fields["iscsi_name"] == "Login Request"
    assert explain_connection(c).verdict == "ok"
    bad = _one(caps.iser_login(tmp_path / "inv.pcap", target_invalidates=True))
    e = explain_connection(bad)
    assert e.cause == "iser-unsupported"
    assert caps.ISER_FRAMES["invalidate"] in e.evidence
    assert caps.ISER_FRAMES["request"] in e.evidence


def test_rpcrdma_inline_overflow(tmp_path: Path) -> None:
    c = _one(caps.rpcrdma_inline(tmp_path / "rpc.pcap"))
    assert c.ulp is not None and c.ulp.negotiated["server_inline_receive"] == 1024
    e = explain_connection(c)
    assert e.cause == "rpcrdma-inline-overflow"
    assert "2,000 bytes" in e.summary and "1,024 bytes" in e.summary
    assert e.evidence == [caps.RPC_FRAMES["reply"], caps.RPC_FRAMES["call"]]
    ok = _one(caps.rpcrdma_inline(tmp_path / "ok.pcap", call_size=600))
    assert explain_connection(ok).verdict == "ok"


def test_unknown_private_data_stays_unknown(tmp_path: Path) -> None:
    c = _one(caps.unknown_pd(tmp_path / "unk.pcap"))
    assert c.ulp is not None and c.ulp.protocol == "unknown"
    assert c.ulp.private_data == {"client": b"\x01\x02app-hello".hex()}
    assert not c.ulp.messages and not c.ulp.diagnoses
    text = format_report(inspect_capture(tmp_path / "unk.pcap"))
    assert "unknown upper protocol" in text and b"\x01\x02app-hello".hex() in text


@pytest.mark.parametrize("build", [caps.smbd_falloc, caps.nvme_reject, caps.rpcrdma_inline])
def test_text_json_and_html_agree(build, tmp_path: Path,  # type: ignore[no-untyped-def]
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = build(tmp_path / "x.pcap")
    assert main(["explain", "--json", "-", str(path)]) == 1
    entry = json.loads(capsys.readouterr().out)["connections"][0]
    cause = entry["cause"]
    assert entry["ulp"]["causes"][0] == cause
    assert main(["explain", str(path)]) == 1
    text = capsys.readouterr().out
    assert f"{cause}: {entry['summary']}" in text
    html = tmp_path / "x.html"
    assert main(["explain", "--html", str(html), str(path)]) == 1
    capsys.readouterr()
    assert cause in html.read_text()
    assert main(["inspect", "--json", str(path)]) in (0, 1)
    conn = json.loads(capsys.readouterr().out)["connections"][0]
    assert conn["ulp"]["diagnoses"][0]["cause"] == cause
    assert conn["ulp"]["diagnoses"][0]["evidence"] == [
        n for n in entry["evidence"] if n in conn["ulp"]["diagnoses"][0]["evidence"]]


def test_fpdus_lists_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = caps.smbd_falloc(tmp_path / "f.pcap")
    main(["inspect", "--fpdus", str(path)])
    out = capsys.readouterr().out
    assert "frames 10-21 client MSN 3: 16,520 bytes in 12 segments: Data Transfer: SMB2 " \
        "WRITE request" in out


def _negotiate_only(tmp_path: Path, request: bytes, response: bytes | None) -> Path:
    b = caps.PortBuilder(5445)
    b.handshake()
    b.add(True, "PA", caps.mpa_frame(caps.KEY_REQ, 0x10, 2, (16, 16), caps.SMBD_LEGACY))
    b.add(False, "PA", caps.mpa_frame(caps.KEY_REP, 0x10, 2, (16, 16), caps.SMBD_LEGACY))
    b.send(True, 1, request)
    if response is not None:
        b.send(False, 1, response)
    b.add(False, "R")
    return b.write(tmp_path / "neg.pcap")


def test_smbd_negotiate_refused_by_ksmbd_limits(tmp_path: Path) -> None:
    # [MS-SMBD] 2.2.1 with MaxFragmentedSize 65,536 (offset 16): ksmbd's
    # smb_direct_check_recvmsg wants more than 128 * 1024 and sends no response.
    req = bytearray(caps.SMBD_NEG_REQ)
    req[16:20] = (65536).to_bytes(4, "little")
    e = explain_connection(_one(_negotiate_only(tmp_path, bytes(req), None)))
    assert e.cause == "smbd-negotiate-refused"
    assert "MaxFragmentedSize 65,536" in e.summary and "-ECONNABORTED" in e.summary
    assert any("the server is ksmbd" in n for n in e.notes)


def test_smbd_negotiate_status_not_supported(tmp_path: Path) -> None:
    resp = bytearray(caps.SMBD_NEG_RESP)
    resp[12:16] = (0xC00000BB).to_bytes(4, "little")  # Status, [MS-SMBD] 2.2.2 offset 12
    e = explain_connection(_one(_negotiate_only(tmp_path, caps.SMBD_NEG_REQ, bytes(resp))))
    assert e.cause == "smbd-negotiate-refused" and "STATUS_NOT_SUPPORTED" in e.summary


def test_a_good_negotiate_then_reset_is_no_negotiate_refusal(tmp_path: Path) -> None:
    e = explain_connection(_one(_negotiate_only(tmp_path, caps.SMBD_NEG_REQ, None)))
    assert e.cause != "smbd-negotiate-refused"
