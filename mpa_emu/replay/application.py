"""What the recorded application must have done in the data phase, read from the
recording of one connection: the memory it registered, the receive buffers it posted and
the RDMA Read Requests it issued. The scripted application does the same, so that the
emulated stack meets the peer's traffic as the recorded host met it.

The rules, each from what the receiving stack checks:

- Receive buffers (siw_proc_send: siw_rqe_get takes one per new Send; siw_send_check_ntoh
  fails a segment that does not fit, ``wqe->bytes < wqe->processed + fpdu_part_rem``):
  one per Send message (MSN) the peer sent, each as large as the largest Send the
  recorded host took without a Terminate. Where the recorded host terminated a Send for
  its buffer (DDP layer, untagged buffer error, code 0x02 "no buffer available" or 0x05
  "message too long"), the Terminate quotes the segment's MSN and MO: at MO 0 no buffer
  is posted for that MSN (siw sends 0x02 for an empty queue and for a buffer shorter
  than the first segment alike); past MO 0 that Send's buffer holds MO bytes or more
  (the earlier segments fit) and fewer than MO plus the quoted segment's length, so
  the buffer of the largest earlier Send (at least MO) overflows there again.
- Memory regions (siw_proc_write, siw_init_rresp/siw_check_sgl_tx, siw_proc_rresp/
  siw_check_sge, siw_invalidate_stag): every STag the peer's Writes target, the source
  STag of every Read Request the recorded host answered, the sink STag of every Read
  Request the recorded host sent, and the STag a Send with Invalidate names, each
  covering the bytes the recording reaches. An STag the recorded host's Terminate
  quotes, and the source STag of a Read Request it never answered, stay unregistered:
  the recording does not show them valid.
- Read Requests: each non-zero-length Read Request the recorded host sent is issued again
  with the same sink STag/TO, length and source STag/TO, at the recorded frame (a
  zero-length one is the RTR or a keep-alive: the stack sends its own RTR).

What the recording cannot show is said in :attr:`Plan.buffer_notes` and
:attr:`Plan.assumptions`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from mpa_emu.replay.recording import Frame
from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import fpdu_pad_len, mpa_kind
from mpa_emu.wire.seq import MASK as MASK32
from mpa_emu.wire.seq import at_or_after
from mpa_emu.wire.terminate_layouts import read_terminate

_SENDS = (ddp.Opcode.SEND, ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE,
          ddp.Opcode.SEND_SE_INVALIDATE)
_INVALIDATES = (ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE_INVALIDATE)
DDP_LAYER, UNTAGGED_BUFFER, TAGGED_BUFFER = 1, 2, 1
NO_BUFFER, TOO_LONG = 0x02, 0x05
"""RFC 5041 section 7.2: "Invalid MSN - no buffer available", "DDP Message too long for
available buffer"."""
RDMAP_LAYER, REMOTE_PROTECTION = 0, 1
MAX_BUFFERS = 1 << 16


@dataclass(frozen=True, slots=True)
class Segment:
    """One DDP segment of the stream: the frame its FPDU ended in, who sent it, the
    ULPDU."""

    frame: int
    time_ns: int
    outbound: bool
    ulpdu: bytes

    @property
    def tagged(self) -> bool:
        """The T bit (RFC 5041 section 4.2)."""
        return bool(self.ulpdu[0] & ddp.DDP_FLAG_TAGGED)

    @property
    def last(self) -> bool:
        """The L bit."""
        return bool(self.ulpdu[0] & ddp.DDP_FLAG_LAST)

    @property
    def opcode(self) -> int:
        """The RDMAP opcode (RFC 5040 section 4.3)."""
        return self.ulpdu[1] & ddp.RDMAP_OPCODE_MASK


@dataclass(frozen=True, slots=True)
class Region:
    """A memory region the application registers: ``data`` fills it from ``va`` on."""

    stag: int
    va: int
    length: int
    remote_write: bool
    remote_read: bool
    why: str
    data: bytes = b""

    def words(self) -> str:
        """``STag 0x77, 6000 bytes at 0x2000 (remote read): the peer's ...``."""
        rights = "/".join(n for on, n in ((self.remote_write, "remote write"),
                                           (self.remote_read, "remote read")) if on)
        return (f"STag {self.stag:#x}, {self.length} bytes at {self.va:#x} "
                f"({rights or 'local access only'}): {self.why}")


