"""The negotiated values of each upper protocol and what broke them, in its own terms.

Causes (catalogue keys, docs/ulp/*.md):

- ``smbd-send-over-max-receive``: an SMB Direct message larger than the MaxReceiveSize
  the peer announced in its Negotiate Request or Response ([MS-SMBD] 3.1.5.1: a sender
  never sends more than the peer's MaxReceiveSize; larger payloads go as fragments with
  RemainingDataLength, or by RDMA Read/Write);
- ``smbd-no-credit``: an SMB Direct data message sent with no send credit left
  ([MS-SMBD] 3.1.1.1 and 3.1.5.1: each message uses one credit the peer granted);
- ``nvme-connect-rejected``: the NVMe-oF target refused the connect, its reason in the
  reject's private data (``nvmet_rdma_cm_reject``);
- ``rpcrdma-inline-overflow``: an RPC-over-RDMA message sent inline (no chunk) larger than
  the peer's inline receive size (RFC 8166 section 3.3; RFC 8797);
- ``smbd-negotiate-refused``: the server answered the Negotiate Request with a failure
  Status, or sent no Negotiate Response to a request ksmbd refuses
  (``smb_direct_check_recvmsg``, :mod:`mpa_emu.ulp.upper.ksmbd`);
- ``iser-unsupported``: an iSER peer uses what the other's CM header says it does not
  support (Send with Invalidate; zero-based virtual addresses).
"""

from __future__ import annotations

import errno
import struct
from typing import TYPE_CHECKING

from mpa_emu.judge.model import errno_name
from mpa_emu.ulp.upper import ksmbd
from mpa_emu.ulp.upper.report import UlpBlock, UlpDiagnosis, UlpReport
from mpa_emu.wire.ulp import detect, nvme_rdma, rpcrdma, smbd

if TYPE_CHECKING:
    from mpa_emu.views.inspection.report import ConnectionReport

_TERMINATE = 7
STATUS = "{status}"
"""Stands for the initiator's rdma_cm status in an event text; explain fills it in (the
initiator's stack decides it: -ECONNREFUSED from irdma and cxgb4, -ECONNRESET from siw)."""
DISCONNECTED = ("the Terminate moves both QPs to error: each application's posted work "
                "completes flushed (IB_WC_WR_FLUSH_ERR) and rdma_cm reports "
                "RDMA_CM_EVENT_DISCONNECTED when the connection closes")


def diagnose(ulp: UlpReport, rep: ConnectionReport, blocks: list[UlpBlock]) -> None:
    """Fill ``ulp.negotiated`` and ``ulp.diagnoses`` from the private data and all the
    messages (``blocks``, in frame order)."""
    if ulp.protocol == detect.SMBD:
        _smbd(ulp, rep, blocks)
    elif ulp.protocol == detect.NVME:
        _nvme(ulp, rep)
    elif ulp.protocol == detect.RPCRDMA:
        _rpcrdma(ulp, rep, blocks)
    elif ulp.protocol == detect.ISER:
        _iser(ulp, rep, blocks)


def _terminate_after(rep: ConnectionReport, frame: int, side: str) -> tuple[int, str] | None:
    """The first Terminate ``side`` sent at or after ``frame``: (frame, what)."""
    for f in rep.fpdu_list:
        if f.opcode == _TERMINATE and f.side == side and f.frame >= frame:
            return f.frame, f.what
    return None


def _quoted_segment(rep: ConnectionReport, term_frame: int,
                    msg: UlpBlock) -> tuple[int, int] | None:
    """(MO, frame) of ``msg``'s segment whose untagged DDP header the Terminate of
    ``term_frame`` quotes (RFC 5040 section 4.8: after the control word, the DDP Segment
    Length and the DDP header; MO is the header's last word, RFC 5041 section 4.4)."""
    term = next((f for f in rep.fpdu_list if f.frame == term_frame and f.term_body), None)
    if term is None or len(term.term_body) < 4 + 2 + 18:
        return None
    quoted = term.term_body[6:24]
    msn, mo = struct.unpack_from("!II", quoted, 10)
    if quoted[0] & 0x80 or msn != msg.msn:
        return None
    seg = next((f for f in rep.fpdu_list if f.side == msg.side and f.msn == msn
                and f.mo == mo and f.qn == 0), None)
    return None if seg is None else (mo, seg.frame)


