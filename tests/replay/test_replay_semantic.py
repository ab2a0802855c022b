"""replay --semantic on traffic the emulator did not make, --checksums, --profile and the
recorded ISNs in -o.

The captures are built here byte by byte with scapy and struct, not by the emulator:
MPA frames from the RFC 5044 section 7.1 layout (key, flags, rev, PD_Length), FPDUs from
RFC 5044 section 4 (ULPDU_LENGTH, DDP/RDMAP untagged Send header of RFC 5041 section 4.3
and RFC 5040 section 4, pad, CRC32c written little-endian), and a CRC32c of our own.
"""

from __future__ import annotations

import struct
from pathlib import Path

from helpers.replay_cli import PCAPS, replay
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mpa_emu.capture.pcap import read_capture

CLIENT, SERVER = "10.0.0.1", "10.0.0.2"
CPORT, SPORT = 50000, 4000
ISN_C, ISN_S = 0x11223344, 0x55667788
KEY_REQ, KEY_REP = b"MPA ID Req Frame", b"MPA ID Rep Frame"
CRC_FLAG = 0x40


def crc32c(data: bytes) -> int:
    """CRC32c (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_our_crc32c_has_the_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # RFC 3720 appendix B.4 check value


def mpa_v1(key: bytes, flags: int) -> bytes:
    return key + struct.pack("!BBH", flags, 1, 0)


def fpdu_send(msn: int, data: bytes, *, with_crc: bool) -> bytes:
    # DDP control 0x41 (untagged, last, DV 1), RDMAP control 0x43 (RV 1, Send), Inv STag
    # 0, QN 0, MSN, MO 0.
    ulpdu = struct.pack("!BBIIII", 0x41, 0x43, 0, 0, msn, 0) + data
    body = struct.pack("!H", len(ulpdu)) + ulpdu + b"\0" * ((-(2 + len(ulpdu))) % 4)
    return body + struct.pack("<I", crc32c(body) if with_crc else 0)


def partial_sum(src: str, dst: str, tcp_len: int) -> int:
    """The pseudo-header sum a Linux stack with TX offload leaves in the field."""
    words = [int(p) for p in src.split(".")] + [int(p) for p in dst.split(".")]
    total = ((words[0] << 8) | words[1]) + ((words[2] << 8) | words[3])
    total += ((words[4] << 8) | words[5]) + ((words[6] << 8) | words[7]) + 6 + tcp_len
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def conversation(tmp: Path, *, c_flags: int, s_flags: int, fpdu_crc: bool,
                 offload: bool) -> Path:
    """A Linux-shaped client (SACK, timestamps, WS 7) speaking MPA v1 to a userspace
    server: 1 SYN, 2 SYN-ACK, 3 ACK, 4 request, 5 ACK, 6 reply, 7 ACK, 8 client Send,
    9 server ACK. With ``offload`` the client's frames carry the partial sum."""
    req, rep = mpa_v1(KEY_REQ, c_flags), mpa_v1(KEY_REP, s_flags)
    send = fpdu_send(1, b"hello", with_crc=fpdu_crc)
    c_nxt, s_nxt = ISN_C + 1, ISN_S + 1
    ts = [("NOP", None), ("NOP", None), ("Timestamp", (1000, 2000))]
    syn_opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("NOP", None),
                ("WScale", 7)]
    plan = [
        (True, "S", ISN_C, 0, b"", syn_opts),
        (False, "SA", ISN_S, c_nxt, b"", [("MSS", 1460), ("WScale", 2), ("EOL", None)]),
        (True, "A", c_nxt, s_nxt, b"", ts),
        (True, "PA", c_nxt, s_nxt, req, ts),
        (False, "A", s_nxt, c_nxt + len(req), b"", []),
        (False, "PA", s_nxt, c_nxt + len(req), rep, []),
        (True, "A", c_nxt + len(req), s_nxt + len(rep), b"", ts),
        (True, "PA", c_nxt + len(req), s_nxt + len(rep), send, ts),
        (False, "A", s_nxt + len(rep), c_nxt + len(req) + len(send), b"", []),
    ]
    pkts = []
    for i, (client, flags, seq, ack, payload, opts) in enumerate(plan):
        src, dst = (CLIENT, SERVER) if client else (SERVER, CLIENT)
        sport, dport = (CPORT, SPORT) if client else (SPORT, CPORT)
        tcp = TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack,
                  window=502 if client else 65535, options=opts)
        pkt = Ether(src="02:00:00:00:00:01" if client else "02:00:00:00:00:02",
                    dst="02:00:00:00:00:02" if client else "02:00:00:00:00:01") / IP(
            src=src, dst=dst, ttl=64) / tcp / payload
        pkt = Ether(bytes(pkt))
        if client and offload:
            tcp_len = len(bytes(pkt[TCP]))
            pkt[TCP].chksum = partial_sum(src, dst, tcp_len)
        pkt.time = 1_700_000_000 + i * 0.001
        pkts.append(pkt)
    path = tmp / "v1.pcap"
    wrpcap(str(path), pkts)
    return path


