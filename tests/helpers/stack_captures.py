"""Captures shaped like each stack's traffic, built byte by byte for the judge and explain
tests (the expected values of those tests come from these layouts and the kernel source
they cite, never from the code under test).

- A Linux socket's SYN (siw, a userspace library): MSS, SACK permitted, timestamps, NOP,
  WS 7, window 64240 (``tcp_syn_options``).
- siw's MPA request with its defaults (siw_connect): rev 2, flags 0x10 (S; no C:
  mpa_crc_required off), the RFC 6581 block without P2P (peer_to_peer off) carrying the
  application's IRD and ORD, then the ULP private data.
- siw's reply (siw_proc_mpareq, siw_accept): the request's flags, key Rep, the block
  without P2P with the accepted IRD/ORD, then the ULP private data.
- SMB Direct over iWARP: the ULP private data is the [MS-SMBD] 6.1 IRD/ORD header, 8 bytes,
  IRD then ORD, big-endian as ``_smbd_get_connection`` writes it (``cpu_to_be32``):
  IRD = responder_resources (32, SMBD_CM_RESPONDER_RESOURCES), ORD = initiator_depth (1);
  the first FPDU is the SMB Direct negotiate request ([MS-SMBD] 2.2.1, 20 bytes,
  little-endian fields) in an untagged Send, CRC field zero (no CRC negotiated).
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.utils import wrpcap

from helpers.inspect_builders import Conversation
from helpers.real_like_captures import KEY_REP, KEY_REQ, fpdu, send

LINUX_SYN = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("NOP", None),
             ("WScale", 7)]
LINUX_SYNACK = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (2000, 1000)), ("NOP", None),
                ("WScale", 7)]
CXGB4_SYN = [("MSS", 1460), ("NOP", None), ("WScale", 9)]
IRDMA_SYN = [("MSS", 1460), ("WScale", 2)]

SMBD_PORT = 5445
SMBD_IRD, SMBD_ORD = 32, 1


def block(ird: int, ord_: int, *, p2p: bool = False, send0: bool = False,
          write: bool = False, read: bool = False) -> bytes:
    """RFC 6581 section 5: A|B|IRD, C|D|ORD as two big-endian words."""
    ird_word = ird | (0x8000 if p2p else 0) | (0x4000 if send0 else 0)
    ord_word = ord_ | (0x8000 if write else 0) | (0x4000 if read else 0)
    return struct.pack("!HH", ird_word, ord_word)


def mpa(key: bytes, flags: int, rev: int, pdata: bytes) -> bytes:
    """RFC 5044 section 7.1: key, flags, rev, PD_Length (big-endian), private data."""
    return key + struct.pack("!BBH", flags, rev, len(pdata)) + pdata


def legacy(ird: int, ord_: int, order: str = ">") -> bytes:
    """[MS-SMBD] 6.1: IRD (4 bytes), ORD (4 bytes)."""
    return struct.pack(f"{order}II", ird, ord_)


def smbd_negotiate_request() -> bytes:
    """[MS-SMBD] 2.2.1: MinVersion 0x0100, MaxVersion 0x0100, Reserved, CreditsRequested
    255, PreferredSendSize 1364, MaxReceiveSize 1364, MaxFragmentedSize 1048576."""
    return struct.pack("<HHHHIII", 0x0100, 0x0100, 0, 255, 1364, 1364, 1048576)


def smbd_negotiate_response() -> bytes:
    """[MS-SMBD] 2.2.2: versions 0x0100, credits 255/255, status 0, sizes."""
    return struct.pack("<HHHHHHIIIII", 0x0100, 0x0100, 0x0100, 0, 255, 255, 0, 1048576,
                       1364, 1364, 1048576)


def no_crc(ulpdu: bytes) -> bytes:
    """An FPDU with a zero CRC field (siw sends 0 when CRC is off)."""
    return fpdu(ulpdu, crc="zero")


def siw_smb_direct(cport: int = 40100, *, client: str = "10.0.0.1",
                   server: str = "10.0.0.2", legacy_order: str = ">",
                   then: tuple[bytes, ...] = ()) -> Conversation:
    """A healthy siw-to-siw SMB Direct connection: handshake (Linux SYNs), MPA rev 2
    enhanced without P2P or CRC, legacy IRD/ORD private data both ways, the SMB Direct
    negotiate request and response in Sends, the client's ``then`` payloads (each ACKed),
    a graceful close."""
    conv = Conversation(client=client, server=server, cport=cport, sport=SMBD_PORT)
    conv.handshake(LINUX_SYN, LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x10, 2, block(SMBD_IRD, SMBD_ORD)
                          + legacy(SMBD_IRD, SMBD_ORD, legacy_order)))
    conv.ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x10, 2, block(SMBD_IRD, SMBD_ORD)
                          + legacy(SMBD_IRD, SMBD_ORD, legacy_order)))
    conv.ack_from_client()
    conv.client_sends(no_crc(send(1, smbd_negotiate_request())))
    conv.server_sends(no_crc(send(1, smbd_negotiate_response())))
    conv.ack_from_client()
    for payload in then:
        conv.client_sends(payload)
        conv.ack_from_server()
    conv.graceful_close()
    return conv


def smbd_data(payload: bytes) -> bytes:
    """[MS-SMBD] 2.2.3 data transfer message: credits 255/255, no flags, RemainingDataLength
    0, DataOffset 24, DataLength, Padding, then the data."""
    return struct.pack("<HHHHIIII", 255, 255, 0, 0, 0, 24, len(payload), 0) + payload


BROKEN_SMB2 = b"\xfeSMB" + struct.pack("<H", 64) + b"\x00" * 6
"""An SMB2 header cut after 12 of its 64 bytes ([MS-SMB2] 2.2.1): tshark's SMB2
dissector calls the frame malformed."""


def siw_smb_direct_with_bad_smb2(cport: int = 40101) -> Conversation:
    """:func:`siw_smb_direct` whose client then sends a data transfer message carrying a
    cut SMB2 header: a problem of SMB2, not of iWARP."""
    return siw_smb_direct(cport, then=(no_crc(send(2, smbd_data(BROKEN_SMB2))),))


# ---- one capture per explain cause -------------------------------------------------

IRDMA_REQUEST = mpa(KEY_REQ, 0x50, 2, block(16, 16, p2p=True, write=True, read=True))
"""irdma_build_mpa_v2: C|S, rev 2, P2P, IRD/ORD 16, Write and Read RTR offered."""
SIW_REQUEST = mpa(KEY_REQ, 0x10, 2, block(16, 16))
"""siw_connect with its defaults: S only, no P2P, the application's IRD/ORD."""


