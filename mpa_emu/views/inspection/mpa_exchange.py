"""The connection set-up as inspect reads it: TCP handshake, each side's byte stream,
the MPA request and reply (RFC 5044 section 7.1, RFC 6581 section 5) and what was
negotiated. What each stack refuses is judged per side in :mod:`mpa_emu.judge`."""

from __future__ import annotations

import struct

from mpa_emu.capture.decode import TcpFrame, options_text
from mpa_emu.views.inspection.report import ConnectionReport, Direction, MpaInfo
from mpa_emu.wire import erdma_mpa
from mpa_emu.wire import seq as seq_space
from mpa_emu.wire.mpa import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_MARKERS,
    FLAG_REJECT,
    FLAG_RESERVED,
    FRAME_SIZE,
    IRD_ORD_MASK,
    KEY_REP,
    KEY_REQ,
    KEY_SIZE,
    MAX_PRIV_DATA_LEN,
    RTR_MSG_SIZE,
    RtrBlock,
)
from mpa_emu.wire.private_data import decode_legacy

IRDMA_RCV_WND = 65535
"""irdma's receive window for irdma_check_seq: the unscaled TCP window field."""

Stream = list[tuple[int, int, bytes]]
"""One side's data in stream order: (frame, offset from the first data byte, bytes)."""


def handshake(rep: ConnectionReport, frames: list[TcpFrame], client: Direction,
               server: Direction) -> None:
    """The handshake lines (SYN, SYN-ACK, options) and their findings."""
    if client.syn_frame is None:
        rep.handshake.append("no SYN in the capture (connection already open)")
    else:
        retr = f", sent {client.syn_count} times" if client.syn_count > 1 else ""
        rep.handshake.append(f"SYN     frame {client.syn_frame}: ISN {client.isn} "
                             f"[{options_text(client.options)}]{retr}")
    if server.syn_frame is not None:
        retr = f", sent {server.syn_count} times" if server.syn_count > 1 else ""
        rep.handshake.append(f"SYN-ACK frame {server.syn_frame}: ISN {server.isn} "
                             f"[{options_text(server.options)}]{retr}")
        if client.isn is not None:
            synack = next(f for f in frames if f.number == server.syn_frame)
            if synack.ack != seq_space.add(client.isn, 1):
                rep.add(synack.number, "error", f"SYN-ACK acks {synack.ack}, expected "
                        f"{seq_space.add(client.isn, 1)} (irdma_check_syn: RST)", rule="bad-tcp")
    elif client.syn_frame is not None:
        if server.rst_frame is not None:
            rep.handshake.append(f"refused: RST from the server in frame {server.rst_frame}")
        else:
            rep.handshake.append("no SYN-ACK")
    for side, d in (("client", client), ("server", server)):
        mss = d.options.get("mss")
        if mss is not None and mss < 536:
            rep.add(d.syn_frame, "warning", f"{side} MSS {mss} < 536: irdma_process_options "
                    "rejects it")


def side_stream(rep: ConnectionReport, d: Direction, side: str) -> Stream:
    """Data segments in stream order as (frame, stream offset, bytes), retransmissions and
    overlaps dropped, gaps reported."""
    if not d.segments:
        return []
    base = seq_space.add(d.isn, 1) if d.isn is not None else d.segments[0][1]
    out: Stream = []
    seen: dict[int, int] = {}
    for frame, seq, data in d.segments:
        if not seq_space.at_or_after(seq, base):
            continue  # before the ISN: not ours to place
        off = seq_space.diff(seq, base)
        if off in seen and seen[off] >= len(data):
            d.retransmissions += 1
            continue
        seen[off] = len(data)
        out.append((frame, off, data))
    out.sort(key=lambda x: x[1])
    stream: Stream = []
    nxt = 0
    cut: list[int] = []
    for frame, off, data in out:
        if off + len(data) + d.short.get(frame, 0) <= nxt:
            continue
        if off > nxt:
            if off - nxt > IRDMA_RCV_WND:
                # irdma_check_seq: seq must lie in [rcv_nxt, rcv_nxt + rcv_wnd], rcv_wnd 65535.
                rep.add(frame, "warning", f"{side} segment starts {off - nxt} bytes past the "
                        f"{side}'s data so far: outside irdma's receive window "
                        f"({IRDMA_RCV_WND}), irdma_check_seq drops it silently")
            else:
                rep.add(frame, "warning", f"{side} stream has {off - nxt} bytes missing "
                        "before this frame (not captured?)")
            break
        data = data[nxt - off:]
        if data:
            stream.append((frame, nxt, data))
            nxt += len(data)
        if frame in d.short:
            # A frame captured short (snap length) leaves a hole only the capture made:
            # the sender sent those bytes, so the next segment is placed by its sequence
            # number after them, as a capture tool reads it.
            nxt += d.short[frame]
            cut.append(frame)
    if cut:
        d.cut = cut[0]
        rep.cut_frames.extend(cut)
        rep.add(cut[0], "note", f"{side}: {len(cut)} frame{'s' * (len(cut) > 1)} captured "
                f"short (snap length), TCP payload not in the capture: "
                f"{_missing(cut, d.short)}; each next segment is placed by its sequence "
                "number, and only what lies wholly in the capture is judged")
    return stream


