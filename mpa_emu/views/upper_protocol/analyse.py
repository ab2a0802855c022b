"""A connection's upper protocol from what inspect read: which protocol, its private
data each way, its Send messages decoded, the values the two sides negotiated, and what
broke them (:mod:`mpa_emu.views.upper_protocol.diagnose`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mpa_emu.ulp.upper.messages import SendMessage, Stream, first_send, send_messages
from mpa_emu.ulp.upper.report import MAX_MESSAGES, UlpBlock, UlpReport
from mpa_emu.views.upper_protocol.diagnose import diagnose
from mpa_emu.wire.mpa import FRAME_SIZE
from mpa_emu.wire.ulp import detect
from mpa_emu.wire.ulp.nvme_rdma import CmRequest

if TYPE_CHECKING:
    from mpa_emu.views.inspection.report import ConnectionReport


def _port(endpoint: str) -> int:
    try:
        return int(endpoint.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def analyse_connection(rep: ConnectionReport, c_stream: Stream,
                       s_stream: Stream) -> UlpReport | None:
    """The upper protocol of ``rep`` (its MPA request and reply read, ``c_stream`` and
    ``s_stream`` the two sides' payload), or None when nothing names one."""
    req, reply = rep.request, rep.reply
    if req is None:
        return None
    c_start = req.frame_len
    s_start = reply.frame_len if reply is not None else FRAME_SIZE
    accepted = reply is not None and not reply.reject
    first_c = first_send(c_stream, c_start) if accepted else None
    found = detect.recognise(req.private_data, _port(rep.server), first_c)
    if found is None:
        return None
    known = accepted and found.protocol != detect.UNKNOWN
    # The messages are cut only for a protocol that reads them.
    client_msgs = send_messages(c_stream, c_start, "client") if known else []
    server_msgs = send_messages(s_stream, s_start, "server") if known else []
    ulp = UlpReport(found.protocol, found.name, found.by)
    proto = found.protocol
    pd_req = detect.decode_private_data(proto, req.private_data, request=True)
    if pd_req is not None:
        ulp.request = UlpBlock.of(pd_req, req.frame, "client", size=len(req.private_data))
    elif req.private_data:
        ulp.private_data["client"] = req.private_data.hex()
    if reply is not None:
        pd_rep = detect.decode_private_data(proto, reply.private_data, request=False,
                                            reject=reply.reject)
        if pd_rep is not None:
            ulp.reply = UlpBlock.of(pd_rep, reply.frame, "server",
                                    size=len(reply.private_data))
        elif reply.private_data:
            ulp.private_data["server"] = reply.private_data.hex()
    admin = isinstance(pd_req, CmRequest) and pd_req.admin
    msgs = sorted(client_msgs + server_msgs, key=lambda m: (m.frame, m.side))
    blocks = _decode_messages(ulp, msgs, admin)
    diagnose(ulp, rep, blocks)
    return ulp


def _decode_messages(ulp: UlpReport, msgs: list[SendMessage],
                     admin: bool) -> list[UlpBlock]:
    """Every message decoded (the first :data:`MAX_MESSAGES` also listed in ``ulp``)."""
    out: list[UlpBlock] = []
    seen: set[str] = set()
    for m in msgs:
        first = m.side not in seen
        seen.add(m.side)
        value = detect.decode_message(ulp.protocol, m.head, m.size,
                                      from_initiator=m.side == "client", first=first,
                                      admin=admin)
        ulp.message_count += 1
        if value is None:
            ulp.undecoded += 1
            block = UlpBlock(m.frame, m.side, "undecoded",
                             f"not {ulp.name}: {m.head[:16].hex()}"
                             + ("..." if len(m.head) > 16 else ""))
        else:
            block = UlpBlock.of(value, m.frame, m.side)
        block.size, block.last_frame, block.segments = m.size, m.last_frame, m.segments
        block.msn = m.msn
        if not m.complete:
            block.text += " (its last segment is not in the capture)"
        if len(ulp.messages) < MAX_MESSAGES:
            ulp.messages.append(block)
        out.append(block)
    return out
