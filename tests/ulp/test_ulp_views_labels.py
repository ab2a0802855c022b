"""Ladder labels and the HTML fields panel name an upper protocol's private data when the
bytes prove it on their own (an NVMe-RDMA connect request, RFC 8797's block, an iSER
header with a flag set), and leave everything else as bytes. Frames are built by
helpers.ulp_captures from the specifications."""

from __future__ import annotations

from pathlib import Path

from helpers import ulp_captures as caps

from mpa_emu.views.describe import describe_payload, mpa_summary
from mpa_emu.views.html.fields import capture_fields
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ


def mpa(key: bytes, flags: int, pdata: bytes) -> bytes:
    # RFC 5044 7.1 / RFC 6581: key, flags, rev 2, PD_Length, IRD/ORD block, ULP data.
    return key + bytes([flags, 2]) + (4 + len(pdata)).to_bytes(2, "big") \
        + bytes.fromhex("00100010") + pdata


def test_labels_name_proven_formats_only() -> None:
    req = mpa(KEY_REQ, 0x10, caps.nvme_cm_req(1, 128, 127))
    assert "NVMe-RDMA connect request: I/O queue 1" in (mpa_summary(req) or "")
    assert "NVMe-RDMA connect request" in describe_payload(req)
    rpc = mpa(KEY_REP, 0x10, caps.rpc_private(4, 4))
    assert "inline receive 4,096 bytes" in (mpa_summary(rpc) or "")
    # An NVMe-RDMA reject's 4 bytes prove nothing without the request: shown as bytes.
    rej = mpa(KEY_REP, 0x30, bytes.fromhex("00000400"))
    assert "NVMe" not in (mpa_summary(rej) or "") and "00000400" in describe_payload(rej)
    # Four zero bytes are no iSER header by themselves.
    assert "iSER" not in describe_payload(mpa(KEY_REQ, 0x10, bytes(4)))


def test_html_fields_panel(tmp_path: Path) -> None:
    path = caps.nvme_reject(tmp_path / "n.pcap")
    fields = dict(capture_fields(path)[caps.NVME_FRAMES["request"]])
    assert fields["upper protocol"].startswith("NVMe-RDMA connect request")
    assert fields["  hsqsize"] == "1023" and fields["  qid"] == "1"
    assert "upper protocol" not in dict(capture_fields(path)[caps.NVME_FRAMES["reject"]])


def test_send_labels_name_smb_direct_by_content(tmp_path: Path) -> None:
    from mpa_emu.views.diagram import from_capture

    path = caps.smbd_falloc(tmp_path / "f.pcap")
    text = "\n".join(str(row) for row in from_capture(str(path)).rows)
    assert "[SMB Direct Negotiate Request]" in text
    assert "[SMB Direct Negotiate Response]" in text
    # The WRITE's first segment (MO 0, L clear) names the SMB2 command it opens.
    assert "[SMB Direct SMB2 WRITE request (MessageId 2)]" in text
    # A Send of other bytes is not labelled.
    other = caps.unknown_pd(tmp_path / "u.pcap")
    assert "SMB Direct" not in "\n".join(str(r) for r in from_capture(str(other)).rows)