def _end_after(rep: ConnectionReport, frame: int) -> tuple[int, str, str] | None:
    later = [c for c in rep.closes if c[0] > frame]
    return later[0] if later else None


def _other(side: str) -> str:
    return "server" if side == "client" else "client"


# -- SMB Direct ---------------------------------------------------------------------


def _smbd(ulp: UlpReport, rep: ConnectionReport, blocks: list[UlpBlock]) -> None:
    neg_req = next((b for b in blocks if b.kind == "Negotiate Request"), None)
    neg_resp = next((b for b in blocks if b.kind == "Negotiate Response"), None)
    limits: dict[str, tuple[int, UlpBlock]] = {}
    if neg_req is not None:
        mrs = int(neg_req.fields["max_receive_size"] or 0)
        limits["server"] = (mrs, neg_req)  # what the server may send the client
        ulp.negotiated["client_max_receive_size"] = mrs
    if neg_resp is not None:
        f = neg_resp.fields
        mrs = int(f["max_receive_size"] or 0)
        limits["client"] = (mrs, neg_resp)
        ulp.negotiated.update({
            "server_max_receive_size": mrs, "credits_granted": f["credits_granted"],
            "max_read_write_size": f["max_read_write_size"], "status": f["status_name"]})
        ulp.negotiated_text.append(
            f"{f['status_name']}; the client may send at most {mrs:,} bytes per message "
            f"(the server's MaxReceiveSize, frame {neg_resp.frame}), with "
            f"{f['credits_granted']} credits granted; RDMA Read/Write of up to "
            f"{int(f['max_read_write_size'] or 0):,} bytes")
    if neg_req is not None:
        ulp.negotiated_text.append(
            f"the server may send at most {limits['server'][0]:,} bytes per message (the "
            f"client's MaxReceiveSize, frame {neg_req.frame})")
    for b in blocks:
        limit = limits.get(b.side)
        if limit is None or b.kind != "Data Transfer" or b.size <= limit[0]:
            continue
        _smbd_oversize(ulp, rep, b, *limit)
        break
    if neg_resp is not None:
        _smbd_credits(ulp, blocks, neg_resp)
    if neg_req is not None:
        _smbd_refused(ulp, rep, neg_req, neg_resp)


def _smbd_refused(ulp: UlpReport, rep: ConnectionReport, req: UlpBlock,
                  resp: UlpBlock | None) -> None:
    if resp is not None:
        if resp.fields["status"] == 0:
            return
        ulp.diagnoses.append(UlpDiagnosis(
            cause="smbd-negotiate-refused", severity="error",
            summary=(f"the server answered the Negotiate Request (frame {req.frame}) with "
                     f"{resp.fields['status_name']} (frame {resp.frame}): no common SMB "
                     "Direct version"),
            evidence=[req.frame, resp.frame], negotiated=req.text,
            negotiated_frame=req.frame, broken_frame=resp.frame,
            event="the client's SMB Direct connect fails and it disconnects: "
                  "RDMA_CM_EVENT_DISCONNECTED",
            fix="offer SMB Direct version 1.0 (0x0100) in MinVersion..MaxVersion"))
        return
    value = _negotiate_of(req)
    if value is None:
        return
    status, why = ksmbd.check_negotiate(value)
    end = _end_after(rep, req.frame)
    if status == 0 or end is None:
        return
    # smb_direct_prepare: -ECONNABORTED sends nothing; -EOPNOTSUPP is answered with
    # smb_direct_send_negotiate_response(failed), which this capture does not show.
    reaction = ("no Negotiate Response" if status == -errno.ECONNABORTED else
                "ksmbd answers it with STATUS_NOT_SUPPORTED, yet no Negotiate Response came")
    ulp.diagnoses.append(UlpDiagnosis(
        cause="smbd-negotiate-refused", severity="error",
        summary=(f"the client's Negotiate Request (frame {req.frame}) has {why}, which "
                 f"ksmbd refuses ({_kernel_errno(status)}, smb_direct_check_recvmsg): "
                 f"{reaction}, then a {end[2]} from the {end[1]} (frame {end[0]})"),
        evidence=[req.frame, end[0]], negotiated=req.text, negotiated_frame=req.frame,
        broken_frame=req.frame,
        event="both applications get RDMA_CM_EVENT_DISCONNECTED; cifs.ko's "
              "smbd_negotiate times out waiting for the response",
        assumption="the server is ksmbd: the capture does not show which SMB server "
                   "answered, and Windows's limits are not in it",
        fix=("ask for at least one credit, MaxReceiveSize above 128 and MaxFragmentedSize "
             "above 131,072 ([MS-SMBD] 2.2.1; ksmbd's smb_direct_check_recvmsg)"
             if status == -errno.ECONNABORTED else
             "offer SMB Direct version 1.0 (0x0100) in MinVersion..MaxVersion")))


