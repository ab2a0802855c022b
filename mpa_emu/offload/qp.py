"""The NIC after OFFLOADED: the hardware TCP engine and iWARP QP of one connection.

Once the CM hands a connection to the hardware (``irdma_cm_init_tsa_conn`` +
``irdma_init_tcp_ctx``) the CM never touches its segments again: the NIC's connection
hash takes the flow before ``irdma_receive_ilq`` could see it. This module is what the
NIC then does, kept deliberately modest:

* **Continuity.** The QP starts from exactly the numbers in :class:`QpInit`:
  ``snd_nxt = snd_una = loc_seq_num`` and ``rcv_nxt`` of the CM node, the peer's window
  and scales, the MSS, the VLAN/PCP/TOS/TTL of the node.
* **Stream mode first.** A passive QP sends the MPA reply as raw stream data (the LSMM,
  ``irdma_sc_send_lsmm`` from ``irdma_accept``) and then waits for the first FPDU before it sends
  anything else (``WAITFORRCVPDU``): that FPDU, the peer's RTR, raises :attr:`Ae.RTS`.
  An active QP sends the RTR (``irdma_sc_send_rtt``) as one CRC-protected FPDU in its own
  segment and raises :attr:`Ae.RTS` when it has sent it.
* **Receive model.** Segments are taken strictly in order (``drop_ooo_seg``, as
  mainline sets it because ``iw_ooo`` is off): a segment whose sequence number is not
  ``rcv_nxt`` is dropped and answered with a duplicate ACK. Every in-order segment that
  carries data or a FIN is answered by one pure ACK (no delayed ACK). FPDUs are
  reassembled from the byte stream; markers are not parsed.
* **Send model.** One FPDU per segment; FPDUs are sized so that they fit the MSS. The
  peer's advertised window (scaled by ``snd_wscale``) limits what is in flight.
* **Retransmission.** The oldest unacknowledged segment is resent when its timer
  expires: first after :data:`RTO_INITIAL_NS`, doubling each time, at most
  :data:`REXMIT_THRESH` (8, ``IRDMA_DEFAULT_REXMIT_THRESH``) times. After that the QP
  gives up: TCP CLOSED, iWARP ERROR, :attr:`Ae.LLP_TOO_MANY_RETRIES`.
* **Close.** ``modify_qp("sqd")`` sends a FIN once the send queue has drained;
  ``modify_qp("err")`` sends a RST when asked to reset a live connection. A peer FIN
  raises :attr:`Ae.LLP_FIN_RECEIVED`; the end of the FIN exchange (our FIN acknowledged
  and the peer's received) raises :attr:`Ae.LLP_CLOSE_COMPLETE`; an acceptable peer RST
  raises :attr:`Ae.LLP_CONNECTION_RESET`.

* **Checks on received FPDUs** (RFC 5044 section 8, RFC 5041 section 7, RFC 5040
  section 7): CRC, DDP and RDMAP versions, QN, MSN and MO of untagged segments, opcodes
  per queue, and STags. The model registers no memory, so a tagged segment that would
  place data, or a Read Request that would read data, names an STag the NIC never
  allocated. Each error raises its AE with the offending frame (the q2 buffer); the
  driver answers with a Terminate (:mod:`mpa_emu.stacks.irdma.offload.terminate`).
* **Zero-length RDMA Read.** A Read Request of size 0 (the read0 RTR of
  ``irdma_sc_send_rtt``) is answered by a zero-length RDMA Read Response: tagged, last,
  the request's sink STag and sink TO, CRC as negotiated (RFC 5040 section 4.4 and
  5.3: every Read Request gets a Read Response; RFC 6581 section 3 makes the read0 RTR
  an ordinary zero-length Read; siw's ``siw_init_rresp`` queues one for every inbound
  Read Request, and the initiator's READ WQE, sink STag 0xabcd, completes only on it).
  The response goes out with the ACK of the request. The initiator's NIC accepts the
  zero-length Read Response to 0xabcd while its RTR is outstanding.
* **Terminate** (``irdma_term_modify_qp``): ``modify_qp("terminate", term=...)`` puts
  the Terminate on the wire and raises :attr:`Ae.TERMINATE_SENT`;
  ``modify_qp("terminate", send_fin=True)`` sends the FIN. FPDUs arriving in TERMINATE
  are acknowledged and discarded. A QP in ERROR whose TCP connection is still alive
  answers every segment with a RST (RFC 9293 section 3.10.7.1).
* **Terminate timer.** The driver's ``terminate_timer`` (HZ) lives in ``iwqp``; the QP
  counts it among its deadlines and reports it as :attr:`Ae.TERMINATE_TIMEOUT`.

Not modelled: MPA markers (``snd_markers``/``rcv_markers`` are carried but FPDUs are sent
and parsed without them), memory registration, keep-alives and the 2MSL timer (TIME_WAIT
lasts until the CM releases the connection). :attr:`Ae.RESET_SENT` and
:attr:`Ae.BAD_CLOSE` are never raised by this model; the driver sets RESET_SENT itself
(``irdma_handle_close_entry``, the ``dont_wait`` path of ``irdma_modify_qp``).

Everything is driven by ``now_ns`` arguments; there is no clock and no randomness.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Final

from mpa_emu.errors import MpaEmuError
from mpa_emu.stacks.irdma.offload.iwqp import IwQp
from mpa_emu.stacks.irdma.offload.qp_records import (
    FIRST_RECV,
    NO_AE,
    NO_SENDS,
    RTS_AE,
    AeRecord,
    Busy,
    RecvExpect,
    SendCounts,
    Unacked,
    shared_link,
)
from mpa_emu.stacks.irdma.offload.qp_records import (
    QpInit as QpInit,  # the QP's context record, imported from here too
)
from mpa_emu.stacks.irdma.offload.states import (
    AE_AMP_BOUNDS_VIOLATION,
    AE_AMP_UNALLOCATED_STAG,
    AE_DDP_INVALID_MSN_GAP_IN_MSN,
    AE_DDP_NO_L_BIT,
    AE_DDP_UBE_INVALID_DDP_VERSION,
    AE_DDP_UBE_INVALID_MO,
    AE_DDP_UBE_INVALID_QN,
    AE_LLP_CLOSE_COMPLETE,
    AE_LLP_CONNECTION_RESET,
    AE_LLP_FIN_RECEIVED,
    AE_LLP_RECEIVED_MPA_CRC_ERROR,
    AE_LLP_SEGMENT_TOO_SMALL,
    AE_LLP_TERMINATE_RECEIVED,
    AE_LLP_TOO_MANY_RETRIES,
    AE_RDMAP_ROE_INVALID_RDMAP_VERSION,
    AE_RDMAP_ROE_UNEXPECTED_OPCODE,
    AE_ROE_INVALID_RDMA_WRITE_OR_READ_RESP,
    AE_RTS,
    AE_TERMINATE_SENT,
    AE_TERMINATE_TIMEOUT,
    QPS_CLOSING,
    QPS_ERROR,
    QPS_RTS,
    QPS_TERMINATE,
    TCP_CLOSE_WAIT,
    TCP_CLOSED,
    TCP_CLOSING,
    TCP_ESTABLISHED,
    TCP_FIN_WAIT_1,
    TCP_FIN_WAIT_2,
    TCP_LAST_ACK,
    TCP_NON_EXISTENT,
    TCP_TIME_WAIT,
    Ae,
    IwarpState,
    TcpState,
)
from mpa_emu.wire import ddp, mpa
from mpa_emu.wire.interning import shared, shared_bytes
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment, Transmit
from mpa_emu.wire.seq import MOD as _SEQ_MOD
from mpa_emu.wire.seq import at_or_before as _seq_le
from mpa_emu.wire.seq import before as _seq_lt

REXMIT_THRESH: Final = 8
"""IRDMA_DEFAULT_REXMIT_THRESH written into the TCP context by irdma_init_tcp_ctx."""
RTO_INITIAL_NS: Final = 200_000_000
"""First retransmission timeout of the model (the Linux TCP_RTO_MIN of 200 ms)."""
RCV_WND_FIELD: Final = 0xFFFF
"""irdma_init_tcp_ctx: rcv_wnd = 0xFFFF << rcv_wscale, so the window field is 0xFFFF."""
FPDU_OVERHEAD: Final = 2 + 4
"""ULPDU_LENGTH field and CRC (RFC 5044 section 4.1); pad comes on top."""

@dataclass(slots=True, unsafe_hash=True)
class ReceivedMessage:
    """One FPDU the QP took off the stream: the DDP segment and its CRC verdict."""

    ulpdu: bytes
    crc_ok: bool
    time_ns: int

    def __init__(self, ulpdu: bytes, crc_ok: bool, time_ns: int) -> None:
        self.ulpdu = ulpdu
        self.crc_ok = crc_ok
        self.time_ns = time_ns


RECEIVED_KEPT: Final = 8
"""How many of the last received FPDUs a QP keeps for inspection."""


# Bits of OffloadedQp._flags: one int for the QP's yes/no facts (each a slot of its own
# would cost 8 bytes per connection). Those an established QP usually has set come
# first, so that the usual values are small ints every QP shares.
_ACTIVE: Final = 0x1
"""The QP is the active side (sends the RTR)."""
_FIRST_PDU_SEEN: Final = 0x2
_RTR_SENT: Final = 0x4
_LSMM_SENT: Final = 0x8
_READ_PENDING: Final = 0x10
"""The read0 RTR was sent and its Read Response has not arrived."""
_HOLD_TX: Final = 0x20
"""WAITFORRCVPDU: a passive QP sends nothing after its LSMM until the first FPDU."""
_FIN_REQUESTED: Final = 0x40
_FIN_SENT: Final = 0x80
_PEER_FIN: Final = 0x100
_TERM_SENT: Final = 0x200
_RX_HALTED: Final = 0x400
"""An FPDU failed a check: later ones are acknowledged, not placed."""
_CRC_BAD: Final = 0x800
"""The one FPDU kept in ``_received`` failed its CRC check."""


class QpError(MpaEmuError, ValueError):
    """Misuse of the QP by the driver (a verb in a state where the NIC refuses it)."""


class OffloadedQp(IwQp):
    """The NIC's TCP engine and iWARP QP for one offloaded connection (sans-IO).

    One lives per established connection, so it is slotted and one allocation: it is
    also the driver's :class:`~mpa_emu.stacks.irdma.offload.iwqp.IwQp` of the connection (as
    ``struct irdma_qp`` embeds the hardware QP ``struct irdma_sc_qp``), which
    :attr:`iwqp` returns. What only a busy connection holds (pending sends,
    unacknowledged segments and their timer, asynchronous events, receive buffer) lives
    in a :class:`Busy` record that exists only while it holds something, and the
    outbox is ``None`` when empty.
    """

    __slots__ = ("_ae", "_busy", "_conn", "_flags", "_irs", "_isn",
                 "_link", "_local_port", "_outbox", "_received", "_received_at", "_recv",
                 "_remote_port", "_sent", "nic_iwarp_state", "rcv_nxt", "received_count",
                 "snd_nxt", "snd_una", "snd_wnd", "tcp_state")

    def __init__(self, init: QpInit) -> None:
        if init.rtr_op not in ("read", "write"):
            raise QpError(f"rtr_op must be 'read' or 'write', got {init.rtr_op!r}")
        # The driver's copies of this QP's states (struct irdma_qp), as a new IwQp has them.
        super().__init__()
        # The context is kept as the per-connection numbers plus the shared QpLink of what
        # many connections have in common (addresses, VLAN, the peer's first window,
        # negotiated settings): :attr:`init` rebuilds the record.
        self._conn = init.conn
        self._flags = _ACTIVE if init.active else 0
        self._local_port = init.local_port
        self._remote_port = init.remote_port
        self._isn = init.snd_nxt
        self._irs = init.rcv_nxt
        self._link = shared_link(init)
        self.tcp_state = TCP_ESTABLISHED
        self.nic_iwarp_state = QPS_RTS
        """The NIC's own iWARP state (the driver's copies are ``iwarp_state`` and
        ``hw_iwarp_state``)."""
        self.snd_una = init.snd_nxt
        self.snd_nxt = init.snd_nxt
        self.rcv_nxt = init.rcv_nxt
        self.snd_wnd = init.snd_wnd
        # The AEQE last returned by next_ae: (AE, TCP state, iWARP state, q2 frame).
        self._ae: AeRecord = NO_AE
        # The last few FPDUs. Most connections only ever get one (the RTR or its Read
        # Response): that one is kept as its ULPDU, _received_at and the _CRC_BAD bit, not
        # as an object of its own; two or more as a tuple.
        self._received: bytes | tuple[ReceivedMessage, ...] = ()
        self._received_at = 0
        self.received_count = 0
        """FPDUs taken off the stream so far (:attr:`received` keeps the last few)."""
        self._busy: Busy | None = None
        self._outbox: list[Transmit] | None = None
        self._sent: SendCounts = NO_SENDS
        self._recv: RecvExpect = FIRST_RECV

    def __repr__(self) -> str:
        return (f"OffloadedQp(conn={self._conn}, tcp_state={self.tcp_state!r}, "
                f"nic_iwarp_state={self.nic_iwarp_state!r})")

    @property
    def iwqp(self) -> IwQp:
        """The driver's copies of this QP's states (``struct irdma_qp``): the QP itself."""
        return self

    @property
    def retransmissions(self) -> int:
        """Segments retransmitted so far."""
        return self._sent.retransmissions

    def _work(self) -> Busy:
        busy = self._busy
        if busy is None:
            busy = self._busy = Busy()
        return busy

    def _settle(self) -> None:
        """Drop the busy record once it holds nothing."""
        busy = self._busy
        if busy is not None and busy.idle():
            self._busy = None

    @property
    def init(self) -> QpInit:
        """The connection context the QP was created with (``irdma_init_tcp_ctx``),
        rebuilt from the QP's own fields."""
        c = self._link
        return QpInit(conn=self._conn, active=bool(self._flags & _ACTIVE), gen=c.gen,
                      local_mac=c.local_mac, remote_mac=c.remote_mac,
                      local_ip=c.local_ip, remote_ip=c.remote_ip,
                      local_port=self._local_port, remote_port=self._remote_port,
                      vlan=c.vlan, pcp=c.pcp, tos=c.tos, ttl=c.ttl,
                      snd_nxt=self._isn, rcv_nxt=self._irs, snd_wnd=c.snd_wnd,
                      snd_wscale=c.snd_wscale, rcv_wscale=c.rcv_wscale, mss=c.mss,
                      rtr_op=c.rtr_op, ird=c.ird, ord=c.ord, mpa_rev=c.mpa_rev,
                      crc=c.crc, snd_markers=c.snd_markers, rcv_markers=c.rcv_markers)

    @property
    def received(self) -> list[ReceivedMessage]:
        """The last :data:`RECEIVED_KEPT` FPDUs taken off the stream, oldest first (a
        long-lived connection does not keep every message it ever got; the count is
        :attr:`received_count`)."""
        kept = self._received
        if isinstance(kept, bytes):
            return [ReceivedMessage(kept, not self._flags & _CRC_BAD, self._received_at)]
        return list(kept)

    # ---- the contract ----------------------------------------------------------------

    def send_lsmm(self, mpa_reply: bytes, now_ns: int) -> None:
        """Passive accept: send the MPA reply as stream data (``irdma_sc_send_lsmm``).

        It goes out at once in its own segment with ``seq = loc_seq_num`` and
        ``ack = rcv_nxt`` of the CM node (``irdma_accept`` hands the reply to the QP),
        ahead of anything else.
        """
        if self._flags & (_ACTIVE | _LSMM_SENT):
            raise QpError("the LSMM is sent once, by a passive QP")
        self._flags |= _LSMM_SENT
        self._transmit_data(mpa_reply, "irdma_sc_send_lsmm: MPA reply as stream data",
                            now_ns)
        # WAITFORRCVPDU: nothing more leaves a passive QP before the peer's first FPDU.
        if not self._flags & _FIRST_PDU_SEEN:
            self._flags |= _HOLD_TX
        else:
            self._flags &= ~_HOLD_TX

    def send_rtr(self, now_ns: int) -> None:
        """Active side: send the RTR (``irdma_sc_send_rtt``) as one FPDU with CRC.

        A zero-length RDMA READ (sink STag 0xabcd, source STag 0x1234, TO 0) or a
        zero-length RDMA WRITE (STag 0, TO 0), as ``rtr_op`` says (``irdma_sc_send_rtt``,
        RFC 6581 section 5).
        """
        if not self._flags & _ACTIVE or self._flags & _RTR_SENT:
            raise QpError("the RTR is sent once, by an active QP")
        self._flags |= _RTR_SENT
        if self._link.rtr_op == "read":
            ulpdu = ddp.read_rtr()
            comment = "irdma_sc_send_rtt: RTR, zero-length RDMA READ request"
            self._flags |= _READ_PENDING
        else:
            ulpdu = ddp.write_rtr()
            comment = "irdma_sc_send_rtt: RTR, zero-length RDMA WRITE"
        self._transmit_data(self._fpdu(ulpdu), comment, now_ns)
        self._raise(AE_RTS)

    def post_send(self, data: bytes, now_ns: int) -> None:
        """Post an RDMA Send of ``data``; it is split into DDP segments that fit the MSS.

        Raises :class:`QpError` when the QP no longer accepts work requests.
        """
        if self.nic_iwarp_state != QPS_RTS or self._flags & _FIN_REQUESTED:
            raise QpError(f"post_send needs an RTS QP, the QP is {self.nic_iwarp_state.name}")
        self._sent = self._sent.next_message()
        msn = self._sent.msn
        room = max(1, self._link.mss - FPDU_OVERHEAD - 3 - ddp.UNTAGGED_HEADER_LEN)
        chunks = [data[i:i + room] for i in range(0, len(data), room)] or [b""]
        offset = 0
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            ulpdu = ddp.send(chunk, msn, offset, last=last)
            offset += len(chunk)
            self._queue(self._fpdu(ulpdu), f"RDMA Send MSN {msn}")
        self._pump(now_ns)

    def receive(self, frame: Segment, now_ns: int) -> None:
        """Take one segment of this connection off the wire. Never raises."""
        if self._closed():
            return
        if frame.flags & RST:
            self._receive_rst(frame)
            return
        if self.nic_iwarp_state == QPS_ERROR and self.tcp_alive:
            self._reset_reply(frame)
            return
        if frame.flags & SYN:
            return  # a SYN on an established flow is ignored by the model
        if frame.flags & ACK:
            self._receive_ack(frame, now_ns)
        if self._closed():
            return
        if not frame.payload and not frame.flags & FIN:
            return
        if frame.seq != self.rcv_nxt:
            # drop_ooo_seg: out of order or duplicate; a duplicate ACK tells the peer.
            self._send_ack("hw qp: duplicate ACK (segment out of order, dropped)")
            return
        if frame.payload and self.tcp_state in (TCP_ESTABLISHED, TCP_FIN_WAIT_1,
                                                TCP_FIN_WAIT_2):
            self.rcv_nxt = (self.rcv_nxt + len(frame.payload)) % _SEQ_MOD
            busy = self._busy
            if busy is not None and busy.rx_buffer is not None:
                busy.rx_buffer += frame.payload
                stream = bytes(busy.rx_buffer)
                busy.rx_buffer = None
            else:
                stream = frame.payload  # the usual case: whole FPDUs, nothing buffered
            self._take_fpdus(stream, now_ns)
            busy = self._busy
            if busy is not None and busy.read_responses:
                # The Read Responses queued by this segment carry its ACK.
                busy.read_responses = 0
                sent = self._outbox_len()
                self._pump(now_ns)
                if self._outbox_len() > sent and not frame.flags & FIN:
                    self._settle()
                    return
            self._settle()
        elif frame.payload:
            self.rcv_nxt = (self.rcv_nxt + len(frame.payload)) % _SEQ_MOD
        if frame.flags & FIN:
            self._receive_fin()
        self._send_ack("hw qp: ACK")
        self._pump(now_ns)

    def modify_qp(self, target: str, now_ns: int, *, reset_tcp_conn: bool | None = None,
                  term: bytes | None = None, send_fin: bool = False) -> None:
        """Move the hardware QP: ``"sqd"`` (CLOSING, graceful: FIN after the queued
        sends), ``"err"`` (ERROR, abortive) or ``"terminate"`` (TERMINATE).

        For ``"err"`` the RST goes out when ``reset_tcp_conn`` is true; the driver
        decides that in ``irdma_modify_qp`` (TCP alive, not TIME_WAIT, link up) or
        ``irdma_next_iw_state`` (``term_flags`` set). When it is ``None`` the QP decides
        from its own TCP state alone. Without the RST the TCP connection stays as it is
        and every later segment of the peer is answered by a RST.

        For ``"terminate"``, ``term`` is the Terminate DDP segment to send
        (``IRDMAQP_TERM_SEND_TERM_ONLY``) and ``send_fin`` asks for the FIN
        (``IRDMAQP_TERM_SEND_FIN_ONLY``).
        """
        if target == "terminate":
            self._terminate(term, send_fin, now_ns)
        elif target == "sqd":
            if self.nic_iwarp_state != QPS_RTS:
                return
            self.nic_iwarp_state = QPS_CLOSING
            self._flags |= _FIN_REQUESTED
            self._pump(now_ns)
        elif target == "err":
            if reset_tcp_conn is None:
                reset_tcp_conn = self.tcp_alive
            self.nic_iwarp_state = QPS_ERROR
            if reset_tcp_conn and self.tcp_alive:
                self._send_rst("irdma_modify_qp: QP to ERROR, reset_tcp_conn (RST)")
            self._stop()
        else:
            raise QpError("modify_qp target must be 'sqd', 'err' or 'terminate', "
                          f"got {target!r}")

    def handle_timer(self, now_ns: int) -> None:
        """Fire the retransmission timer, and the driver's terminate timer, if due at or
        before ``now_ns``."""
        term_at = self.terminate_at
        if term_at is not None and term_at <= now_ns:
            self.terminate_at = None
            self._raise(AE_TERMINATE_TIMEOUT)
        busy = self._busy
        if busy is None or not busy.unacked or now_ns < busy.rexmit_at:
            return
        if busy.retries >= REXMIT_THRESH:
            self.tcp_state = TCP_CLOSED
            self.nic_iwarp_state = QPS_ERROR
            self._stop()
            self._raise(AE_LLP_TOO_MANY_RETRIES)
            return
        busy.retries += 1
        self._sent = self._sent.retransmitted()
        oldest = busy.unacked[0]
        self._emit(oldest.seq, oldest.flags, oldest.payload,
                   f"hw qp: retransmission {busy.retries} of {oldest.comment}")
        busy.rexmit_at = now_ns + (RTO_INITIAL_NS << busy.retries)

    def get_timer(self) -> int | None:
        """Absolute ns of the next retransmission or terminate timeout, ``None`` when
        neither is pending."""
        busy = self._busy
        rexmit = busy.rexmit_at if busy is not None and busy.unacked else None
        term_at = self.terminate_at
        if term_at is None:
            return rexmit
        return term_at if rexmit is None else min(rexmit, term_at)

    def frames_to_send(self) -> list[Transmit]:
        """Drain the frames the NIC put on the wire."""
        out, self._outbox = self._outbox, None
        return out if out is not None else []

    def next_ae(self) -> Ae | None:
        """Pop the next asynchronous event; :attr:`ae_tcp_state` and
        :attr:`ae_iwarp_state` then hold the states reported with it."""
        busy = self._busy
        if busy is None or busy.aes is None:
            return None
        aes = busy.aes
        record = aes.popleft()
        if not aes:
            busy.aes = None
            self._settle()
        self._ae = record
        return record.ae

    @property
    def ae_tcp_state(self) -> TcpState:
        """The TCP state carried by the AEQE last returned by :meth:`next_ae`."""
        return self._ae.tcp

    @property
    def ae_iwarp_state(self) -> IwarpState:
        """The iWARP state carried by the AEQE last returned by :meth:`next_ae`."""
        return self._ae.iwarp

    @property
    def ae_frame(self) -> bytes | None:
        """The offending frame the NIC wrote to q2 with the last AE (from its
        ULPDU_LENGTH on), None when it wrote none."""
        return self._ae.frame

    # ---- inspection --------------------------------------------------------------------

    @property
    def tcp_alive(self) -> bool:
        """``hw_tcp_state > CLOSED && != TIME_WAIT`` (the test in ``irdma_modify_qp``)."""
        return self.tcp_state > TCP_CLOSED and self.tcp_state != TCP_TIME_WAIT

    @property
    def bytes_in_flight(self) -> int:
        """Sequence space sent but not yet acknowledged."""
        return (self.snd_nxt - self.snd_una) % _SEQ_MOD

    # ---- internals ---------------------------------------------------------------------

    def _closed(self) -> bool:
        return self.tcp_state in (TCP_CLOSED, TCP_NON_EXISTENT)

    def _fpdu(self, ulpdu: bytes) -> bytes:
        # Without negotiated CRC the field is still present; siw and irdma send 0.
        return mpa.frame_fpdu(ulpdu, crc=None if self._link.crc else 0)

    def _raise(self, ae: Ae, q2: bytes | None = None) -> None:
        busy = self._work()
        if busy.aes is None:
            busy.aes = deque()
        tcp, iwarp = self.tcp_state, self.nic_iwarp_state
        if ae is AE_RTS and tcp is TCP_ESTABLISHED and iwarp is QPS_RTS \
                and q2 is None:
            # shared: a QP keeps its last AE, and most QPs' last AE is this RTS
            busy.aes.append(RTS_AE)
        else:
            busy.aes.append(AeRecord(ae, tcp, iwarp, q2))

    def _stop(self) -> None:
        busy = self._busy
        if busy is not None:
            busy.pending = None
            busy.unacked = None
            self._settle()

    def _transmit_data(self, payload: bytes, comment: str, now_ns: int) -> None:
        self._send_queue().appendleft((payload, comment))
        self._pump(now_ns)

    def _queue(self, payload: bytes, comment: str) -> None:
        self._send_queue().append((payload, comment))

    def _send_queue(self) -> deque[tuple[bytes, str]]:
        busy = self._work()
        if busy.pending is None:
            busy.pending = deque()
        return busy.pending

    def _outbox_len(self) -> int:
        return len(self._outbox) if self._outbox is not None else 0

    def _can_send_data(self) -> bool:
        return (self.tcp_state in (TCP_ESTABLISHED, TCP_CLOSE_WAIT)
                and not self._flags & _HOLD_TX)

    def _pump(self, now_ns: int) -> None:
        busy = self._busy
        pending = busy.pending if busy is not None else None
        while pending and self._can_send_data():
            payload, comment = pending[0]
            if busy is not None and busy.unacked \
                    and self.bytes_in_flight + len(payload) > self.snd_wnd:
                return  # the peer's window is full; an ACK will reopen it
            pending.popleft()
            if not pending and busy is not None:
                busy.pending = pending = None
            self._send_segment(ACK, payload, comment, now_ns)
        if (self._flags & _FIN_REQUESTED and not self._flags & _FIN_SENT and not pending
                and self.tcp_state in (TCP_ESTABLISHED, TCP_CLOSE_WAIT)):
            self._flags |= _FIN_SENT
            self.tcp_state = (TCP_FIN_WAIT_1 if self.tcp_state == TCP_ESTABLISHED
                              else TCP_LAST_ACK)
            self._send_segment(FIN | ACK, b"", "hw qp: FIN (QP CLOSING)", now_ns)

    def _send_segment(self, flags: int, payload: bytes, comment: str, now_ns: int) -> None:
        entry = Unacked(self.snd_nxt, flags, payload, comment)
        self._emit(entry.seq, flags, payload, comment)
        self.snd_nxt = (self.snd_nxt + entry.seq_len) % _SEQ_MOD
        busy = self._work()
        if not busy.unacked:
            busy.retries = 0
            busy.rexmit_at = now_ns + RTO_INITIAL_NS
        if busy.unacked is None:
            busy.unacked = deque()
        busy.unacked.append(entry)

    def _send_ack(self, comment: str) -> None:
        self._emit(self.snd_nxt, ACK, b"", comment)

    def _send_rst(self, comment: str) -> None:
        self._emit(self.snd_nxt, RST | ACK, b"", comment)
        self.tcp_state = TCP_CLOSED

    def _emit(self, seq: int, flags: int, payload: bytes, comment: str,
              ack: int | None = None) -> None:
        c = self._link
        vlan = c.vlan
        seg = Segment(
            src_mac=c.local_mac, dst_mac=c.remote_mac,
            src_ip=c.local_ip, dst_ip=c.remote_ip,
            sport=self._local_port, dport=self._remote_port,
            seq=seq, ack=self.rcv_nxt if ack is None else ack, flags=flags,
            window=RCV_WND_FIELD,
            payload=payload, vlan=vlan, pcp=c.pcp if vlan is not None else 0,
            ttl=c.ttl, tos=c.tos,
        )
        if self._outbox is None:
            self._outbox = []
        self._outbox.append(Transmit(seg, comment, conn=self._conn))

    def _receive_rst(self, frame: Segment) -> None:
        # RFC 9293 section 3.10.7.1: a RST is acceptable when its sequence number is in
        # the receive window.
        if not (_seq_le(self.rcv_nxt, frame.seq)
                and _seq_lt(frame.seq, (self.rcv_nxt + (RCV_WND_FIELD << self._link.rcv_wscale))
                            % _SEQ_MOD)):
            return
        was_time_wait = self.tcp_state == TCP_TIME_WAIT
        self.tcp_state = TCP_CLOSED
        self._stop()
        if not was_time_wait:
            self._raise(AE_LLP_CONNECTION_RESET)

    def _receive_ack(self, frame: Segment, now_ns: int) -> None:
        ack = frame.ack
        if _seq_lt(self.snd_una, ack) and _seq_le(ack, self.snd_nxt):
            self.snd_una = ack
            if ack == self.snd_nxt:
                self.snd_nxt = ack  # the same number: keep one int object, not two
            busy = self._busy
            if busy is not None:
                unacked = busy.unacked
                while unacked and _seq_le((unacked[0].seq + unacked[0].seq_len) % _SEQ_MOD,
                                          ack):
                    unacked.popleft()
                busy.retries = 0
                if unacked:
                    busy.rexmit_at = now_ns + RTO_INITIAL_NS
                else:
                    busy.unacked = None
                    self._settle()
            if self._flags & _FIN_SENT and ack == self.snd_nxt:
                self._our_fin_acked()
        self.snd_wnd = shared(frame.window << self._link.snd_wscale)

    def _our_fin_acked(self) -> None:
        if self.tcp_state == TCP_FIN_WAIT_1:
            self.tcp_state = TCP_FIN_WAIT_2
        elif self.tcp_state == TCP_CLOSING:
            self.tcp_state = TCP_TIME_WAIT
            self._raise(AE_LLP_CLOSE_COMPLETE)
        elif self.tcp_state == TCP_LAST_ACK:
            self.tcp_state = TCP_CLOSED
            self._raise(AE_LLP_CLOSE_COMPLETE)

    def _receive_fin(self) -> None:
        if self._flags & _PEER_FIN:
            return  # a retransmitted FIN: only re-ACKed
        self._flags |= _PEER_FIN
        self.rcv_nxt = (self.rcv_nxt + 1) % _SEQ_MOD
        if self.tcp_state == TCP_ESTABLISHED:
            self.tcp_state = TCP_CLOSE_WAIT
            self._raise(AE_LLP_FIN_RECEIVED)
        elif self.tcp_state == TCP_FIN_WAIT_1:
            self.tcp_state = TCP_CLOSING
            self._raise(AE_LLP_FIN_RECEIVED)
        elif self.tcp_state == TCP_FIN_WAIT_2:
            self.tcp_state = TCP_TIME_WAIT
            self._raise(AE_LLP_FIN_RECEIVED)
            self._raise(AE_LLP_CLOSE_COMPLETE)

    def _reset_reply(self, frame: Segment) -> None:
        # irdma_next_iw_state(ERROR) without reset_tcp_conn left the connection alive
        # but gave up the QP: RFC 9293 section 3.10.7.1 answers any segment with a RST,
        # <SEQ=SEG.ACK><CTL=RST> when it carries an ACK, else
        # <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
        comment = "hw qp: RST, QP in ERROR (segment for a QP that gave up)"
        if frame.flags & ACK:
            self._emit(frame.ack, RST, b"", comment, ack=0)
        else:
            seg_len = len(frame.payload) + (1 if frame.flags & (SYN | FIN) else 0)
            self._emit(0, RST | ACK, b"", comment, ack=(frame.seq + seg_len) % _SEQ_MOD)
        self.tcp_state = TCP_CLOSED
        self._stop()

    def _terminate(self, ulpdu: bytes | None, send_fin: bool, now_ns: int) -> None:
        # irdma_next_iw_state(TERMINATE, ...): dont_send_term / dont_send_fin cleared.
        if self.nic_iwarp_state == QPS_ERROR:
            return
        self.nic_iwarp_state = QPS_TERMINATE
        self._flags &= ~_HOLD_TX
        if ulpdu is not None and not self._flags & _TERM_SENT:
            self._flags |= _TERM_SENT
            if self._busy is not None:
                self._busy.pending = None  # the send queue stops; only the Terminate goes out
            if self.tcp_state in (TCP_ESTABLISHED, TCP_CLOSE_WAIT):
                self._transmit_data(self._fpdu(ulpdu),
                                    "hw qp: Terminate (irdma_bld_terminate_hdr)", now_ns)
                self._raise(AE_TERMINATE_SENT)
        if send_fin and not self._flags & _FIN_REQUESTED:
            self._flags |= _FIN_REQUESTED
            self._pump(now_ns)
        self._settle()

    def _take_fpdus(self, stream: bytes, now_ns: int) -> None:
        """Take the complete FPDUs off the front of ``stream`` (the received bytes from
        an FPDU boundary on) and keep the rest in the receive buffer."""
        start, end = 0, len(stream)
        while end - start >= 2:
            (ulen,) = struct.unpack_from("!H", stream, start)
            total = 2 + ulen + mpa.fpdu_pad_len(ulen) + 4
            if end - start < total:
                break
            raw = stream[start:start + total]
            start += total
            fpdu = mpa.unframe_fpdu(raw)
            crc_ok = fpdu.crc_ok or not self._link.crc
            self.received_count += 1
            kept = self._received
            if isinstance(kept, bytes):
                first = ReceivedMessage(kept, not self._flags & _CRC_BAD, self._received_at)
                self._received = (first, ReceivedMessage(fpdu.ulpdu, crc_ok, now_ns))
                self._received_at = 0
            elif kept:
                self._received = (*kept[1 - RECEIVED_KEPT:],
                                  ReceivedMessage(fpdu.ulpdu, crc_ok, now_ns))
            else:
                self._received = shared_bytes(fpdu.ulpdu)
                self._received_at = now_ns
                if not crc_ok:
                    self._flags |= _CRC_BAD
            if self._flags & _RX_HALTED or self.nic_iwarp_state not in (
                    QPS_RTS, QPS_CLOSING):
                continue  # TERMINATE or ERROR: acknowledged, not placed
            # RFC 5044 section 8: a CRC error is a fatal LLP error for the stream.
            ae = (AE_LLP_RECEIVED_MPA_CRC_ERROR if not crc_ok
                  else self._check_ulpdu(fpdu.ulpdu, now_ns))
            if ae is not None:
                self._flags |= _RX_HALTED
                self._raise(ae, raw)
                continue
            if not self._flags & _FIRST_PDU_SEEN:
                self._flags |= _FIRST_PDU_SEEN
                self._flags &= ~_HOLD_TX
                if not self._flags & _ACTIVE:
                    self._raise(AE_RTS)
        if start < end:
            self._work().rx_buffer = bytearray(stream[start:])

    def _check_ulpdu(self, ulpdu: bytes, now_ns: int) -> Ae | None:
        """The NIC's checks of one DDP segment (RFC 5041 section 7, RFC 5040 section 7);
        the AE of the first failed check, or ``None`` when the segment is taken."""
        if len(ulpdu) < 2:
            return AE_LLP_SEGMENT_TOO_SMALL
        ctl, rctl = ulpdu[0], ulpdu[1]
        if ctl & ddp.DDP_VERSION_MASK != ddp.DDP_VERSION:
            return AE_DDP_UBE_INVALID_DDP_VERSION
        if rctl >> 6 != ddp.RDMAP_VERSION:
            return AE_RDMAP_ROE_INVALID_RDMAP_VERSION
        opcode = rctl & ddp.RDMAP_OPCODE_MASK
        last = bool(ctl & ddp.DDP_FLAG_LAST)
        if ctl & ddp.DDP_FLAG_TAGGED:
            if len(ulpdu) < ddp.TAGGED_HEADER_LEN:
                return AE_LLP_SEGMENT_TOO_SMALL
            size = len(ulpdu) - ddp.TAGGED_HEADER_LEN
            if opcode == ddp.Opcode.WRITE:
                # Zero length places nothing (the write0 RTR, STag 0); any data names an
                # STag this NIC never allocated.
                return AE_AMP_UNALLOCATED_STAG if size else None
            if opcode == ddp.Opcode.READ_RESPONSE:
                (stag,) = struct.unpack_from("!I", ulpdu, 2)
                if not self._flags & _READ_PENDING or stag != ddp.RTR_READ_SINK_STAG:
                    return AE_ROE_INVALID_RDMA_WRITE_OR_READ_RESP
                if size:
                    return AE_AMP_BOUNDS_VIOLATION  # the read0 sink buffer has length 0
                if last:
                    self._flags &= ~_READ_PENDING
                return None
            return AE_RDMAP_ROE_UNEXPECTED_OPCODE
        if len(ulpdu) < ddp.UNTAGGED_HEADER_LEN:
            return AE_LLP_SEGMENT_TOO_SMALL
        _, qn, msn, mo = struct.unpack_from("!IIII", ulpdu, 2)
        if qn > ddp.QN_TERMINATE:
            return AE_DDP_UBE_INVALID_QN
        recv = self._recv
        if msn != recv.msn[qn]:
            return AE_DDP_INVALID_MSN_GAP_IN_MSN
        if mo != recv.mo[qn]:
            return AE_DDP_UBE_INVALID_MO
        allowed = ((ddp.Opcode.SEND, ddp.Opcode.SEND_INVALIDATE, ddp.Opcode.SEND_SE,
                    ddp.Opcode.SEND_SE_INVALIDATE), (ddp.Opcode.READ_REQUEST,),
                   (ddp.Opcode.TERMINATE,))[qn]
        if opcode not in allowed:
            return AE_RDMAP_ROE_UNEXPECTED_OPCODE
        body = ulpdu[ddp.UNTAGGED_HEADER_LEN:]
        if qn != ddp.QN_SEND and not last:
            return AE_DDP_NO_L_BIT  # Read Requests and Terminates are single segments
        self._recv = recv.after(qn, last, len(body))
        if qn == ddp.QN_TERMINATE:
            return AE_LLP_TERMINATE_RECEIVED
        if qn == ddp.QN_READ_REQUEST:
            if len(body) < ddp.READ_REQUEST_LEN:
                return AE_LLP_SEGMENT_TOO_SMALL
            request = ddp.ReadRequest.from_bytes(body)
            if request.size:
                return AE_AMP_UNALLOCATED_STAG  # the source STag was never allocated
            # RFC 5040 section 5.3: the Responder answers every RDMA Read Request with a
            # Read Response; the read0 RTR of irdma_sc_send_rtt (RFC 6581 section 3) is
            # one, and the initiator's READ WQE completes only on it.
            self._queue(self._fpdu(ddp.read_response(b"", request.sink_stag,
                                                     request.sink_to)),
                        "hw qp: RDMA Read Response (zero-length, answers the read0 RTR)")
            self._work().read_responses += 1
        return None
