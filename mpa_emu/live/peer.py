"""An MPA peer over ordinary kernel sockets: the Linux kernel does TCP, this module only
frames MPA (RFC 5044 section 7, RFC 6581) with :mod:`mpa_emu.wire.mpa`, or erdma's
dialect (revision 129 and the 8-byte ``struct erdma_mpa_ext`` after the header) with
:mod:`mpa_emu.wire.erdma_mpa` when :attr:`PeerOptions.ext` is set.

It is the tool to poke an emulated or a real iWARP node: as initiator it sends an MPA
request and reads the reply; as responder it reads the request and accepts or rejects.
After an accepted exchange it sends or expects the RTR and optional Send FPDUs.

Everything the other side sends is reported, never raised as a traceback: a failed
exchange ends with :class:`PeerReport.error` set (or :class:`PeerError` from the
convenience functions that also open the socket).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.base import FrameExtension
from mpa_emu.wire import ddp, erdma_mpa, mpa

Log = Callable[[str], None]


class PeerError(MpaEmuError):
    """The exchange could not proceed: timeout, reset, refused, malformed frame."""


class PeerClosed(PeerError):
    """The other side closed the stream; ``how`` is "fin" or "reset"."""

    def __init__(self, how: str, waiting_for: str) -> None:
        super().__init__(f"connection {'reset' if how == 'reset' else 'closed (FIN)'} "
                         f"while waiting for {waiting_for}")
        self.how = how


@dataclass(frozen=True, slots=True)
class PeerOptions:
    """What this peer offers and how it answers."""

    rev: int = 2
    ird: int = 16
    ord: int = 16
    private_data: bytes = b""
    reject: bool = False
    p2p: bool = True
    rtr: str = "both"
    """Initiator: RTR types offered ("read", "write", "both", "none"). Responder: the
    preferred one when both are offered ("both" prefers read, as irdma does)."""
    crc: bool = True
    send: bytes | None = None
    """Payload of one Send FPDU sent after the RTR exchange."""
    negotiate: bool = True
    """Responder: lower the advertised ORD to the initiator's IRD (RFC 6581 section 5:
    the responder's ORD must not exceed the initiator's IRD; irdma resets a reply that
    breaks this). ``False`` sends ``ird``/``ord`` exactly as given."""
    answer_read_rtr: bool = True
    """Responder: answer a zero-length Read Request RTR with a zero-length Read Response."""
    v1_rtr: str = "none"
    """Initiator, after an accepting MPA v1 reply: the RTR to send ("read", "write");
    "none" as RFC 5044 (``--stack`` sets it as the stack does: irdma and cxgb4 send one
    under v1 too)."""
    v1_rtr_expected: bool = False
    """Responder, after accepting an MPA v1 request: read an RTR as the first FPDU (as
    irdma_accept waits for it)."""
    ext: FrameExtension | None = None
    """The extension frames of revision ``rev`` carry after the header (erdma's; the
    stack's :attr:`~mpa_emu.stacks.base.PeerFraming.ext`), or None for RFC 5044's layout.
    With it, ``rev`` is the dialect's (:data:`mpa_emu.wire.erdma_mpa.REVISION_EXT_1`)
    and no RFC 6581 block, C or RTR is sent."""
    timeout: float = 5.0
    """Seconds to wait for each expected frame."""
    hold: float = 0.0
    """Seconds to keep reading FPDUs after the exchange before closing."""


@dataclass
class PeerReport:
    """What happened on one connection, in order."""

    role: str
    local: str = ""
    remote: str = ""
    sent: mpa.MpaFrame | None = None
    received: mpa.MpaFrame | None = None
    sent_ext: erdma_mpa.ErdmaFrame | None = None
    """The frame sent, read in erdma's layout, when it carried the extension."""
    received_ext: erdma_mpa.ErdmaFrame | None = None
    """The frame received, read in erdma's layout, when it carried the extension."""
    rtr_sent: str | None = None
    rtr_received: str | None = None
    messages: list[Message] = field(default_factory=list)
    close: str = "open"
    """How the other side ended the stream: "fin", "reset" or "open" (still open)."""
    error: str | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """An MPA exchange completed without the R flag."""
        frame = self.received if self.role == "initiator" else self.sent
        return self.error is None and frame is not None and not frame.reject

    @property
    def rejected(self) -> bool:
        """The reply carried the R flag."""
        frame = self.received if self.role == "initiator" else self.sent
        return frame is not None and frame.reject


    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (bytes as hex)."""
        return {
            "role": self.role, "local": self.local, "remote": self.remote,
            "accepted": self.accepted, "rejected": self.rejected,
            "sent": frame_dict(self.sent, self.sent_ext),
            "received": frame_dict(self.received, self.received_ext),
            "rtr_sent": self.rtr_sent, "rtr_received": self.rtr_received,
            "messages": [{"name": m.name, "opcode": m.opcode, "msn": m.msn,
                          "rtr": m.rtr_kind, "payload": m.payload.hex()}
                         for m in self.messages],
            "close": self.close, "error": self.error,
        }


def frame_dict(frame: mpa.MpaFrame | None, ext: erdma_mpa.ErdmaFrame | None = None
               ) -> dict[str, Any] | None:
    """One MPA frame as JSON-ready values (``ext``: its erdma extension, if it has one)."""
    if frame is None:
        return None
    block = frame.rtr
    extra: dict[str, Any] = {}
    if ext is not None:
        extra["ext"] = {"cookie": ext.cookie, "bits": ext.ext_bits, "cc": ext.cc,
                        "cc_name": ext.cc_name}
    return extra | {
        "request": frame.request, "rev": frame.rev, "flags": frame.flags,
        "reject": frame.reject, "pd_length": frame.wire_pd_length,
        "rtr": None if block is None else {
            "ird": block.ird, "ord": block.ord, "p2p": block.peer_to_peer,
            "send0": block.zero_len_send, "write0": block.write0, "read0": block.read0},
        "private_data": frame.private_data.hex(),
        "private_data_text": _printable(frame.private_data),
    }


@dataclass(frozen=True, slots=True)
class Message:
    """One DDP/RDMAP message received after the MPA exchange (RFC 5040, RFC 5041)."""

    opcode: int
    tagged: bool
    msn: int | None
    payload: bytes
    read_size: int | None = None
    read_sink: tuple[int, int] = (ddp.RTR_READ_SINK_STAG, 0)
    """Sink STag and sink TO of a Read Request (where its Read Response goes)."""

    @classmethod
    def parse(cls, ulpdu: bytes) -> Message:
        """Decode a ULPDU with :func:`mpa_emu.wire.ddp.parse_segment`."""
        segment = ddp.parse_segment(ulpdu)
        header = segment.header
        msn = header.msn if isinstance(header, ddp.UntaggedHeader) else None
        request = segment.read_request
        if request is None:
            return cls(segment.opcode, segment.tagged, msn, segment.payload)
        return cls(segment.opcode, segment.tagged, msn, segment.payload, request.size,
                   (request.sink_stag, request.sink_to))

    @property
    def name(self) -> str:
        """The RDMAP opcode as tshark names it."""
        try:
            return ddp.OPCODE_NAMES[ddp.Opcode(self.opcode)]
        except ValueError:
            return f"opcode {self.opcode}"

    @property
    def rtr_kind(self) -> str | None:
        """"read" or "write" for a zero-length RTR message (RFC 6581 section 5)."""
        if self.opcode == ddp.Opcode.READ_REQUEST and self.read_size == 0:
            return "read"
        if self.opcode == ddp.Opcode.WRITE and self.tagged and not self.payload:
            return "write"
        return None

    def describe(self) -> str:
        """One line for humans."""
        if self.rtr_kind is not None:
            return f"{self.name} (zero-length, RTR {self.rtr_kind})"
        if self.opcode == ddp.Opcode.SEND:
            return f"{self.name} msn={self.msn} len={len(self.payload)}"
        return self.name


# ---- frames -------------------------------------------------------------------------

def _offer(rtr: str) -> tuple[bool, bool]:
    """(write0, read0) offered for an ``--rtr`` choice."""
    table = {"both": (True, True), "read": (False, True), "write": (True, False),
             "none": (False, False)}
    if rtr not in table:
        raise ValueError(f"RTR choice must be one of {', '.join(table)}, got {rtr!r}")
    return table[rtr]


def build_request(options: PeerOptions) -> mpa.MpaFrame:
    """The MPA request this peer sends as initiator (in erdma's dialect, the header
    :func:`build_ext_request` extends)."""
    if options.ext is not None:
        return ext_frame(build_ext_request(options))
    flags = mpa.FLAG_CRC if options.crc else 0
    block = None
    if options.rev == 2:
        flags |= mpa.FLAG_ENHANCED
        write0, read0 = _offer(options.rtr)
        block = mpa.RtrBlock(ird=options.ird, ord=options.ord, peer_to_peer=options.p2p,
                             write0=write0, read0=read0)
    return mpa.MpaFrame(request=True, rev=options.rev, flags=flags, rtr=block,
                        private_data=options.private_data)


def build_ext_request(options: PeerOptions) -> erdma_mpa.ErdmaFrame:
    """erdma_newconn_connected's request: ``params.bits`` 0 and then the revision
    (MPA_REVISION_EXT_1: no M, C, R or any flag), the request key, the extension's
    cookie and bits (``options.ext``), the private data."""
    ext = options.ext
    assert ext is not None
    return erdma_mpa.ErdmaFrame(mpa.KEY_REQ, 0, erdma_mpa.REVISION_EXT_1, ext.cookie,
                                ext.bits, options.private_data)


def build_ext_reply(request: erdma_mpa.ErdmaFrame, options: PeerOptions
                    ) -> erdma_mpa.ErdmaFrame:
    """The answer erdma_cm.c writes to ``request``: the request's header with the reply
    key (erdma_proc_mpareq's memcpy of MPA_KEY_REP). A request with M or C gets
    erdma_proc_mpareq's reject (M and C cleared, R set, no private data); ``reject``
    erdma_reject's (R added, the private data); both send the request's own extension
    back (``ext_data`` as erdma_recv_mpa_rr read it, when
    :attr:`FrameExtension.reject_echoes_request`). An accept is erdma_accept's:
    ``ext_data.bits`` cleared then the CC, the cookie, the private data."""
    ext = options.ext
    assert ext is not None
    flags = request.flags
    if flags & (mpa.FLAG_MARKERS | mpa.FLAG_CRC):  # "does not support marker and crc"
        flags = (flags & ~(mpa.FLAG_MARKERS | mpa.FLAG_CRC)) | mpa.FLAG_REJECT
        private = b""
    elif options.reject:
        flags |= mpa.FLAG_REJECT
        private = options.private_data
    else:
        return erdma_mpa.ErdmaFrame(mpa.KEY_REP, flags, request.rev, ext.cookie, ext.bits,
                                    options.private_data)
    cookie, bits = ((request.cookie, request.ext_bits) if ext.reject_echoes_request
                    else (ext.cookie, ext.bits))
    return erdma_mpa.ErdmaFrame(mpa.KEY_REP, flags, request.rev, cookie, bits, private)


def ext_frame(frame: erdma_mpa.ErdmaFrame) -> mpa.MpaFrame:
    """The header fields of an erdma frame as an :class:`~mpa_emu.wire.mpa.MpaFrame`
    (no RFC 6581 block; the private data after the extension)."""
    return mpa.MpaFrame(request=frame.request, rev=frame.rev, flags=frame.flags, rtr=None,
                        private_data=frame.private_data)


def choose_rtr(offered: mpa.RtrBlock, preference: str) -> str | None:
    """The single RTR type the responder picks from what the request offers
    (RFC 6581 section 5: exactly one of B/C/D in the reply)."""
    if preference == "write" and offered.write0:
        return "write"
    if offered.read0:
        return "read"
    if offered.write0:
        return "write"
    return None


def rtr_to_send(reply: mpa.MpaFrame, v1_rtr: str = "none") -> str | None:
    """The RTR an initiator sends after an accepting v2 reply: the one type the reply
    chose (RFC 6581 section 5). A reply choosing nothing gets none; a v1 reply gets
    ``v1_rtr`` (none by RFC 5044)."""
    if reply.rev == 1:
        return v1_rtr if v1_rtr in ("read", "write") else None
    if reply.rev != 2 or reply.rtr is None:
        return None
    if reply.rtr.read0:
        return "read"
    if reply.rtr.write0:
        return "write"
    return None


def build_reply(request: mpa.MpaFrame, options: PeerOptions) -> mpa.MpaFrame:
    """The reply to ``request``: accept, or reject when ``options.reject``. The revision
    is the lower of the request's and ours (RFC 6581 section 5)."""
    rev = min(request.rev, options.rev) if request.rev in (1, 2) else options.rev
    flags = (mpa.FLAG_CRC if options.crc else 0) | (mpa.FLAG_REJECT if options.reject else 0)
    block = None
    if rev == 2:
        flags |= mpa.FLAG_ENHANCED
        chosen = choose_rtr(request.rtr, options.rtr) if request.rtr is not None else "read"
        ord_ = options.ord
        if options.negotiate and request.rtr is not None \
                and request.rtr.ird != mpa.IRD_ORD_MASK:
            ord_ = min(ord_, request.rtr.ird)
        block = mpa.RtrBlock(ird=options.ird, ord=ord_, peer_to_peer=options.p2p,
                             write0=chosen == "write", read0=chosen == "read")
    return mpa.MpaFrame(request=False, rev=rev, flags=flags, rtr=block,
                        private_data=options.private_data)


def _printable(data: bytes) -> str:
    return "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in data)


def _flag_names(flags: int) -> str:
    names = [(mpa.FLAG_MARKERS, "M"), (mpa.FLAG_CRC, "C"), (mpa.FLAG_REJECT, "R"),
             (mpa.FLAG_ENHANCED, "S")]
    text = " ".join(name for bit, name in names if flags & bit)
    return text or "none"


def describe_frame(direction: str, frame: mpa.MpaFrame,
                   ext: erdma_mpa.ErdmaFrame | None = None) -> list[str]:
    """Human lines for one MPA frame: fields, RFC 6581 block or erdma's extension,
    private data hex/text."""
    kind = "request" if frame.request else ("reject" if frame.reject else "reply")
    lines = [f"{direction} MPA {kind}: rev {frame.rev}, flags 0x{frame.flags:02x} "
             f"({_flag_names(frame.flags)}), PD_Length {frame.wire_pd_length}"]
    if frame.rtr is not None:
        block = frame.rtr
        bits = [name for on, name in ((block.peer_to_peer, "P2P"),
                                      (block.zero_len_send, "send0"),
                                      (block.write0, "write0"), (block.read0, "read0")) if on]
        lines.append(f"  RFC 6581: IRD {block.ird}, ORD {block.ord}, "
                     f"{' '.join(bits) or 'no bits'}")
    if ext is not None:
        lines.append(f"  {erdma_mpa.ext_text(ext)} (bits 0x{ext.ext_bits:08x})")
    data = frame.private_data
    lines.append(f"  private data ({len(data)} bytes): {data.hex() or '-'}"
                 + (f" \"{_printable(data)}\"" if data else ""))
    return lines


# ---- the stream ---------------------------------------------------------------------

class MpaStream:
    """MPA framing on a connected stream socket, with a timeout on every read."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.timeout = timeout
        self.crc = True
        """CRC in use: set when either frame of the exchange has C (RFC 5044 section
        7.1); when off, the CRC field is sent as zero and not checked."""

    def read_exact(self, count: int, waiting_for: str) -> bytes:
        """Read exactly ``count`` bytes or raise :class:`PeerError`/:class:`PeerClosed`."""
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        got = 0
        while got < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerError(f"timed out after {self.timeout:g} s waiting for {waiting_for}")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(count - got)
            except TimeoutError:
                continue
            except ConnectionResetError:
                raise PeerClosed("reset", waiting_for) from None
            if not chunk:
                raise PeerClosed("fin", waiting_for)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def read_frame(self, expect_request: bool) -> mpa.MpaFrame:
        """Read one MPA request (``expect_request``) or reply, header then private data."""
        return self.read_any_frame(expect_request)[0]

    def read_any_frame(self, expect_request: bool
                       ) -> tuple[mpa.MpaFrame, erdma_mpa.ErdmaFrame | None]:
        """Read one MPA request or reply in either layout: RFC 5044's, or erdma's
        (revision 129: the 8 bytes of ``struct erdma_mpa_ext`` after the header, then
        PD_Length bytes of private data, as erdma_recv_mpa_rr reads it), with the erdma
        frame when it was one."""
        what = "the MPA request" if expect_request else "the MPA reply"
        head_bytes = self.read_exact(mpa.FRAME_SIZE, what)
        head = mpa.parse_header(head_bytes)
        wanted = mpa.KEY_REQ if expect_request else mpa.KEY_REP
        if head.key != wanted:
            raise PeerError(f"expected {what}, got key {head.key!r} "
                            f"(header {head_bytes.hex()})")
        if head.pd_length > mpa.MAX_PRIV_DATA_LEN:
            # RFC 5044 section 7.1: PD_Length above 512 must close the connection.
            raise PeerError(f"{what} has PD_Length {head.pd_length} > "
                            f"{mpa.MAX_PRIV_DATA_LEN}")
        if head.rev == erdma_mpa.REVISION_EXT_1:
            head_bytes += self.read_exact(erdma_mpa.EXT_SIZE,
                                          f"the {erdma_mpa.EXT_SIZE}-byte erdma extension")
        body = self.read_exact(head.pd_length, f"{head.pd_length} bytes of private data")
        return erdma_mpa.decode_frame(head_bytes + body)

    def send_ext_frame(self, frame: erdma_mpa.ErdmaFrame) -> None:
        """Send one erdma frame in a single write (erdma_send_mpareqrep's one
        kernel_sendmsg of header, extension and private data)."""
        self.sock.sendall(frame.to_bytes())

    def send_frame(self, frame: mpa.MpaFrame) -> None:
        """Send one MPA frame in a single write."""
        self.sock.sendall(frame.to_bytes())

    def send_ulpdu(self, ulpdu: bytes) -> None:
        """Frame a DDP segment as an FPDU (CRC32c little-endian, or 0 when CRC is not in
        use) and send it."""
        self.sock.sendall(mpa.frame_fpdu(ulpdu, None if self.crc else 0))

    def read_fpdu(self) -> mpa.Fpdu:
        """Read one FPDU (no markers)."""
        head = self.read_exact(2, "an FPDU")
        ulen = int.from_bytes(head, "big")
        rest = self.read_exact(ulen + mpa.fpdu_pad_len(ulen) + 4, f"an FPDU of {ulen} bytes")
        return mpa.unframe_fpdu(head + rest)

    def wait_close(self, seconds: float) -> str:
        """Read and discard until the other side closes: "fin", "reset", or "open" when
        ``seconds`` pass first."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "open"
            self.sock.settimeout(left)
            try:
                if not self.sock.recv(4096):
                    return "fin"
            except TimeoutError:
                return "open"
            except ConnectionResetError:
                return "reset"


# ---- the exchanges ------------------------------------------------------------------

class _Run:
    def __init__(self, role: str, sock: socket.socket, options: PeerOptions,
                 log: Log | None) -> None:
        self.options = options
        self.stream = MpaStream(sock, options.timeout)
        self.report = PeerReport(role=role, local=_name(sock.getsockname),
                                 remote=_name(sock.getpeername))
        self._log = log
        self.msn = 1

    def say(self, line: str) -> None:
        self.report.lines.append(line)
        if self._log is not None:
            self._log(line)

    def frame(self, direction: str, frame: mpa.MpaFrame,
              ext: erdma_mpa.ErdmaFrame | None = None) -> None:
        for line in describe_frame(direction, frame, ext):
            self.say(line)

    def fpdu(self) -> Message:
        unit = self.stream.read_fpdu()
        message = Message.parse(unit.ulpdu)
        self.report.messages.append(message)
        if not self.stream.crc:
            crc = "CRC not in use"
        else:
            crc = "good CRC" if unit.crc_ok else f"BAD CRC 0x{unit.crc:08x}"
        self.say(f"received FPDU: {message.describe()}, {crc}")
        if message.opcode == ddp.Opcode.SEND and message.payload:
            self.say(f"  payload: {message.payload.hex()} \"{_printable(message.payload)}\"")
        return message

    def send_message(self) -> None:
        if self.options.send is not None:
            self.stream.send_ulpdu(ddp.send(self.options.send, self.msn))
            self.say(f"sent FPDU: Send msn={self.msn} len={len(self.options.send)}")
            self.msn += 1

    def hold(self) -> None:
        deadline = time.monotonic() + self.options.hold
        while time.monotonic() < deadline:
            self.stream.timeout = max(0.01, deadline - time.monotonic())
            try:
                self.fpdu()
            except PeerClosed as closed:
                self.finish(closed.how)
                return
            except PeerError:
                return

    def finish(self, how: str) -> None:
        self.report.close = how
        self.say({"fin": "received FIN", "reset": "connection reset (ECONNRESET)",
                  "open": "connection still open"}[how])

    def fail(self, exc: Exception) -> PeerReport:
        if isinstance(exc, PeerClosed):
            self.report.close = exc.how
        elif isinstance(exc, ConnectionResetError | BrokenPipeError):
            self.report.close = "reset"
        self.report.error = str(exc)
        self.say(f"error: {exc}")
        return self.report


def _name(getter: Callable[[], tuple[object, ...] | str]) -> str:
    try:
        return endpoint_text(getter())
    except OSError:  # already reset by the other side
        return "?"


def endpoint_text(name: tuple[object, ...] | str) -> str:
    """``ip:port`` (``[ip]:port`` for IPv6) from a socket address."""
    if isinstance(name, tuple) and len(name) >= 2:
        host = str(name[0])
        host = host.removeprefix("::ffff:") if "." in host else host
        return f"[{host}]:{name[1]}" if ":" in host else f"{host}:{name[1]}"
    return str(name)


def run_initiator(sock: socket.socket, options: PeerOptions, log: Log | None = None
                  ) -> PeerReport:
    """Send the MPA request on a connected socket, read the reply, then RTR and Send."""
    run = _Run("initiator", sock, options, log)
    try:
        request = build_request(options)
        if options.ext is not None:
            sent = build_ext_request(options)
            run.stream.send_ext_frame(sent)
            run.report.sent_ext = sent
        else:
            run.stream.send_frame(request)
        run.report.sent = request
        run.frame("sent", request, run.report.sent_ext)
        reply, reply_ext = run.stream.read_any_frame(expect_request=False)
        run.report.received = reply
        run.report.received_ext = reply_ext
        run.frame("received", reply, reply_ext)
        _check_dialect(options, reply_ext, "reply")
        if reply.reject:
            run.finish(run.stream.wait_close(options.timeout))
            return run.report
        run.stream.crc = bool((request.flags | reply.flags) & mpa.FLAG_CRC)
        kind = rtr_to_send(reply, options.v1_rtr)
        if kind is not None:
            run.stream.send_ulpdu(ddp.read_rtr() if kind == "read" else ddp.write_rtr())
            run.report.rtr_sent = kind
            run.say(f"sent FPDU: RTR {kind} (zero-length "
                    f"{'RDMA Read Request' if kind == 'read' else 'RDMA Write'})")
        run.send_message()
        run.hold()
    except (PeerError, OSError, mpa.MpaFormatError, ddp.DdpFormatError) as exc:
        return run.fail(exc)
    return run.report


def run_responder(sock: socket.socket, options: PeerOptions, log: Log | None = None
                  ) -> PeerReport:
    """Read the MPA request on an accepted socket, answer it, then expect the RTR."""
    run = _Run("responder", sock, options, log)
    try:
        request, request_ext = run.stream.read_any_frame(expect_request=True)
        run.report.received = request
        run.report.received_ext = request_ext
        run.frame("received", request, request_ext)
        _check_dialect(options, request_ext, "request")
        if request_ext is not None and options.ext is not None:
            answer = build_ext_reply(request_ext, options)
            reply = ext_frame(answer)
            run.stream.send_ext_frame(answer)
            run.report.sent_ext = answer
        else:
            reply = build_reply(request, options)
            run.stream.send_frame(reply)
        run.report.sent = reply
        run.frame("sent", reply, run.report.sent_ext)
        if reply.reject:
            # Like siw: the reject is followed by our FIN, then we wait for theirs.
            sock.shutdown(socket.SHUT_WR)
            run.say("sent FIN")
            run.finish(run.stream.wait_close(options.timeout))
            return run.report
        run.stream.crc = bool((request.flags | reply.flags) & mpa.FLAG_CRC)
        if (reply.rev == 2 and reply.rtr is not None and (reply.rtr.read0 or reply.rtr.write0)) \
                or (reply.rev == 1 and options.v1_rtr_expected):
            message = run.fpdu()
            run.report.rtr_received = message.rtr_kind
            if message.rtr_kind == "read" and options.answer_read_rtr:
                run.stream.send_ulpdu(_read_response(message))
                run.say("sent FPDU: RDMA Read Response (zero-length)")
        run.send_message()
        run.hold()
    except (PeerError, OSError, mpa.MpaFormatError, ddp.DdpFormatError) as exc:
        return run.fail(exc)
    return run.report


def _check_dialect(options: PeerOptions, ext: erdma_mpa.ErdmaFrame | None,
                   what: str) -> None:
    """A peer framing as a stack that reads only its own dialect refuses a frame without
    the extension as the stack does (erdma_recv_mpa_rr: a revision other than
    MPA_REVISION_EXT_1 is -EPROTO; no frame is sent, the socket released)."""
    if options.ext is not None and options.ext.takes_only_ext and ext is None:
        raise PeerError(f"the MPA {what} is not of revision {erdma_mpa.REVISION_EXT_1} "
                        "with the extension: refused as erdma_recv_mpa_rr refuses it "
                        "(-EPROTO), nothing sent")


def _read_response(request: Message) -> bytes:
    # RFC 5040 section 5.3: a zero-length RDMA Read Response to the sink STag/TO of the
    # RTR's Read Request, as irdma's emulated NIC answers it (its offload/qp.py).
    stag, to = request.read_sink
    return ddp.read_response(b"", stag, to)


# ---- sockets ------------------------------------------------------------------------

def open_connection(host: str, port: int, timeout: float) -> socket.socket:
    """A connected TCP socket, or :class:`PeerError` with the reason."""
    try:
        return socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise PeerError(f"connection to {host}:{port} refused (RST)") from None
    except TimeoutError:
        raise PeerError(f"connection to {host}:{port} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise PeerError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None


def open_listener(port: int, bind: str = "") -> socket.socket:
    """A listening socket on ``port``: dual-stack on ``::`` unless ``bind`` names an
    address."""
    try:
        if bind:
            family = socket.AF_INET6 if ":" in bind else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind, port))
        elif socket.has_dualstack_ipv6():
            sock = socket.create_server(("::", port), family=socket.AF_INET6,
                                        dualstack_ipv6=True, reuse_port=False)
        else:
            sock = socket.create_server(("", port))
        sock.listen(8)
    except OSError as exc:
        raise PeerError(f"cannot listen on port {port}: {exc.strerror or exc}") from None
    return sock


def accept_one(listener: socket.socket, timeout: float | None) -> socket.socket:
    """Wait up to ``timeout`` seconds (``None``: without limit) for one connection."""
    listener.settimeout(timeout)
    try:
        conn, _addr = listener.accept()
    except TimeoutError:
        raise PeerError(f"no connection within {timeout:g} s") from None
    conn.settimeout(timeout)
    return conn