def _kernel_errno(status: int) -> str:
    """The errno as the kernel source spells it: smb_direct_check_recvmsg returns
    -EOPNOTSUPP, which Python names ENOTSUP (the same number on Linux)."""
    return "-EOPNOTSUPP" if status == -errno.EOPNOTSUPP else errno_name(status)


def _negotiate_of(block: UlpBlock) -> smbd.NegotiateRequest | None:
    f = block.fields
    try:
        return smbd.NegotiateRequest(
            int(f["min_version"] or 0), int(f["max_version"] or 0),
            int(f["credits_requested"] or 0), int(f["preferred_send_size"] or 0),
            int(f["max_receive_size"] or 0), int(f["max_fragmented_size"] or 0))
    except KeyError:
        return None


def _smbd_oversize(ulp: UlpReport, rep: ConnectionReport, msg: UlpBlock, limit: int,
                   neg: UlpBlock) -> None:
    peer = _other(msg.side)
    term = _terminate_after(rep, msg.frame, peer)
    end = _end_after(rep, term[0] if term else msg.last_frame)
    evidence = [neg.frame, msg.frame, msg.last_frame]
    tail = ""
    if term is not None:
        evidence.append(term[0])
        at = _quoted_segment(rep, term[0], msg)
        if at is not None:
            evidence.append(at[1])
            tail = (f"; the {peer}'s receive buffer overflowed at the segment with MO "
                    f"{at[0]:,} (frame {at[1]}), which its Terminate quotes")
        tail += f"; the {peer} answered with a Terminate (frame {term[0]}: {term[1]})"
    if end is not None:
        evidence.append(end[0])
        tail += f", then a {end[2]} from the {end[1]} (frame {end[0]})"
    carried = str(msg.fields.get("smb2_command_name") or "")
    what = f"an SMB2 {carried}" if carried else "a message"
    ulp.diagnoses.append(UlpDiagnosis(
        cause="smbd-send-over-max-receive", severity="error",
        summary=(f"the {msg.side} sent one {msg.size:,}-byte Send ({what}, MSN {msg.msn}, "
                 f"{msg.segments} segment{'s' * (msg.segments != 1)}, frames {msg.frame}-"
                 f"{msg.last_frame}) although the {peer}'s {neg.kind} (frame {neg.frame}) "
                 f"announced a MaxReceiveSize of {limit:,} bytes{tail}"),
        evidence=sorted(set(evidence)),
        negotiated=f"MaxReceiveSize {limit:,} (frame {neg.frame})",
        negotiated_frame=neg.frame, broken_frame=msg.frame, event=DISCONNECTED,
        assumption=(f"the {peer}'s posted receive buffers are not on the wire: that they "
                    f"are MaxReceiveSize large is what [MS-SMBD] promises, not what the "
                    "capture shows"),
        fix=(f"a {msg.side} bug: messages above the peer's MaxReceiveSize must be split "
             "into SMB Direct fragments (RemainingDataLength, [MS-SMBD] 3.1.5.1) or the "
             "payload moved by RDMA Read/Write (an SMB2 buffer descriptor), as cifs.ko "
             "does when smbd_max_send_size is honoured")))


