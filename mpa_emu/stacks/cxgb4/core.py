"""iw_cxgb4's connection manager (cm.c) on the adapter's TCP, sans-IO.

:class:`Cxgb4Core` implements :class:`mpa_emu.cm.api.CoreApi`. Its methods are named
after the cm.c functions they model: the CPL handlers (``act_establish``,
``pass_establish``, ``rx_data``, ``peer_close``, ``peer_abort``, ``close_con_rpl``,
``abort_rpl``, ``terminate``, ``act_open_rpl``), the MPA steps (``send_mpa_req``,
``process_mpa_reply``, ``process_mpa_request``, ``send_mpa_reply``,
``send_mpa_reject``), the verbs (``c4iw_connect``, ``c4iw_accept_cr``,
``c4iw_reject_cr``, ``c4iw_ep_disconnect``) and the timer (``process_timeout``).

The TCP events of :class:`~mpa_emu.stacks.cxgb4.tcp.Cxgb4Tcp` stand for the CPL
messages: ``connected`` is ``CPL_ACT_ESTABLISH``, ``accepted`` is
``CPL_PASS_ACCEPT_REQ`` followed by ``CPL_PASS_ESTABLISH``, ``data`` is ``CPL_RX_DATA``,
``peer_fin`` is ``CPL_PEER_CLOSE``, ``reset`` is ``CPL_ABORT_REQ_RSS``, ``failed`` on a
connecting socket is ``CPL_ACT_OPEN_RPL``; ``CPL_CLOSE_CON_RPL`` is our FIN acknowledged
(the socket past FIN_WAIT1, CLOSING or LAST_ACK); ``CPL_ABORT_RPL_RSS`` follows every RST
we send at once. docs/stacks/cxgb4.md is the behaviour reference.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from errno import (
    EADDRINUSE,
    EADDRNOTAVAIL,
    ECONNREFUSED,
    ECONNRESET,
    EINVAL,
    ENOMEM,
    EOPNOTSUPP,
    ETIMEDOUT,
)
from typing import Any

from mpa_emu.cm.errors import CmError
from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.cm.trace import Trace, make_record
from mpa_emu.stacks.cxgb4 import frames
from mpa_emu.stacks.cxgb4.endpoint import Endpoint, ListenEp
from mpa_emu.stacks.cxgb4.mpa_rx import BAD, INCOMPLETE, accumulate
from mpa_emu.stacks.cxgb4.params import Cxgb4Params
from mpa_emu.stacks.cxgb4.states import (
    DDP_LLP,
    LAYER_MPA,
    MPA_INSUFF_IRD,
    MPA_NOMATCH_RTR,
    STATE_TEXT,
    EpState,
    P2pType,
    QpState,
)
from mpa_emu.stacks.cxgb4.tcp import Cxgb4Tcp
from mpa_emu.stacks.tcp.stack import TcpEvent
from mpa_emu.wire import ddp, mpa
from mpa_emu.wire.segment import Segment, Transmit

S = EpState
SECOND = 1_000_000_000
MAX_PDATA = 255
"""``conn_param->private_data_len`` and ``c4iw_reject_cr``'s ``pdata_len`` are u8."""

# CPL status values of act_open_rpl / peer_abort that the model produces.
CPL_ERR_CONN_RESET = 20
CPL_ERR_XMIT_TIMEDOUT = 32
CPL_ERR_CONN_TIMEDOUT = 31

_FIN_ACKED_STATES = frozenset({"FIN_WAIT2", "TIME_WAIT", "CLOSED"})


@dataclass(frozen=True, slots=True)
class EndpointView:
    """Read-only view of one endpoint (``Host.node``)."""

    conn: int
    state: str
    initiator: bool
    qp_state: str | None
    ird: int
    ord: int
    mpa_rev: int
    crc: bool
    p2p_type: int
    tried_with_mpa_v1: bool
    timer_due_ns: int | None
    tcp_state: str | None


@dataclass(frozen=True, slots=True)
class QpView:
    """Read-only view of a connection's QP (``Host.qp_state``): the ``enum
    c4iw_qp_state`` name and the adapter's TCP state, named as irdma's views name them."""

    iwarp_state: str
    tcp_state: str


_TCP_NAMES = {"SYN_RECV": "SYN_RECEIVED", "FIN_WAIT1": "FIN_WAIT_1",
              "FIN_WAIT2": "FIN_WAIT_2"}


@dataclass(frozen=True, slots=True)
class ListenerView:
    """Read-only view of a listener (``Host.listener``)."""

    ident: int
    state: str
    port: int
    backlog: int


