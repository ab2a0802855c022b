"""qedr on a FastLinQ adapter, sans-IO: :class:`QedrCore` implements
:class:`mpa_emu.stacks.contract.api.CoreApi`.

Three layers, each in its module and named after its kernel functions:
qedr_iw_cm.c (:mod:`~mpa_emu.stacks.qedr.qedr_iw_cm`, the iw_cm provider and its upcalls),
qed_iwarp.c (:mod:`~mpa_emu.stacks.qedr.qed_iwarp`, the ramrods and async events) and the
firmware under them (:mod:`~mpa_emu.stacks.qedr.firmware`, its TCP in
:mod:`~mpa_emu.stacks.qedr.tcp`). This module is the plumbing: the verbs as iw_cm calls
them, the sans-IO loop, the views. docs/stacks/qedr.md is the behaviour reference.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from errno import EADDRINUSE, EADDRNOTAVAIL, EINVAL, EOPNOTSUPP
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.qedr.endpoint import Ep, Listener
from mpa_emu.stacks.qedr.params import QED_IWARP_PREALLOC_CNT, QedrParams
from mpa_emu.stacks.qedr.qedr_iw_cm import QedrIwCm
from mpa_emu.stacks.qedr.states import ConnectMode, EpState, QpState
from mpa_emu.stacks.qedr.tcp import QedTcp
from mpa_emu.stacks.tcp.stack import TcpEvent
from mpa_emu.wire.segment import Segment, Transmit

MAX_PDATA = 255
"""``iw_cm_conn_param.private_data_len`` and qedr_iw_reject's ``pdata_len`` are u8."""

_TCP_NAMES = {"SYN_RECV": "SYN_RECEIVED", "FIN_WAIT1": "FIN_WAIT_1",
              "FIN_WAIT2": "FIN_WAIT_2"}


@dataclass(frozen=True, slots=True)
class EpView:
    """Read-only view of one endpoint (``Host.node``)."""

    conn: int
    state: str
    initiator: bool
    qp_state: str | None
    ird: int
    ord: int
    mpa_rev: int
    rtr_type: int
    crc: bool
    fw_waiting_for: str
    timer_due_ns: int | None
    tcp_state: str | None


@dataclass(frozen=True, slots=True)
class QpView:
    """Read-only view of a connection's QP (``Host.qp_state``): the ``enum
    qed_iwarp_qp_state`` name and the firmware's TCP state, named as irdma's views name
    them."""

    iwarp_state: str
    tcp_state: str


@dataclass(frozen=True, slots=True)
class ListenerView:
    """Read-only view of a listener (``Host.listener``)."""

    ident: int
    state: str
    port: int
    backlog: int