def _smbd_credits(ulp: UlpReport, blocks: list[UlpBlock], neg_resp: UlpBlock) -> None:
    # [MS-SMBD] 3.1.5.1: the client starts with the Negotiate Response's CreditsGranted;
    # each data message it sends uses one, each message the server sends grants more.
    credits = int(neg_resp.fields["credits_granted"] or 0)
    last_grant = neg_resp.frame
    for b in blocks:
        if b.frame <= neg_resp.frame or b.kind != "Data Transfer":
            continue
        if b.side == "server":
            granted = int(b.fields["credits_granted"] or 0)
            if granted:
                credits += granted
                last_grant = b.frame
            continue
        if credits <= 0:
            ulp.diagnoses.append(UlpDiagnosis(
                cause="smbd-no-credit", severity="error",
                summary=(f"the client sent a data message (MSN {b.msn}, frame {b.frame}) "
                         f"with no send credit left: the credits the server granted (last "
                         f"in frame {last_grant}) were all used"),
                evidence=[neg_resp.frame, last_grant, b.frame],
                negotiated=f"CreditsGranted {neg_resp.fields['credits_granted']} (frame "
                           f"{neg_resp.frame})",
                negotiated_frame=neg_resp.frame, broken_frame=b.frame,
                event=("the server may find no receive posted for it: a Terminate (no "
                       "buffer available) and RDMA_CM_EVENT_DISCONNECTED"),
                assumption=("credits are counted from the messages in the capture: a "
                            "message missing from it would change the count"),
                fix=("wait for the server's CreditsGranted before sending ([MS-SMBD] "
                     "3.1.5.1); the client's send queue must block on zero credits")))
            return
        credits -= 1


# -- NVMe over Fabrics ---------------------------------------------------------------


def _nvme(ulp: UlpReport, rep: ConnectionReport) -> None:
    req = ulp.request
    if req is not None:
        f = req.fields
        qid, hsq, hrq = int(f["qid"] or 0), int(f["hsqsize"] or 0), int(f["hrqsize"] or 0)
        ulp.negotiated.update({"qid": qid, "hsqsize": hsq, "hrqsize": hrq,
                               "queue": "admin" if qid == 0 else "io"})
        ulp.negotiated_text.append(
            f"{'admin queue' if qid == 0 else f'I/O queue {qid}'}: the host sends up to "
            f"{hsq + 1} commands (HSQSIZE {hsq}, 0's based) and receives {hrq} responses "
            "(HRQSIZE)")
    reply = ulp.reply
    if reply is not None and reply.kind == nvme_rdma.CmReply.kind:
        ulp.negotiated["crqsize"] = reply.fields["crqsize"]
        ulp.negotiated_text.append(f"the target's receive queue: CRQSIZE "
                                   f"{reply.fields['crqsize']}")
    if reply is None or reply.kind != nvme_rdma.CmReject.kind:
        return
    sts = int(reply.fields["sts"] or 0)
    name = str(reply.fields["status_name"])
    why, assumption, fix = _nvme_reason(sts, req)
    evidence = [b.frame for b in (req, reply) if b is not None]
    ulp.negotiated["reject_status"] = sts
    ulp.diagnoses.append(UlpDiagnosis(
        cause="nvme-connect-rejected", severity="error",
        summary=f"the NVMe-oF target rejected the connect with status {sts} {name}{why}",
        evidence=evidence,
        negotiated=req.text if req is not None else "",
        negotiated_frame=req.frame if req is not None else None,
        broken_frame=reply.frame,
        event=(f"RDMA_CM_EVENT_REJECTED status {STATUS} at the host, whose "
               "nvme_rdma_conn_rejected logs \"Connect rejected: status "
               f"{STATUS} nvme status {sts} ({name.split('(', 1)[-1].rstrip(')')}).\""),
        assumption=assumption, fix=fix))