def terminate(layer: int, etype: int, code: int, quoted: bytes = b"") -> bytes:
    """A Terminate ULPDU (RFC 5040 section 4.8): untagged, RDMAP opcode 7, QN 2, MSN 1,
    the control word (Layer, EType, Error Code; D set when a DDP header is quoted)."""
    hdrct = 0x40 if quoted else 0
    body = struct.pack("!I", (layer << 28) | (etype << 24) | (code << 16) | (hdrct << 8))
    if quoted:
        body += struct.pack("!H", len(quoted)) + quoted
    return bytes([0x41, 0x47]) + struct.pack("!IIII", 0, 2, 1, 0) + body


def zero_read_rtr() -> bytes:
    """irdma's RTR: a zero-length RDMA Read Request (untagged, QN 1, MSN 1)."""
    return (bytes([0x41, 0x41]) + struct.pack("!IIII", 0, 1, 1, 0)
            + struct.pack("!IQIIQ", 0x100, 0, 0, 0x200, 0))


def siw_pair(cport: int, sport: int = 31000) -> Conversation:
    """Two Linux sockets after their handshake."""
    conv = Conversation(client="10.0.1.1", server="10.0.1.2", cport=cport, sport=sport)
    return conv.handshake(LINUX_SYN, LINUX_SYNACK)


def rejected_by_siw_application(cport: int = 41100) -> Conversation:
    """siw_reject: the request's bits with R, the block (siw's values), the application's
    private data "no resources"; then the socket is released (FIN)."""
    conv = siw_pair(cport).client_sends(SIW_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x30, 2, block(16, 16) + b"no resources"), flags="FA")
    conv.client_sends(b"", flags="FA")
    return conv.ack_from_server()


def siw_request_to_irdma(cport: int = 41101) -> Conversation:
    """A siw request without P2P to an irdma responder: irdma_negotiate_mpa_v2_ird_ord
    returns -EOPNOTSUPP and irdma resets the connection (no upcall)."""
    conv = Conversation(client="10.0.1.1", server="10.0.1.3", cport=cport)
    conv.handshake(LINUX_SYN, IRDMA_SYN)
    conv.client_sends(SIW_REQUEST)
    return conv.server_sends(b"", flags="RA")


def reply_without_p2p_to_irdma(cport: int = 41102) -> Conversation:
    """An irdma request answered by a responder that leaves P2P out of its reply: the
    irdma initiator fails negotiation (-EOPNOTSUPP) and resets."""
    conv = Conversation(client="10.0.1.4", server="10.0.1.2", cport=cport)
    conv.handshake(IRDMA_SYN, LINUX_SYNACK)
    conv.client_sends(IRDMA_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x50, 2, block(16, 16)))
    return conv.client_sends(b"", flags="RA")


