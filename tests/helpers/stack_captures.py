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

from tests.helpers.inspect_builders import Conversation
from tests.helpers.real_like_captures import KEY_REP, KEY_REQ, fpdu, send

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
