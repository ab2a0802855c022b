"""The upper-protocol decoders read bytes written here by hand from each specification's
field table ([MS-SMBD] 2.2.1-2.2.3, [MS-SMB2] 2.2.1.2, include/linux/nvme-rdma.h,
iscsi_iser.h, RFC 7143 11.2, RFC 8797 / rpc_rdma.h, RFC 8166 4.2), never from the
emulator's own encoders."""

from __future__ import annotations

import struct

from mpa_emu.wire.ulp import detect, iser, nvme_rdma, rpcrdma, smbd


def le16(v: int) -> bytes:
    return v.to_bytes(2, "little")


def le32(v: int) -> bytes:
    return v.to_bytes(4, "little")


# [MS-SMBD] 2.2.1: MinVersion 0x0100, MaxVersion 0x0100, Reserved, CreditsRequested 255,
# PreferredSendSize 1364, MaxReceiveSize 8192, MaxFragmentedSize 1048576 (cifs.ko's).
NEG_REQ = (le16(0x0100) + le16(0x0100) + le16(0) + le16(255) + le32(1364) + le32(8192)
           + le32(1048576))
# [MS-SMBD] 2.2.2: ksmbd's answer: MaxReceiveSize 1364, CreditsGranted 255, Status 0,
# MaxReadWriteSize 8 MiB.
NEG_RESP = (le16(0x0100) + le16(0x0100) + le16(0x0100) + le16(0) + le16(255) + le16(255)
            + le32(0) + le32(8 << 20) + le32(1364) + le32(1364) + le32(1048576))


def test_smbd_negotiate_request_fields() -> None:
    assert len(NEG_REQ) == 20
    req = smbd.NegotiateRequest.decode(NEG_REQ)
    assert req is not None
    assert (req.min_version, req.max_version, req.credits_requested,
            req.preferred_send_size, req.max_receive_size,
            req.max_fragmented_size) == (0x0100, 0x0100, 255, 1364, 8192, 1048576)
    assert "MaxReceiveSize 8,192" in req.text()


def test_smbd_negotiate_response_fields() -> None:
    assert len(NEG_RESP) == 32
    resp = smbd.NegotiateResponse.decode(NEG_RESP)
    assert resp is not None
    assert resp.negotiated_version == 0x0100 and resp.credits_granted == 255
    assert resp.status_name == "STATUS_SUCCESS"
    assert resp.max_read_write_size == 8 << 20 and resp.max_receive_size == 1364


def test_smbd_negotiate_needs_version_one_and_exact_size() -> None:
    assert smbd.NegotiateRequest.decode(NEG_REQ + b"\0") is None
    bad = le16(0x0200) + NEG_REQ[2:]  # MinVersion 2.0 > MaxVersion 1.0
    assert smbd.NegotiateRequest.decode(bad) is None
    # The bytes of a v1.0 version written big-endian are no request.
    assert smbd.NegotiateRequest.decode(bytes.fromhex("01000100") + NEG_REQ[4:]) is None


def smb2_header(command: int, flags: int = 0, mid: int = 7) -> bytes:
    # [MS-SMB2] 2.2.1.2: ProtocolId, StructureSize 64, CreditCharge, Status, Command,
    # CreditRequest, Flags, NextCommand, MessageId, Reserved, TreeId, SessionId, Signature.
    return (b"\xfeSMB" + le16(64) + le16(1) + le32(0) + le16(command) + le16(1)
            + le32(flags) + le32(0) + mid.to_bytes(8, "little") + le32(0) + le32(1)
            + bytes(8) + bytes(16))


def test_smbd_data_transfer_names_the_smb2_command() -> None:
    payload = smb2_header(0x0009) + bytes(48) + bytes(16384)  # an SMB2 WRITE of 16 KiB
    # [MS-SMBD] 2.2.3: CreditsRequested, CreditsGranted, Flags, Reserved,
    # RemainingDataLength, DataOffset 24, DataLength, Padding, Buffer.
    msg = (le16(255) + le16(0) + le16(1) + le16(0) + le32(0) + le32(24)
           + le32(len(payload)) + le32(0) + payload)
    assert len(msg) == 16520
    dt = smbd.DataTransfer.decode(msg[:200], len(msg))
    assert dt is not None and dt.smb2 is not None
    assert dt.smb2.command_name == "WRITE" and not dt.smb2.response
    assert dt.response_requested and dt.data_length == 16496 and dt.data_offset == 24
    assert "SMB2 WRITE request" in dt.text()