def rtr_mismatch_to_siw(cport: int = 41103) -> Conversation:
    """A siw initiator with P2P (a siw built with peer_to_peer on: Write and Read
    offered) gets a reply choosing only the zero-length Send: siw_proc_mpareply sends a
    Terminate (LLP, MPA, 0x07 no matching RTR) and closes."""
    conv = siw_pair(cport)
    conv.client_sends(mpa(KEY_REQ, 0x10, 2, block(16, 16, p2p=True, write=True, read=True)))
    conv.ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x10, 2, block(16, 16, p2p=True, send0=True)))
    conv.client_sends(no_crc(terminate(2, 0, 0x07)))
    conv.client_sends(b"", flags="FA")
    return conv.server_sends(b"", flags="FA")


def ird_insufficient_for_irdma(cport: int = 41104) -> Conversation:
    """An irdma initiator with IRD 2 gets a reply with ORD 8: own IRD below the peer's ORD,
    irdma_negotiate_mpa_v2_ird_ord returns -EINVAL and irdma resets."""
    conv = Conversation(client="10.0.1.4", server="10.0.1.5", cport=cport)
    conv.handshake(IRDMA_SYN, IRDMA_SYN)
    conv.client_sends(mpa(KEY_REQ, 0x50, 2, block(2, 2, p2p=True, write=True, read=True)))
    conv.ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x50, 2, block(2, 8, p2p=True, read=True)))
    return conv.client_sends(b"", flags="RA")


def pdata_over_siw_limit(cport: int = 41105) -> Conversation:
    """An irdma request with PD_Length 304 (block + 300 bytes: under irdma's 512) to a siw
    responder: siw_recv_mpa_rr refuses PD_Length over MPA_MAX_PRIVDATA (256), -EPROTO,
    and the socket is released with the data unread (RST)."""
    conv = Conversation(client="10.0.1.4", server="10.0.1.2", cport=cport)
    conv.handshake(IRDMA_SYN, LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x50, 2, block(16, 16, p2p=True, write=True, read=True)
                          + b"p" * 300))
    return conv.server_sends(b"", flags="RA")


def revision_1_reply_to_siw(cport: int = 41106) -> Conversation:
    """siw's enhanced rev 2 request answered by a rev 1 reply: siw_proc_mpareply, "mpa
    reply error: vers 1, enhcd 0", CONNECT_REPLY -ECONNRESET; the socket is closed."""
    conv = siw_pair(cport).client_sends(SIW_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x00, 1, b""))
    conv.client_sends(b"", flags="FA")
    return conv.server_sends(b"", flags="FA")


def markers_to_siw(cport: int = 41107) -> Conversation:
    """An irdma request with M (0xD0) to siw: siw_proc_mpareq rejects it: the reply has
    the request's bits with M cleared and R set (0x70), and a zeroed block."""
    conv = Conversation(client="10.0.1.4", server="10.0.1.2", cport=cport)
    conv.handshake(IRDMA_SYN, LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0xD0, 2, block(16, 16, p2p=True, write=True, read=True)))
    conv.ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x70, 2, block(0, 0)), flags="FA")
    return conv.client_sends(b"", flags="RA")


def split_request_to_irdma(cport: int = 41108) -> Conversation:
    """siw's request in two segments (10 + 26 bytes) to irdma: irdma_parse_mpa reads one
    segment and has no reassembly (-EOVERFLOW/-EINVAL), RST."""
    conv = Conversation(client="10.0.1.1", server="10.0.1.3", cport=cport)
    conv.handshake(LINUX_SYN, IRDMA_SYN)
    conv.client_sends(SIW_REQUEST[:10]).client_sends(SIW_REQUEST[10:])
    return conv.server_sends(b"", flags="RA")


def siw_timeout(cport: int = 41109) -> Conversation:
    """siw's request gets no reply; MPAREQ_TIMEOUT (10 s) later siw closes (FIN): the
    timed writer puts the FIN 10 s after the request."""
    conv = siw_pair(cport).client_sends(SIW_REQUEST).ack_from_server()
    conv.client_sends(b"", flags="FA")
    return conv.server_sends(b"", flags="FA")


def reset_during_exchange(cport: int = 41110) -> Conversation:
    """siw's request answered by a RST from a responder whose stack is not known."""
    conv = siw_pair(cport).client_sends(SIW_REQUEST)
    return conv.server_sends(b"", flags="RA")