def _missing(frames: list[int], short: dict[int, int]) -> str:
    """``frame 4 (22 bytes), frame 6 (50 bytes)``, or for many frames their range and
    total."""
    if len(frames) <= 6:
        return ", ".join(f"frame {f} ({short[f]} bytes)" for f in frames)
    return (f"frames {frames[0]}-{frames[-1]} ({sum(short[f] for f in frames)} bytes in "
            "all)")


def stream_end(stream: Stream, d: Direction) -> int:
    """The stream offset just past the last byte the side sent in the capture's frames
    (bytes a frame captured short did not keep included)."""
    return max((off + len(data) + d.short.get(frame, 0) for frame, off, data in stream),
               default=0)


def starts_reply(stream: Stream, d: Direction) -> bool:
    """The server's stream starts with the MPA reply key, or with as much of it as a
    frame captured short kept."""
    if not stream:
        return False
    head = stream[0][2]
    return head.startswith(KEY_REP) or (d.cut is not None and KEY_REP.startswith(head[:16]))


def bytes_at(stream: Stream, start: int, length: int) -> bytes:
    """Up to ``length`` bytes of ``stream`` from offset ``start``, as far as they are in
    the capture without a hole (the bytes a frame captured short did not keep)."""
    out = bytearray()
    pos = start
    for _, off, data in stream:
        if off + len(data) <= pos:
            continue
        if off > pos or len(out) >= length:
            break
        piece = data[pos - off:pos - off + length - len(out)]
        out += piece
        pos += len(piece)
    return bytes(out)


def frame_at(stream: Stream, offset: int) -> int:
    """The frame that carried the stream byte at ``offset``."""
    for frame, off, data in stream:
        if off <= offset < off + len(data):
            return frame
    return stream[-1][0] if stream else 0