@dataclass(frozen=True, slots=True)
class ReadIssue:
    """A Read Request the recorded host sent, to be issued again at ``frame``."""

    frame: int
    time_ns: int
    sink_stag: int
    sink_to: int
    length: int
    src_stag: int
    src_to: int

    def words(self) -> str:
        """``RDMA Read of 12000 bytes: sink STag 0x5a5a TO 0x10000, source ...``."""
        return (f"RDMA Read Request of {self.length} bytes as recorded at frame {self.frame}: "
                f"sink STag {self.sink_stag:#x} TO {self.sink_to:#x}, source STag "
                f"{self.src_stag:#x} TO {self.src_to:#x}")


@dataclass(slots=True)
class Plan:
    """The recorded application's data phase on one connection (module docstring)."""

    buffers: list[int] = field(default_factory=list)
    """Receive buffer sizes, in the order they are posted."""
    regions: list[Region] = field(default_factory=list)
    reads: list[ReadIssue] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    """Of the regions and the Reads."""
    buffer_notes: list[str] = field(default_factory=list)
    """Of the receive buffers."""
    complete: bool = True
    """False when the recorded stream has a hole: the buffers are an upper bound."""


def buffer_words(buffers: Sequence[int]) -> str:
    """``3 receive buffer(s) of 1364 bytes`` (each size listed when they differ), or
    ``no receive buffer``."""
    if not buffers:
        return "no receive buffer"
    if len(set(buffers)) == 1:
        return f"{len(buffers)} receive buffer(s) of {buffers[0]} bytes"
    return f"{len(buffers)} receive buffer(s) of {', '.join(map(str, buffers))} bytes"


def stream_segments(frames: Sequence[Frame], outbound: bool) -> tuple[list[Segment], bool]:
    """The DDP segments one direction carried after its MPA frames, reassembled by
    sequence number (resent bytes skipped); ``False`` second when a hole in the capture
    or an unreadable FPDU ended the stream early."""
    out: list[Segment] = []
    nxt: int | None = None
    buf = bytearray()
    whole = True
    for f in frames:
        seg = f.seg
        if f.outbound != outbound or not seg.payload:
            continue
        payload = seg.payload
        if mpa_kind(payload) != "data" and not out and not buf:
            nxt = (seg.seq + len(payload)) & MASK32
            continue
        if nxt is not None and seg.seq != nxt:
            if at_or_after(nxt, (seg.seq + len(payload)) & MASK32):
                continue
            if not at_or_after(nxt, seg.seq):
                whole = False
                break
            payload = payload[(nxt - seg.seq) & MASK32:]
        buf += payload
        nxt = (seg.seq + len(seg.payload)) & MASK32
        while len(buf) >= 2:
            (ulen,) = struct.unpack_from("!H", buf)
            total = 2 + ulen + fpdu_pad_len(ulen) + 4
            if len(buf) < total:
                break
            if ulen >= 2:
                out.append(Segment(f.number, f.time_ns, outbound, bytes(buf[2:2 + ulen])))
            del buf[:total]
    return out, whole


@dataclass(frozen=True, slots=True)
class _Quoted:
    """What the recorded host's Terminate says and the DDP header it quotes."""

    frame: int
    layer: int
    etype: int
    code: int
    header: bytes
    """The quoted DDP header (after the DDP Segment Length), or b""."""
    segment_length: int


def _terminates(segments: list[Segment]) -> list[_Quoted]:
    out = []
    for s in segments:
        if s.tagged or s.opcode != ddp.Opcode.TERMINATE or len(s.ulpdu) < 22:
            continue
        body = s.ulpdu[ddp.UNTAGGED_HEADER_LEN:]
        try:
            t = read_terminate(body).reading
        except ValueError:
            continue
        header, seg_len = b"", 0
        if (t.m or t.d) and len(body) >= 6:
            seg_len = struct.unpack_from("!H", body, 4)[0]
            header = body[6:] if t.d else b""
        out.append(_Quoted(s.frame, t.layer, t.etype, t.error_code, header, seg_len))
    return out


def _untagged_fields(header: bytes) -> tuple[int, int, int] | None:
    """(QN, MSN, MO) of a quoted untagged DDP header."""
    if len(header) < ddp.UNTAGGED_HEADER_LEN or header[0] & ddp.DDP_FLAG_TAGGED:
        return None
    _inv, qn, msn, mo = struct.unpack_from("!IIII", header, 2)
    return qn, msn, mo


def _tagged_stag(header: bytes) -> int | None:
    if len(header) < ddp.TAGGED_HEADER_LEN or not header[0] & ddp.DDP_FLAG_TAGGED:
        return None
    return int(struct.unpack_from("!I", header, 2)[0])