def accepted_irdma(cport: int, *after: tuple[bool, bytes]) -> Conversation:
    """irdma to irdma, accepted with the Read RTR (CRC on), the RTR, then ``after``
    (from_client, payload) FPDUs or flags-only segments (payload ``b"F"``/``b"R"``)."""
    from helpers.real_like_captures import fpdu as crc_fpdu

    conv = Conversation(client="10.0.2.1", server="10.0.2.2", cport=cport)
    conv.handshake(IRDMA_SYN, IRDMA_SYN)
    conv.client_sends(IRDMA_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x50, 2, block(16, 16, p2p=True, read=True)))
    conv.client_sends(crc_fpdu(zero_read_rtr()))
    for from_client, payload in after:
        send_ = conv.client_sends if from_client else conv.server_sends
        if payload == b"F":
            send_(b"", flags="FA")
        elif payload == b"R":
            send_(b"", flags="RA")
        else:
            send_(crc_fpdu(payload))
    return conv


def terminate_protection(cport: int = 41111) -> Conversation:
    """After set-up the server terminates: RDMAP, Remote Protection Error, Invalid STag,
    quoting the offending DDP header."""
    quoted = bytes([0x80, 0x41]) + struct.pack("!IQ", 0x1234, 0)
    return accepted_irdma(cport, (True, bytes([0x80, 0x40]) + struct.pack("!IQ", 0x1234, 0)
                                  + b"x" * 8),
                          (False, terminate(0, 1, 0x00, quoted)), (False, b"F"),
                          (True, b"F"))


def receive_overflow(cport: int = 41112) -> Conversation:
    """A Send with no receive posted: the server terminates (DDP, untagged buffer,
    0x02 Invalid MSN - no buffer available)."""
    return accepted_irdma(cport, (True, send(1, b"s" * 32)),
                          (False, terminate(1, 2, 0x02)), (False, b"F"), (True, b"F"))


def rtr_refused(cport: int = 41113) -> Conversation:
    """The responder resets right after the initiator's zero-length Read RTR."""
    return accepted_irdma(cport, (False, b"R"))


def data_after_fin(cport: int = 41114) -> Conversation:
    """siw to siw, healthy; the server closes its side, the client still sends a Send
    (TCP half-close, RFC 9293 section 3.6), then closes."""
    conv = siw_pair(cport).client_sends(SIW_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x10, 2, block(16, 16))).ack_from_client()
    conv.client_sends(no_crc(send(1, smbd_negotiate_request())))
    conv.server_sends(b"", flags="FA")
    conv.client_sends(no_crc(send(2, smbd_negotiate_request())))
    conv.ack_from_server()
    conv.client_sends(b"", flags="FA")
    return conv.ack_from_server()


def nvme_port(cport: int = 41115) -> Conversation:
    """A healthy siw to siw connection on port 4420 (NVMe/TCP's)."""
    conv = siw_pair(cport, sport=4420).client_sends(SIW_REQUEST).ack_from_server()
    conv.server_sends(mpa(KEY_REP, 0x10, 2, block(16, 16))).ack_from_client()
    conv.client_sends(no_crc(send(1, smbd_negotiate_request())))
    conv.server_sends(no_crc(send(1, smbd_negotiate_response())))
    conv.ack_from_client()
    return conv.graceful_close()


def write_timed(path: Path, conv: Conversation, gaps: dict[int, float]) -> Path:
    """Write ``conv`` as pcap, frame i at 1 ms after frame i-1 unless ``gaps`` (frame
    number, 1-based) gives its distance in seconds."""
    t = 1_700_000_000.0
    for number, frame in enumerate(conv.frames, start=1):
        t += gaps.get(number, 0.001)
        frame.time = t
    wrpcap(str(path), conv.frames)
    return path


def cxgb4_timeout(cport: int = 41116) -> Conversation:
    """cxgb4's request (MSS/WS SYN, C|S, P2P with the Read RTR) gets no reply; its
    endpoint timer (ep_timeout_secs, 60 s) aborts the connection (RST): the timed writer
    puts the RST 60 s after the request."""
    conv = Conversation(client="10.0.5.1", server="10.0.5.2", cport=cport)
    conv.handshake(CXGB4_SYN, LINUX_SYNACK)
    conv.client_sends(mpa(KEY_REQ, 0x50, 2, block(16, 16, p2p=True, read=True)))
    conv.ack_from_server()
    return conv.client_sends(b"", flags="RA")


def siw_responder_timeout(cport: int = 41117) -> Conversation:
    """A connection to a siw listener that never sends its request: MPAREP_TIMEOUT (5 s)
    later siw releases the socket (FIN); the timed writer puts it 5 s after the
    handshake."""
    conv = Conversation(client="10.0.5.3", server="10.0.5.4", cport=cport)
    conv.handshake(LINUX_SYN, LINUX_SYNACK)
    conv.server_sends(b"", flags="FA")
    return conv.client_sends(b"", flags="FA")
