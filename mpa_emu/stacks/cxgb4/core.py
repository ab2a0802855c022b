"""iw_cxgb4's connection manager (cm.c) on the adapter's TCP, sans-IO.

:class:`Cxgb4Core` implements :class:`mpa_emu.stacks.contract.api.CoreApi`: the verbs
(``c4iw_connect``, ``c4iw_accept_cr``, ``c4iw_reject_cr``, ``c4iw_create_listen`` ...),
the views, and the dispatch of the adapter's TCP events to cm.c's handlers. The handlers
are functions named after the cm.c functions they model, given the adapter's
:class:`~mpa_emu.stacks.cxgb4.cm.Cxgb4Cm` and grouped as cm.c groups them: the CPL
handlers and MPA steps of the set-up in :mod:`~mpa_emu.stacks.cxgb4.opening`
(``pass_accept_req``, ``act_establish``, ``rx_data``, ``send_mpa_req``,
``process_mpa_reply``, ``process_mpa_request`` ...), the upcalls in
:mod:`~mpa_emu.stacks.cxgb4.upcalls`, RDMA mode in :mod:`~mpa_emu.stacks.cxgb4.rdma`,
the timeout and the close paths in :mod:`~mpa_emu.stacks.cxgb4.closing`
(``c4iw_ep_disconnect``, ``peer_close``, ``peer_abort``, ``close_con_rpl`` ...).

The TCP events of :class:`~mpa_emu.stacks.cxgb4.tcp.Cxgb4Tcp` stand for the CPL
messages: ``connected`` is ``CPL_ACT_ESTABLISH``, ``accepted`` is
``CPL_PASS_ACCEPT_REQ`` followed by ``CPL_PASS_ESTABLISH``, ``data`` is ``CPL_RX_DATA``,
``peer_fin`` is ``CPL_PEER_CLOSE``, ``reset`` is ``CPL_ABORT_REQ_RSS``, ``failed`` on a
connecting socket is ``CPL_ACT_OPEN_RPL``; ``CPL_CLOSE_CON_RPL`` is our FIN acknowledged
(the socket past FIN_WAIT1, CLOSING or LAST_ACK); ``closed`` after that, with no FIN from
the peer (the adapter's FIN_WAIT2 timer), is ``CPL_ABORT_REQ_RSS`` with
``CPL_ERR_FINWAIT2_TIMEDOUT``; ``CPL_ABORT_RPL_RSS`` follows every RST we send at once.
docs/stacks/cxgb4.md is the behaviour reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from errno import EADDRINUSE, EADDRNOTAVAIL, ECONNRESET, EINVAL, EOPNOTSUPP
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch, SendCompletion
from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.cxgb4 import frames
from mpa_emu.stacks.cxgb4.closing import (
    close_con_rpl,
    modify_qp_from_ulp,
    peer_abort,
    peer_close,
    process_timeout,
)
from mpa_emu.stacks.cxgb4.cm import (
    CPL_ERR_CONN_RESET,
    CPL_ERR_FINWAIT2_TIMEDOUT,
    CPL_ERR_XMIT_TIMEDOUT,
    Cxgb4Cm,
    alloc_ep,
    ep_send,
    release_if_dead,
    state_set,
)
from mpa_emu.stacks.cxgb4.endpoint import Endpoint, ListenEp
from mpa_emu.stacks.cxgb4.opening import (
    act_establish,
    act_open_rpl,
    c4iw_accept_cr,
    c4iw_reject_cr,
    pass_accept_req,
    rx_data,
)
from mpa_emu.stacks.cxgb4.params import Cxgb4Params
from mpa_emu.stacks.cxgb4.states import EpState, QpState
from mpa_emu.stacks.cxgb4.tcp import Cxgb4Tcp
from mpa_emu.stacks.tcp.stack import TcpEvent
from mpa_emu.wire import ddp, mpa
from mpa_emu.wire.segment import Segment, Transmit

S = EpState
SECOND = 1_000_000_000
MAX_PDATA = 255
"""``conn_param->private_data_len`` and ``c4iw_reject_cr``'s ``pdata_len`` are u8."""


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
        self.base = CoreBase(name, trace)
        """The contract's mechanics: state changes, trace, kernel log, upcall queue."""
        self.tcp = Cxgb4Tcp(name, mac, self.p, seed=seed, mtu=mtu, trace=trace)
        self._cm = Cxgb4Cm(self.p, self.tcp, self.base)
        """What cm.c's handlers are given: the endpoint and listener tables, the timers."""
        self._addresses: dict[bytes, int | None] = {}
        self._next_listener = 1

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each endpoint (not listeners): created with its 4-tuple on
        its first state change, each change (an :class:`EpState`), freed when it leaves
        the tables (:class:`mpa_emu.stacks.contract.api.WatchedCore`)."""
        self.base.watch_nodes(watch)

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
        self.base.now_ns = now_ns
        self.tcp.receive(frame, now_ns)
        self._drain()

    def handle_timer(self, now_ns: int) -> None:
        """Fire the endpoint timers (``ep_timeout`` -> ``process_timeout``) and the
        TCP's timers due at ``now_ns``."""
        while True:
            # The earliest first (ties: the oldest endpoint), each from its own instant.
            due = self._cm.ep_timers.next_due(now_ns)
            if due is None:
                break
            self.base.now_ns, conn = due
            ep = self._cm.eps[conn]
            ep.timer_due = None
            self.base.record("timer_fired", "ep_timeout", conn=ep.conn, state=ep.state.name)
            process_timeout(self._cm, ep)
            self._drain()
        self.base.now_ns = now_ns
        self.tcp.handle_timer(now_ns)
        self._drain()

    def get_timer(self) -> int | None:
        """The earliest endpoint or TCP deadline."""
        best = self.tcp.get_timer()
        at = self._cm.ep_timers.earliest()
        return at if best is None or (at is not None and at < best) else best

    def frames_to_send(self) -> list[Transmit]:
        """Segments the adapter put on the wire since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event for the ULP."""
        return self.base.next_event()

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
        self.base.now_ns = now_ns
        # c4iw_create_listen stores the backlog and nothing checks it: no SYN queue limit
        tcp_listener = self.tcp.listen(ip, port, 1 << 30, ipv6=ipv6)
        lst = ListenEp(self._next_listener, ip, port, backlog, tcp_listener)
        self._next_listener += 1
        self._cm.listeners[lst.ident] = lst
        self._cm.by_tcp_listener[tcp_listener] = lst
        self.base.kernel_log("debug", "state_set", "idle -> listen", dynamic_debug=True)
        self.base.record("listen_created", "c4iw_create_listen", listener=lst.ident, port=port)
        return lst.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """``c4iw_destroy_listen``: DEAD, the server TID removed. Children keep going; a
        request that completes later finds the parent DEAD and is aborted."""
        lst = self._cm.listeners.get(listener)
        if lst is None or lst.state != S.LISTEN:
            raise CmError(EINVAL, f"no listener {listener}")
        self.base.now_ns = now_ns
        state_set(self._cm, lst, S.DEAD, "c4iw_destroy_listen", logged=True)
        self.tcp.unlisten(lst.tcp_listener)
        self.base.record("listen_destroyed", "c4iw_destroy_listen", listener=listener)

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
        self.base.now_ns = now_ns
        try:
            sock = self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)
        except OSError as exc:
            raise CmError(exc.errno or EINVAL, f"c4iw_connect: {exc.strerror}") from None
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        ep = alloc_ep(self._cm, True, addrs)
        ep.sock = sock
        self._cm.by_sock[sock] = ep
        ep.has_cm_id = True
        ep.qp = QpState.IDLE
        ep.plen = len(private_data)
        ep.mpa_pkt[mpa.FRAME_SIZE:mpa.FRAME_SIZE + ep.plen] = private_data
        ep.ird = ird
        ep.ord = 1 if self.p.peer2peer and ord == 0 else ord
        state_set(self._cm, ep, S.CONNECTING, "c4iw_connect", logged=True)
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
        self.base.now_ns = now_ns
        ep.held = False
        if ep.state != S.MPA_REQ_RCVD:
            release_if_dead(self._cm, ep)
            raise CmError(ECONNRESET, f"c4iw_accept_cr in state {ep.state.name}")
        # What the application got (connect_request_upcall: ep->ird/ord for v2,
        # cur_max_read_depth for v1), echoed: its ORD as our IRD, its IRD as our ORD.
        if ep.tried_with_mpa_v1:
            got_ird = got_ord = self.p.cur_max_read_depth
        else:
            got_ird, got_ord = ep.ird, ep.ord
        want_ird = got_ord if ird is None else ird
        want_ord = got_ird if ord is None else ord
        err = c4iw_accept_cr(self._cm, ep, bytes(private_data), want_ird, want_ord)
        self._drain()
        if err:
            raise CmError(-err, "c4iw_accept_cr failed; the connection was aborted")

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """``c4iw_reject_cr``: the reject frame, then a FIN (a RST with ``mpa_rev`` 0)."""
        ep = self._held_ep(conn, "reject")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"reject private data of {len(private_data)} bytes: "
                          "pdata_len is a u8 (at most 255)")
        self.base.now_ns = now_ns
        ep.held = False
        if ep.state != S.MPA_REQ_RCVD:
            release_if_dead(self._cm, ep)
            raise CmError(ECONNRESET, f"c4iw_reject_cr in state {ep.state.name}")
        c4iw_reject_cr(self._cm, ep, bytes(private_data))
        self._drain()

    def close(self, conn: int, *, now_ns: int) -> None:
        """``iw_destroy_cm_id`` on the connection's cm_id: a request still held is
        rejected (``iw_reject`` with no private data), an established connection's QP
        goes to ERROR (abortive close); otherwise the cm_id just goes away. An active
        connect whose CONNECT_REPLY has not gone up yet makes the destroy wait for it
        (``destroy_cm_id``: ``wait_event`` on ``IWCM_F_CONNECT_WAIT``, which
        ``iw_cm_connect`` set and ``cm_conn_rep_handler`` clears): the reply goes up,
        then the destroy goes on from the state it left."""
        ep = self._ep(conn)
        self.base.now_ns = now_ns
        if ep.initiator and ep.has_cm_id and ep.state in (S.CONNECTING, S.MPA_REQ_SENT):
            ep.destroy_waiting = True
            self.base.record("verb_deferred", "destroy_cm_id", conn=conn,
                             why="IWCM_F_CONNECT_WAIT: waiting for CONNECT_REPLY")
            return
        self._destroy_cm_id(ep)
        self._drain()

    def _destroy_cm_id(self, ep: Endpoint) -> None:
        """What ``iw_destroy_cm_id`` does to the endpoint once it no longer waits."""
        if ep.held:
            ep.held = False
            if ep.state == S.MPA_REQ_RCVD:
                c4iw_reject_cr(self._cm, ep, b"")
            else:
                release_if_dead(self._cm, ep)
        elif ep.qp == QpState.RTS and ep.has_cm_id:
            # destroy_cm_id in ESTABLISHED: iwcm_modify_qp_err, an abortive close
            modify_qp_from_ulp(self._cm, ep, QpState.ERROR)
        ep.has_cm_id = False

    def _run_waiting_destroys(self) -> bool:
        """The destroys that waited for a CONNECT_REPLY now gone up (or for an endpoint
        gone): each goes on, after the handler that sent the reply."""
        waiting = [ep for ep in self._cm.eps.values() if ep.destroy_waiting
                   and not (ep.has_cm_id and ep.state in (S.CONNECTING, S.MPA_REQ_SENT))]
        for ep in waiting:
            ep.destroy_waiting = False
            self._destroy_cm_id(ep)
        return bool(waiting)

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """``rdma_disconnect`` through ``c4iw_modify_qp``: RTS -> CLOSING is a graceful
        ``c4iw_ep_disconnect`` (FIN), RTS -> ERROR an abortive one (RST)."""
        ep = self._ep(conn)
        self.base.now_ns = now_ns
        modify_qp_from_ulp(self._cm, ep, QpState.CLOSING if graceful else QpState.ERROR)
        self._drain()

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)``: an abortive disconnect from RTS; an idle QP just
        goes to ERROR (the later RTS then fails)."""
        ep = self._ep(conn)
        self.base.now_ns = now_ns
        if ep.qp == QpState.IDLE:
            ep.qp = QpState.ERROR
            self.base.record("qp_state", "c4iw_modify_qp", conn=conn, new="ERROR")
        else:
            modify_qp_from_ulp(self._cm, ep, QpState.ERROR)
        self._drain()

    def post_recv(self, conn: int, length: int, *, now_ns: int = 0) -> None:
        """``c4iw_post_receive``: a receive buffer of ``length`` bytes for the next Send
        (an RQE the adapter takes). A QP in ERROR or TERMINATE refuses it (-EINVAL)."""
        ep = self._ep(conn)
        if not 0 <= length < 1 << 31:
            raise CmError(EINVAL, f"post_recv: length {length} out of range")
        if ep.qp in (QpState.ERROR, QpState.TERMINATE):
            raise CmError(EINVAL, f"post_recv: the QP is in {ep.qp.name}")
        ep.recvq.append(length)

    def post_send(self, conn: int, payload: bytes, *, now_ns: int) -> None:
        """``c4iw_post_send`` of an RDMA Send: the adapter sends it as FPDUs that fit the
        MSS, MSN counting from 1 (RFC 5041 section 5.1). Only an RTS QP sends."""
        ep = self._ep(conn)
        if ep.qp != QpState.RTS or ep.sock is None or ep.state != S.FPDU_MODE:
            raise CmError(EINVAL, f"post_send: connection {conn} has no RTS QP")
        self.base.now_ns = now_ns
        ep.tx_msn += 1
        room = max(4, self.tcp.mss(ep.sock) - ddp.UNTAGGED_HEADER_LEN - 2 - 4)
        room -= room % 4
        data = bytes(payload)
        pos = 0
        while True:
            piece = data[pos:pos + room]
            last = pos + room >= len(data)
            ep_send(self._cm, ep, frames.send(piece, ep.tx_msn, pos, last=last, crc=ep.attr_crc),
                       f"firmware: RDMA Send MSN {ep.tx_msn}")
            pos += len(piece)
            if last:
                break
        self._drain()

    def completions(self, conn: int) -> list[SendCompletion]:
        """Receive completions of ``conn``: (status, bytes placed)."""
        ep = self._cm.eps.get(conn)
        return [] if ep is None else list(ep.completions)

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
        ep = self._cm.eps.get(conn)
        if ep is None or ep.qp is None:
            return None
        tcp = None if ep.sock is None else self.tcp.state(ep.sock)
        return QpView(ep.qp.name, "CLOSED" if tcp is None else _TCP_NAMES.get(tcp, tcp))

    def listener(self, ident: int) -> Any:
        """A listener's view, None when unknown."""
        lst = self._cm.listeners.get(ident)
        if lst is None:
            return None
        return ListenerView(lst.ident, lst.state.name, lst.port, lst.backlog)

    def node(self, conn: int) -> Any:
        """An endpoint's view, None once released."""
        ep = self._cm.eps.get(conn)
        if ep is None:
            return None
        return EndpointView(ep.conn, ep.state.name, ep.initiator,
                            None if ep.qp is None else ep.qp.name, ep.ird, ep.ord,
                            ep.attr_version, ep.attr_crc, ep.attr_p2p_type,
                            ep.tried_with_mpa_v1, ep.timer_due,
                            None if ep.sock is None else self.tcp.state(ep.sock))

    def conns(self) -> list[int]:
        """Endpoints not yet released."""
        return list(self._cm.eps)

    # ---- helpers -------------------------------------------------------------------------

    def _ep(self, conn: int) -> Endpoint:
        ep = self._cm.eps.get(conn)
        if ep is None:
            raise CmError(EINVAL, f"no connection {conn}")
        return ep

    def _held_ep(self, conn: int, verb: str) -> Endpoint:
        ep = self._ep(conn)
        if ep.initiator or not ep.held:
            raise CmError(EINVAL, f"{verb} on connection {conn}: no connection request "
                          "is pending for the application")
        return ep

    def _drain(self) -> None:
        """Hand every TCP event to its CPL handler, then look for FINs acknowledged."""
        while True:
            event = self.tcp.next_event()
            if event is None:
                if not self._check_fin_acked() and not self._run_waiting_destroys():
                    return
                continue
            self._tcp_event(event)

    def _tcp_event(self, ev: TcpEvent) -> None:
        if ev.kind == "accepted":
            pass_accept_req(self._cm, ev.sock, ev.listener)
            return
        ep = self._cm.by_sock.get(ev.sock)
        if ep is None:
            return
        if ev.kind == "connected":
            act_establish(self._cm, ep)
        elif ev.kind == "data":
            rx_data(self._cm, ep, ev.data)
        elif ev.kind == "peer_fin":
            peer_close(self._cm, ep)
        elif ev.kind == "reset":
            peer_abort(self._cm, ep, CPL_ERR_CONN_RESET)
        elif ev.kind == "failed":
            if ep.state == S.CONNECTING and ep.initiator:
                act_open_rpl(self._cm, ep, ev.errno)
            else:  # the firmware gives up retransmitting: CPL_ABORT_REQ_RSS
                peer_abort(self._cm, ep, CPL_ERR_XMIT_TIMEDOUT)
        elif ev.kind == "closed" and ep.sock in self._cm.fin_sent:
            self._cm.fin_sent.discard(ev.sock)
            close_con_rpl(self._cm, ep)
        elif ev.kind == "closed":
            # Our FIN was acknowledged (close_con_rpl: MORIBUND) and the peer's FIN never
            # came: the adapter's FIN_WAIT2 timer (TP_FINWAIT2_TIMER) gives up on the
            # connection and raises CPL_ABORT_REQ_RSS with CPL_ERR_FINWAIT2_TIMEDOUT, which
            # peer_abort takes like a RST (no negative advice, is_neg_adv): MORIBUND -> DEAD,
            # release_ep_resources. Without it the endpoint would stay in MORIBUND.
            peer_abort(self._cm, ep, CPL_ERR_FINWAIT2_TIMEDOUT)

    def _check_fin_acked(self) -> bool:
        """``CPL_CLOSE_CON_RPL``: our FIN was acknowledged."""
        done = [sock for sock in self._cm.fin_sent
                if (self.tcp.state(sock) or "CLOSED") in _FIN_ACKED_STATES]
        for sock in sorted(done):
            self._cm.fin_sent.discard(sock)
            ep = self._cm.by_sock.get(sock)
            if ep is not None:
                close_con_rpl(self._cm, ep)
        return bool(done)