def plan(frames: Sequence[Frame]) -> Plan:
    """The recorded application's data phase on the connection of ``frames`` (one
    flow of the recording, in capture order)."""
    mine, mine_whole = stream_segments(frames, True)
    theirs, theirs_whole = stream_segments(frames, False)
    out = Plan(complete=mine_whole and theirs_whole)
    terms = _terminates(mine)
    _receive_buffers(out, theirs, terms)
    _regions(out, mine, theirs, terms)
    out.reads = [r for r in _host_reads(mine) if r.length]
    return out


def _receive_buffers(out: Plan, theirs: list[Segment], terms: list[_Quoted]) -> None:
    """One buffer per Send message of the peer, sized by the largest the recorded host
    took; the overflow a recorded Terminate names reproduced (module docstring)."""
    ends: dict[int, int] = {}
    first: dict[int, int] = {}
    for s in theirs:
        if s.tagged or s.opcode not in _SENDS or len(s.ulpdu) < ddp.UNTAGGED_HEADER_LEN:
            continue
        _inv, qn, msn, mo = struct.unpack_from("!IIII", s.ulpdu, 2)
        if qn != ddp.QN_SEND:
            continue
        end = mo + len(s.ulpdu) - ddp.UNTAGGED_HEADER_LEN
        ends[msn] = max(ends.get(msn, 0), end)
        first.setdefault(msn, s.frame)
    overflow = next(((t, f) for t in terms
                     if (t.layer, t.etype) == (DDP_LAYER, UNTAGGED_BUFFER)
                     and t.code in (NO_BUFFER, TOO_LONG)
                     and (f := _untagged_fields(t.header)) is not None
                     and f[0] == ddp.QN_SEND), None)
    if overflow is None:
        taken = sorted(ends)
        size = max((ends[m] for m in taken), default=0)
        out.buffers = [size] * min(len(taken), MAX_BUFFERS)
        if taken:
            out.buffer_notes.append(
                f"the application posted {len(taken)} receive buffer(s) of {size} bytes: "
                f"one per Send the peer sent, each as large as the largest ({size} bytes, "
                f"MSN {max(taken, key=lambda m: ends[m])}), the smallest size that takes "
                "every recorded Send without a Terminate (the recording does not show the "
                "buffers' real size)")
        return
    term, (_qn, msn, mo) = overflow
    taken = sorted(m for m in ends if m < msn)
    size = max((ends[m] for m in taken), default=0)
    words = f"the recorded Terminate (frame {term.frame}) quotes MSN {msn} MO {mo}"
    if mo == 0:
        out.buffers = [size] * len(taken)
        posted = (f"{len(taken)} receive buffer(s) of {size} bytes and none for MSN {msn}"
                  if taken else "no receive buffer")
        out.buffer_notes.append(
            f"{words}: the application posted {posted} (siw_rqe_get finds the receive "
            "queue empty; siw sends the same code for a buffer shorter than the first "
            "segment, siw_send_check_ntoh)")
        return
    seg_len = max(term.segment_length, 1)
    room = max(size, mo)
    limits = (f"{words}: the buffer of MSN {msn} held at least {mo} bytes (its earlier "
              f"segments fit) and fewer than {mo + seg_len} (MO + the segment's {seg_len} "
              "bytes: siw_send_check_ntoh, receive space short)")
    if room < mo + seg_len:
        out.buffers = [room] * (len(taken) + 1)
        out.buffer_notes.append(
            f"{limits}; the application posted {len(out.buffers)} receive buffer(s) of "
            f"{room} bytes, one per Send up to MSN {msn}, the smallest size that takes "
            "the earlier Sends and overflows there")
        return
    out.buffers = [size] * len(taken) + [mo]
    out.buffer_notes.append(
        f"{limits}; the Sends taken before it need {size} bytes, so the buffers cannot all "
        f"have been one size: the application posted {len(taken)} receive buffer(s) of "
        f"{size} bytes and one of {mo} bytes for MSN {msn}")


def _host_reads(mine: list[Segment]) -> list[ReadIssue]:
    out = []
    for s in mine:
        if s.tagged or s.opcode != ddp.Opcode.READ_REQUEST \
                or len(s.ulpdu) < ddp.UNTAGGED_HEADER_LEN + ddp.READ_REQUEST_LEN:
            continue
        sink, sink_to, size, src, src_to = struct.unpack_from(
            "!IQIIQ", s.ulpdu, ddp.UNTAGGED_HEADER_LEN)
        out.append(ReadIssue(s.frame, s.time_ns, sink, sink_to, size, src, src_to))
    return out