def mpa_frame(rep: ConnectionReport, d: Direction, stream: Stream,
              request: bool) -> MpaInfo | None:
    """The MPA request (``request``) or reply at the start of ``stream``, with findings."""
    if not stream:
        return None
    frame, _, first = stream[0]
    what = "request" if request else "reply"
    key = KEY_REQ if request else KEY_REP
    whole = bytes_at(stream, 0, FRAME_SIZE)
    kept = len(whole)
    if d.cut is not None and kept < FRAME_SIZE and key.startswith(whole[:KEY_SIZE]):
        rep.add(frame, "note", f"MPA {what} captured short: {kept} of its bytes are in "
                "the capture (snap length), too few to read its header; not judged",
                rule="cut-capture")
        return None
    if whole[:KEY_SIZE] != key:
        other = KEY_REP if request else KEY_REQ
        if len(whole) < KEY_SIZE and key.startswith(whole):
            rep.add(frame, "error", f"MPA {what} cut short: only {len(whole)} bytes of the "
                    f"{FRAME_SIZE}-byte header (irdma_parse_mpa: -EINVAL, RST)",
                    rule="split-frame")
        elif whole[:KEY_SIZE] == other:
            rep.add(frame, "error", f"MPA {what} expected, found the "
                    f"{'reply' if request else 'request'} key (irdma_parse_mpa: "
                    "\"Unexpected MPA Key\", RST)", rule="wrong-key")
        elif whole[:4] == b"MPA ":
            rep.add(frame, "error", f"wrong MPA key {whole[:KEY_SIZE]!r} "
                    "(irdma_parse_mpa: -EINVAL, RST)", rule="wrong-key")
        elif request:
            rep.add(frame, "note", "first client payload is not an MPA request: not iWARP")
        else:
            rep.add(frame, "error", "server's first payload is not an MPA reply "
                    f"({first[:16].hex()})", rule="wrong-key")
        return None
    if len(whole) < FRAME_SIZE:
        rep.add(frame, "error", f"MPA {what} header incomplete ({len(whole)} bytes)",
                rule="split-frame")
        return None
    flags, rev, pd_length = struct.unpack_from("!BBH", whole, KEY_SIZE)
    info = MpaInfo(frame=frame, request=request, rev=rev, flags=flags, pd_length=pd_length)
    if rev == erdma_mpa.REVISION_EXT_1:
        return _erdma_frame(rep, stream, info, what)
    if len(first) < FRAME_SIZE + min(pd_length, MAX_PRIV_DATA_LEN) and frame not in d.short:
        # Whether that matters is the receiving stack's business (mpa_emu.judge.rules):
        # irdma_parse_mpa has no reassembly, siw and cxgb4 reassemble.
        rep.add(frame, "note", f"MPA {what} split over segments: {len(first)} bytes here, "
                f"{FRAME_SIZE + pd_length} needed")
    if len(first) > FRAME_SIZE + pd_length and not request:
        rep.add(frame, "warning", f"{len(first) - FRAME_SIZE - pd_length} bytes follow the "
                "MPA reply in the same segment (Wireshark does not dissect an FPDU there)")
    if pd_length > MAX_PRIV_DATA_LEN:
        rep.add(frame, "error", f"PD_Length {pd_length} > 512 (RFC 5044 section 7.1)",
                rule="pd-over-limit")
    if rev not in (1, 2):
        rep.add(frame, "error", f"unknown MPA revision {rev} (RFC 5044 section 7.1 defines "
                "rev 1, RFC 6581 rev 2)", rule="revision")
    if flags & FLAG_RESERVED:
        rep.add(frame, "warning", f"reserved flag bits 0x{flags & FLAG_RESERVED:x} set")
    if request and flags & FLAG_REJECT:
        rep.add(frame, "note", "R flag set in a request (irdma logs and ignores it)")
    if flags & FLAG_MARKERS:
        rep.add(frame, "note", "M flag set: markers requested (RFC 5044 section 7.1)")
    body = bytes_at(stream, FRAME_SIZE, min(pd_length, MAX_PRIV_DATA_LEN))
    if len(body) < min(pd_length, MAX_PRIV_DATA_LEN):
        if d.cut is not None:
            rep.add(frame, "note", f"PD_Length {pd_length}: {len(body)} bytes of private "
                    "data in the capture, which was cut short there (snap length)")
        else:
            rep.add(frame, "error", f"PD_Length {pd_length} but only {len(body)} bytes of "
                    "private data in the capture", rule="split-frame")
    if rev == 2 and not flags & FLAG_ENHANCED:
        rep.add(frame, "warning", "rev 2 without the enhanced flag 0x10 (RFC 6581 section "
                "5): irdma_parse_mpa reads the first 4 private data bytes as the RFC 6581 "
                "block anyway, siw and cxgb4 do not")
    if flags & FLAG_ENHANCED and rev != 2:
        rep.add(frame, "warning", f"enhanced flag 0x10 with rev {rev}")
    if rev == 2 and flags & FLAG_ENHANCED:
        if len(body) < RTR_MSG_SIZE:
            if d.cut is None:
                rep.add(frame, "error", "enhanced flag set but fewer than 4 bytes of "
                        "private data", rule="revision")
            info.private_data = body
            return info
        block = RtrBlock.from_bytes(body)
        info.ird, info.ord = block.ird, block.ord
        info.p2p, info.zero_len_send = block.peer_to_peer, block.zero_len_send
        info.write_rtr, info.read_rtr = block.write0, block.read0
        body = body[RTR_MSG_SIZE:]
    info.private_data = body
    info.legacy = decode_legacy(body)
    return info


