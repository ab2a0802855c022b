"""A sans-IO host TCP shaped like Linux's: the sockets siw (and other socket-based stacks)
open, with the handshake, data, FIN and RST the Linux stack puts on the wire.

Modelled: the three-way handshake with Linux's SYN options and windows
(:class:`~mpa_emu.stacks.tcp.shape.TcpShape`), SYN and SYN-ACK retransmission with
exponential back-off (tcp_retransmit_timer, inet_csk_reqsk_queue timer), data segmented
by the MSS and retransmitted on an RTO computed as tcp_set_rto does (srtt plus at least
TCP_RTO_MIN), quick ACKs at the start and delayed ACKs after (approximately: Linux's
pingpong heuristics are not modelled), FIN handling through FIN_WAIT1, FIN_WAIT2,
CLOSING, TIME_WAIT, CLOSE_WAIT and LAST_ACK, RSTs for aborts, for data reaching a closed
socket (tcp_rcv_state_process: TCPABORTONDATA) and for segments no socket owns
(tcp_v4_send_reset), RFC 5961 challenge ACKs for an in-window RST or a SYN on an
established socket, and Linux's limit on ACKs that answer segments breaking the
sequence checks (tcp_oow_rate_limited, net.ipv4.tcp_invalid_ratelimit: one per socket
per 500 ms), which keeps two hosts out of an endless ACK exchange.

Not modelled: PAWS and the sequence check of segments without data
(tcp_validate_incoming's own duplicate ACKs, which Linux rate-limits the same way; such
segments are ignored here), congestion control beyond sending what the peer's window
allows, SACK blocks and the out-of-order queue (a segment past ``rcv_nxt`` is dropped and
answered by a duplicate ACK), window updates as the application reads (the advertised window stays
at its post-handshake value), zero-window probes, keepalive, PMTU discovery.
"""

from __future__ import annotations

import errno
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mpa_emu.stacks.contract.trace import Trace, make_record
from mpa_emu.stacks.deadlines import Deadlines
from mpa_emu.stacks.tcp import options as opts
from mpa_emu.stacks.tcp.shape import TcpShape
from mpa_emu.wire import seq as sq
from mpa_emu.wire.segment import ACK, FIN, PSH, RST, SYN, Segment, Transmit

# Socket states, as include/net/tcp_states.h names them.
SYN_SENT = "SYN_SENT"
SYN_RECV = "SYN_RECV"
ESTABLISHED = "ESTABLISHED"
FIN_WAIT1 = "FIN_WAIT1"
FIN_WAIT2 = "FIN_WAIT2"
CLOSING = "CLOSING"
TIME_WAIT = "TIME_WAIT"
CLOSE_WAIT = "CLOSE_WAIT"
LAST_ACK = "LAST_ACK"
CLOSED = "CLOSED"

_SYNCHRONIZED = frozenset({ESTABLISHED, FIN_WAIT1, FIN_WAIT2, CLOSING, TIME_WAIT,
                           CLOSE_WAIT, LAST_ACK})


@dataclass(frozen=True, slots=True)
class TcpEvent:
    """What a socket tells its owner.

    ``kind``: ``"accepted"`` (a passive socket finished its handshake; ``listener`` says
    whose), ``"connected"``, ``"data"`` (``data`` holds the bytes, in order),
    ``"peer_fin"`` (the peer's FIN: the socket is in CLOSE_WAIT or further),
    ``"reset"`` (a RST killed it), ``"failed"`` (``errno``: ETIMEDOUT, ECONNREFUSED),
    ``"closed"`` (the socket is gone after a close the owner asked for).
    """

    kind: str
    sock: int
    listener: int | None = None
    data: bytes = b""
    errno: int = 0


@dataclass(slots=True)
class _Chunk:
    seq: int
    payload: bytes
    flags: int
    comment: str
    sent_ns: int = -1
    retransmitted: bool = False


@dataclass(slots=True)
class _Listener:
    ip: bytes | None
    port: int
    backlog: int
    ipv6: bool


@dataclass(slots=True)
class _Sock:
    ident: int
    local_ip: bytes
    local_port: int
    remote_ip: bytes
    remote_port: int
    vlan: int | None
    state: str
    passive: bool
    listener: int | None
    iss: int
    ts_off: int
    ip_id: int
    snd_una: int = 0
    snd_nxt: int = 0
    rcv_nxt: int = 0
    snd_wnd: int = 65535
    snd_wscale: int = 0
    rcv_wscale: int = 0
    use_ts: bool = False
    use_sack: bool = False
    use_ws: bool = False
    ts_recent: int = 0
    mss: int = 536
    rcv_window: int = 65535
    queue: list[_Chunk] = field(default_factory=list)
    """Sent and not yet acknowledged, then not yet sent: ``chunk.sent_ns`` < 0 (a list:
    a handful of chunks at a time, and an empty deque costs 760 bytes a socket)."""
    fin_queued: bool = False
    orphan: bool = False
    rto_ns: int = 0
    backoff: int = 0
    retries: int = 0
    rtx_at: int | None = None
    ack_at: int | None = None
    end_at: int | None = None
    quick: int = 0
    srtt_ns: int = 0
    mdev_ns: int = 0
    last_oow_ack_ns: int | None = None
    """tp->last_oow_ack_time: when the last rate-limited ACK went out."""

    @property
    def key(self) -> tuple[bytes, int, bytes, int]:
        return (self.local_ip, self.local_port, self.remote_ip, self.remote_port)