@dataclass(slots=True)
class _Span:
    lo: int
    hi: int
    write: bool = False
    read: bool = False
    why: list[str] = field(default_factory=list)
    data: dict[int, bytes] = field(default_factory=dict)


def _regions(out: Plan, mine: list[Segment], theirs: list[Segment],
             terms: list[_Quoted]) -> None:
    refused: set[int] = set()
    for t in terms:
        stag = _tagged_stag(t.header)
        if stag is not None:
            refused.add(stag)
        elif t.layer == RDMAP_LAYER and t.etype == REMOTE_PROTECTION \
                and len(t.header) >= ddp.UNTAGGED_HEADER_LEN + ddp.READ_REQUEST_LEN:
            refused.add(struct.unpack_from("!I", t.header, ddp.UNTAGGED_HEADER_LEN + 16)[0])
    spans: dict[int, _Span] = {}

    def reach(stag: int, lo: int, size: int, why: str, *, write: bool = False,
              read: bool = False) -> None:
        span = spans.setdefault(stag, _Span(lo, lo + size))
        span.lo, span.hi = min(span.lo, lo), max(span.hi, lo + size)
        span.write |= write
        span.read |= read
        if why not in span.why:
            span.why.append(why)

    for s in theirs:
        if s.tagged and s.opcode == ddp.Opcode.WRITE and len(s.ulpdu) >= 14:
            stag, to = struct.unpack_from("!IQ", s.ulpdu, 2)
            size = len(s.ulpdu) - ddp.TAGGED_HEADER_LEN
            if size:
                reach(stag, to, size, f"the peer's RDMA Write (frame {s.frame})", write=True)
        elif not s.tagged and s.opcode in _INVALIDATES and len(s.ulpdu) >= 6:
            stag = struct.unpack_from("!I", s.ulpdu, 2)[0]
            reach(stag, 0, 1, f"the peer's Send with Invalidate (frame {s.frame})")
    answers = [s for s in mine if s.tagged and s.opcode == ddp.Opcode.READ_RESPONSE]
    for s in theirs:
        if s.tagged or s.opcode != ddp.Opcode.READ_REQUEST \
                or len(s.ulpdu) < ddp.UNTAGGED_HEADER_LEN + ddp.READ_REQUEST_LEN:
            continue
        sink, sink_to, size, src, src_to = struct.unpack_from(
            "!IQIIQ", s.ulpdu, ddp.UNTAGGED_HEADER_LEN)
        if not size:
            continue
        mine_answer = [a for a in answers if a.frame > s.frame
                       and struct.unpack_from("!I", a.ulpdu, 2)[0] == sink]
        if not mine_answer:
            out.assumptions.append(
                f"the peer's RDMA Read Request (frame {s.frame}, source STag {src:#x} TO "
                f"{src_to:#x}, {size} bytes) has no Read Response in the recording: the "
                "application registered no memory for it (the recording does not show "
                "the STag valid)")
            continue
        reach(src, src_to, size, f"the peer's RDMA Read Request (frame {s.frame}), "
              "answered in the recording", read=True)
        span = spans[src]
        for a in mine_answer:
            to = struct.unpack_from("!Q", a.ulpdu, 6)[0]
            at = src_to + (to - sink_to)
            span.data.setdefault(at, a.ulpdu[ddp.TAGGED_HEADER_LEN:])
    for r in _host_reads(mine):
        if r.length:
            reach(r.sink_stag, r.sink_to, r.length,
                  f"the sink of its own RDMA Read Request (frame {r.frame})")
    for stag, span in sorted(spans.items()):
        if stag in refused:
            out.assumptions.append(
                f"STag {stag:#x}: the recorded host's Terminate quotes it, so the "
                "application registered no memory for it")
            continue
        if stag == 0:
            out.assumptions.append("STag 0 is named in the recording: no region can carry "
                                   "it (siw_reg_user_mr never hands out STag 0)")
            continue
        size = span.hi - span.lo
        data = bytearray(size)
        for at, piece in sorted(span.data.items()):
            off = at - span.lo
            if 0 <= off < size:
                data[off:off + len(piece)] = piece[:size - off]
        out.regions.append(Region(stag, span.lo, size, span.write, span.read,
                                  "; ".join(span.why), bytes(data)))