class QedrCore(QedrIwCm):
    """One host's qedr, qed and FastLinQ adapter. See the module docstring."""

    def __init__(self, name: str, mac: bytes,
                 params: Mapping[str, int | bool] | QedrParams | None = None, *,
                 seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        self.name = name
        self.mac = mac
        self.p = params if isinstance(params, QedrParams) \
            else QedrParams.from_mapping(params or {})
        self.trace = trace
        self.tcp = QedTcp(name, mac, self.p, seed=seed, mtu=mtu, trace=trace)
        self.tcp.syn_hook = self._syn_checks
        self._eps: dict[int, Ep] = {}
        self._by_sock: dict[int, Ep] = {}
        self._listeners: dict[int, Listener] = {}
        self._by_tcp_listener: dict[int, Listener] = {}
        self._addresses: dict[bytes, int | None] = {}
        self._upcalls: deque[Upcall] = deque()
        self._work: deque[Callable[[], None]] = deque()
        self._next_conn = 1
        self._next_listener = 1
        self._now = 0
        self._watch = None
        self._watched = set()
        self.free_eps = QED_IWARP_PREALLOC_CNT

    # ---- local stack ------------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """Configure a local address on the port."""
        if len(ip) not in (4, 16):
            raise CmError(EINVAL, f"an address has 4 or 16 bytes, got {len(ip)}")
        self._addresses[ip] = vlan
        self.tcp.add_address(ip, vlan)

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """Remove a local address: qedr has no address notifier, offloaded connections
        on it carry on."""
        if ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{ip.hex()} is not a local address")
        del self._addresses[ip]
        self.tcp.remove_address(ip)

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The link goes down: qedr_iw_cm.c reacts to nothing."""
        return []

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """A neighbour entry (qedr_addr4_resolve's lookup); None = unresolved."""
        self.tcp.set_neighbour(ip, mac)

    # ---- sans-IO ---------------------------------------------------------------------

    def receive(self, frame: Segment, now_ns: int) -> None:
        """One frame from the wire, into the adapter."""
        self._now = now_ns
        self.tcp.receive(frame, now_ns)
        self._drain()

    def handle_timer(self, now_ns: int) -> None:
        """Fire the firmware's MPA timers and its TCP's timers due at ``now_ns``."""
        while True:
            due = [ep for ep in self._eps.values()
                   if ep.fw_due is not None and ep.fw_due <= now_ns]
            if not due:
                break
            ep = min(due, key=lambda e: (e.fw_due or 0, e.conn))
            self._now = ep.fw_due or now_ns
            self.fw_timeout(ep)
            self._drain()
        self._now = now_ns
        self.tcp.handle_timer(now_ns)
        self._drain()

    def get_timer(self) -> int | None:
        """The earliest firmware or TCP deadline."""
        best = self.tcp.get_timer()
        for ep in self._eps.values():
            if ep.fw_due is not None and (best is None or ep.fw_due < best):
                best = ep.fw_due
        return best

    def frames_to_send(self) -> list[Transmit]:
        """Segments the adapter put on the wire since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event for the ULP."""
        return self._upcalls.popleft() if self._upcalls else None

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each endpoint (:class:`mpa_emu.stacks.contract.api.
        WatchedCore`): created with its ports on its first state change, each change (an
        :class:`EpState`), freed when it leaves the tables."""
        self._watch = watch

    # ---- listeners ---------------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        """qedr_iw_create_listen -> qed_iwarp_create_listen: a listener on ``listen_list``
        (its ``max_backlog`` is stored and never checked)."""
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, f"listen port {port} out of range 1..65535")
        if ip is not None and len(ip) not in (4, 16):
            raise CmError(EINVAL, f"an address has 4 or 16 bytes, got {len(ip)}")
        if self.tcp.listener_bound(ip, port):
            raise CmError(EADDRINUSE, f"port {port} already has a listener")
        self._now = now_ns
        tcp_listener = self.tcp.listen(ip, port, 1 << 30, ipv6=ipv6)
        lst = Listener(self._next_listener, ip, port, backlog, tcp_listener, vlan)
        self._next_listener += 1
        self._listeners[lst.ident] = lst
        self._by_tcp_listener[tcp_listener] = lst
        self.tr("listen_created", "qed_iwarp_create_listen", listener=lst.ident, port=port)
        return lst.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """qedr_iw_destroy_listen -> qed_iwarp_destroy_listen: off ``listen_list``; later
        SYNs go to the host's TCP stack. Connections already taken carry on."""
        lst = self._listeners.pop(listener, None)
        if lst is None:
            raise CmError(EINVAL, f"no listener {listener}")
        self._now = now_ns
        self._by_tcp_listener.pop(lst.tcp_listener, None)
        self.tcp.unlisten(lst.tcp_listener)
        self.tr("listen_destroyed", "qed_iwarp_destroy_listen", listener=listener)

    def _syn_checks(self, seg: Segment) -> bool:
        """qed_iwarp_ll2_comp_syn_pkt for a SYN on a listened tuple: dropped when an ep
        has the 4-tuple (qed_iwarp_ep_exists) or the free list is empty."""
        for ep in self._eps.values():
            if (ep.local_ip, ep.local_port, ep.remote_ip, ep.remote_port) == \
                    (seg.dst_ip, seg.dport, seg.src_ip, seg.sport):
                self.klog("notice", "qed_iwarp_ep_exists",
                          "SYN received on active connection - dropping")
                return False
        if self.free_eps <= 0:
            self.klog("err", "qed_iwarp_get_free_ep", "Ep list is empty")
            return False
        return True

    def qed_iwarp_ll2_comp_syn_pkt(self, sock: int, tcp_listener: int | None) -> None:
        """qed_iwarp_ll2_comp_syn_pkt for a listened SYN: an ep from the free list, the
        listener's event_cb, TCP_CONNECT_PASSIVE and the TCP offload (the firmware's
        SYN-ACK); the firmware then waits for the MPA request."""
        lst = None if tcp_listener is None else self._by_tcp_listener.get(tcp_listener)
        addrs = self.tcp.addresses(sock)
        if lst is None or addrs is None:
            self.tcp.abort(sock, self._now, "firmware: the listener is gone (RST)")
            return
        self.free_eps -= 1
        ep = self._new_ep(ConnectMode.PASSIVE, addrs)
        ep.sock = sock
        ep.listener = lst.ident
        self._by_sock[sock] = ep
        self._set_state(ep, EpState.INIT, "qed_iwarp_ll2_comp_syn_pkt")
        self.fw_start_timer(ep, "request")

    # ---- verbs ---------------------------------------------------------------------------

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        """qedr_iw_connect -> qed_iwarp_connect: an active ep and the SYN. Refusals raise
        :class:`CmError` with the kernel's errno before anything changes."""
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"private data of {len(private_data)} bytes: "
                          "conn_param->private_data_len is a u8 (at most 255)")
        if len(local_ip) != len(remote_ip):
            raise CmError(EINVAL, "local and remote address families differ")
        if not 0 < remote_port < 0x10000 or (local_port is not None
                                             and not 0 < local_port < 0x10000):
            # qedr_iw_connect: if (!laddr->sin_port || !raddr->sin_port) return -EINVAL
            raise CmError(EINVAL, "qedr_iw_connect: port 0")
        if local_ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{local_ip.hex()} is not a local address")
        if ird < 0 or ord < 0 or self.qed_iwarp_check_connect(ird, ord):
            raise CmError(EINVAL, f"qed_iwarp_connect: ord {ord} / ird {ird} above "
                          "QED_IWARP_ORD_DEFAULT/QED_IWARP_IRD_DEFAULT (32)")
        self._now = now_ns
        try:
            sock = self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)
        except OSError as exc:
            raise CmError(exc.errno or EINVAL, f"qedr_iw_connect: {exc.strerror}") from None
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        ep = self._new_ep(ConnectMode.ACTIVE, addrs)
        ep.sock = sock
        self._by_sock[sock] = ep
        ep.has_cm_id = True
        ep.connect_wait = True  # iw_cm_connect: set until the CONNECT_REPLY
        ep.qp = QpState.IDLE
        ep.ird, ep.ord = ird, ord
        self.qed_iwarp_connect(ep, bytes(private_data))
        self._drain()
        return ep.conn

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int,
               ird: int | None = None, ord: int | None = None) -> None:
        """qedr_iw_accept. ``ird``/``ord`` are ``conn_param``'s; None takes what an
        rdma_cm application echoes from the request (its ORD as our IRD, its IRD as our
        ORD). A refusal raises :class:`CmError` and changes nothing, but one: a second
        accept while the first one's handshake goes on reaches qedr_iw_accept (iw_cm's
        id is still in CONN_RECV), whose error path frees the ep under qed (the kernel's
        own bug, a ``kernel_bug`` trace record; :meth:`QedrIwCm.qedr_iw_accept`)."""
        ep = self._answerable_ep(conn, "accept")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"private data of {len(private_data)} bytes: "
                          "conn_param->private_data_len is a u8 (at most 255)")
        want_ird = ep.ord if ird is None else ird
        want_ord = ep.ird if ord is None else ord
        if want_ird < 0 or want_ord < 0:
            raise CmError(EINVAL, "accept: negative IRD or ORD")
        self._now = now_ns
        if not ep.held:
            rc = self.qedr_iw_accept(ep, bytes(private_data), want_ird, want_ord)
            self._iw_cm_error_path(ep)
            self._drain()
            raise CmError(-rc, f"qedr_iw_accept on connection {conn}: a second accept, "
                          "QEDR_IWARP_CM_WAIT_FOR_CONNECT already set")
        ep.connect_wait = True  # iw_cm_accept: set until ESTABLISHED
        ep.held = False  # answered: a handshake that fails at once frees the ep
        rc = self.qedr_iw_accept(ep, bytes(private_data), want_ird, want_ord)
        if rc:
            ep.connect_wait = False  # iw_cm_accept's error path
            ep.held = True
            raise CmError(-rc, f"qed_iwarp_accept: ord {want_ord} / ird {want_ird} above 32")
        self._drain()

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """qedr_iw_reject -> qed_iwarp_reject: the reject frame, then the firmware's FIN.
        After an accept whose handshake goes on, iw_cm_reject still finds its id in
        CONN_RECV (-> IDLE) and qedr_iw_reject clears ``ep->qp``: the firmware is given a
        second MPA offload ramrod (:meth:`Firmware.fw_send_mpa`), and the handshake's
        completion meets the NULL QP."""
        ep = self._answerable_ep(conn, "reject")
        if len(private_data) > MAX_PDATA:
            raise CmError(EINVAL, f"reject private data of {len(private_data)} bytes: "
                          "pdata_len is a u8 (at most 255)")
        self._now = now_ns
        if not ep.held:
            self.qedr_iw_reject(ep, bytes(private_data))
            self._iw_cm_error_path(ep)  # iw_cm_reject clears IWCM_F_CONNECT_WAIT
            self._drain()
            return
        ep.held = False
        self.qedr_iw_reject(ep, bytes(private_data))
        self._drain()

    def close(self, conn: int, *, now_ns: int) -> None:
        """``iw_destroy_cm_id`` on the connection's cm_id: ``destroy_cm_id`` first waits
        while ``IWCM_F_CONNECT_WAIT`` is set (an active connect before its CONNECT_REPLY,
        an accept before its ESTABLISHED: the call goes on after that event,
        :meth:`_iw_cm_resume`); then a request still held is rejected (``iw_reject``
        with no private data), an RTS QP goes to ERROR (abortive); otherwise the cm_id
        just goes away (qedr's ``ep->cm_id``)."""
        ep = self._ep(conn)
        self._now = now_ns
        if ep.connect_wait:
            self._wait(ep, "destroy", False)
            return
        self._destroy_cm_id(ep)
        self._drain()

    def _destroy_cm_id(self, ep: Ep) -> None:
        """What ``destroy_cm_id`` does to the ep once it no longer waits: the id is
        DESTROYING before the abort, so the CLOSE the abort brings reaches no one
        (cm_close_handler drops it)."""
        ep.has_cm_id = False
        if ep.held:
            ep.held = False
            self.qedr_iw_reject(ep, b"")
        elif ep.qp == QpState.RTS:
            self.qed_iwarp_modify_qp(ep, QpState.ERROR, internal=False)
        if ep.state == EpState.CLOSED:
            self._release(ep)

    def _wait(self, ep: Ep, verb: str, graceful: bool) -> None:
        """``wait_event(cm_id_priv->connect_wait, !test_bit(IWCM_F_CONNECT_WAIT, ...))``
        in iw_cm_disconnect / destroy_cm_id: the call waits for the event that clears
        the bit."""
        ep.waiting.append((verb, graceful))
        event = "ESTABLISHED" if ep.connect_mode == ConnectMode.PASSIVE else "CONNECT_REPLY"
        self.tr("verb_deferred", "iw_cm_disconnect" if verb == "disconnect"
                else "destroy_cm_id", conn=ep.conn, graceful=graceful,
                why=f"IWCM_F_CONNECT_WAIT: waiting for {event}")

    def _iw_cm_error_path(self, ep: Ep) -> None:
        """iw_cm_accept's error path or iw_cm_reject after an accept: the id leaves
        CONN_RECV for IDLE and ``IWCM_F_CONNECT_WAIT`` is cleared; the calls blocked on it
        go on (from IDLE: a disconnect does nothing, a destroy drops the cm_id)."""
        ep.connect_wait = False
        if ep.waiting:
            self._work.append(lambda: self._iw_cm_resume(ep))

    def _iw_cm_resume(self, ep: Ep) -> None:
        """The application's calls that waited on ``IWCM_F_CONNECT_WAIT``, in order, from
        the state the event left iw_cm's id in: ESTABLISHED (the QP in RTS) makes a
        disconnect move the QP to CLOSING or ERROR (``iw_cm_disconnect``:
        iwcm_modify_qp_sqd / iwcm_modify_qp_err) and a destroy abort it
        (``destroy_cm_id``); after a failed connect or handshake (IDLE) a disconnect
        does nothing and a destroy only drops the cm_id."""
        waiting, ep.waiting = ep.waiting, []
        for verb, graceful in waiting:
            self.tr("verb_resumed", "iw_cm", conn=ep.conn, verb=verb, graceful=graceful)
            if verb == "disconnect":
                if ep.qp == QpState.RTS and ep.has_cm_id:
                    self.qed_iwarp_modify_qp(ep, QpState.CLOSING if graceful
                                             else QpState.ERROR, internal=False)
            else:
                self._destroy_cm_id(ep)

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """``iw_cm_disconnect`` -> qedr_modify_qp -> qed_iwarp_modify_qp: RTS -> CLOSING is
        a graceful close (FIN), RTS -> ERROR an abortive one (RST)."""
        ep = self._ep(conn)
        if ep.qp is None:
            raise CmError(EINVAL, f"disconnect: connection {conn} has no QP")
        self._now = now_ns
        if ep.connect_wait:
            self._wait(ep, "disconnect", graceful)
            return
        rc = self.qed_iwarp_modify_qp(ep, QpState.CLOSING if graceful else QpState.ERROR,
                                      internal=False)
        self._drain()
        if rc:
            raise CmError(-rc, f"qed_iwarp_modify_qp: the QP is in {ep.qp.name}")

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)`` -> qed_iwarp_modify_qp(ERROR): abortive from RTS,
        IDLE -> ERROR otherwise."""
        ep = self._ep(conn)
        if ep.qp is None:
            raise CmError(EINVAL, f"modify_qp: connection {conn} has no QP")
        self._now = now_ns
        self.qed_iwarp_modify_qp(ep, QpState.ERROR, internal=False)
        self._drain()

    # ---- the QP's data verbs ---------------------------------------------------------------

    def post_send(self, conn: int, payload: bytes, *, now_ns: int) -> None:
        """qedr_post_send of an IB_WR_SEND on an RTS QP: the firmware sends it
        (:meth:`Firmware.fw_post_send`). qedr_post_send checks the QP state only on RoCE
        (``rdma_protocol_roce``: "QP in wrong state!" unless RTS, ERR or SQD); on iWARP it
        queues the WQE in any state, and what the firmware does with it on a QP not in RTS
        is not in the driver: the model refuses it with -EINVAL, as
        :class:`~mpa_emu.stacks.contract.api.PostsSends` has every stack do."""
        ep = self._ep(conn)
        if ep.qp != QpState.RTS:
            state = "no QP" if ep.qp is None else f"the QP in {ep.qp.name}"
            raise CmError(EINVAL, f"qedr_post_send: connection {conn} has {state}, not RTS "
                          f"(endpoint {ep.state.name})")
        self._now = now_ns
        self.fw_post_send(ep, bytes(payload))
        self._drain()

    def post_recv(self, conn: int, length: int, *, now_ns: int = 0) -> None:
        """qedr_post_recv: a receive buffer of ``length`` bytes on the QP's RQ for the
        peer's next Send. The RQ is the QP's from its creation, so a buffer posted before
        qedr_iw_accept binds the QP waits there."""
        ep = self._ep(conn)
        if not 0 <= length < 1 << 32:
            raise CmError(EINVAL, f"qedr_post_recv: length {length} out of range")
        self._now = max(self._now, now_ns)
        ep.rq.recvq.append(length)

    def completions(self, conn: int) -> list[tuple[str, bytes]]:
        """Receive completions of ``conn`` so far: (status, bytes placed), oldest first."""
        ep = self._eps.get(conn)
        return [] if ep is None else list(ep.completions)

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """irdma's teardown by address has no counterpart in qedr."""
        raise CmError(EOPNOTSUPP, "qedr has no teardown of connections by address")

    def device_reset(self, *, now_ns: int) -> list[int]:
        """A qed recovery is not modelled."""
        raise CmError(EOPNOTSUPP, "a qed device recovery is not modelled")

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
        return ListenerView(lst.ident, "LISTEN", lst.port, lst.backlog)

    def node(self, conn: int) -> Any:
        """An endpoint's view, None once released."""
        ep = self._eps.get(conn)
        if ep is None:
            return None
        return EpView(ep.conn, ep.state.name, ep.connect_mode == ConnectMode.ACTIVE,
                      None if ep.qp is None else ep.qp.name, ep.ird, ep.ord,
                      int(ep.mpa_rev), int(ep.rtr_type), ep.crc, ep.fw_wait, ep.fw_due,
                      None if ep.sock is None else self.tcp.state(ep.sock))

    def conns(self) -> list[int]:
        """Endpoints not yet released."""
        return list(self._eps)

    # ---- helpers -------------------------------------------------------------------------

    def _new_ep(self, mode: ConnectMode, addrs: tuple[bytes, int, bytes, int]) -> Ep:
        ep = Ep(self._next_conn, mode, addrs[0], addrs[1], addrs[2], addrs[3])
        self._next_conn += 1
        self._eps[ep.conn] = ep
        return ep

    def _release(self, ep: Ep) -> None:
        """The ep's last reference in qedr and qed is gone: it leaves the tables (a
        request the ULP still holds stays until it answers)."""
        if ep.state == EpState.CLOSED and ep.sock is not None:
            self._by_sock.pop(ep.sock, None)
        ep.fw_due = None
        if ep.held:
            return
        self._eps.pop(ep.conn, None)
        if ep.conn in self._watched and self._watch is not None:
            self._watched.discard(ep.conn)
            self._watch.node_freed(ep.conn)

    def _ep(self, conn: int) -> Ep:
        ep = self._eps.get(conn)
        if ep is None:
            raise CmError(EINVAL, f"no connection {conn}")
        return ep

    def _answerable_ep(self, conn: int, verb: str) -> Ep:
        """The passive ep an accept or reject reaches qedr for: iw_cm's id in CONN_RECV,
        that is a request the application holds, or one it accepted whose ESTABLISHED
        has not gone up yet (``IWCM_F_CONNECT_WAIT``). Otherwise ``iw_cm_accept`` /
        ``iw_cm_reject`` return -EINVAL before anything changes."""
        ep = self._ep(conn)
        if ep.connect_mode == ConnectMode.ACTIVE or not (ep.held or ep.connect_wait):
            raise CmError(EINVAL, f"{verb} on connection {conn}: no connection request "
                          "is pending for the application", before_iw_cm=True)
        return ep

    def _drain(self) -> None:
        """Every TCP event to the firmware, then the queued qedr work, then the closes the
        firmware completes, until nothing is left."""
        while True:
            event: TcpEvent | None = self.tcp.next_event()
            if event is not None:
                self.fw_tcp_event(event)
                continue
            if self._work:
                self._work.popleft()()
                continue
            done = False
            for ep in list(self._eps.values()):
                if ep.closing and ep.state == EpState.ESTABLISHED:
                    before = ep.state
                    self.fw_check_closed(ep)
                    done = done or ep.state != before
            if not done:
                return