def test_smbd_keepalive_and_bad_offset() -> None:
    keep = le16(10) + le16(3) + le16(0) + le16(0) + le32(0) + le32(0) + le32(0)
    dt = smbd.DataTransfer.decode(keep)
    assert dt is not None and dt.data_length == 0 and dt.credits_granted == 3
    odd = le16(1) + le16(1) + le16(0) + le16(0) + le32(0) + le32(25) + le32(4) + bytes(12)
    assert smbd.DataTransfer.decode(odd) is None  # DataOffset not 8-aligned


def test_nvme_cm_request_reply_reject_from_the_header() -> None:
    # struct nvme_rdma_cm_req: recfmt 0, qid 1, hrqsize 128, hsqsize 127, rsvd[24].
    req = le16(0) + le16(1) + le16(128) + le16(127) + bytes(24)
    got = nvme_rdma.CmRequest.decode(req)
    assert got is not None and (got.qid, got.hrqsize, got.hsqsize) == (1, 128, 127)
    assert not got.admin and "I/O queue 1" in got.text() and "128 entries" in got.text()
    rep = nvme_rdma.CmReply.decode(le16(0) + le16(128) + bytes(28))
    assert rep is not None and rep.crqsize == 128
    rej = nvme_rdma.CmReject.decode(le16(0) + le16(0x04))
    assert rej is not None and rej.status_name == \
        "NVME_RDMA_CM_INVALID_HSQSIZE (invalid host SQ size)"
    assert nvme_rdma.CmRequest.decode(req[:-1]) is None
    assert nvme_rdma.CmRequest.decode(le16(1) + req[2:]) is None  # recfmt 1


def test_nvme_status_values_follow_the_enum() -> None:
    # enum nvme_rdma_cm_status, include/linux/nvme-rdma.h.
    names = {1: "INVALID_LEN", 2: "INVALID_RECFMT", 3: "INVALID_QID", 4: "INVALID_HSQSIZE",
             5: "INVALID_HRQSIZE", 6: "NO_RSC", 7: "INVALID_IRD", 8: "INVALID_ORD"}
    for value, name in names.items():
        assert nvme_rdma.status_name(value).startswith(f"NVME_RDMA_CM_{name} ")
    assert nvme_rdma.status_name(0x42).endswith("(unrecognized reason)")


def test_nvme_capsules() -> None:
    # struct nvmf_connect_command: opcode 0x7f, cid, fctype 1 at byte 4, dptr at 24,
    # recfmt at 40, qid at 42, sqsize at 44; then 1024 bytes of connect data in-capsule.
    sqe = bytearray(64)
    sqe[0], sqe[2:4], sqe[4] = 0x7F, le16(5), 0x01
    sqe[42:44], sqe[44:46] = le16(1), le16(127)
    cap = nvme_rdma.CommandCapsule.decode(bytes(sqe) + bytes(1024), admin=False)
    assert cap is not None and cap.name == "Fabrics Connect"
    assert (cap.connect_qid, cap.connect_sqsize, cap.inline_length) == (1, 127, 1024)
    write = bytearray(64)
    write[0] = 0x01
    io = nvme_rdma.CommandCapsule.decode(bytes(write), admin=False)
    adm = nvme_rdma.CommandCapsule.decode(bytes(write), admin=True)
    assert io is not None and io.name == "Write"
    assert adm is not None and adm.name == "Create I/O SQ"
    # struct nvme_completion: result (8), sq_head, sq_id, command_id, status (phase bit 0).
    cqe = bytes(8) + le16(3) + le16(1) + le16(5) + le16((0x0182 << 1) | 1)
    resp = nvme_rdma.ResponseCapsule.decode(cqe)
    assert resp is not None and resp.command_id == 5 and resp.status == 0x0182
    assert "SCT 1 SC 0x82" in resp.text()