def _nvme_reason(sts: int, req: UlpBlock | None) -> tuple[str, str, str]:
    """(what the request shows, what the capture cannot prove, the fix) of a status."""
    if req is None:
        return ("", "the connect's private data is of no NVMe-RDMA format",
                "send struct nvme_rdma_cm_req (32 bytes) as the connect's private data")
    f = req.fields
    qid, hsq, hrq = int(f["qid"] or 0), int(f["hsqsize"] or 0), int(f["hrqsize"] or 0)
    if sts == nvme_rdma.INVALID_HSQSIZE:
        if qid == 0 and hsq + 1 > nvme_rdma.NVME_AQ_DEPTH:
            return (f": the admin queue asked HSQSIZE {hsq} ({hsq + 1} entries), above "
                    f"NVME_AQ_DEPTH {nvme_rdma.NVME_AQ_DEPTH} "
                    "(nvmet_rdma_parse_cm_connect_req)", "",
                    f"connect the admin queue with hsqsize {nvme_rdma.NVME_AQ_DEPTH - 1}")
        return (f": I/O queue {qid} asked HSQSIZE {hsq} ({hsq + 1} entries)",
                "the target's queue size limit is not on the wire; Linux's nvmet-rdma does "
                "not check an I/O queue's size at connect time (its limit applies at the "
                "Fabrics Connect command), so this target has a limit of its own below "
                f"{hsq + 1}",
                "connect with a smaller queue (nvme connect --queue-size, at most the "
                "target's limit; Linux's host caps it at NVME_RDMA_MAX_QUEUE_SIZE "
                f"{nvme_rdma.NVME_RDMA_MAX_QUEUE_SIZE})")
    if sts == nvme_rdma.INVALID_HRQSIZE:
        return (f": HRQSIZE {hrq}", "the target's limit is not on the wire",
                "connect with a smaller queue size")
    if sts == nvme_rdma.INVALID_QID:
        return (f": queue ID {qid}", "how many I/O queues the target allows is not on the "
                "wire", "connect fewer I/O queues (nvme connect --nr-io-queues)")
    if sts == nvme_rdma.INVALID_RECFMT:
        return (f": record format {f['recfmt']}", "",
                "send record format 0 (NVME_RDMA_CM_FMT_1_0)")
    if sts == nvme_rdma.INVALID_LEN:
        return ("", "", "send the 32-byte struct nvme_rdma_cm_req as private data")
    if sts == nvme_rdma.NO_RSC:
        return ("", "which resource ran out (queue memory, QPs, CQs) is not on the wire: "
                "the target's log says", "check the target's memory and device limits")
    return ("", "", "read the target's log (nvmet_rdma_cm_reject)")


# -- RPC-over-RDMA -------------------------------------------------------------------


def _rpcrdma(ulp: UlpReport, rep: ConnectionReport, blocks: list[UlpBlock]) -> None:
    recv: dict[str, tuple[int, int | None]] = {}
    for side, block in (("client", ulp.request), ("server", ulp.reply)):
        if block is not None:
            recv[side] = (int(block.fields["recv_size"] or 0), block.frame)
            ulp.negotiated[f"{side}_inline_receive"] = recv[side][0]
            ulp.negotiated[f"{side}_inline_send"] = block.fields["send_size"]
            ulp.negotiated_text.append(
                f"the {side} receives inline up to {recv[side][0]:,} bytes and sends up to "
                f"{int(block.fields['send_size'] or 0):,} (frame {block.frame})")
    for b in blocks:
        if not b.kind.startswith("RPC-over-RDMA") or b.fields.get("proc") != \
                rpcrdma.RDMA_MSG:
            continue
        peer = _other(b.side)
        limit, frame = recv.get(peer, (rpcrdma.DEFAULT_INLINE, None))
        chunked = bool(b.fields["read_segments"] or b.fields["write_chunks"]
                       or b.fields["reply_chunk"])
        if b.size <= limit or chunked:
            continue
        source = (f"the {peer}'s CM private data (frame {frame})" if frame is not None
                  else "the RFC 8166 default (no RFC 8797 private data from the "
                  f"{peer})")
        kind = "call" if b.fields.get("rpc_call") else "message"
        term = _terminate_after(rep, b.frame, peer)
        evidence = [x for x in (frame, b.frame, b.last_frame) if x is not None]
        event = ("the receiver has no receive buffer that large: it terminates the "
                 "connection (a Terminate, RDMA_CM_EVENT_DISCONNECTED) and the RPC is "
                 "retransmitted on a new connection")
        if term is not None:
            evidence.append(term[0])
            event = DISCONNECTED
        ulp.diagnoses.append(UlpDiagnosis(
            cause="rpcrdma-inline-overflow", severity="error",
            summary=(f"the {b.side} sent an RPC {kind} of {b.size:,} bytes inline (RDMA_MSG "
                     f"without a chunk, XID 0x{int(b.fields['xid'] or 0):08x}, frame "
                     f"{b.frame}), larger than the {peer}'s inline receive size of "
                     f"{limit:,} bytes from {source}"),
            evidence=sorted(set(evidence)),
            negotiated=f"inline receive {limit:,} bytes", negotiated_frame=frame,
            broken_frame=b.frame, event=event,
            assumption="" if frame is not None else
            f"the {peer}'s inline size is the RFC 8166 default: the capture holds no RFC "
            "8797 private data to say otherwise",
            fix=("send a message larger than the peer's inline threshold with a Read "
                 "list (a call) or RDMA_NOMSG with a reply chunk (RFC 8166 section 3.5)")))
        return