def test_irdma_initiator_against_a_recorded_v1_initiator_names_the_revision(
        tmp_path: Path) -> None:
    cap = conversation(tmp_path, c_flags=0, s_flags=0, fpdu_crc=False, offload=True)
    rc, text, report = replay(cap, "--emulate", CLIENT, "--semantic", tmp_path=tmp_path)
    assert rc == 1, text
    # irdma_build_mpa_v2: 20 bytes + the 4-byte RFC 6581 block; the recorded one is 20.
    first = ("frame 4: irdma sends MPA request rev 2 (IRD/ORD block, 24 bytes); the "
             "recorded initiator sent rev 1 (20 bytes)")
    assert report["first_divergence"].startswith(first), text
    assert report["first_divergence_frame"] == 4
    assert text.splitlines()[0].startswith("DIVERGENCE (semantic) at frame 4")
    # The server's acks (recorded: ISN+1+20) are moved by the 4 extra bytes so the
    # conversation goes on: the node receives the v1 reply and offloads.
    assert report["rebases"][0]["shift"] == 4
    assert "re-based by +4 byte(s)" in text
    conn = report["semantic"]["connections"][0]
    assert conn["emulated"]["offloaded"] is not None


def test_irdma_responder_against_a_peer_without_crc_names_crc(tmp_path: Path) -> None:
    cap = conversation(tmp_path, c_flags=0, s_flags=0, fpdu_crc=False, offload=True)
    rc, text, report = replay(cap, "--emulate", SERVER, "--semantic", tmp_path=tmp_path)
    assert rc == 1, text
    first = report["first_divergence"]
    assert first.startswith("frame 6: irdma always sets C (irdma_build_mpa_v1/v2); the "
                            "recorded responder sent C=0"), text
    # The client's Send (frame 8) carries CRC 0: with C negotiated the NIC flags it.
    assert "frame 8: the peer sends FPDUs without a valid CRC" in first
    assert "IRDMA_AE_LLP_RECEIVED_MPA_CRC_ERROR" in first
    assert "NIC events" in text and "after frame 8" in text
    conn = report["semantic"]["connections"][0]
    assert conn["emulated"]["established"] is None
    assert conn["recorded"]["established"] == 8
    # The client's frames carry offload artefacts: taken as good, said once.
    assert text.count("TX checksum offload artefacts on frames from 10.0.0.1 (5)") == 1


def test_strict_checksums_drop_the_offload_artefacts_as_the_nic_would(
        tmp_path: Path) -> None:
    cap = conversation(tmp_path, c_flags=0, s_flags=0, fpdu_crc=False, offload=True)
    rc, text, report = replay(cap, "--emulate", SERVER, "--semantic", "--checksums",
                              "strict", tmp_path=tmp_path)
    assert rc == 1
    assert "dropped by the NIC (--checksums strict)" in text
    outcomes = {i["frame"]: i["outcome"] for i in report["injections"]}
    assert outcomes[1].startswith("dropped by the NIC: bad TCP checksum")
    rc_off, text_off, report_off = replay(cap, "--emulate", SERVER, "--checksums", "off",
                                          "--semantic", tmp_path=tmp_path)
    assert rc_off == 1  # C still differs, but every frame reached the node
    assert "TX checksum offload" not in text_off
    assert report_off["semantic"]["connections"][0]["emulated"]["offloaded"] is not None


