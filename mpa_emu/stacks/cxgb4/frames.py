"""The bytes iw_cxgb4 and its firmware put on the stream: the MPA frames of
``send_mpa_req``, ``send_mpa_reply`` and ``send_mpa_reject`` (FW_OFLD_TX_DATA_WR), the RTR
of ``build_rtr_msg`` and the Terminate of ``post_terminate`` (sent by the firmware as
FPDUs), and the zero-length Read Response the firmware answers a read RTR with."""

from __future__ import annotations

from mpa_emu.stacks.cxgb4.states import RTR_STAG, RTR_TO, P2pType
from mpa_emu.wire import ddp, mpa

MPA_V2_PEER2PEER_MODEL = 0x8000
MPA_V2_RDMA_WRITE_RTR = 0x8000
MPA_V2_RDMA_READ_RTR = 0x4000


def v2_block(ird: int, ord: int, *, peer2peer: bool, p2p_type: int) -> bytes:
    """The 4-byte ``struct mpa_v2_conn_params``: ``htons((u16)ird)`` with A when
    ``peer2peer``, ``htons((u16)ord)`` with C (``p2p_type`` RDMA_WRITE) or D (READ_REQ),
    only when ``peer2peer``. The values are not masked to 14 bits, as in the kernel."""
    ird_word = ird & 0xFFFF
    ord_word = ord & 0xFFFF
    if peer2peer:
        ird_word |= MPA_V2_PEER2PEER_MODEL
        if p2p_type == P2pType.RDMA_WRITE:
            ord_word |= MPA_V2_RDMA_WRITE_RTR
        elif p2p_type == P2pType.READ_REQ:
            ord_word |= MPA_V2_RDMA_READ_RTR
    return ird_word.to_bytes(2, "big") + ord_word.to_bytes(2, "big")


def frame(key: bytes, flags: int, rev: int, body: bytes) -> bytes:
    """``struct mpa_message``: key, flags, revision, PD_Length (``len(body)``), body."""
    return key + bytes((flags & 0xFF, rev & 0xFF)) + len(body).to_bytes(2, "big") + body


def mpa_request(*, rev: int, crc: bool, markers: bool, ird: int, ord: int,
                peer2peer: bool, p2p_type: int, private_data: bytes) -> bytes:
    """``send_mpa_req``: C, M, S (v2) and the v2 block before the private data."""
    flags = (mpa.FLAG_CRC if crc else 0) | (mpa.FLAG_MARKERS if markers else 0)
    if rev == 2:
        block = v2_block(ird, ord, peer2peer=peer2peer, p2p_type=p2p_type)
        return frame(mpa.KEY_REQ, flags | mpa.FLAG_ENHANCED, rev, block + private_data)
    return frame(mpa.KEY_REQ, flags, rev, private_data)


def mpa_reply(*, reject: bool, rev: int, enhanced: bool, crc: bool, markers: bool,
              ird: int, ord: int, peer2peer: bool, p2p_type: int, private_data: bytes,
              copy_private_data: bool) -> bytes:
    """``send_mpa_reply`` (``reject`` False) or ``send_mpa_reject`` (True).

    The reply carries C and M as negotiated, the reject only R. For rev 2 with S both add
    S and the v2 block; ``p2p_type`` is what goes into the block (the caller passes
    DISABLED for a reply without a negotiated RTR). ``copy_private_data`` is the kernel's
    ``if (ep->plen)`` in the v2 branch: False leaves zeros of the right length."""
    if reject:
        flags = mpa.FLAG_REJECT
    else:
        flags = (mpa.FLAG_CRC if crc else 0) | (mpa.FLAG_MARKERS if markers else 0)
    if rev == 2 and enhanced:
        block = v2_block(ird, ord, peer2peer=peer2peer, p2p_type=p2p_type)
        body = private_data if copy_private_data else bytes(len(private_data))
        return frame(mpa.KEY_REP, flags | mpa.FLAG_ENHANCED, rev, block + body)
    return frame(mpa.KEY_REP, flags, rev, private_data)


def _fpdu(ulpdu: bytes, crc: bool) -> bytes:
    return mpa.frame_fpdu(ulpdu, crc=None if crc else 0)


def rtr(p2p_type: int, *, crc: bool) -> bytes | None:
    """``build_rtr_msg``: a zero-length RDMA Write to STag 1, TO 1, or a zero-length
    RDMA Read Request (sink and source STag 1, TO 1), MSN 1 on the read queue; None for
    any other type (no RTR)."""
    if p2p_type == P2pType.RDMA_WRITE:
        return _fpdu(ddp.rdma_write(b"", RTR_STAG, RTR_TO), crc)
    if p2p_type == P2pType.READ_REQ:
        head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=ddp.QN_READ_REQUEST,
                                  msn=1, mo=0, last=True)
        body = ddp.ReadRequest(sink_stag=RTR_STAG, sink_to=RTR_TO, size=0,
                               src_stag=RTR_STAG, src_to=RTR_TO)
        return _fpdu(head.to_bytes() + body.to_bytes(), crc)
    return None


def read_response(stag: int, to: int, *, crc: bool) -> bytes:
    """The zero-length RDMA Read Response to a zero-length Read Request."""
    return _fpdu(ddp.read_response(b"", stag, to), crc)


def send(payload: bytes, msn: int, mo: int, *, last: bool, crc: bool) -> bytes:
    """An RDMA Send the firmware sends for ``c4iw_post_send``: untagged, QN 0."""
    return _fpdu(ddp.send(payload, msn, mo, last=last), crc)


def terminate(layer_etype: int, ecode: int, *, crc: bool) -> bytes:
    """``post_terminate`` with ``struct terminate_message`` {layer_etype, ecode, hdrct 0}
    as the firmware frames it: untagged, QN 2, MSN 1, MO 0, RDMAP Terminate."""
    return _fpdu(ddp.terminate(layer_etype >> 4, layer_etype & 0xF, ecode), crc)