class Cxgb4Core:
    """One host's iw_cxgb4 and adapter. See the module docstring."""

    def __init__(self, name: str, mac: bytes,
                 params: Mapping[str, int | bool] | Cxgb4Params | None = None, *,
                 seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        self.name = name
        self.mac = mac
        self.p = params if isinstance(params, Cxgb4Params) \
            else Cxgb4Params.from_mapping(params or {})
        self.trace = trace
        self.tcp = Cxgb4Tcp(name, mac, self.p, seed=seed, mtu=mtu, trace=trace)
        self._eps: dict[int, Endpoint] = {}
        self._by_sock: dict[int, Endpoint] = {}
        self._listeners: dict[int, ListenEp] = {}
        self._by_tcp_listener: dict[int, ListenEp] = {}
        self._fin_sent: set[int] = set()
        self._addresses: dict[bytes, int | None] = {}
        self._upcalls: deque[Upcall] = deque()
        self._next_conn = 1
        self._next_listener = 1
        self._now = 0

    # ---- trace and kernel log ------------------------------------------------------

    def tr(self, kind: str, fn: str, **fields: Any) -> None:
        """Emit one trace record at the current time."""
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, kind, fn, fields))

    def klog(self, level: str, fn: str, text: str, *, debug: bool = False) -> None:
        """A line the driver writes to the kernel log (``pr_err``, ``pr_warn``,
        ``pr_info``; ``debug`` for ``pr_debug``, seen only with dynamic debug)."""
        self.tr("kernel_log", fn, level=level, text=text, dynamic_debug=debug)

    def _set_state(self, ep: Endpoint, new: EpState, fn: str, *, logged: bool = False) -> None:
        old = ep.state
        ep.state = new
        if logged:  # state_set prints; __state_set does not
            self.klog("debug", "state_set", f"{STATE_TEXT[old]} -> {STATE_TEXT[new]}",
                      debug=True)
        self.tr("state_changed", fn, conn=ep.conn, old=old.name, new=new.name)

    # ---- local stack ------------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """Configure a local address on the port."""
        if len(ip) not in (4, 16):
            raise CmError(EINVAL, f"an address has 4 or 16 bytes, got {len(ip)}")
        self._addresses[ip] = vlan
        self.tcp.add_address(ip, vlan)

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """Remove a local address. cm.c has no notifier for it: offloaded connections
        on it carry on."""
        if ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{ip.hex()} is not a local address")
        del self._addresses[ip]
        self.tcp.remove_address(ip)

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The link goes down: iw_cxgb4 reacts to nothing (no address is removed)."""
        return []

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """A neighbour (L2T) entry; None = unresolved."""
        self.tcp.set_neighbour(ip, mac)

    # ---- sans-IO -------------------------------------------------------------------------

    def receive(self, frame: Segment, now_ns: int) -> None:
        """One frame from the wire, into the adapter's TCP."""
        self._now = now_ns
        self.tcp.receive(frame, now_ns)
        self._drain()

    def handle_timer(self, now_ns: int) -> None:
        """Fire the endpoint timers (``ep_timeout`` -> ``process_timeout``) and the
        TCP's timers due at ``now_ns``."""
        while True:
            due = [ep for ep in self._eps.values()
                   if ep.timer_due is not None and ep.timer_due <= now_ns]
            if not due:
                break
            ep = min(due, key=lambda e: (e.timer_due or 0, e.conn))
            self._now = ep.timer_due or now_ns
            ep.timer_due = None
            self.tr("timer_fired", "ep_timeout", conn=ep.conn, state=ep.state.name)
            self.process_timeout(ep)
            self._drain()
        self._now = now_ns
        self.tcp.handle_timer(now_ns)
        self._drain()

    def get_timer(self) -> int | None:
        """The earliest endpoint or TCP deadline."""
        best = self.tcp.get_timer()
        for ep in self._eps.values():
            if ep.timer_due is not None and (best is None or ep.timer_due < best):
                best = ep.timer_due
        return best

    def frames_to_send(self) -> list[Transmit]:
        """Segments the adapter put on the wire since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event for the ULP."""
        return self._upcalls.popleft() if self._upcalls else None

    # ---- listeners -------------------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        """``c4iw_create_listen``: a listening endpoint in LISTEN and its server TID."""
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, f"listen port {port} out of range 1..65535")
        if ip is not None and len(ip) not in (4, 16):
            raise CmError(EINVAL, f"an address has 4 or 16 bytes, got {len(ip)}")
        if self.tcp.listener_bound(ip, port):
            raise CmError(EADDRINUSE, f"port {port} already has a listener")
        self._now = now_ns
        tcp_listener = self.tcp.listen(ip, port, backlog, ipv6=ipv6)
        lst = ListenEp(self._next_listener, ip, port, backlog, tcp_listener)
        self._next_listener += 1
        self._listeners[lst.ident] = lst
        self._by_tcp_listener[tcp_listener] = lst
        self.klog("debug", "state_set", "idle -> listen", debug=True)
        self.tr("listen_created", "c4iw_create_listen", listener=lst.ident, port=port)
        return lst.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """``c4iw_destroy_listen``: DEAD, the server TID removed. Children keep going; a
        request that completes later finds the parent DEAD and is aborted."""
        lst = self._listeners.get(listener)
        if lst is None or lst.state != S.LISTEN:
            raise CmError(EINVAL, f"no listener {listener}")
        self._now = now_ns
        lst.state = S.DEAD
        self.tcp.unlisten(lst.tcp_listener)
        self.tr("listen_destroyed", "c4iw_destroy_listen", listener=listener)

    # ---- verbs ---------------------------------------------------------------------------

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        """``c4iw_connect``: an active endpoint in CONNECTING and its SYN. Refusals raise
        :class:`CmError` with the kernel's errno before anything changes."""
        limit = self.p.cur_max_read_depth
        if ord > limit or ird > limit or ord < 0 or ird < 0:
            raise CmError(EINVAL, f"ird {ird} / ord {ord} above cur_max_read_depth {limit} "
                          "(c4iw_connect)")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"private data of {len(private_data)} bytes: "
                          "conn_param->private_data_len is a u8 (at most 255)")
        if len(local_ip) != len(remote_ip):
            raise CmError(EINVAL, "local and remote address families differ")
        if not 0 < remote_port < 0x10000 or (local_port is not None
                                             and not 0 < local_port < 0x10000):
            raise CmError(EINVAL, "port 0 or out of range")
        if local_ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{local_ip.hex()} is not a local address")
        self._now = now_ns
        try:
            sock = self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)
        except OSError as exc:
            raise CmError(exc.errno or EINVAL, f"c4iw_connect: {exc.strerror}") from None
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        ep = self._new_ep(True, addrs)
        ep.sock = sock
        self._by_sock[sock] = ep
        ep.has_cm_id = True
        ep.qp = QpState.IDLE
        ep.plen = len(private_data)
        ep.mpa_pkt[mpa.FRAME_SIZE:mpa.FRAME_SIZE + ep.plen] = private_data
        ep.ird = ird
        ep.ord = 1 if self.p.peer2peer and ord == 0 else ord
        self._set_state(ep, S.CONNECTING, "c4iw_connect", logged=True)
        self._drain()
        return ep.conn

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int,
               ird: int | None = None, ord: int | None = None) -> None:
        """``c4iw_accept_cr``. ``ird``/``ord`` are ``conn_param``'s; None takes what an
        rdma_cm application echoes from the request (its ORD as our IRD, its IRD as our
        ORD). Misuse raises :class:`CmError` and changes nothing; a failure of the
        kernel's own checks raises after its error path (the abort) ran."""
        ep = self._held_ep(conn, "accept")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"private data of {len(private_data)} bytes: "
                          "conn_param->private_data_len is a u8 (at most 255)")
        self._now = now_ns
        ep.held = False
        if ep.state != S.MPA_REQ_RCVD:
            self._release_if_dead(ep)
            raise CmError(ECONNRESET, f"c4iw_accept_cr in state {ep.state.name}")
        want_ird = ep.ord if ird is None else ird
        want_ord = ep.ird if ord is None else ord
        err = self.c4iw_accept_cr(ep, bytes(private_data), want_ird, want_ord)
        self._drain()
        if err:
            raise CmError(-err, "c4iw_accept_cr failed; the connection was aborted")

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """``c4iw_reject_cr``: the reject frame, then a FIN (a RST with ``mpa_rev`` 0)."""
        ep = self._held_ep(conn, "reject")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"reject private data of {len(private_data)} bytes: "
                          "pdata_len is a u8 (at most 255)")
        self._now = now_ns
        ep.held = False
        if ep.state != S.MPA_REQ_RCVD:
            self._release_if_dead(ep)
            raise CmError(ECONNRESET, f"c4iw_reject_cr in state {ep.state.name}")
        self.c4iw_reject_cr(ep, bytes(private_data))
        self._drain()

    def close(self, conn: int, *, now_ns: int) -> None:
        """``iw_destroy_cm_id`` on the connection's cm_id: a request still held is
        rejected (``iw_reject`` with no private data), an established connection's QP
        goes to ERROR (abortive close); otherwise the cm_id just goes away."""
        ep = self._ep(conn)
        self._now = now_ns
        if ep.held:
            ep.held = False
            if ep.state == S.MPA_REQ_RCVD:
                self.c4iw_reject_cr(ep, b"")
            else:
                self._release_if_dead(ep)
        elif ep.qp == QpState.RTS and ep.has_cm_id:
            self._modify_qp_from_ulp(ep, QpState.ERROR)
        ep.has_cm_id = False
        self._drain()

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """``rdma_disconnect`` through ``c4iw_modify_qp``: RTS -> CLOSING is a graceful
        ``c4iw_ep_disconnect`` (FIN), RTS -> ERROR an abortive one (RST)."""
        ep = self._ep(conn)
        self._now = now_ns
        self._modify_qp_from_ulp(ep, QpState.CLOSING if graceful else QpState.ERROR)
        self._drain()

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)``: an abortive disconnect from RTS; an idle QP just
        goes to ERROR (the later RTS then fails)."""
        ep = self._ep(conn)
        self._now = now_ns
        if ep.qp == QpState.IDLE:
            ep.qp = QpState.ERROR
            self.tr("qp_state", "c4iw_modify_qp", conn=conn, new="ERROR")
        else:
            self._modify_qp_from_ulp(ep, QpState.ERROR)
        self._drain()

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """irdma's ``irdma_cm_teardown_connections`` has no counterpart in iw_cxgb4."""
        raise CmError(EOPNOTSUPP, "iw_cxgb4 has no teardown of connections by address")

    def device_reset(self, *, now_ns: int) -> list[int]:
        """Not modelled for cxgb4 (a fatal error would close every endpoint with -EIO)."""
        raise CmError(EOPNOTSUPP, "a cxgb4 adapter reset is not modelled")

    # ---- views ---------------------------------------------------------------------------

    def qp_state(self, conn: int) -> Any:
        """The QP's view (:class:`QpView`), None when no QP is bound."""
        ep = self._eps.get(conn)
        if ep is None or ep.qp is None:
            return None
        tcp = None if ep.sock is None else self.tcp.state(ep.sock)
        return QpView(ep.qp.name, "CLOSED" if tcp is None else _TCP_NAMES.get(tcp, tcp))

    def listener(self, ident: int) -> Any:
        """A listener's view, None when unknown."""
        lst = self._listeners.get(ident)
        if lst is None:
            return None
        return ListenerView(lst.ident, lst.state.name, lst.port, lst.backlog)

    def node(self, conn: int) -> Any:
        """An endpoint's view, None once released."""
        ep = self._eps.get(conn)
        if ep is None:
            return None
        return EndpointView(ep.conn, ep.state.name, ep.initiator,
                            None if ep.qp is None else ep.qp.name, ep.ird, ep.ord,
                            ep.attr_version, ep.attr_crc, ep.attr_p2p_type,
                            ep.tried_with_mpa_v1, ep.timer_due,
                            None if ep.sock is None else self.tcp.state(ep.sock))

    def conns(self) -> list[int]:
        """Endpoints not yet released."""
        return list(self._eps)

    # ---- helpers -------------------------------------------------------------------------

    def _ep(self, conn: int) -> Endpoint:
        ep = self._eps.get(conn)
        if ep is None:
            raise CmError(EINVAL, f"no connection {conn}")
        return ep

    def _held_ep(self, conn: int, verb: str) -> Endpoint:
        ep = self._ep(conn)
        if ep.initiator or not ep.held:
            raise CmError(EINVAL, f"{verb} on connection {conn}: no connection request "
                          "is pending for the application")
        return ep

    def _new_ep(self, initiator: bool, addrs: tuple[bytes, int, bytes, int]) -> Endpoint:
        ep = Endpoint(self._next_conn, initiator, addrs[0], addrs[1], addrs[2], addrs[3],
                      state=S.IDLE)
        self._next_conn += 1
        self._eps[ep.conn] = ep
        return ep

    def _upcall(self, fn: str, ep: Endpoint, event: IwEvent, status: int, *,
                pdata: bytes = b"", pdata_len: int = 0, ird: int = 0, ord: int = 0,
                listener: int | None = None, past: int = 0) -> None:
        self._upcalls.append(Upcall(event, ep.conn, status, self._now, ep.local_ip,
                                    ep.local_port, ep.remote_ip, ep.remote_port, pdata,
                                    pdata_len, ird, ord, listener, past))
        self.tr("upcall", fn, conn=ep.conn, event=event.name, status=status)

    def _drain(self) -> None:
        """Hand every TCP event to its CPL handler, then look for FINs acknowledged."""
        while True:
            event = self.tcp.next_event()
            if event is None:
                if not self._check_fin_acked():
                    return
                continue
            self._tcp_event(event)

    def _tcp_event(self, ev: TcpEvent) -> None:
        if ev.kind == "accepted":
            self.pass_accept_req(ev.sock, ev.listener)
            return
        ep = self._by_sock.get(ev.sock)
        if ep is None:
            return
        if ev.kind == "connected":
            self.act_establish(ep)
        elif ev.kind == "data":
            self.rx_data(ep, ev.data)
        elif ev.kind == "peer_fin":
            self.peer_close(ep)
        elif ev.kind == "reset":
            self.peer_abort(ep, CPL_ERR_CONN_RESET)
        elif ev.kind == "failed":
            if ep.state == S.CONNECTING and ep.initiator:
                self.act_open_rpl(ep, ev.errno)
            else:  # the firmware gives up retransmitting: CPL_ABORT_REQ_RSS
                self.peer_abort(ep, CPL_ERR_XMIT_TIMEDOUT)
        elif ev.kind == "closed" and ep.sock in self._fin_sent:
            self._fin_sent.discard(ev.sock)
            self.close_con_rpl(ep)

    def _check_fin_acked(self) -> bool:
        """``CPL_CLOSE_CON_RPL``: our FIN was acknowledged."""
        done = [sock for sock in self._fin_sent
                if (self.tcp.state(sock) or "CLOSED") in _FIN_ACKED_STATES]
        for sock in sorted(done):
            self._fin_sent.discard(sock)
            ep = self._by_sock.get(sock)
            if ep is not None:
                self.close_con_rpl(ep)
        return bool(done)

    def _send(self, ep: Endpoint, data: bytes, comment: str) -> None:
        if ep.sock is not None:
            self.tcp.send(ep.sock, data, self._now, comment)

    # ---- endpoint timer ----------------------------------------------------------------

    def start_ep_timer(self, ep: Endpoint) -> None:
        """``start_ep_timer``: ``ep_timeout_secs`` from now (pr_err if already running)."""
        if ep.timer_due is not None:
            self.klog("err", "start_ep_timer", f"start_ep_timer timer already started! "
                      f"ep#{ep.conn}")
            return
        ep.timer_due = self._now + self.p.ep_timeout_secs * SECOND

    def stop_ep_timer(self, ep: Endpoint) -> None:
        """``stop_ep_timer``."""
        ep.timer_due = None

    def process_timeout(self, ep: Endpoint) -> None:
        """``process_timeout``: the endpoint timer fired."""
        abort = True
        if ep.state == S.MPA_REQ_SENT:
            self.connect_reply_upcall(ep, -ETIMEDOUT)
        elif ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_RCVD, S.MPA_REP_SENT, S.FPDU_MODE):
            pass
        elif ep.state in (S.CLOSING, S.MORIBUND):
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.ERROR
            self.close_complete_upcall(ep, -ETIMEDOUT)
        else:
            abort = False
        if abort:
            self.c4iw_ep_disconnect(ep, True)

    # ---- upcalls -----------------------------------------------------------------------

    def _pdata(self, ep: Endpoint, v2: bool) -> tuple[bytes, int, int]:
        """Private data as the upcalls point at it: after the header (and the 4-byte
        block when v2), ``(u8)`` length; bytes past the received frame counted."""
        start = mpa.FRAME_SIZE + (mpa.RTR_MSG_SIZE if v2 else 0)
        length = (ep.plen - (mpa.RTR_MSG_SIZE if v2 else 0)) & 0xFF
        data = bytes(ep.mpa_pkt[start:start + length])
        data += bytes(length - len(data))
        past = max(0, start + length - ep.mpa_pkt_len)
        return data, length, min(past, length)

    def connect_reply_upcall(self, ep: Endpoint, status: int) -> None:
        """``connect_reply_upcall``: CONNECT_REPLY; private data and IRD/ORD only for 0
        and -ECONNREFUSED; a failure drops the cm_id."""
        if not ep.has_cm_id:
            return
        pdata, length, past, ird, ord = b"", 0, 0, 0, 0
        if status in (0, -ECONNREFUSED):
            if not ep.tried_with_mpa_v1:
                pdata, length, past = self._pdata(ep, True)
                ird, ord = ep.ord, ep.ird
            else:
                pdata, length, past = self._pdata(ep, False)
                ird = ord = self.p.cur_max_read_depth
        self._upcall("connect_reply_upcall", ep, IwEvent.CONNECT_REPLY, status, pdata=pdata,
                     pdata_len=length, ird=ird, ord=ord, past=past)
        if status < 0:
            ep.has_cm_id = False

    def connect_request_upcall(self, ep: Endpoint) -> None:
        """``connect_request_upcall``: CONNECT_REQUEST to the listener's ULP."""
        if not ep.tried_with_mpa_v1:
            pdata, length, past = self._pdata(ep, True)
            ird, ord = ep.ird, ep.ord
        else:
            pdata, length, past = self._pdata(ep, False)
            ird = ord = self.p.cur_max_read_depth
        ep.held = True
        self._upcall("connect_request_upcall", ep, IwEvent.CONNECT_REQUEST, 0, pdata=pdata,
                     pdata_len=length, ird=ird, ord=ord, listener=ep.parent, past=past)

    def established_upcall(self, ep: Endpoint) -> None:
        """``established_upcall``: ESTABLISHED with IRD = ``ep->ord``, ORD = ``ep->ird``."""
        if ep.has_cm_id:
            self._upcall("established_upcall", ep, IwEvent.ESTABLISHED, 0, ird=ep.ord,
                         ord=ep.ird)

    def peer_close_upcall(self, ep: Endpoint) -> None:
        """``peer_close_upcall``: DISCONNECT."""
        if ep.has_cm_id:
            self._upcall("peer_close_upcall", ep, IwEvent.DISCONNECT, 0)

    def peer_abort_upcall(self, ep: Endpoint) -> None:
        """``peer_abort_upcall``: CLOSE -ECONNRESET; drops the cm_id."""
        if ep.has_cm_id:
            self._upcall("peer_abort_upcall", ep, IwEvent.CLOSE, -ECONNRESET)
            ep.has_cm_id = False

    def close_complete_upcall(self, ep: Endpoint, status: int) -> None:
        """``close_complete_upcall``: CLOSE with ``status``; drops the cm_id."""
        if ep.has_cm_id:
            self._upcall("close_complete_upcall", ep, IwEvent.CLOSE, status)
            ep.has_cm_id = False

    # ---- opening -------------------------------------------------------------------------

    def pass_accept_req(self, sock: int, tcp_listener: int | None) -> None:
        """``pass_accept_req`` + ``pass_establish``: a child endpoint for a completed
        passive open, in MPA_REQ_WAIT with the endpoint timer running."""
        lst = None if tcp_listener is None else self._by_tcp_listener.get(tcp_listener)
        addrs = self.tcp.addresses(sock)
        if lst is None or lst.state != S.LISTEN or addrs is None:
            self.klog("err", "pass_accept_req", "pass_accept_req - listening ep not in LISTEN")
            self.tcp.abort(sock, self._now, "reject_cr: CPL_TID_RELEASE")
            return
        ep = self._new_ep(False, addrs)
        ep.sock = sock
        ep.parent = lst.ident
        self._by_sock[sock] = ep
        self._set_state(ep, S.CONNECTING, "pass_accept_req", logged=True)
        self._set_state(ep, S.MPA_REQ_WAIT, "pass_establish")
        self.start_ep_timer(ep)

    def act_establish(self, ep: Endpoint) -> None:
        """``act_establish``: the handshake is done; send the MPA request."""
        self.send_mpa_req(ep, 1 if ep.retry_with_mpa_v1 else self.p.mpa_rev)

    def act_open_rpl(self, ep: Endpoint, err: int) -> None:
        """``act_open_rpl``: the active open failed. A RST to the SYN is
        ``CPL_ERR_CONN_RESET`` (-ECONNRESET, ``status2errno``); a SYN timeout -ETIMEDOUT."""
        status = -ECONNRESET if err != ETIMEDOUT else -ETIMEDOUT
        self.connect_reply_upcall(ep, status)
        self._set_state(ep, S.DEAD, "act_open_rpl", logged=True)
        self.release_ep_resources(ep)

    def send_mpa_req(self, ep: Endpoint, rev: int) -> None:
        """``send_mpa_req``: the request frame; timer; MPA_REQ_SENT."""
        p = self.p
        ep.attr_recv_marker = p.markers_enabled
        if rev == 1:
            ep.tried_with_mpa_v1 = True
            ep.retry_with_mpa_v1 = False
        pdata = bytes(ep.mpa_pkt[mpa.FRAME_SIZE:mpa.FRAME_SIZE + ep.plen])
        data = frames.mpa_request(rev=rev, crc=p.crc_enabled, markers=p.markers_enabled,
                                  ird=ep.ird, ord=ep.ord, peer2peer=p.peer2peer,
                                  p2p_type=p.p2p_type, private_data=pdata)
        old = ep.state.name
        self.start_ep_timer(ep)
        ep.state = S.MPA_REQ_SENT
        ep.attr_initiator = True
        self._send(ep, data, f"send_mpa_req: {old} -> MPA_REQ_SENT (MPA v{rev} request)")
        self.tr("state_changed", "send_mpa_req", conn=ep.conn, old=old, new="MPA_REQ_SENT")

    def rx_data(self, ep: Endpoint, data: bytes) -> None:
        """``rx_data``: stream bytes during MPA negotiation; in RDMA mode the firmware's
        (see :meth:`rdma_rx`)."""
        disconnect = 0
        if ep.state == S.MPA_REQ_SENT:
            disconnect = self.process_mpa_reply(ep, data)
        elif ep.state == S.MPA_REQ_WAIT:
            disconnect = self.process_mpa_request(ep, data)
        elif ep.state == S.FPDU_MODE and ep.qp == QpState.RTS:
            self.rdma_rx(ep, data)
        else:
            self.tr("segment_dropped", "rx_data", conn=ep.conn, state=ep.state.name,
                    reason=f"{len(data)} stream bytes in {ep.state.name}: not looked at",
                    len=len(data))
        if disconnect:
            self.c4iw_ep_disconnect(ep, disconnect == 2)

    def process_mpa_reply(self, ep: Endpoint, data: bytes) -> int:
        """``process_mpa_reply``: 0 (incomplete or done), 1 (close), 2 (abort)."""
        p = self.p
        fn = "process_mpa_reply"
        check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=False,
                                           mpa_rev=p.mpa_rev)
        if check.status == INCOMPLETE:
            if check.pd_length:
                ep.plen = check.pd_length & 0xFF
            return 0
        if check.status == BAD:
            if check.log:
                self.klog("err", fn, check.log)
            self.tr("mpa_error", fn, conn=ep.conn, reason=check.reason, errno=-check.errno)
            self.stop_ep_timer(ep)
            self.connect_reply_upcall(ep, -check.errno)
            return 2
        ep.plen = check.pd_length & 0xFF
        if check.flags & mpa.FLAG_REJECT:
            self.stop_ep_timer(ep)
            self.connect_reply_upcall(ep, -ECONNREFUSED)
            return 2
        self.stop_ep_timer(ep)
        ep.state = S.FPDU_MODE
        self.tr("state_changed", fn, conn=ep.conn, old="MPA_REQ_SENT", new="FPDU_MODE")
        ep.attr_crc = bool(check.flags & mpa.FLAG_CRC) or p.crc_enabled
        ep.attr_xmit_marker = bool(check.flags & mpa.FLAG_MARKERS)
        ep.attr_version = check.rev
        ep.attr_p2p_type = P2pType.DISABLED
        insuff_ird = False
        if check.rev == 2:
            ep.attr_enhanced = bool(check.flags & mpa.FLAG_ENHANCED)
            if ep.attr_enhanced:
                ird_word = int.from_bytes(check.pd[0:2], "big") if len(check.pd) >= 2 else 0
                ord_word = int.from_bytes(check.pd[2:4], "big") if len(check.pd) >= 4 else 0
                insuff_ird = self._negotiate_reply(ep, ird_word, ord_word)
        elif check.rev == 1 and p.peer2peer:
            ep.attr_p2p_type = p.p2p_type
        self.klog("debug", fn, f"crc_enabled={int(ep.attr_crc)}, recv_marker_enabled="
                  f"{int(ep.attr_recv_marker)}, xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                  f", version={ep.attr_version} p2p_type={ep.attr_p2p_type} "
                  f"local-p2p_type = {p.p2p_type}", debug=True)
        rtr_mismatch = False
        if ep.attr_version == 2 and p.peer2peer and ep.attr_p2p_type != p.p2p_type:
            ep.attr_p2p_type = P2pType.DISABLED
            rtr_mismatch = True
        if ep.qp != QpState.IDLE:  # the ULP moved the QP to ERROR: RTS fails
            self.connect_reply_upcall(ep, -EINVAL)
            return 2
        self.rdma_init(ep)
        if rtr_mismatch or insuff_ird:
            what = "RTR mismatch" if rtr_mismatch else "Insufficient IRD"
            self.klog("err", fn, f"{fn}: {what}, sending TERM")
            self.post_terminate(ep, LAYER_MPA | DDP_LLP,
                                MPA_NOMATCH_RTR if rtr_mismatch else MPA_INSUFF_IRD)
            self.connect_reply_upcall(ep, -ENOMEM)
            return 1
        self.connect_reply_upcall(ep, 0)
        return 0

    def _negotiate_reply(self, ep: Endpoint, ird_word: int, ord_word: int) -> bool:
        """The MPA v2 part of ``process_mpa_reply``; True for insufficient IRD."""
        p = self.p
        resp_ird = ird_word & mpa.IRD_ORD_MASK
        resp_ord = ord_word & mpa.IRD_ORD_MASK
        self.klog("debug", "process_mpa_reply", f"responder ird {resp_ird} ord {resp_ord} "
                  f"ep ird {ep.ird} ord {ep.ord}", debug=True)
        insuff = False
        if ep.ird < resp_ord:
            if p.relaxed_ird_negotiation and resp_ord <= p.max_ordird_qp:
                ep.ird = resp_ord
            else:
                insuff = True
        elif ep.ird > resp_ord:
            ep.ird = resp_ord
        if ep.ord > resp_ird:
            if p.relaxed_ird_negotiation:
                ep.ord = resp_ird
            else:
                insuff = True
        if insuff:
            ep.ird = resp_ord
            ep.ord = resp_ird
        if ird_word & frames.MPA_V2_PEER2PEER_MODEL:
            if ord_word & frames.MPA_V2_RDMA_WRITE_RTR:
                ep.attr_p2p_type = P2pType.RDMA_WRITE
            elif ord_word & frames.MPA_V2_RDMA_READ_RTR:
                ep.attr_p2p_type = P2pType.READ_REQ
        return insuff

    def process_mpa_request(self, ep: Endpoint, data: bytes) -> int:
        """``process_mpa_request``: 0 (incomplete or delivered) or 2 (abort)."""
        p = self.p
        fn = "process_mpa_request"
        check, ep.mpa_pkt_len = accumulate(ep.mpa_pkt, ep.mpa_pkt_len, data, request=True,
                                           mpa_rev=p.mpa_rev)
        if check.status == INCOMPLETE:
            if check.pd_length:
                ep.plen = check.pd_length & 0xFF
            return 0
        if check.status == BAD:
            if check.log:
                self.klog("err", fn, check.log)
            self.tr("mpa_error", fn, conn=ep.conn, reason=check.reason)
            self.stop_ep_timer(ep)
            return 2
        ep.plen = check.pd_length & 0xFF
        ep.attr_initiator = False
        ep.attr_crc = bool(check.flags & mpa.FLAG_CRC) or p.crc_enabled
        ep.attr_recv_marker = p.markers_enabled
        ep.attr_xmit_marker = bool(check.flags & mpa.FLAG_MARKERS)
        ep.attr_version = check.rev
        if check.rev == 1:
            ep.tried_with_mpa_v1 = True
        ep.attr_p2p_type = P2pType.DISABLED
        if check.rev == 2:
            ep.attr_enhanced = bool(check.flags & mpa.FLAG_ENHANCED)
            if ep.attr_enhanced:
                ird_word = int.from_bytes(check.pd[0:2], "big") if len(check.pd) >= 2 else 0
                ord_word = int.from_bytes(check.pd[2:4], "big") if len(check.pd) >= 4 else 0
                ep.ird = min(ird_word & mpa.IRD_ORD_MASK, p.cur_max_read_depth)
                ep.ord = min(ord_word & mpa.IRD_ORD_MASK, p.cur_max_read_depth)
                self.klog("debug", fn, f"initiator ird {ep.ird} ord {ep.ord}", debug=True)
                if ird_word & frames.MPA_V2_PEER2PEER_MODEL and p.peer2peer:
                    if ord_word & frames.MPA_V2_RDMA_WRITE_RTR:
                        ep.attr_p2p_type = P2pType.RDMA_WRITE
                    elif ord_word & frames.MPA_V2_RDMA_READ_RTR:
                        ep.attr_p2p_type = P2pType.READ_REQ
        elif check.rev == 1 and p.peer2peer:
            ep.attr_p2p_type = p.p2p_type
        self.klog("debug", fn, f"crc_enabled={int(ep.attr_crc)}, recv_marker_enabled="
                  f"{int(ep.attr_recv_marker)}, xmit_marker_enabled={int(ep.attr_xmit_marker)}"
                  f", version={ep.attr_version} p2p_type={ep.attr_p2p_type}", debug=True)
        ep.state = S.MPA_REQ_RCVD
        self.tr("state_changed", fn, conn=ep.conn, old="MPA_REQ_WAIT", new="MPA_REQ_RCVD")
        parent = None if ep.parent is None else self._listeners.get(ep.parent)
        if parent is None or parent.state == S.DEAD:
            self.tr("upcall_dropped", fn, conn=ep.conn, reason="the listener is DEAD")
            return 2
        self.connect_request_upcall(ep)
        return 0

    def c4iw_accept_cr(self, ep: Endpoint, pdata: bytes, ird: int, ord: int) -> int:
        """``c4iw_accept_cr`` from its checks on: 0 or the negative errno it returns."""
        p = self.p
        fn = "c4iw_accept_cr"
        limit = p.cur_max_read_depth
        if ord > limit or ird > limit:
            self.c4iw_ep_disconnect(ep, True)
            return -EINVAL
        if ep.attr_version == 2 and ep.attr_enhanced:
            if ord > ep.ird:
                if p.relaxed_ird_negotiation:
                    ord = ep.ird
                else:
                    ep.ird, ep.ord = ird, ord
                    self.send_mpa_reject(ep, pdata)
                    self.c4iw_ep_disconnect(ep, True)
                    return -ENOMEM
            if ird < ep.ord:
                if p.relaxed_ird_negotiation and ep.ord <= p.max_ordird_qp:
                    ird = ep.ord
                else:
                    self.c4iw_ep_disconnect(ep, True)
                    return -ENOMEM
        ep.ird, ep.ord = ird, ord
        if ep.attr_version == 1:
            if p.peer2peer and ep.ird == 0:
                ep.ird = 1
        elif p.peer2peer and ep.attr_p2p_type != P2pType.DISABLED \
                and p.p2p_type == P2pType.READ_REQ and ep.ird == 0:
            ep.ird = 1
        self.klog("debug", fn, f"ird {ep.ird} ord {ep.ord}", debug=True)
        ep.has_cm_id = True
        ep.qp = QpState.IDLE
        self.rdma_init(ep)
        self.send_mpa_reply(ep, pdata)
        ep.state = S.FPDU_MODE
        self.tr("state_changed", fn, conn=ep.conn, old="MPA_REP_SENT", new="FPDU_MODE")
        # fw4_ack with STOP_MPA_TIMER: the model takes the reply as acknowledged at once.
        self.stop_ep_timer(ep)
        self.established_upcall(ep)
        return 0

    def c4iw_reject_cr(self, ep: Endpoint, pdata: bytes) -> None:
        """``c4iw_reject_cr``: reject frame and FIN (``mpa_rev`` 0: RST)."""
        abort = self.p.mpa_rev == 0
        if not abort:
            self.send_mpa_reject(ep, pdata)
        self.stop_ep_timer(ep)
        self.c4iw_ep_disconnect(ep, abort)

    def _reply(self, ep: Endpoint, pdata: bytes, reject: bool) -> bytes:
        p = self.p
        if reject:
            p2p = p.p2p_type
        else:  # send_mpa_reply: A and the local type only with a negotiated RTR
            p2p = p.p2p_type if ep.attr_p2p_type != P2pType.DISABLED else P2pType.DISABLED
        return frames.mpa_reply(
            reject=reject, rev=ep.attr_version, enhanced=ep.attr_enhanced, crc=ep.attr_crc,
            markers=ep.attr_recv_marker, ird=ep.ird, ord=ep.ord,
            peer2peer=p.peer2peer and (reject or ep.attr_p2p_type != P2pType.DISABLED),
            p2p_type=p2p, private_data=pdata, copy_private_data=ep.plen != 0)

    def send_mpa_reject(self, ep: Endpoint, pdata: bytes) -> None:
        """``send_mpa_reject``: R, the v2 block with the request's IRD/ORD when v2 with S.
        In the v2 branch the private data is copied only when ``ep->plen`` (the request's
        PD_Length as a u8) is not 0."""
        data = self._reply(ep, pdata, True)
        self._send(ep, data, f"send_mpa_reject: {ep.state.name} (MPA reject, "
                   f"{len(pdata)} bytes of private data)")

    def send_mpa_reply(self, ep: Endpoint, pdata: bytes) -> None:
        """``send_mpa_reply``: C and M as negotiated, the v2 block, MPA_REP_SENT."""
        data = self._reply(ep, pdata, False)
        ep.state = S.MPA_REP_SENT
        self._send(ep, data, "send_mpa_reply: MPA_REQ_RCVD -> MPA_REP_SENT")

    # ---- RDMA mode (the firmware after FW_RI_INIT_WR) ------------------------------------

    def rdma_init(self, ep: Endpoint) -> None:
        """``c4iw_modify_qp(RTS)`` -> ``rdma_init``: the initiator's firmware sends the
        RTR (``build_rtr_msg``) unless the negotiated type is DISABLED."""
        ep.qp = QpState.RTS
        self.tr("qp_state", "rdma_init", conn=ep.conn, new="RTS", p2p_type=ep.attr_p2p_type)
        if ep.attr_initiator:
            rtr = frames.rtr(ep.attr_p2p_type, crc=ep.attr_crc)
            if rtr is not None:
                kind = "zero-length RDMA Write" if ep.attr_p2p_type == P2pType.RDMA_WRITE \
                    else "zero-length RDMA Read Request"
                self._send(ep, rtr, f"rdma_init: RTR, {kind} (build_rtr_msg)")

    def post_terminate(self, ep: Endpoint, layer_etype: int, ecode: int) -> None:
        """``c4iw_modify_qp(TERMINATE, send_term)`` -> ``post_terminate``."""
        ep.qp = QpState.TERMINATE
        self._send(ep, frames.terminate(layer_etype, ecode, crc=ep.attr_crc),
                   f"post_terminate: Terminate layer_etype {layer_etype:#04x} "
                   f"ecode {ecode:#04x}")

    def rdma_rx(self, ep: Endpoint, data: bytes) -> None:
        """The firmware takes FPDUs in order: a Terminate raises ``CPL_RDMA_TERMINATE``,
        a zero-length Read Request gets its zero-length Read Response, anything else is
        dropped (no memory is registered)."""
        ep.rx_fpdu += data
        while ep.qp == QpState.RTS and len(ep.rx_fpdu) >= 2:
            try:
                fpdu = mpa.unframe_fpdu(bytes(ep.rx_fpdu))
                seg = ddp.parse_segment(fpdu.ulpdu)
            except (mpa.MpaFormatError, ddp.DdpFormatError) as exc:
                if isinstance(exc, mpa.MpaFormatError) and "needs" in str(exc):
                    return  # wait for the rest of the FPDU
                self.tr("segment_dropped", "firmware RDMA", conn=ep.conn, reason=str(exc))
                ep.rx_fpdu.clear()
                return
            del ep.rx_fpdu[:fpdu.wire_length]
            if seg.opcode == ddp.Opcode.TERMINATE:
                self.terminate(ep)
                return
            rr = seg.read_request
            if rr is not None and rr.size == 0:
                self._send(ep, frames.read_response(rr.sink_stag, rr.sink_to,
                                                    crc=ep.attr_crc),
                           "firmware: RDMA Read Response (zero-length, answers the RTR)")
                continue
            self.tr("fpdu_received", "firmware RDMA", conn=ep.conn,
                    opcode=ddp.OPCODE_NAMES.get(seg.opcode, str(seg.opcode)),
                    len=len(seg.payload))

    def terminate(self, ep: Endpoint) -> None:
        """``terminate``: a Terminate arrived: QP to TERMINATE and an abortive close."""
        self.klog("warn", "terminate", f"TERM received tid {ep.conn} qpid {ep.conn}")
        ep.qp = QpState.TERMINATE
        self.c4iw_ep_disconnect(ep, True)

    # ---- closing -------------------------------------------------------------------------

    def _modify_qp_from_ulp(self, ep: Endpoint, target: QpState) -> None:
        """``c4iw_modify_qp`` with ``internal`` 0 and NEXT_STATE (iwcm_modify_qp_sqd/err)."""
        if ep.qp == QpState.RTS:
            ep.qp = target
            self.tr("qp_state", "c4iw_modify_qp", conn=ep.conn, new=target.name)
            self.c4iw_ep_disconnect(ep, target == QpState.ERROR)
        elif ep.qp == QpState.CLOSING and target == QpState.ERROR:
            ep.qp = QpState.ERROR
            self.tr("qp_state", "c4iw_modify_qp", conn=ep.conn, new="ERROR")
        else:
            state = "no QP" if ep.qp is None else f"QP in {ep.qp.name}"
            raise CmError(EINVAL, f"c4iw_modify_qp to {target.name}: {state}")

    def c4iw_ep_disconnect(self, ep: Endpoint, abrupt: bool) -> None:
        """``c4iw_ep_disconnect``: FIN (CLOSING/MORIBUND) or RST (ABORTING)."""
        fn = "c4iw_ep_disconnect"
        self.klog("debug", fn, f"ep#{ep.conn} state {STATE_TEXT[ep.state]}, abrupt "
                  f"{int(abrupt)}", debug=True)
        close = False
        old = ep.state
        if ep.state in (S.MPA_REQ_WAIT, S.MPA_REQ_SENT, S.MPA_REQ_RCVD, S.MPA_REP_SENT,
                        S.FPDU_MODE, S.CONNECTING):
            close = True
            if abrupt:
                ep.state = S.ABORTING
            else:
                # the model stops the MPA timer at accept (fw4_ack taken as immediate),
                # so the STOP_MPA_TIMER fix-up never applies; a running timer stays
                # (start_ep_timer's "already started" pr_err)
                ep.state = S.CLOSING
                self.start_ep_timer(ep)
            ep.close_sent = True
        elif ep.state == S.CLOSING:
            if not ep.close_sent:
                ep.close_sent = True
                close = True
                if abrupt:
                    self.stop_ep_timer(ep)
                    ep.state = S.ABORTING
                else:
                    ep.state = S.MORIBUND
        else:
            self.klog("debug", fn, f"ignoring disconnect ep#{ep.conn} state {int(ep.state)}",
                      debug=True)
        if not close:
            return
        self.tr("state_changed", fn, conn=ep.conn, old=old.name, new=ep.state.name)
        if abrupt:
            self.send_abort(ep, old)
        else:
            self.send_halfclose(ep, old)

    def send_halfclose(self, ep: Endpoint, old: EpState) -> None:
        """``send_halfclose``: ``CPL_CLOSE_CON_REQ``, the FIN."""
        if ep.sock is None:
            return
        self.tcp.shutdown(ep.sock, self._now,
                          f"send_halfclose: {old.name} -> {ep.state.name} (FIN)")
        self._fin_sent.add(ep.sock)

    def send_abort(self, ep: Endpoint, old: EpState) -> None:
        """``send_abort``: ``CPL_ABORT_REQ``, the RST; ``CPL_ABORT_RPL_RSS`` follows."""
        if ep.sock is not None:
            self.tcp.abort(ep.sock, self._now,
                           f"send_abort: {old.name} -> {ep.state.name} (RST)")
            self._fin_sent.discard(ep.sock)
        self.abort_rpl(ep)

    def abort_rpl(self, ep: Endpoint) -> None:
        """``abort_rpl``: ABORTING -> DEAD, CLOSE -ECONNRESET, resources released."""
        if ep.state != S.ABORTING:
            self.klog("err", "abort_rpl", f"abort_rpl ep#{ep.conn} state {int(ep.state)}")
            return
        self._set_state(ep, S.DEAD, "abort_rpl")
        self.close_complete_upcall(ep, -ECONNRESET)
        self.release_ep_resources(ep)

    def close_con_rpl(self, ep: Endpoint) -> None:
        """``close_con_rpl``: our FIN acknowledged."""
        if ep.state == S.CLOSING:
            self._set_state(ep, S.MORIBUND, "close_con_rpl")
        elif ep.state == S.MORIBUND:
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.IDLE
            self.close_complete_upcall(ep, 0)
            self._set_state(ep, S.DEAD, "close_con_rpl")
            self.release_ep_resources(ep)

    def peer_close(self, ep: Endpoint) -> None:
        """``peer_close``: the peer's FIN (``CPL_PEER_CLOSE``)."""
        fn = "peer_close"
        disconnect = True
        release = False
        st = ep.state
        if st == S.MPA_REQ_WAIT:
            self._set_state(ep, S.CLOSING, fn)
        elif st == S.MPA_REQ_SENT:
            self._set_state(ep, S.CLOSING, fn)
            self.connect_reply_upcall(ep, -ECONNRESET)
        elif st in (S.MPA_REQ_RCVD, S.MPA_REP_SENT):
            self._set_state(ep, S.CLOSING, fn)
        elif st == S.FPDU_MODE:
            self.start_ep_timer(ep)
            self._set_state(ep, S.CLOSING, fn)
            if ep.qp == QpState.RTS:
                ep.qp = QpState.CLOSING
            # c4iw_modify_qp(CLOSING) returns 0, or -EINVAL from another QP state; only
            # -ECONNRESET (rdma_fini woken by a peer abort) would skip the upcall
            self.peer_close_upcall(ep)
        elif st == S.CLOSING:
            self._set_state(ep, S.MORIBUND, fn)
            disconnect = False
        elif st == S.MORIBUND:
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.IDLE
            self.close_complete_upcall(ep, 0)
            self._set_state(ep, S.DEAD, fn)
            release = True
            disconnect = False
        else:  # ABORTING, DEAD
            disconnect = False
        if disconnect:
            self.c4iw_ep_disconnect(ep, False)
        if release:
            self.release_ep_resources(ep)

    def peer_abort(self, ep: Endpoint, status: int) -> None:
        """``peer_abort``: the peer's RST (``CPL_ABORT_REQ_RSS``)."""
        fn = "peer_abort"
        st = ep.state
        p = self.p
        if ep.sock is not None:
            self._fin_sent.discard(ep.sock)
        if st == S.MPA_REQ_WAIT:
            self.stop_ep_timer(ep)
        elif st == S.MPA_REQ_SENT:
            self.stop_ep_timer(ep)
            if status != CPL_ERR_CONN_RESET or p.mpa_rev == 1 or \
                    (p.mpa_rev == 2 and ep.tried_with_mpa_v1):
                self.connect_reply_upcall(ep, -ECONNRESET)
            else:
                self.klog("info", fn, f"{fn}: mpa_rev={p.mpa_rev}. Retrying with mpav1")
                ep.retry_with_mpa_v1 = True
        elif st in (S.MORIBUND, S.CLOSING, S.FPDU_MODE):
            self.stop_ep_timer(ep)
            if ep.has_cm_id and ep.qp is not None:
                ep.qp = QpState.ERROR
            self.peer_abort_upcall(ep)
        elif st == S.DEAD:
            self.klog("warn", fn, f"{fn} PEER_ABORT IN DEAD STATE!!!!")
            return
        if st == S.ABORTING:
            return
        self._set_state(ep, S.DEAD, fn)
        if ep.retry_with_mpa_v1:
            self.c4iw_reconnect(ep)
        else:
            self.release_ep_resources(ep)

    def c4iw_reconnect(self, ep: Endpoint) -> None:
        """``c4iw_reconnect``: a new TCP connection from the same local address and port
        (the cm_id's), CONNECTING; ``act_establish`` then sends a v1 request."""
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
        try:
            sock = self.tcp.connect(ep.local_ip, ep.remote_ip, ep.remote_port,
                                    ep.local_port, self._now)
        except OSError:
            self.connect_reply_upcall(ep, -ECONNRESET)
            self.release_ep_resources(ep)
            return
        ep.sock = sock
        self._by_sock[sock] = ep
        self._set_state(ep, S.CONNECTING, "c4iw_reconnect", logged=True)

    def release_ep_resources(self, ep: Endpoint) -> None:
        """``release_ep_resources``: the endpoint leaves the tables (a request the ULP
        still holds stays until it answers)."""
        if ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
            self._fin_sent.discard(ep.sock)
        self.stop_ep_timer(ep)
        if not ep.held:
            self._eps.pop(ep.conn, None)

    def _release_if_dead(self, ep: Endpoint) -> None:
        if ep.state == S.DEAD and ep.sock not in self._by_sock:
            self._eps.pop(ep.conn, None)