# -- iSER ---------------------------------------------------------------------------


def _iser(ulp: UlpReport, rep: ConnectionReport, blocks: list[UlpBlock]) -> None:
    ini, tgt = ulp.request, ulp.reply
    if ini is not None:
        ulp.negotiated["initiator_zbva"] = ini.fields["zbva"]
        ulp.negotiated["initiator_send_with_invalidate"] = ini.fields["send_with_invalidate"]
        ulp.negotiated_text.append(f"the initiator (frame {ini.frame}): {ini.text}")
    if tgt is not None and tgt.kind == "iSER CM header":
        ulp.negotiated["target_zbva"] = tgt.fields["zbva"]
        ulp.negotiated["target_send_with_invalidate"] = tgt.fields["send_with_invalidate"]
        ulp.negotiated_text.append(f"the target (frame {tgt.frame}): {tgt.text}")
    if ini is not None and not ini.fields["send_with_invalidate"]:
        inval = next((f for f in rep.fpdu_list if f.side == "server"
                      and f.opcode in (4, 6)), None)
        if inval is not None:
            ulp.diagnoses.append(UlpDiagnosis(
                cause="iser-unsupported", severity="error",
                summary=(f"the target sent a {inval.what.split(' (')[0]} (frame "
                         f"{inval.frame}) although the initiator's CM header (frame "
                         f"{ini.frame}) says it does not support Send with Invalidate "
                         "(ISER_SEND_W_INV_NOT_SUP)"),
                evidence=[ini.frame, inval.frame], negotiated=ini.text,
                negotiated_frame=ini.frame, broken_frame=inval.frame, event=DISCONNECTED,
                fix=("a target bug: use remote invalidation only when the initiator allows "
                     "it (isert_set_nego_params reads ISER_SEND_W_INV_NOT_SUP)")))
            return
    zbva_off = [b for b in (ini, tgt) if b is not None and b.kind == "iSER CM header"
                and not b.fields["zbva"]]
    if not zbva_off:
        return
    for b in blocks:
        f = b.fields
        if b.side != "client" or b.kind != "iSER":
            continue
        zero = [n for n, valid, va in (("write", f.get("wsv"), f.get("write_va")),
                                       ("read", f.get("rsv"), f.get("read_va")))
                if valid and va == 0]
        if zero:
            by = zbva_off[0]
            ulp.diagnoses.append(UlpDiagnosis(
                cause="iser-unsupported", severity="warning",
                summary=(f"the initiator advertises its {zero[0]} buffer at VA 0 (frame "
                         f"{b.frame}), a zero-based address, although the {by.side}'s CM "
                         f"header (frame {by.frame}) says zero-based VAs are not used"),
                evidence=[by.frame, b.frame], negotiated=by.text, negotiated_frame=by.frame,
                broken_frame=b.frame,
                event="the target's RDMA Read or Write to that address fails with a "
                      "Terminate (invalid TO): RDMA_CM_EVENT_DISCONNECTED",
                assumption="a buffer may really live at virtual address 0; unlikely",
                fix="advertise the buffer's virtual address (ZBVA is not in use)"))
            return