def test_iser_cm_header_and_login() -> None:
    hdr = iser.CmHeader.decode(bytes([0xC0, 0, 0, 0]))
    assert hdr is not None and not hdr.zbva and not hdr.send_with_invalidate
    assert iser.CmHeader.decode(bytes([0x80, 0, 0, 0])).send_with_invalidate  # type: ignore[union-attr]
    assert iser.CmHeader.decode(bytes([0x81, 0, 0, 0])) is None
    # struct iser_ctrl: flags ISCSI_CTRL | RSV, rsvd, write STag/VA, read STag/VA (BE).
    ctrl = bytes([0x14, 0, 0, 0]) + struct.pack(">IQIQ", 0, 0, 0x1234, 0x7000)
    text = b"InitiatorName=iqn.2004-10.com.example:host\0SessionType=Normal\0"
    bhs = bytearray(48)
    bhs[0] = 0x43  # immediate + Login Request (RFC 7143 11.12)
    bhs[5:8] = len(text).to_bytes(3, "big")
    msg = iser.IserMessage.decode(ctrl + bytes(bhs) + text)
    assert msg is not None and msg.iscsi_name == "Login Request"
    assert msg.read_stag == 0x1234 and msg.flags & iser.ISER_RSV
    assert msg.login_keys[0] == "InitiatorName=iqn.2004-10.com.example:host"


def test_rpcrdma_private_data_and_header() -> None:
    # RFC 8797 / struct rpcrdma_connect_private: magic, version 1, flags W, send 3
    # (4 KiB), recv 0 (1 KiB).
    cp = rpcrdma.ConnectPrivate.decode(bytes.fromhex("f6ab0e18") + bytes([1, 1, 3, 0]))
    assert cp is not None and (cp.send_size, cp.recv_size) == (4096, 1024)
    assert cp.remote_invalidate
    assert rpcrdma.ConnectPrivate.decode(bytes.fromhex("f6ab0e19") + bytes(4)) is None
    # RFC 8166 4.2: XID, vers 1, credits 32, RDMA_MSG, read list: one segment
    # (1, position 0, handle, length, offset), 0; write list 0; reply chunk 0; then
    # an RPC call (xid, CALL 0, rpcvers 2, program 100003).
    hdr = struct.pack(">IIII", 0xABCD, 1, 32, 0) + struct.pack(">IIIIQ", 1, 0, 9, 4096, 0) \
        + struct.pack(">III", 0, 0, 0) + struct.pack(">IIII", 0xABCD, 0, 2, 100003)
    th = rpcrdma.TransportHeader.decode(hdr)
    assert th is not None and th.proc_name == "RDMA_MSG" and th.credits == 32
    assert th.read_segments == 1 and not th.write_chunks and not th.reply_chunk
    assert th.rpc_call is True and th.rpc_program == 100003 and th.chunked
    err = rpcrdma.TransportHeader.decode(struct.pack(">IIIII", 1, 1, 0, 4, 1))
    assert err is not None and "ERR_VERS" in err.text()
    assert rpcrdma.TransportHeader.decode(struct.pack(">IIII", 1, 2, 0, 0)) is None


def test_recognise_by_content_then_port_and_unknown_stays_unknown() -> None:
    nvme_req = le16(0) + le16(0) + le16(32) + le16(31) + bytes(24)
    assert detect.recognise(nvme_req, 31000) == detect.Recognition("nvme-rdma", "private data")
    assert detect.recognise(bytes(32), 31000) == detect.Recognition(
        "unknown", "private data of no known format")
    rpc = bytes.fromhex("f6ab0e18") + bytes([1, 0, 0, 0])
    assert detect.recognise(rpc, 20049).by == "private data and port 20049"
    assert detect.recognise(bytes([0x80, 0, 0, 0]), 1234).protocol == "iser"
    assert detect.recognise(bytes(4), 1234).protocol == "unknown"
    assert detect.recognise(b"", 5000, first_client_send=NEG_REQ).by == "first message"
    assert detect.recognise(b"", 5445).by == "port 5445"
    assert detect.recognise(b"hello", 5445) == detect.Recognition("smb-direct", "port 5445")
    assert detect.recognise(b"", 31000) is None
