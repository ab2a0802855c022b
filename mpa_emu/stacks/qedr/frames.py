"""The bytes a FastLinQ adapter puts on the stream for qed: the MPA request, reply and
reject the firmware builds from the mpa offload ramrod (qed_iwarp_mpa_offload), the RTR
it sends after IWARP_RAMROD_CMD_ID_MPA_OFFLOAD_SEND_RTR (qed_iwarp_send_rtr), and the
zero-length Read Response it answers a Read RTR with.

What the driver fixes: the ULP buffer (``out_pdata``: the RFC 6581 block that
qed_iwarp_mpa_v2_set_private writes, then the application's private data, its length
``cm_info.private_data_len``), ``crc_needed``, ``mode`` (the revision), ``reject``. What
the firmware adds is the 20-byte header around that buffer; the model writes it as RFC
5044 section 7.1 lays it out, with C from ``crc_needed``, S (RFC 6581 section 5) and Rev 2
for MPA_NEGOTIATION_TYPE_ENHANCED, Rev 1 for BASIC, R for a reject and never M (qed has
no marker setting). The RTRs' STag and TO are the firmware's: the model sends 0.
"""

from __future__ import annotations

from mpa_emu.stacks.qedr.states import (
    MPA_V2_PEER2PEER_MODEL,
    MPA_V2_READ_RTR,
    MPA_V2_SEND_RTR,
    MPA_V2_WRITE_RTR,
    MpaMode,
    RtrType,
)
from mpa_emu.wire import ddp, mpa


def v2_block(ird: int, ord: int, rtr_type: int) -> bytes:
    """qed_iwarp_mpa_v2_set_private: ``htons((u16)ird)``, ``htons((u16)ord)``; with an
    RTR type, the P2P bit on IRD, then the Send RTR bit on IRD, the Write and Read RTR bits
    on ORD. The values are neither masked nor capped (cm_info's u8 fields)."""
    ird_word = ird & 0xFFFF
    ord_word = ord & 0xFFFF
    rtr = RtrType(rtr_type)
    if rtr != RtrType.NONE:
        ird_word |= MPA_V2_PEER2PEER_MODEL
        if rtr & RtrType.ZERO_SEND:
            ird_word |= MPA_V2_SEND_RTR
        if rtr & RtrType.ZERO_WRITE:
            ord_word |= MPA_V2_WRITE_RTR
        if rtr & RtrType.ZERO_READ:
            ord_word |= MPA_V2_READ_RTR
    return ird_word.to_bytes(2, "big") + ord_word.to_bytes(2, "big")


def out_pdata(mode: int, ird: int, ord: int, rtr_type: int, private_data: bytes) -> bytes:
    """``ep_buffer_virt->out_pdata`` as qed_iwarp_connect / qed_iwarp_accept /
    qed_iwarp_reject fill it: the v2 block when the mode is ENHANCED, then the
    application's private data (``cm_info.private_data_len`` bytes in all)."""
    block = v2_block(ird, ord, rtr_type) if mode == MpaMode.ENHANCED else b""
    return block + private_data


def frame(*, request: bool, mode: int, crc: bool, reject: bool, ulp: bytes) -> bytes:
    """The firmware's MPA frame around the outgoing ULP buffer ``ulp``."""
    flags = (mpa.FLAG_CRC if crc else 0) | (mpa.FLAG_REJECT if reject else 0)
    if mode == MpaMode.ENHANCED:
        flags |= mpa.FLAG_ENHANCED
    rev = 2 if mode == MpaMode.ENHANCED else 1
    key = mpa.KEY_REQ if request else mpa.KEY_REP
    return key + bytes((flags, rev)) + len(ulp).to_bytes(2, "big") + ulp


def rtr(kind: str, *, crc: bool) -> bytes:
    """The zero-length RTR the initiator's firmware sends: an RDMA Write (tagged, STag 0,
    TO 0), an RDMA Read Request (QN 1, MSN 1, sink and source STag 0, TO 0) or a Send (QN
    0, MSN 1)."""
    if kind == "write":
        ulpdu = ddp.rdma_write(b"", 0, 0)
    elif kind == "read":
        head = ddp.UntaggedHeader(opcode=ddp.Opcode.READ_REQUEST, qn=ddp.QN_READ_REQUEST,
                                  msn=1, mo=0, last=True)
        body = ddp.ReadRequest(sink_stag=0, sink_to=0, size=0, src_stag=0, src_to=0)
        ulpdu = head.to_bytes() + body.to_bytes()
    else:
        ulpdu = ddp.send(b"", 1, 0, last=True)
    return mpa.frame_fpdu(ulpdu, crc=None if crc else 0)


def read_response(stag: int, to: int, *, crc: bool) -> bytes:
    """The zero-length RDMA Read Response the firmware answers a zero-length Read Request
    with (RFC 5040 section 4.4)."""
    return mpa.frame_fpdu(ddp.read_response(b"", stag, to), crc=None if crc else 0)