class TcpStack:
    """One host's TCP: listeners and sockets, sans-IO.

    Segments go in with :meth:`receive`, verbs with the current time; segments to send
    (:meth:`frames_to_send`), events (:meth:`next_event`) and the next deadline
    (:meth:`get_timer`) come out. ``seed`` draws the ISNs, timestamp offsets, IP IDs and
    ephemeral ports.
    """

    data_after_close_resets: ClassVar[bool] = True
    """tcp_rcv_state_process: data for a socket the application closed (FIN_WAIT1/2)
    is answered with a RST (TCPABORTONDATA), Linux's rule for orphaned sockets. A TCP
    whose close is a half close (an adapter's) keeps receiving instead."""

    def __init__(self, host: str, mac: bytes, shape: TcpShape, *, seed: int,
                 mtu: int = 1500, trace: Trace | None = None) -> None:
        self.host = host
        self.mac = mac
        self.shape = shape
        self.mtu = mtu
        self.trace = trace
        self._rng = random.Random(seed)
        self._addresses: dict[bytes, int | None] = {}
        self._neigh: dict[bytes, bytes | None] = {}
        self._listeners: dict[int, _Listener] = {}
        self._socks: dict[int, _Sock] = {}
        self._by_key: dict[tuple[bytes, int, bytes, int], _Sock] = {}
        self._timers = Deadlines(self._holds)
        """Every deadline armed, by socket id: each store of a time into ``rtx_at``,
        ``ack_at`` or ``end_at`` goes through its ``arm`` (clearing one needs nothing)."""
        self._syn_recv: dict[int, int] = {}
        """Sockets in SYN_RECV per listener (the request queue tcp_conn_request checks)."""
        self._out: list[Transmit] = []
        self._events: deque[TcpEvent] = deque()
        self._next_id = 1
        self._now = 0

    # ---- addresses and neighbours ------------------------------------------------

    def add_address(self, ip: bytes, vlan: int | None = None) -> None:
        """Bring up a local address (on ``vlan``)."""
        self._addresses[ip] = vlan

    def remove_address(self, ip: bytes) -> None:
        """Take a local address down; sockets on it stay (Linux keeps them until they
        fail on their own)."""
        self._addresses.pop(ip, None)

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """A neighbour entry (``None``: unresolved)."""
        self._neigh[ip] = mac

    def has_address(self, ip: bytes) -> bool:
        """True when ``ip`` is a local address."""
        return ip in self._addresses

    # ---- verbs -------------------------------------------------------------------

    def listen(self, ip: bytes | None, port: int, backlog: int, *, ipv6: bool = False) -> int:
        """A listening socket on ``ip`` (``None``: any address of the family) and
        ``port``; returns its id."""
        ident = self._new_id()
        if ip is not None:
            ipv6 = len(ip) == 16
        self._listeners[ident] = _Listener(ip, port, max(backlog, 0), ipv6)
        return ident

    def unlisten(self, listener: int) -> None:
        """Close a listening socket (its queued children stay)."""
        self._listeners.pop(listener, None)

    def listener_bound(self, ip: bytes | None, port: int) -> bool:
        """True when a listener already holds ``ip``/``port``."""
        return any(lst.port == port and (lst.ip is None or ip is None or lst.ip == ip)
                   for lst in self._listeners.values())

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int,
                local_port: int | None, now_ns: int) -> int:
        """tcp_v4_connect / tcp_v6_connect: send the SYN; returns the socket id. Raises
        OSError (EADDRNOTAVAIL, EADDRINUSE, EHOSTUNREACH) when Linux's connect would fail
        at once."""
        self._now = now_ns
        if local_ip not in self._addresses:
            raise OSError(errno.EADDRNOTAVAIL, "not a local address")
        if self._neigh.get(remote_ip) is None:
            raise OSError(errno.EHOSTUNREACH, "neighbour not resolved")
        if local_port is None:
            low, high = self.shape.ephemeral_ports
            for _ in range(high - low + 1):
                candidate = self._rng.randint(low, high)
                if (local_ip, candidate, remote_ip, remote_port) not in self._by_key:
                    local_port = candidate
                    break
            else:
                raise OSError(errno.EADDRNOTAVAIL, "no free local port")
        elif (local_ip, local_port, remote_ip, remote_port) in self._by_key:
            raise OSError(errno.EADDRINUSE, "4-tuple in use")
        s = self._new_sock(local_ip, local_port, remote_ip, remote_port, passive=False,
                           listener=None)
        self._set_state(s, SYN_SENT, self._fn(s, "connect"))
        s.rcv_wscale = self.shape.window_scale or 0
        s.snd_nxt = sq.add(s.iss, 1)
        s.queue.append(_Chunk(s.iss, b"", SYN, self._fn(s, "connect") + ": SYN_SENT"))
        s.rto_ns = self.shape.rto_initial_ns
        self._output(s)
        return s.ident

    def send(self, sock: int, data: bytes, now_ns: int, comment: str = "") -> None:
        """Queue ``data`` (TCP_NODELAY: sent at once as far as the peer's window allows),
        segmented by the MSS; the last segment of the write carries PSH. ``comment`` names
        the kernel function behind the bytes, for the capture."""
        self._now = now_ns
        s = self._socks.get(sock)
        if s is None or s.fin_queued or s.state not in (ESTABLISHED, CLOSE_WAIT):
            return
        comment = comment or "tcp_sendmsg"
        pos = 0
        nxt = self._queued_end(s)
        while pos < len(data):
            piece = data[pos:pos + s.mss]
            pos += len(piece)
            flags = ACK | (PSH if pos >= len(data) else 0)
            s.queue.append(_Chunk(nxt, piece, flags, comment))
            nxt = sq.add(nxt, len(piece))
        self._output(s)

    def shutdown(self, sock: int, now_ns: int, comment: str = "") -> None:
        """close(): a FIN after the queued data; the socket becomes an orphan (data
        that still arrives is answered with a RST, tcp_rcv_state_process)."""
        self._now = now_ns
        s = self._socks.get(sock)
        if s is None:
            return
        s.orphan = True
        if s.state in (SYN_SENT, SYN_RECV):
            self._free(s)
            return
        if s.fin_queued or s.state not in (ESTABLISHED, CLOSE_WAIT):
            return
        nxt = self._queued_end(s)
        old = s.state
        self._set_state(s, FIN_WAIT1 if s.state == ESTABLISHED else LAST_ACK, "tcp_close")
        s.fin_queued = True
        text = f"tcp_send_fin: {old} -> {s.state}"
        text = f"{comment}; {text}" if comment else text
        s.queue.append(_Chunk(nxt, b"", FIN | ACK, text))
        self._output(s)

    def abort(self, sock: int, now_ns: int, comment: str = "") -> None:
        """tcp_send_active_reset: RST|ACK at ``snd_nxt``; the socket is freed at once."""
        self._now = now_ns
        s = self._socks.get(sock)
        if s is None:
            return
        if s.state in _SYNCHRONIZED and s.state != TIME_WAIT:
            text = f"{comment}; tcp_send_active_reset" if comment else "tcp_send_active_reset"
            self._emit(s, RST | ACK, s.snd_nxt, b"", text, ack=s.rcv_nxt)
        self._free(s)

    def state(self, sock: int) -> str | None:
        """The socket's state name (``None`` once freed)."""
        s = self._socks.get(sock)
        return None if s is None else s.state

    def mss(self, sock: int) -> int:
        """The socket's ``mss_cache``: payload bytes per segment, options counted (0 once
        freed)."""
        s = self._socks.get(sock)
        return 0 if s is None else s.mss

    def addresses(self, sock: int) -> tuple[bytes, int, bytes, int] | None:
        """(local ip, local port, remote ip, remote port) of a socket."""
        s = self._socks.get(sock)
        return None if s is None else s.key

    def sockets(self) -> list[int]:
        """Ids of the sockets that exist (listeners excluded)."""
        return list(self._socks)

    # ---- the sans-IO loop ----------------------------------------------------------

    def frames_to_send(self) -> list[Transmit]:
        """Segments built since the last call."""
        out, self._out = self._out, []
        return out

    def next_event(self) -> TcpEvent | None:
        """The next socket event, or None."""
        return self._events.popleft() if self._events else None

    def get_timer(self) -> int | None:
        """The earliest deadline of any socket."""
        return self._timers.earliest()

    def _holds(self, ident: int, at: int) -> bool:
        s = self._socks.get(ident)
        return s is not None and (s.rtx_at == at or s.ack_at == at or s.end_at == at)

    def handle_timer(self, now_ns: int) -> None:
        """Run every deadline due at ``now_ns``, socket by socket in the order they were
        made."""
        self._now = now_ns
        for ident in self._timers.due(now_ns):
            s = self._socks.get(ident)
            if s is None:
                continue
            if s.end_at is not None and s.end_at <= now_ns:
                s.end_at = None
                self._note("timer_fired", "tcp_time_wait" if s.state == TIME_WAIT
                           else "tcp_keepalive_timer", sock=s.ident, state=s.state)
                self._free(s, event="closed")
                continue
            if s.ack_at is not None and s.ack_at <= now_ns:
                s.ack_at = None
                self._emit(s, ACK, s.snd_nxt, b"", "tcp_delack_timer: delayed ACK")
            if s.rtx_at is not None and s.rtx_at <= now_ns:
                self._retransmit(s)

    def receive(self, seg: Segment, now_ns: int) -> None:
        """One segment from the wire; nothing a peer sends raises."""
        self._now = now_ns
        if seg.dst_ip not in self._addresses:
            self._note("segment_dropped", "ip_rcv", reason="not a local address")
            return
        s = self._by_key.get((seg.dst_ip, seg.dport, seg.src_ip, seg.sport))
        if s is None:
            self._no_socket(seg)
            return
        if s.state == SYN_SENT:
            self._rcv_syn_sent(s, seg)
        elif s.state == SYN_RECV:
            self._rcv_syn_recv(s, seg)
        else:
            self._rcv_synchronized(s, seg)

    # ---- receive paths -------------------------------------------------------------

    def _no_socket(self, seg: Segment) -> None:
        if seg.flags & SYN and not seg.flags & (ACK | RST):
            lst = self._find_listener(seg.dst_ip, seg.dport)
            if lst is not None:
                self._passive_open(lst, seg)
                return
        self._send_reset(seg, "no socket")

    def _find_listener(self, ip: bytes, port: int) -> int | None:
        for ident, lst in self._listeners.items():
            if lst.port != port:
                continue
            if lst.ip == ip or (lst.ip is None and lst.ipv6 == (len(ip) == 16)):
                return ident
        return None

    def _passive_open(self, listener: int, seg: Segment) -> None:
        """tcp_conn_request: a request socket and the SYN-ACK (tcp_v4_send_synack)."""
        lst = self._listeners[listener]
        pending = self._syn_recv.get(listener, 0)
        if pending >= max(lst.backlog, 1):
            self._note("segment_dropped", "tcp_conn_request", reason="SYN queue full")
            return
        if self._neigh.get(seg.src_ip) is None:
            self._note("segment_dropped", "tcp_conn_request", reason="neighbour unresolved")
            return
        s = self._new_sock(seg.dst_ip, seg.dport, seg.src_ip, seg.sport, passive=True,
                           listener=listener)
        self._set_state(s, SYN_RECV, "tcp_conn_request")
        s.ip_id = 0  # a request socket is not a full socket: IP ID 0 (ip_select_ident)
        peer = opts.parse(seg.options)
        s.rcv_nxt = sq.add(seg.seq, 1)
        self._take_syn_options(s, peer)
        s.snd_wnd = seg.window
        s.snd_nxt = sq.add(s.iss, 1)
        s.queue.append(_Chunk(s.iss, b"", SYN | ACK, self._fn(s, "send_synack")
                              + ": SYN_RECV"))
        s.rto_ns = self.shape.rto_initial_ns
        self._output(s)

    def _take_syn_options(self, s: _Sock, peer: opts.ParsedOptions) -> None:
        shape = self.shape
        s.use_ts = shape.timestamps and peer.tsval is not None
        if s.use_ts and peer.tsval is not None:
            s.ts_recent = peer.tsval
        s.use_sack = shape.sack_permitted and peer.sack_perm
        s.use_ws = peer.wscale is not None and shape.window_scale is not None
        if s.use_ws and peer.wscale is not None and shape.window_scale is not None:
            s.snd_wscale = peer.wscale
            s.rcv_wscale = shape.window_scale
        else:
            s.snd_wscale = s.rcv_wscale = 0
        own = self._adv_mss(s)
        peer_mss = peer.mss if peer.mss else (536 if len(s.local_ip) == 4 else 1220)
        s.mss = min(own, peer_mss) - (12 if s.use_ts else 0)

    def _adv_mss(self, s: _Sock) -> int:
        return self.mtu - (40 if len(s.local_ip) == 4 else 60)

    def _rcv_syn_sent(self, s: _Sock, seg: Segment) -> None:
        """tcp_rcv_synsent_state_process."""
        if seg.flags & ACK and seg.ack != sq.add(s.iss, 1):
            if not seg.flags & RST:
                self._send_reset(seg, "unacceptable ACK in SYN_SENT")
            return
        if seg.flags & RST:
            if seg.flags & ACK:
                self._note("state_changed", "tcp_reset", sock=s.ident, old=s.state,
                           new=CLOSED, reason="connection refused")
                self._free(s, event="failed", err=errno.ECONNREFUSED)
            return
        if not seg.flags & SYN:
            return
        if not seg.flags & ACK:
            return  # simultaneous open: not modelled
        peer = opts.parse(seg.options)
        self._take_syn_options(s, peer)
        s.rcv_nxt = sq.add(seg.seq, 1)
        s.snd_una = seg.ack
        s.snd_wnd = seg.window  # a SYN-ACK's window is never scaled
        self._rtt_sample(s, s.queue.pop(0))
        s.rtx_at = None
        s.backoff = s.retries = 0
        s.rto_ns = self._rto(s)
        s.rcv_window = self.shape.active_window
        self._set_state(s, ESTABLISHED, "tcp_finish_connect")
        s.quick = self.shape.quick_acks
        self._emit(s, ACK, s.snd_nxt, b"", "tcp_send_ack: handshake")
        self._events.append(TcpEvent("connected", s.ident))
        self._output(s)

    def _rcv_syn_recv(self, s: _Sock, seg: Segment) -> None:
        """tcp_check_req: the handshake's last ACK, a retransmitted SYN, a RST."""
        if seg.flags & RST:
            if seg.seq == s.rcv_nxt:
                self._free(s)
            return
        if seg.flags & SYN and not seg.flags & ACK:
            if seg.seq == sq.add(s.rcv_nxt, -1):  # the peer retransmitted its SYN
                self._transmit(s, s.queue[0], "tcp_check_req: SYN again, SYN-ACK again")
            return
        if not seg.flags & ACK:
            return
        if seg.ack != sq.add(s.iss, 1):
            self._send_reset(seg, "tcp_check_req: unacceptable ACK")
            return
        synack = s.queue.pop(0)
        s.snd_una = seg.ack
        s.snd_wnd = seg.window << s.snd_wscale
        self._rtt_sample(s, synack)
        s.ip_id = self._rng.getrandbits(16)  # the child is a full socket now
        s.rtx_at = None
        s.backoff = s.retries = 0
        s.rto_ns = self._rto(s)
        s.rcv_window = self.shape.passive_window
        self._set_state(s, ESTABLISHED, "tcp_child_process")
        s.quick = self.shape.quick_acks
        self._events.append(TcpEvent("accepted", s.ident, listener=s.listener))
        if seg.payload or seg.flags & FIN:
            self._rcv_synchronized(s, seg)

    def _rcv_synchronized(self, s: _Sock, seg: Segment) -> None:
        """tcp_rcv_established / tcp_rcv_state_process for a synchronized socket."""
        if seg.flags & RST:
            if seg.seq == s.rcv_nxt:
                self._note("state_changed", "tcp_reset", sock=s.ident, old=s.state,
                           new=CLOSED, reason="RST")
                if s.state == TIME_WAIT:
                    self._free(s)  # tcp_timewait_state_process: TIME_WAIT assassination
                else:
                    self._free(s, event="reset", err=errno.ECONNRESET)
            elif self._in_window(s, seg.seq):
                self._challenge_ack(s, "RST in window")
            return
        if seg.flags & SYN:
            self._challenge_ack(s, "SYN")  # tcp_validate_incoming: RFC 5961 4.2
            return
        if s.state == TIME_WAIT:
            if seg.flags & FIN:  # a retransmitted FIN: ACK it again
                self._emit(s, ACK, s.snd_nxt, b"", "tcp_timewait_state_process: ACK")
            return
        if s.use_ts:
            peer = opts.parse(seg.options)
            if peer.tsval is not None and sq.at_or_after(peer.tsval, s.ts_recent) \
                    and sq.at_or_after(s.rcv_nxt, seg.seq):
                s.ts_recent = peer.tsval
        if seg.flags & ACK:
            if not self._rcv_ack(s, seg):
                return
            if s.ident not in self._socks:
                return
        self._rcv_data(s, seg)

    def _rcv_ack(self, s: _Sock, seg: Segment) -> bool:
        """tcp_ack; False when the segment is discarded."""
        ack = seg.ack
        if sq.after(ack, s.snd_nxt):
            # tcp_ack: SKB_DROP_REASON_TCP_ACK_UNSENT_DATA, the whole segment discarded;
            # tcp_rcv_established sends nothing, tcp_rcv_state_process (the other
            # synchronized states) a challenge ACK
            self._note("segment_dropped", "tcp_ack", sock=s.ident,
                       reason="ACK of unsent data")
            if s.state != ESTABLISHED:
                self._challenge_ack(s, "ACK of unsent data")
            return False
        s.snd_wnd = seg.window << s.snd_wscale
        if not sq.after(ack, s.snd_una):
            return True
        newest: _Chunk | None = None
        while s.queue and s.queue[0].sent_ns >= 0:
            head = s.queue[0]
            end = sq.add(head.seq, len(head.payload) + (1 if head.flags & (SYN | FIN) else 0))
            if not sq.at_or_after(ack, end):
                break
            newest = s.queue.pop(0)
        s.snd_una = ack
        if newest is not None:
            self._rtt_sample(s, newest)
        s.backoff = s.retries = 0
        s.rto_ns = self._rto(s)
        s.rtx_at = (self._timers.arm(s.ident, self._now + s.rto_ns) if self._unacked(s)
                    else None)
        fin_acked = s.fin_queued and ack == s.snd_nxt and not s.queue
        if fin_acked:
            if s.state == FIN_WAIT1:
                self._set_state(s, FIN_WAIT2, "tcp_rcv_state_process")
                if s.orphan:
                    s.end_at = self._timers.arm(s.ident, self._now + self.shape.fin_timeout_ns)
            elif s.state == CLOSING:
                self._enter_time_wait(s)
            elif s.state == LAST_ACK:
                self._set_state(s, CLOSED, "tcp_rcv_state_process")
                self._free(s, event="closed")
                return True
        self._output(s)
        return True

    def _rcv_data(self, s: _Sock, seg: Segment) -> None:
        payload = seg.payload
        start = seg.seq
        fin = bool(seg.flags & FIN)
        if not payload and not fin:
            return
        if sq.after(start, s.rcv_nxt):
            self._emit(s, ACK, s.snd_nxt, b"", "tcp_data_queue: out of order, dup ACK")
            self._note("segment_dropped", "tcp_data_queue", sock=s.ident,
                       reason="out of order (no out-of-order queue modelled)")
            return
        skip = sq.diff(s.rcv_nxt, start)
        if skip > len(payload) or (skip == len(payload) and not fin):
            self._emit(s, ACK, s.snd_nxt, b"", "tcp_send_dupack: old segment")
            return
        payload = payload[skip:]
        if payload and s.state in (FIN_WAIT1, FIN_WAIT2) and s.orphan \
                and self.data_after_close_resets:
            # tcp_rcv_state_process: data for a socket the application closed
            self._note("state_changed", "tcp_rcv_state_process", sock=s.ident, old=s.state,
                       new=CLOSED, reason="TCPABORTONDATA")
            self._send_reset(seg, "tcp_rcv_state_process: data after close")
            self._free(s)
            return
        if payload and s.state in (CLOSE_WAIT, CLOSING, LAST_ACK, TIME_WAIT):
            payload = b""  # after the peer's FIN: nothing more is queued
        if payload:
            s.rcv_nxt = sq.add(s.rcv_nxt, len(payload))
            if s.quick > 0:
                s.quick -= 1
                self._emit(s, ACK, s.snd_nxt, b"", "tcp_send_ack: quick ACK")
            elif s.ack_at is None:
                s.ack_at = self._timers.arm(s.ident, self._now + self.shape.delayed_ack_ns)
            self._events.append(TcpEvent("data", s.ident, data=payload))
        if fin:
            self._rcv_fin(s)

    def _rcv_fin(self, s: _Sock) -> None:
        """tcp_fin."""
        s.rcv_nxt = sq.add(s.rcv_nxt, 1)
        if s.state == ESTABLISHED:
            self._set_state(s, CLOSE_WAIT, "tcp_fin")
            # pingpong mode: the ACK waits for the application's close or the delack timer
            s.ack_at = self._timers.arm(s.ident, self._now + self.shape.delayed_ack_ns)
            self._events.append(TcpEvent("peer_fin", s.ident))
        elif s.state == FIN_WAIT1:
            self._emit(s, ACK, s.snd_nxt, b"", "tcp_fin: FIN_WAIT1 -> CLOSING")
            self._set_state(s, CLOSING, "tcp_fin")
            self._events.append(TcpEvent("peer_fin", s.ident))
        elif s.state == FIN_WAIT2:
            self._emit(s, ACK, s.snd_nxt, b"", "tcp_fin: FIN_WAIT2 -> TIME_WAIT")
            self._events.append(TcpEvent("peer_fin", s.ident))
            self._enter_time_wait(s)

    def _enter_time_wait(self, s: _Sock) -> None:
        self._set_state(s, TIME_WAIT, "tcp_time_wait")
        s.rtx_at = s.ack_at = None
        s.end_at = self._timers.arm(s.ident, self._now + self.shape.time_wait_ns)

    # ---- output ----------------------------------------------------------------------

    def _output(self, s: _Sock) -> None:
        """tcp_write_xmit: send queued chunks the peer's window allows."""
        if s.state in (SYN_SENT, SYN_RECV):
            head = s.queue[0]
            if head.sent_ns < 0:
                self._transmit(s, head, head.comment)
            return
        limit = sq.add(s.snd_una, max(s.snd_wnd, 1))
        for chunk in s.queue:
            if chunk.sent_ns >= 0:
                continue
            end = sq.add(chunk.seq, len(chunk.payload))
            if chunk.payload and sq.after(end, limit):
                break
            self._transmit(s, chunk, chunk.comment)
            if chunk.flags & FIN:
                s.snd_nxt = sq.add(chunk.seq, 1)
            else:
                s.snd_nxt = end

    def _transmit(self, s: _Sock, chunk: _Chunk, comment: str) -> None:
        if chunk.sent_ns < 0:
            chunk.sent_ns = self._now
        else:
            chunk.retransmitted = True
        if s.rtx_at is None:
            s.rtx_at = self._timers.arm(
                s.ident, self._now + (s.rto_ns or self.shape.rto_initial_ns))
        s.ack_at = None  # the segment carries the ACK
        self._emit(s, chunk.flags, chunk.seq, chunk.payload, comment)

    def _retransmit(self, s: _Sock) -> None:
        """tcp_retransmit_timer (the SYN-ACK: reqsk_timer_handler)."""
        head = next((c for c in s.queue if c.sent_ns >= 0), None)
        if head is None:
            s.rtx_at = None
            return
        limit = {SYN_SENT: self.shape.syn_retries,
                 SYN_RECV: self.shape.synack_retries}.get(s.state, self.shape.retries2)
        if s.retries >= limit:
            self._note("timer_fired", "tcp_write_timeout", sock=s.ident, state=s.state,
                       retries=s.retries)
            if s.state == SYN_RECV:
                self._free(s)  # the request is dropped silently
            else:
                self._free(s, event="failed", err=errno.ETIMEDOUT)
            return
        s.retries += 1
        s.backoff += 1
        rto = min(self.shape.rto_max_ns, (s.rto_ns or self.shape.rto_initial_ns) << 1)
        s.rto_ns = rto
        s.rtx_at = None
        self._note("timer_fired", "tcp_retransmit_timer", sock=s.ident, state=s.state,
                   retries=s.retries)
        self._transmit(s, head, f"tcp_retransmit_timer: retransmission {s.retries} "
                       f"({head.comment})")
        s.rtx_at = self._timers.arm(s.ident, self._now + rto)

    def _emit(self, s: _Sock, flags: int, seq: int, payload: bytes, comment: str,
              ack: int | None = None) -> None:
        syn = bool(flags & SYN)
        shape = self.shape
        if syn and not flags & ACK:  # tcp_connect: what the shape offers
            options = opts.build(
                mss=self._adv_mss(s) if shape.mss_option else None,
                sack_perm=shape.sack_permitted,
                ts=(self._tsval(s), 0) if shape.timestamps else None,
                wscale=shape.window_scale)
            window = min(shape.syn_window, 65535)
        elif syn:  # tcp_make_synack: what both sides offered
            options = opts.build(
                mss=self._adv_mss(s) if shape.mss_option else None,
                sack_perm=s.use_sack,
                ts=(self._tsval(s), s.ts_recent) if s.use_ts else None,
                wscale=s.rcv_wscale if s.use_ws else None)
            window = min(shape.synack_window if s.use_ts else shape.syn_window, 65535)
        else:
            options = opts.build(ts=(self._tsval(s), s.ts_recent)) if s.use_ts else b""
            window = min(s.rcv_window >> s.rcv_wscale, 65535)
        ident = s.ip_id
        if s.state not in (SYN_RECV,) and not flags & RST:
            s.ip_id = (s.ip_id + 1) & 0xFFFF
        mac = self._neigh.get(s.remote_ip) or b"\x00" * 6
        segment = Segment(self.mac, mac, s.local_ip, s.remote_ip, s.local_port,
                          s.remote_port, seq & sq.MASK,
                          (s.rcv_nxt if ack is None else ack) if flags & ACK else 0,
                          flags, window, options, payload, vlan=s.vlan, ttl=shape.ttl,
                          ip_id=ident)
        self._out.append(Transmit(segment, comment, conn=s.ident))
        if flags & ACK:
            s.ack_at = None

    def _challenge_ack(self, s: _Sock, why: str) -> None:
        """tcp_send_challenge_ack: first the per-socket limit (__tcp_oow_rate_limited,
        LINUX_MIB_TCPACKSKIPPEDCHALLENGE); the host-wide tcp_challenge_ack_limit is
        INT_MAX by default (no limit), so not modelled."""
        if self._oow_rate_limited(s, why):
            return
        self._emit(s, ACK, s.snd_nxt, b"", f"tcp_send_challenge_ack: {why}")

    def _oow_rate_limited(self, s: _Sock, why: str) -> bool:
        """__tcp_oow_rate_limited: True (send nothing) within tcp_invalid_ratelimit of
        the last such ACK of this socket; otherwise the time is recorded."""
        limit = self.shape.invalid_ratelimit_ns
        last = s.last_oow_ack_ns
        if limit and last is not None and 0 <= self._now - last < limit:
            self._note("segment_dropped", "__tcp_oow_rate_limited", sock=s.ident,
                       reason=f"ACK skipped ({why}): tcp_invalid_ratelimit")
            return True
        s.last_oow_ack_ns = self._now
        return False

    def _send_reset(self, seg: Segment, why: str) -> None:
        """tcp_v4_send_reset / tcp_v6_send_reset: answer a segment no socket takes."""
        if seg.flags & RST:
            return
        mac = self._neigh.get(seg.src_ip) or seg.src_mac
        if seg.flags & ACK:
            seq, ack, flags = seg.ack, 0, RST
        else:
            span = len(seg.payload) + (1 if seg.flags & SYN else 0) \
                + (1 if seg.flags & FIN else 0)
            seq, ack, flags = 0, sq.add(seg.seq, span), RST | ACK
        fn = "tcp_v4_send_reset" if len(seg.src_ip) == 4 else "tcp_v6_send_reset"
        self._note("segment_dropped", fn, reason=why)
        segment = Segment(self.mac, mac, seg.dst_ip, seg.src_ip, seg.dport, seg.sport, seq,
                          ack, flags, 0, b"", b"", vlan=seg.vlan, ttl=self.shape.ttl)
        self._out.append(Transmit(segment, f"{fn}: {why}"))

    # ---- helpers -----------------------------------------------------------------------

    def _new_id(self) -> int:
        ident = self._next_id
        self._next_id += 1
        return ident

    def _new_sock(self, local_ip: bytes, local_port: int, remote_ip: bytes,
                  remote_port: int, *, passive: bool, listener: int | None) -> _Sock:
        rng = self._rng
        s = _Sock(self._new_id(), local_ip, local_port, remote_ip, remote_port,
                  self._addresses.get(local_ip), CLOSED, passive, listener,
                  iss=rng.getrandbits(32), ts_off=rng.getrandbits(32),
                  ip_id=rng.getrandbits(16))
        s.snd_una = s.iss
        s.mss = self._adv_mss(s) - (12 if self.shape.timestamps else 0)
        self._socks[s.ident] = s
        self._by_key[s.key] = s
        return s

    def _free(self, s: _Sock, *, event: str | None = None, err: int = 0) -> None:
        self._socks.pop(s.ident, None)
        if self._by_key.get(s.key) is s:
            del self._by_key[s.key]
        s.rtx_at = s.ack_at = s.end_at = None
        if s.state != CLOSED:
            self._set_state(s, CLOSED, "tcp_done")
        if event is not None:
            self._events.append(TcpEvent(event, s.ident, errno=err))

    def _set_state(self, s: _Sock, new: str, fn: str) -> None:
        """The only place a socket's state changes (traced as ``tcp_state``)."""
        self._note("tcp_state", fn, sock=s.ident, old=s.state, new=new)
        if s.listener is not None and (s.state == SYN_RECV) != (new == SYN_RECV):
            counts = self._syn_recv
            left = counts.get(s.listener, 0) + (1 if new == SYN_RECV else -1)
            if left:
                counts[s.listener] = left
            else:
                del counts[s.listener]
        s.state = new

    def _fn(self, s: _Sock, name: str) -> str:
        return f"tcp_v{4 if len(s.local_ip) == 4 else 6}_{name}"

    def _tsval(self, s: _Sock) -> int:
        return (self._now // 1_000_000 + s.ts_off) & sq.MASK

    def _queued_end(self, s: _Sock) -> int:
        if s.queue:
            last = s.queue[-1]
            return sq.add(last.seq, len(last.payload) + (1 if last.flags & (SYN | FIN) else 0))
        return s.snd_nxt

    def _unacked(self, s: _Sock) -> bool:
        return any(c.sent_ns >= 0 for c in s.queue)

    def _in_window(self, s: _Sock, seq: int) -> bool:
        return sq.between(seq, s.rcv_nxt, sq.add(s.rcv_nxt, s.rcv_window))

    def _rtt_sample(self, s: _Sock, head: _Chunk) -> None:
        """tcp_rtt_estimator (Karn: no sample from a retransmitted segment)."""
        if head.retransmitted or head.sent_ns < 0:
            return
        rtt = max(self._now - head.sent_ns, 1)
        if s.srtt_ns == 0:
            s.srtt_ns, s.mdev_ns = rtt, rtt // 2
        else:
            err = rtt - s.srtt_ns
            s.srtt_ns += err // 8
            s.mdev_ns += (abs(err) - s.mdev_ns) // 4

    def _rto(self, s: _Sock) -> int:
        """tcp_set_rto: srtt plus the variance term, at least TCP_RTO_MIN of it."""
        if s.srtt_ns == 0:
            return self.shape.rto_initial_ns
        rto = s.srtt_ns + max(4 * s.mdev_ns, self.shape.rto_min_ns)
        return min(rto, self.shape.rto_max_ns)

    def _note(self, kind: str, fn: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.host, kind, fn, dict(fields)))