def _erdma_frame(rep: ConnectionReport, stream: Stream, info: MpaInfo,
                 what: str) -> MpaInfo:
    """An MPA frame of erdma's dialect (erdma_cm.h: MPA_REVISION_EXT_1, then ``struct
    erdma_mpa_ext`` that PD_Length does not count): the cookie and the CC read from the
    extension, the private data after it (erdma_send_mpareqrep's layout)."""
    frame = info.frame
    ext = bytes_at(stream, FRAME_SIZE, erdma_mpa.EXT_SIZE)
    if len(ext) < erdma_mpa.EXT_SIZE:
        rep.add(frame, "error", f"MPA {what} of revision 129 without erdma's 8-byte "
                f"extension ({len(ext)} bytes follow the header)", rule="revision")
        return info
    info.erdma_cookie, bits = struct.unpack("!II", ext)
    info.erdma_cc = bits & erdma_mpa.EXT_FLAG_CC
    rep.add(frame, "note", f"MPA {what} in erdma's dialect (revision 129, "
            "MPA_REVISION_EXT_1 of erdma_cm.h, with an 8-byte extension PD_Length does "
            "not count): only erdma takes it, RFC 5044/6581 stacks refuse it")
    if info.pd_length > erdma_mpa.MAX_PRIVDATA:
        rep.add(frame, "error", f"PD_Length {info.pd_length} > {erdma_mpa.MAX_PRIVDATA} "
                "(erdma_recv_mpa_rr: -EPROTO)", rule="pd-over-limit")
    body = bytes_at(stream, erdma_mpa.HDR_LEN, info.pd_length)
    if len(body) < info.pd_length:
        rep.add(frame, "error", f"PD_Length {info.pd_length} but only {len(body)} bytes of "
                "private data in the capture", rule="split-frame")
    info.private_data = body
    return info


def negotiation(rep: ConnectionReport) -> None:
    """What the request and reply negotiated (RFC 5044 section 7.1, RFC 6581 section 5)."""
    req, reply = rep.request, rep.reply
    if req is None:
        return
    if reply is None:
        rep.negotiated.append("no MPA reply in the capture")
        return
    if reply.rev > req.rev:
        rep.add(reply.frame, "warning", f"reply rev {reply.rev} above the request's rev "
                f"{req.rev} (RFC 6581 section 5: the responder answers at the initiator's "
                "revision or below)")
    # RFC 5044 section 7.1: FPDUs carry a CRC when either side set C.
    crc = bool((req.flags | reply.flags) & FLAG_CRC)
    rep.crc = crc
    markers = bool((req.flags | reply.flags) & FLAG_MARKERS)
    rep.negotiated.append(f"MPA rev {reply.rev}, CRC {'on' if crc else 'off'}, markers "
                          f"{'on' if markers else 'off'}")
    if reply.reject:
        rep.negotiated.append("rejected by the responder")
    if not (req.has_block and reply.has_block):
        if req.has_block != reply.has_block and not reply.reject:
            rep.add(reply.frame, "warning", "only one side sent the RFC 6581 block")
        return
    assert req.ird is not None and req.ord is not None
    assert reply.ird is not None and reply.ord is not None
    rep.negotiated.append(f"initiator IRD {ird_ord_text(req.ird)} ORD {ird_ord_text(req.ord)}; "
                          f"responder IRD {ird_ord_text(reply.ird)} ORD {ird_ord_text(reply.ord)}")
    chosen = reply.rtr_names()
    offered = req.rtr_names()
    rep.negotiated.append(f"RTR offered: {' '.join(offered) or 'none'}; chosen: "
                          f"{' '.join(chosen) or 'none'}")
    if not reply.reject:
        if len(chosen) != 1 and reply.p2p:
            # An RFC violation on the wire, but whether it breaks the connection is the
            # initiator's stack's rule (its refusals: qed's fw_check_reply and cxgb4's
            # process_mpa_reply take a reply holding their own RTR type among others).
            rep.add(reply.frame, "warning", f"reply chooses {len(chosen)} RTR types, RFC "
                    "6581 section 5 requires exactly one", rule="rtr-mismatch")
        elif chosen and chosen[0] not in offered:
            rep.add(reply.frame, "error", f"reply chooses {chosen[0]} RTR, not offered",
                    rule="rtr-mismatch")
        no_value = IRD_ORD_MASK in (req.ird, req.ord, reply.ird, reply.ord)
        if not no_value and reply.ord > req.ird:
            rep.add(reply.frame, "warning", f"responder ORD {reply.ord} above initiator IRD "
                    f"{req.ird} (RFC 6581 section 5)")
        if not no_value and req.ord > reply.ird:
            rep.add(reply.frame, "warning", f"initiator ORD {req.ord} above responder IRD "
                    f"{reply.ird}")


def ird_ord_text(v: int) -> str:
    """An IRD or ORD value; 0x3FFF means none (RFC 6581 section 5)."""
    return "none (0x3FFF)" if v == IRD_ORD_MASK else str(v)