def test_a_v1_recording_with_c_set_matches_the_mpa_v1_profile(tmp_path: Path) -> None:
    cap = conversation(tmp_path, c_flags=CRC_FLAG, s_flags=CRC_FLAG, fpdu_crc=True,
                       offload=False)
    rc, text, report = replay(cap, "--emulate", SERVER, "--semantic", "--profile",
                              "mpa-v1", tmp_path=tmp_path)
    assert rc == 0, text
    assert report["semantic"]["same_outcome"] is True
    conn = report["semantic"]["connections"][0]
    # mpa-v1 is siw(mpa_version=1): siw_proc_mpareq answers in the request's own header
    # (C kept), and siw_accept reports ESTABLISHED with the reply (frame 6) when the
    # request is not enhanced (no RTR to wait for); the node accepted after frame 5.
    assert conn["recorded"]["established"] == 6
    assert conn["emulated"]["established"] == 5
    assert report["profile"] == "mpa-v1"
    assert report["stack"] == "siw(mpa_version=1)"


def test_profile_auto_names_the_profiles_with_the_recorded_outcome(tmp_path: Path) -> None:
    # The recorded responder resets the rev 2 request and accepts the rev 1 retry: a
    # v1-only responder. cxgb4 with mpa_rev 1 aborts a request of a higher revision
    # (process_mpa_request: "MPA version mismatch", abort: RST); siw takes any revision
    # up to 2 (siw_proc_mpareq), so mpa-v1 = siw(mpa_version=1) answers the rev 2 request.
    rc, text, report = replay(PCAPS / "fallback_v2_to_v1.pcap", "--emulate",
                              "192.168.10.2", "--semantic", "--profile", "auto",
                              tmp_path=tmp_path)
    assert rc == 0, text
    assert report["same_outcome_profiles"] == ["cxgb4(mpa_rev=1)"]
    assert text.splitlines()[0] == "PROFILES with the recorded outcome: cxgb4(mpa_rev=1)"
    assert report["profiles"]["irdma"]["same_outcome"] is False
    assert report["profiles"]["siw(mpa_version=1)"]["same_outcome"] is False
    assert report["picked"] == "cxgb4(mpa_rev=1)"


def test_profile_auto_needs_semantic(tmp_path: Path) -> None:
    import contextlib
    import io

    from mpa_emu.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["replay", str(PCAPS / "v2_accept.pcap"), "--emulate", "192.168.10.2",
                   "--profile", "auto"])
    assert rc == 2
    assert "--profile auto needs --semantic" in err.getvalue()


def test_mpa_rev_1_makes_irdma_start_at_rev_1(tmp_path: Path) -> None:
    rc, text, report = replay(PCAPS / "reject_v1.pcap", "--emulate", "192.168.10.1",
                              "--semantic", "--mpa-rev", "1", tmp_path=tmp_path)
    assert rc == 0, text
    assert report["semantic"]["connections"][0]["emulated"]["mpa"][0]["rev"] == 1


def test_irdma_shaped_v2_fixtures_have_the_same_outcome(tmp_path: Path) -> None:
    for name in ("v2_accept.pcap", "v2_reject.pcap", "v2_accept_ipv6.pcapng",
                 "v2_accept_vlan.pcap"):
        for ip in (("192.168.10.1", "192.168.10.2") if "ipv6" not in name
                   else ("fd00:10::1", "fd00:10::2")):
            rc, text, report = replay(PCAPS / name, "--emulate", ip, "--semantic",
                                      tmp_path=tmp_path)
            assert rc == 0, (name, ip, text)
            assert report["semantic"]["same_outcome"] is True


def test_merged_capture_keeps_the_recorded_isns(tmp_path: Path) -> None:
    # pcaps/README.md: ISNs 0x6b8b4567 (A) and 0x327b23c6 (P).
    for ip, isn, flags in (("192.168.10.2", 0x327B23C6, "SA"), ("192.168.10.1", 0x6B8B4567,
                                                                 "S")):
        out = tmp_path / "merged.pcapng"
        rc, _text, _report = replay(PCAPS / "v2_accept.pcap", "--emulate", ip, "-o",
                                    str(out), tmp_path=tmp_path)
        assert rc == 0
        syns = [Ether(r.frame) for r in read_capture(out)]
        mine = [p for p in syns if p[IP].src == ip and str(p[TCP].flags) == flags]
        assert mine and all(p[TCP].seq == isn for p in mine)
