"""siw's connection manager (drivers/infiniband/sw/siw/siw_cm.c) over the Linux TCP
stack (:class:`~mpa_emu.stacks.tcp.TcpStack` with :data:`~mpa_emu.stacks.tcp.LINUX`).

Sans-IO like irdma's core: segments and verbs go in with ``now_ns``; segments, upcalls
(``siw_cm_upcall``) and the next deadline come out. Socket callbacks
(siw_cm_llp_state_change, siw_cm_llp_data_ready) become the TCP stack's events; the work
siw queues on its single-threaded ``siw_cm_wq`` runs at once, in order, as
:meth:`SiwCore._work` (siw_cm_work_handler). Each rule cites its kernel function.

Where the emulation differs from the kernel's timing: siw_connect blocks in
kernel_bindconnect until the TCP handshake completes; here :meth:`connect` returns at
once with the endpoint in CONNECTING and sends the MPA request when the socket connects.
A connect that fails at the TCP level (RST, SYN timeout) is the verb's error in the
kernel: here it is a ``verb_failed`` trace record, and no upcall.
"""

from __future__ import annotations

import contextlib
import errno
import struct
from collections import deque
from collections.abc import Mapping
from errno import ECONNRESET, EINVAL, ENOMEM, EOPNOTSUPP
from typing import Any

from mpa_emu.cm.errors import CmError
from mpa_emu.cm.events import IwEvent, Upcall
from mpa_emu.cm.trace import Trace, make_record
from mpa_emu.stacks.siw import rdma
from mpa_emu.stacks.siw.cep import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_GSO_EXP,
    FLAG_MARKERS,
    FLAG_REJECT,
    IRD_ORD_MASK,
    V2_PEER_TO_PEER,
    V2_READ_RTR,
    V2_WRITE_RTR,
    Cep,
    CepView,
    ListenerView,
    QpView,
)
from mpa_emu.stacks.siw.params import (
    MPA_MAX_PRIVDATA,
    MPAREP_TIMEOUT_NS,
    MPAREQ_TIMEOUT_NS,
    RTR_READ,
    RTR_WRITE,
    SIW_MAX_IRD_QP,
    SIW_MAX_ORD_QP,
    SiwParams,
)
from mpa_emu.stacks.siw.states import SiwQpState, SiwState, SiwWork
from mpa_emu.stacks.tcp import LINUX, TcpEvent, TcpStack
from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import KEY_REP, KEY_REQ, MpaFormatError, unframe_fpdu
from mpa_emu.wire.segment import Segment, Transmit

S = SiwState


class SiwCore:
    """One siw host: its endpoints (``struct siw_cep``) over a Linux-shaped TCP."""

    def __init__(self, name: str, mac: bytes, params: Mapping[str, int | bool] | None = None,
                 *, seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        self.name = name
        self.mac = mac
        self.params = SiwParams.from_mapping(params or {})
        self.trace = trace
        self.tcp = TcpStack(name, mac, LINUX, seed=seed, mtu=mtu, trace=trace)
        self._ceps: dict[int, Cep] = {}
        self._by_sock: dict[int, Cep] = {}
        self._listen_by_tcp: dict[int, Cep] = {}
        self._upcalls: deque[Upcall] = deque()
        self._workq: deque[tuple[int, SiwWork]] = deque()
        """siw_cm_wq: work queued by socket callbacks, run after the segments of the
        same instant (softirq before the work queue)."""
        self._unclaimed: dict[int, tuple[int, bytearray]] = {}
        """Accepted sockets whose SIW_CM_WORK_ACCEPT has not run: listener cep, bytes."""
        self._addresses: dict[bytes, int | None] = {}
        self._next = 1
        self._now = 0

    # ---- addresses -----------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """An address comes up on the siw device's netdev."""
        self._now = max(self._now, now_ns)
        self._addresses[ip] = vlan
        self.tcp.add_address(ip, vlan)

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """An address goes: siw_cm.c has no teardown by address; the sockets stay."""
        self._now = now_ns
        self._addresses.pop(ip, None)
        self.tcp.remove_address(ip)

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The link goes down: siw_netdev_event reports a port error only; no endpoint
        changes (nothing modelled: returns no removed address)."""
        self._now = now_ns
        return []

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """A neighbour entry of the host's IP stack."""
        self.tcp.set_neighbour(ip, mac)

    # ---- the sans-IO loop ------------------------------------------------------------

    def receive(self, frame: Segment, now_ns: int) -> None:
        """A segment from the wire, through the Linux TCP stack to the socket callbacks."""
        self._now = now_ns
        self.tcp.receive(frame, now_ns)
        self._drain()

    def handle_timer(self, now_ns: int) -> None:
        """TCP timers and the MPA timers due at ``now_ns``."""
        self._now = now_ns
        deadline = self.tcp.get_timer()
        if deadline is not None and deadline <= now_ns:
            self.tcp.handle_timer(now_ns)
            self._drain()
        self._run_work()
        for cep in list(self._ceps.values()):
            if cep.mpa_timer is not None and cep.mpa_timer <= now_ns:
                cep.mpa_timer = None
                self._work(cep, SiwWork.MPATIMEOUT)
        self._drain()

    def get_timer(self) -> int | None:
        """The earliest TCP or MPA deadline (now, while work is queued)."""
        if self._workq:
            return self._now
        best = self.tcp.get_timer()
        for cep in self._ceps.values():
            at = cep.mpa_timer
            if at is not None and (best is None or at < best):
                best = at
        return best

    def frames_to_send(self) -> list[Transmit]:
        """Segments built since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event."""
        return self._upcalls.popleft() if self._upcalls else None

    # ---- verbs: listen ---------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        """siw_create_listen: a listening socket (bound to the wildcard or ``ip``) and
        its endpoint in LISTENING; returns the listener id."""
        del vlan
        self._now = max(self._now, now_ns)
        if ip is not None and ip not in self._addresses:
            self._klog("debug", "siw_create_listen", "socket bind error: -99", True)
            raise CmError(errno.EADDRNOTAVAIL, "siw_create_listen: not a local address")
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, "siw_create_listen: port out of range")
        if self.tcp.listener_bound(ip, port):
            self._klog("debug", "siw_create_listen", "socket bind error: -98", True)
            raise CmError(errno.EADDRINUSE, "siw_create_listen: address in use")
        cep = self._new_cep(S.IDLE)
        cep.listener = True
        cep.tcp_listener = self.tcp.listen(ip, port, backlog, ipv6=ipv6)
        cep.cm_id = True
        cep.loc_addr = ip or b""
        cep.loc_port = port
        cep.ord = backlog  # shown in the listener view only
        self._listen_by_tcp[cep.tcp_listener] = cep
        self._set(cep, S.LISTENING, "siw_create_listen")
        self._klog("debug", "siw_create_listen", f"Listen at laddr {self._addr(ip, port)}",
                   True)
        return cep.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """siw_destroy_listen -> siw_drop_listeners: the listening endpoint CLOSED, its
        socket released."""
        self._now = now_ns
        cep = self._ceps.get(listener)
        if cep is None or not cep.listener:
            raise CmError(EINVAL, f"no listener {listener}")
        self._klog("debug", "siw_drop_listeners", f"drop cep, state {int(cep.state)}", True,
                   cep)
        if cep.tcp_listener is not None:
            self.tcp.unlisten(cep.tcp_listener)
            self._listen_by_tcp.pop(cep.tcp_listener, None)
        cep.cm_id = False
        self._set(cep, S.CLOSED, "siw_drop_listeners")
        del self._ceps[cep.ident]

    # ---- verbs: connect, accept, reject ------------------------------------------------

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        """siw_connect: refuse private data over MPA_MAX_PRIVDATA (-EINVAL) and IRD/ORD
        over the device's (-ENOMEM), open the socket (kernel_bindconnect); the MPA
        request follows when it connects (:meth:`_connected`)."""
        self._now = now_ns
        if len(private_data) > MPA_MAX_PRIVDATA:
            raise CmError(EINVAL, f"siw_connect: private data of {len(private_data)} bytes "
                          f"over MPA_MAX_PRIVDATA ({MPA_MAX_PRIVDATA})")
        if not 0 <= ird <= SIW_MAX_IRD_QP or not 0 <= ord <= SIW_MAX_ORD_QP:
            raise CmError(ENOMEM, f"siw_connect: ird {ird} / ord {ord} over the device's "
                          f"max_ird {SIW_MAX_IRD_QP} / max_ord {SIW_MAX_ORD_QP}")
        if len(local_ip) != len(remote_ip):
            raise CmError(errno.EAFNOSUPPORT, "siw_connect: address families differ")
        if not 0 < remote_port < 0x10000:
            raise CmError(EINVAL, "siw_connect: port 0 or out of range")
        try:
            sock = self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)
        except OSError as exc:
            err = exc.errno or EINVAL
            self._klog("debug", "siw_connect", f"kernel_bindconnect: error -{err}", True)
            raise CmError(err, f"siw_connect: kernel_bindconnect: {exc.strerror}") from None
        cep = self._new_cep(S.IDLE)
        cep.sock = sock
        self._by_sock[sock] = cep
        cep.active = True
        cep.qp = True
        cep.cm_id = True
        cep.ird, cep.ord = ird, ord
        if self.params.peer_to_peer and cep.ord == 0:
            cep.ord = 1  # siw_connect: P2P needs an ORD of at least 1 for a Read RTR
        cep.pdata = private_data
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port = addrs
        self._set(cep, S.CONNECTING, "siw_connect")
        return cep.ident

    def _connected(self, cep: Cep) -> None:
        """siw_connect after kernel_bindconnect: the request's bits (revision from
        mpa_version, GSO with try_gso, C with mpa_crc_required; for rev 2 the S flag and
        the RFC 6581 block with IRD/ORD, P2P and rtr_type with peer_to_peer), the
        request sent (siw_send_mpareqrep) and the MPA timer armed (MPAREQ_TIMEOUT)."""
        p = self.params
        version = p.mpa_version
        if version > 2:
            self._klog("warn", "siw_connect", "Setting MPA version to 2", False)
            version = 2
        cep.key = KEY_REQ
        cep.rev = version
        cep.flags = (FLAG_GSO_EXP if p.try_gso else 0) | (FLAG_CRC if p.mpa_crc_required else 0)
        if version == 2:
            cep.enhanced = True
            cep.flags |= FLAG_ENHANCED
            cep.v2_ird, cep.v2_ord = cep.ird, cep.ord
            if p.peer_to_peer:
                cep.v2_ird |= V2_PEER_TO_PEER
                cep.v2_ord |= (V2_WRITE_RTR if p.rtr_type & RTR_WRITE else 0) \
                    | (V2_READ_RTR if p.rtr_type & RTR_READ else 0)
            cep.req_ird, cep.req_ord = cep.v2_ird, cep.v2_ord
        self._set(cep, S.AWAIT_MPAREP, "siw_connect")
        self._send_mpareqrep(cep, cep.pdata, "siw_send_mpareqrep (siw_connect): "
                             "CONNECTING -> AWAIT_MPAREP")
        cep.pdata = b""
        cep.pd_len = 0
        self._queue_mpa_timer(cep)

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int,
               ird: int | None = None, ord: int | None = None) -> None:
        """siw_accept: check state, IRD/ORD and private data; negotiate (relaxed by
        default); QP to RTS; send the reply; ESTABLISHED at once, or after the peer's
        RTR when the reply picked one (siw_sk_assign_rtr_upcalls). ``ird``/``ord`` are
        the application's ``iw_cm_conn_param`` (default: what the request asked)."""
        self._now = now_ns
        cep = self._passive(conn, "siw_accept")
        cep.pdata = b""  # "Free lingering inbound private data"
        cep.pd_len = 0
        cep.mpa_timer = None  # siw_cancel_mpatimer
        held, cep.held = cep.held, False
        if cep.state != S.RECVD_MPAREQ:
            self._klog("debug", "siw_accept", "out of state", True, cep)
            if held:
                self._forget(cep)
            raise CmError(ECONNRESET, f"siw_accept: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        want_ird = cep.ird if ird is None else ird
        want_ord = cep.ord if ord is None else ord
        if want_ord > SIW_MAX_ORD_QP or want_ird > SIW_MAX_IRD_QP:
            self._klog("debug", "siw_accept", f"[QP {cep.ident}]: ord {want_ord} (max "
                       f"{SIW_MAX_ORD_QP}), ird {want_ird} (max {SIW_MAX_IRD_QP})", True, cep)
            self._accept_error(cep)
            raise CmError(EINVAL, "siw_accept: ird/ord over the device's maximum")
        max_priv = MPA_MAX_PRIVDATA - (4 if cep.enhanced else 0)
        if len(private_data) > max_priv:
            self._klog("debug", "siw_accept", f"[QP {cep.ident}]: private data length: "
                       f"{len(private_data)} (max {max_priv})", True, cep)
            self._accept_error(cep)
            raise CmError(EINVAL, f"siw_accept: private data of {len(private_data)} bytes "
                          f"over {max_priv}")
        wait_rtr = False
        if cep.enhanced:
            if want_ord > cep.ord:
                if not self.params.relaxed_ird_negotiation:
                    self._accept_error(cep)
                    raise CmError(EINVAL, "siw_accept: ORD above the request's IRD")
                want_ord = cep.ord
            if want_ird < cep.ird:
                if not (self.params.relaxed_ird_negotiation and cep.ird <= SIW_MAX_IRD_QP):
                    self._accept_error(cep)
                    raise CmError(ENOMEM, "siw_accept: IRD below the request's ORD")
                want_ird = cep.ird
            wait_rtr = bool(cep.v2_ord & (V2_WRITE_RTR | V2_READ_RTR))
            cep.v2_ord = (want_ord & IRD_ORD_MASK) | (cep.v2_ord & ~IRD_ORD_MASK)
            cep.v2_ird = (want_ird & IRD_ORD_MASK) | (cep.v2_ird & ~IRD_ORD_MASK)
        cep.ird, cep.ord = want_ird, want_ord
        cep.cm_id = True
        cep.qp = True
        cep.crc = bool(cep.flags & FLAG_CRC)
        cep.qp_state = SiwQpState.RTS
        cep.wait_rtr = wait_rtr
        self._set(cep, S.RDMA_MODE, "siw_accept")
        self._send_mpareqrep(cep, private_data, "siw_send_mpareqrep (siw_accept): "
                             "RECVD_MPAREQ -> RDMA_MODE")
        if not wait_rtr:
            self._upcall(cep, IwEvent.ESTABLISHED, 0)

    def _accept_error(self, cep: Cep) -> None:
        """siw_accept's error path: socket released, endpoint CLOSED, no upcall."""
        self._release_socket(cep, "siw_accept (error)")
        self._set(cep, S.CLOSED, "siw_accept")
        self._forget(cep)

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """siw_reject: in RECVD_MPAREQ, for a request of revision 1 or more, the reply
        header with R set (the block too when the request had S) and the private data;
        then sock_release (a FIN, or a RST when unread bytes remain)."""
        self._now = now_ns
        cep = self._passive(conn, "siw_reject")
        cep.mpa_timer = None
        held, cep.held = cep.held, False
        if cep.state != S.RECVD_MPAREQ:
            self._klog("debug", "siw_reject", "out of state", True, cep)
            if held:
                self._forget(cep)  # "put last reference"
            raise CmError(ECONNRESET, f"siw_reject: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        if len(private_data) > 0xFF:  # iw_cm_reject and siw_reject take a u8 length
            self._note("kernel_quirk", "siw_reject", what="u8 private data length wraps",
                       length=len(private_data))
            private_data = private_data[:len(private_data) & 0xFF]
        self._klog("debug", "siw_reject", f"cep->state {int(cep.state)}, pd_len "
                   f"{len(private_data)}", True, cep)
        if cep.rev >= 1:
            cep.flags |= FLAG_REJECT
            self._send_mpareqrep(cep, private_data, "siw_send_mpareqrep (siw_reject): "
                                 "RECVD_MPAREQ -> CLOSED")
        self._release_socket(cep, "siw_reject")
        self._set(cep, S.CLOSED, "siw_reject")
        self._forget(cep)

    # ---- verbs: close ------------------------------------------------------------------

    def close(self, conn: int, *, now_ns: int) -> None:
        """iw_cm's close of a connection: a passive endpoint not yet accepted is rejected
        without private data (iw_destroy_cm_id calls iw_reject); otherwise the QP leaves
        RTS and siw_qp_cm_drop closes the socket."""
        self._now = now_ns
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"no connection {conn}")
        if cep.held:
            with contextlib.suppress(CmError):  # iw_destroy_cm_id ignores iw_reject's return
                self.reject(conn, now_ns=now_ns)
            return
        self.disconnect(conn, graceful=True, now_ns=now_ns)

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """iw_cm_disconnect: the QP to CLOSING (graceful) or ERROR (abrupt); either way
        siw_qp_nextstate_from_rts drops the connection with siw_qp_cm_drop, whose
        sock_release sends a FIN (a RST only when unread bytes remain)."""
        self._now = now_ns
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"no connection {conn}")
        if cep.state == S.CONNECTING:
            self._release_socket(cep, "siw_connect", abort=True)
            self._set(cep, S.CLOSED, "siw_connect")
            self._forget(cep)
            return
        if not cep.qp or cep.state not in (S.AWAIT_MPAREP, S.RDMA_MODE):
            raise CmError(EINVAL, f"siw: connection {conn} ({cep.state.name}) has no QP "
                          "to disconnect")
        if cep.qp_state == SiwQpState.RTS:
            cep.qp_state = SiwQpState.CLOSING if graceful else SiwQpState.ERROR
        self._cm_drop(cep)

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """ib_modify_qp(ERR): from RTS siw_qp_cm_drop; before RTS
        (siw_qp_nextstate_from_idle) the QP only goes to ERROR, and the reply that
        arrives later fails siw_proc_mpareply (CONNECT_REPLY -EINVAL)."""
        self._now = now_ns
        cep = self._ceps.get(conn)
        if cep is not None and cep.qp and cep.qp_state in (SiwQpState.IDLE, SiwQpState.RTR):
            cep.qp_state = SiwQpState.ERROR
            return
        self.disconnect(conn, graceful=False, now_ns=now_ns)

    def _cm_drop(self, cep: Cep) -> None:
        """siw_qp_cm_drop(qp, 0): AWAIT_MPAREP -> CONNECT_REPLY(-EINVAL), RDMA_MODE ->
        CLOSE(0); the endpoint CLOSED and its socket released at once."""
        if cep.state == S.CLOSED:
            self._klog("debug", "siw_qp_cm_drop", "already closed", True, cep)
            return
        self._klog("debug", "siw_qp_cm_drop", f"immediate close, state {int(cep.state)}",
                   True, cep)
        if cep.cm_id:
            if cep.state == S.AWAIT_MPAREP:
                self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
            elif cep.state == S.RDMA_MODE:
                self._upcall(cep, IwEvent.CLOSE, 0)
            cep.cm_id = False
        self._set(cep, S.CLOSED, "siw_qp_cm_drop")
        self._release_socket(cep, "siw_qp_cm_drop")
        self._forget(cep)

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """irdma_cm_teardown_connections is irdma's: siw has no such path."""
        raise CmError(EOPNOTSUPP, "teardown by address is irdma's "
                      "(irdma_cm_teardown_connections); siw has none")

    def device_reset(self, *, now_ns: int) -> list[int]:
        """A PCI function reset is irdma's: siw is software."""
        raise CmError(EOPNOTSUPP, "siw has no device reset (software device)")

    # ---- views ---------------------------------------------------------------------------

    def node(self, conn: int) -> CepView | None:
        """The endpoint ``conn`` (None once freed)."""
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            return None
        return CepView(cep.state, cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port,
                       cep.ird, cep.ord, cep.enhanced, cep.mpa_timer)

    def qp_state(self, conn: int) -> QpView | None:
        """The QP of ``conn`` (None without one)."""
        cep = self._ceps.get(conn)
        if cep is None or not cep.qp:
            return None
        tcp = self.tcp.state(cep.sock) if cep.sock is not None else None
        return QpView(cep.qp_state.name, tcp or "CLOSED", cep.crc)

    def listener(self, ident: int) -> ListenerView | None:
        """The listening endpoint ``ident`` (None once destroyed)."""
        cep = self._ceps.get(ident)
        if cep is None or not cep.listener:
            return None
        return ListenerView(cep.state, cep.loc_addr or None, cep.loc_port, cep.ord)

    def conns(self) -> list[int]:
        """Endpoints of connections that still exist."""
        return [c.ident for c in self._ceps.values() if not c.listener]

    # ---- socket callbacks and work ---------------------------------------------------------

    def _drain(self) -> None:
        while (ev := self.tcp.next_event()) is not None:
            self._socket_event(ev)

    def _run_work(self) -> None:
        """siw_cm_wq: the queued work, in order."""
        while self._workq:
            ident, work = self._workq.popleft()
            if work == SiwWork.ACCEPT:
                self._accept_work(ident)
                continue
            cep = self._ceps.get(ident)
            if cep is not None:
                self._work(cep, work)
            self._drain()

    def _socket_event(self, ev: TcpEvent) -> None:
        if ev.kind == "accepted":
            # siw_cm_llp_state_change(TCP_ESTABLISHED) on the listener: SIW_CM_WORK_ACCEPT
            lcep = self._listen_by_tcp.get(ev.listener) if ev.listener is not None else None
            if lcep is None:
                self.tcp.abort(ev.sock, self._now)
                return
            self._unclaimed[ev.sock] = (lcep.ident, bytearray())
            self._workq.append((ev.sock, SiwWork.ACCEPT))
            return
        if ev.sock in self._unclaimed:
            # the child still has the listener's callbacks: siw_cm_llp_data_ready sees a
            # LISTENING cep and leaves the bytes queued; siw_accept_newconn finds them
            if ev.kind == "data":
                self._unclaimed[ev.sock][1].extend(ev.data)
            return
        cep = self._by_sock.get(ev.sock)
        if cep is None:
            return
        if ev.kind == "connected":
            self._connected(cep)
        elif ev.kind == "data":
            cep.rx += ev.data
            self._data_ready(cep)
        elif ev.kind in ("peer_fin", "reset"):
            # siw_cm_llp_state_change(TCP_CLOSE_WAIT / TCP_CLOSE): SIW_CM_WORK_PEER_CLOSE
            self._workq.append((cep.ident, SiwWork.PEER_CLOSE))
        elif ev.kind == "failed":
            self._by_sock.pop(ev.sock, None)
            cep.sock = None
            if cep.state == S.CONNECTING:
                err = ev.errno or EINVAL
                self._klog("debug", "siw_connect", f"kernel_bindconnect: error -{err}", True)
                self._note("verb_failed", "siw_connect", verb="connect", errno=err,
                           error=f"kernel_bindconnect: {errno.errorcode.get(err, err)}")
                cep.cm_id = False
                self._set(cep, S.CLOSED, "siw_connect")
                self._forget(cep)
            else:
                self._workq.append((cep.ident, SiwWork.PEER_CLOSE))

    def _data_ready(self, cep: Cep) -> None:
        """siw_cm_llp_data_ready (SIW_CM_WORK_READ_MPAHDR while awaiting a frame), then
        the QP's receive path once in RDMA mode."""
        if cep.state in (S.AWAIT_MPAREQ, S.AWAIT_MPAREP):
            self._workq.append((cep.ident, SiwWork.READ_MPAHDR))
        elif cep.state == S.RDMA_MODE:
            self._qp_rx(cep)
        else:
            self._klog("debug", "siw_cm_llp_data_ready", f"unexpected data, state "
                       f"{int(cep.state)}", True, cep)

    def _accept_work(self, sock: int) -> None:
        """SIW_CM_WORK_ACCEPT: siw_accept_newconn for the listener that queued it."""
        lident, queued = self._unclaimed.pop(sock, (0, bytearray()))
        lcep = self._ceps.get(lident)
        if lcep is None or lcep.state != S.LISTENING or self.tcp.state(sock) is None:
            self.tcp.abort(sock, self._now)  # "Connection already aborted by peer..?"
            return
        self._accept_newconn(lcep, sock, queued)
        self._drain()

    def _accept_newconn(self, lcep: Cep, sock: int, queued: bytearray) -> None:
        """siw_accept_newconn: a new endpoint in AWAIT_MPAREQ with the MPA timer
        (MPAREP_TIMEOUT, 5 s) for the accepted socket; a request already queued is
        processed at once ("immediate mpa request")."""
        cep = self._new_cep(S.IDLE)
        cep.sock = sock
        cep.listen_cep = lcep.ident
        self._by_sock[sock] = cep
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port = addrs
        self._set(cep, S.AWAIT_MPAREQ, "siw_accept_newconn")
        self._queue_mpa_timer(cep)
        if queued:
            self._klog("debug", "siw_accept_newconn", "immediate mpa request", True, lcep)
            cep.rx += queued
            self._work(cep, SiwWork.READ_MPAHDR)

    def _queue_mpa_timer(self, cep: Cep) -> None:
        """siw_cm_queue_work(SIW_CM_WORK_MPATIMEOUT): MPAREQ_TIMEOUT while awaiting the
        reply, MPAREP_TIMEOUT otherwise."""
        delay = MPAREQ_TIMEOUT_NS if cep.state == S.AWAIT_MPAREP else MPAREP_TIMEOUT_NS
        cep.mpa_timer = self._now + delay
        self._klog("debug", "siw_cm_queue_work", f"[QP {cep.ident if cep.qp else -1}]: "
                   f"work type: {int(SiwWork.MPATIMEOUT)}, timeout {delay // 1_000_000}",
                   True, cep)

    def _work(self, cep: Cep, work: SiwWork) -> None:
        """siw_cm_work_handler for one work item."""
        if cep.ident not in self._ceps:
            return
        self._note("siw_work", "siw_cm_work_handler", conn=cep.ident, work=work.name,
                   state=cep.state.name)
        release = False
        if work == SiwWork.READ_MPAHDR:
            rv = 0
            if cep.state == S.AWAIT_MPAREQ:
                lcep = self._ceps.get(cep.listen_cep) if cep.listen_cep is not None else None
                rv = self._proc_mpareq(cep) if lcep is not None and \
                    lcep.state == S.LISTENING else -errno.EFAULT
                if rv != -errno.EAGAIN:
                    cep.listen_cep = None
            elif cep.state == S.AWAIT_MPAREP:
                rv = self._proc_mpareply(cep)
            else:
                self._klog("debug", "siw_cm_work_handler", f"out of state: {int(cep.state)}",
                           True, cep)
            release = rv != 0 and rv != -errno.EAGAIN
        elif work == SiwWork.PEER_CLOSE:
            if cep.cm_id:
                if cep.state == S.AWAIT_MPAREP:
                    self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
                elif cep.state == S.RDMA_MODE:
                    # "IW_CM_EVENT_DISCONNECT is given just to transition IWCM into CLOSING"
                    self._upcall(cep, IwEvent.DISCONNECT, 0)
                    self._upcall(cep, IwEvent.CLOSE, 0)
            elif cep.state == S.RECVD_MPAREQ:
                self._klog("debug", "siw_cm_work_handler", "mpa req recvd, wait for ULP",
                           True, cep)
            elif cep.state == S.AWAIT_MPAREQ:
                self._klog("debug", "siw_cm_work_handler", "no mpareq: drop listener",
                           True, cep)
                cep.listen_cep = None
            release = True
        elif work == SiwWork.CLOSE_LLP:
            if cep.cm_id:
                self._upcall(cep, IwEvent.CLOSE, 0)
            release = True
        elif work == SiwWork.MPATIMEOUT:
            if cep.state == S.AWAIT_MPAREP:
                cep.pd_len = 0  # "Hide any partially received private data"
                if cep.cm_id:
                    self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ETIMEDOUT)
                release = True
            elif cep.state == S.AWAIT_MPAREQ:
                cep.listen_cep = None
                release = True
        if release:
            self._release(cep, work)

    def _release(self, cep: Cep, work: SiwWork) -> None:
        """siw_cm_work_handler's release_cep: MPA timer cancelled, CLOSED, the QP to
        ERROR (siw_qp_llp_close), the socket released, the cm_id dropped."""
        self._klog("debug", "siw_cm_work_handler", f"release: timer="
                   f"{'y' if cep.mpa_timer is not None else 'n'}, QP[{cep.ident}]", True, cep)
        cep.mpa_timer = None
        self._set(cep, S.CLOSED, f"siw_cm_work_handler ({work.name})")
        if cep.qp:
            cep.qp_state = SiwQpState.ERROR  # siw_qp_llp_close
        self._release_socket(cep, f"siw_cm_work_handler ({work.name})")
        cep.cm_id = False
        self._forget(cep)

    # ---- MPA ---------------------------------------------------------------------------

    def _proc_mpareq(self, cep: Cep) -> int:
        """siw_proc_mpareq: read the request (siw_recv_mpa_rr), check revision and key,
        take the RFC 6581 block, refuse markers and (with mpa_crc_strict) CRC with a
        reject frame, negotiate IRD/ORD and the RTR, CONNECT_REQUEST."""
        rv = cep.reader.step(cep.rx)
        if rv:
            self._recv_log(cep, rv)
            return rv
        head = bytes(cep.reader.hdr)
        cep.key, cep.flags, cep.rev = head[:16], head[16], head[17]
        cep.pd_len = cep.reader.pd_len
        cep.pdata = bytes(cep.reader.pdata)
        if cep.rev > 2:
            return -errno.EPROTO  # "allow for 0, 1, and 2 only"
        if cep.key != KEY_REQ:
            return -errno.EPROTO
        cep.key = KEY_REP  # "Prepare for sending MPA reply"
        p = self.params
        reject = False
        if cep.rev == 2 and cep.flags & FLAG_ENHANCED:
            if cep.pd_len < 4:
                reject = True
            else:
                cep.enhanced = True
        if not reject and cep.flags & FLAG_MARKERS:
            reject = True  # "MPA Markers: currently not supported"
        if not reject and cep.flags & FLAG_CRC and not p.mpa_crc_required \
                and p.mpa_crc_strict:
            reject = True  # "'mpa_crc_strict' parameter to reject connection with CRC"
        if reject:
            self._klog("debug", "siw_proc_mpareq", "reject: crc "
                       f"{1 if cep.flags & FLAG_CRC else 0}:{int(p.mpa_crc_required)}:"
                       f"{int(p.mpa_crc_strict)}, m {1 if cep.flags & FLAG_MARKERS else 0}:0",
                       True, cep)
            cep.flags = (cep.flags & ~FLAG_MARKERS) | FLAG_REJECT
            if not p.mpa_crc_required and p.mpa_crc_strict:
                cep.flags &= ~FLAG_CRC
            cep.pdata = b""
            # cep->mpa.v2_ctrl is still zero here (kzalloc)
            self._send_mpareqrep(cep, b"", "siw_send_mpareqrep (siw_proc_mpareq): reject, "
                                 "AWAIT_MPAREQ -> CLOSED")
            return -EOPNOTSUPP
        if cep.enhanced:
            ird_word, ord_word = struct.unpack_from("!HH", cep.pdata)
            cep.ord = min(ird_word & IRD_ORD_MASK, SIW_MAX_ORD_QP)
            cep.ird = min(ord_word & IRD_ORD_MASK, SIW_MAX_IRD_QP)
            cep.v2_ird, cep.v2_ord = cep.ird, cep.ord
            if ird_word & V2_PEER_TO_PEER:
                cep.v2_ird |= V2_PEER_TO_PEER
                # "Writes are preferred"; Write proposed when neither is offered
                if ord_word & V2_WRITE_RTR:
                    cep.v2_ord |= V2_WRITE_RTR
                elif ord_word & V2_READ_RTR:
                    cep.v2_ord |= V2_READ_RTR
                else:
                    cep.v2_ord |= V2_WRITE_RTR
        self._set(cep, S.RECVD_MPAREQ, "siw_proc_mpareq")
        cep.held = True
        self._upcall(cep, IwEvent.CONNECT_REQUEST, 0)
        return 0

    def _proc_mpareply(self, cep: Cep) -> int:
        """siw_proc_mpareply: the reply read whole, then revision, key (a Terminate),
        R (CONNECT_REPLY -ECONNRESET), M and C against the CRC settings (-ECONNREFUSED),
        the RFC 6581 block (-ECONNRESET without it), IRD and the RTR (a Terminate each),
        QP to RTS, the RTR, CONNECT_REPLY 0 and RDMA mode."""
        rv = cep.reader.step(cep.rx)
        if rv:
            self._recv_log(cep, rv)
            return self._reply_err(cep, rv)
        cep.mpa_timer = None  # siw_cancel_mpatimer
        head = bytes(cep.reader.hdr)
        cep.key, flags, rev = head[:16], head[16], head[17]
        cep.flags, cep.rev = flags, rev
        cep.pd_len = cep.reader.pd_len
        cep.pdata = bytes(cep.reader.pdata)
        p = self.params
        if rev > 2:
            return self._reply_err(cep, -errno.EPROTO)
        if cep.key != KEY_REP:
            self._terminate(cep, rdma.LLP_ECODE_INVALID_REQ_RESP)
            return self._reply_err(cep, -errno.EPROTO)
        if flags & FLAG_REJECT:
            self._klog("debug", "siw_proc_mpareply", "got mpa reject", True, cep)
            self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
            return -ECONNRESET
        if (flags & FLAG_MARKERS or (p.mpa_crc_required and not flags & FLAG_CRC)
                or (p.mpa_crc_strict and not p.mpa_crc_required and flags & FLAG_CRC)):
            self._klog("debug", "siw_proc_mpareply", "reply unsupp: crc "
                       f"{1 if flags & FLAG_CRC else 0}:{int(p.mpa_crc_required)}:"
                       f"{int(p.mpa_crc_strict)}, m {1 if flags & FLAG_MARKERS else 0}:0",
                       True, cep)
            self._upcall(cep, IwEvent.CONNECT_REPLY, -errno.ECONNREFUSED)
            return -EINVAL
        rtr = 0
        if cep.enhanced:
            if rev < 2 or not flags & FLAG_ENHANCED:
                self._klog("debug", "siw_proc_mpareply", f"mpa reply error: vers {rev}, "
                           f"enhcd {1 if flags & FLAG_ENHANCED else 0}", True, cep)
                self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
                return -EINVAL
            if len(cep.pdata) < 4:
                # the kernel reads mpa_v2_data from a buffer PD_Length did not fill
                self._note("kernel_quirk", "siw_proc_mpareply",
                           what="RFC 6581 block read past PD_Length", pd_len=cep.pd_len)
            ird_word, ord_word = struct.unpack_from("!HH", cep.pdata.ljust(4, b"\0"))
            rep_ird, rep_ord = ird_word & IRD_ORD_MASK, ord_word & IRD_ORD_MASK
            insufficient = False
            if cep.ird < rep_ord and (not p.relaxed_ird_negotiation
                                      or rep_ord > SIW_MAX_IRD_QP):
                self._klog("debug", "siw_proc_mpareply", f"ird {cep.ird}, rep_ord {rep_ord}, "
                           f"max_ord {SIW_MAX_ORD_QP}", True, cep)
                insufficient = True
            if cep.ord > rep_ird and not p.relaxed_ird_negotiation:
                self._klog("debug", "siw_proc_mpareply", f"ord {cep.ord}, rep_ird {rep_ird}",
                           True, cep)
                insufficient = True
            # "Always report negotiated peer values to user"
            cep.ird, cep.ord = rep_ord, rep_ird
            if insufficient:
                self._terminate(cep, rdma.LLP_ECODE_INSUFFICIENT_IRD)
                return self._reply_err(cep, -ENOMEM)
            if cep.req_ird & V2_PEER_TO_PEER:
                rtr = cep.req_ord & (V2_WRITE_RTR | V2_READ_RTR)
            if rtr:
                if not rtr & ord_word:
                    self._klog("debug", "siw_proc_mpareply", f"rtr mode:  req {rtr >> 8:2x}, "
                               f"got {(ord_word & (V2_WRITE_RTR | V2_READ_RTR)) >> 8:2x}",
                               True, cep)
                    self._terminate(cep, rdma.LLP_ECODE_NO_MATCHING_RTR)
                    return self._reply_err(cep, -errno.EPROTO)
                rtr = ord_word & (V2_WRITE_RTR | V2_READ_RTR)
        if cep.qp_state > SiwQpState.RTR:
            return self._reply_err(cep, -EINVAL)  # the QP left IDLE/RTR meanwhile
        cep.crc = bool(flags & FLAG_CRC)
        cep.qp_state = SiwQpState.RTS
        if rtr:
            self._send_rtr(cep, rtr)
        self._upcall(cep, IwEvent.CONNECT_REPLY, 0)
        self._set(cep, S.RDMA_MODE, "siw_proc_mpareply")
        return 0

    def _reply_err(self, cep: Cep, rv: int) -> int:
        """siw_proc_mpareply's out_err: CONNECT_REPLY(-EINVAL) unless more bytes are due."""
        if rv != -errno.EAGAIN:
            self._upcall(cep, IwEvent.CONNECT_REPLY, -EINVAL)
        return rv

    def _recv_log(self, cep: Cep, rv: int) -> None:
        reader = cep.reader
        if rv == -errno.EPROTO and reader.extra:
            self._klog("debug", "siw_recv_mpa_rr", f"peer sent extra data: {reader.extra}",
                       True, cep)

    def _send_mpareqrep(self, cep: Cep, private_data: bytes, comment: str) -> None:
        """siw_send_mpareqrep: ``struct mpa_rr`` (key, bits, PD_Length), the
        ``mpa_v2_data`` block when enhanced (PD_Length counts it), the private data; one
        kernel_sendmsg."""
        pd_len = len(private_data) + (4 if cep.enhanced else 0)
        frame = cep.key + struct.pack("!BBH", cep.flags & 0xFF, cep.rev & 0xFF, pd_len & 0xFFFF)
        if cep.enhanced:
            frame += struct.pack("!HH", cep.v2_ird & 0xFFFF, cep.v2_ord & 0xFFFF)
        frame += private_data
        if cep.sock is not None:
            self.tcp.send(cep.sock, frame, self._now, comment)

    # ---- RDMA mode -------------------------------------------------------------------

    def _send_rtr(self, cep: Cep, rtr: int) -> None:
        """siw_qp_mpa_rts: a zero-length Write when the reply picked Write, else a
        zero-length Read Request."""
        if rtr & V2_WRITE_RTR:
            ulpdu, what = rdma.write_rtr(), "zero-length RDMA Write"
        else:
            cep.orq_msn += 1
            ulpdu, what = rdma.read_rtr(cep.orq_msn), "zero-length RDMA Read Request"
        self._send_fpdu(cep, ulpdu, f"siw_qp_mpa_rts: RTR, {what} (AWAIT_MPAREP)")

    def _send_fpdu(self, cep: Cep, ulpdu: bytes, comment: str) -> None:
        if cep.sock is not None:
            self.tcp.send(cep.sock, rdma.fpdu(ulpdu, cep.crc), self._now, comment)

    def _terminate(self, cep: Cep, ecode: int) -> None:
        """siw_init_terminate + siw_send_terminate (LLP layer, MPA error type): the
        Terminate goes out on the endpoint's socket before RTS, CRC field zero."""
        self._klog("debug", "siw_init_terminate", f"init TERM: layer "
                   f"{rdma.TERM_ERROR_LAYER_LLP}, type {rdma.LLP_ETYPE_MPA}, code {ecode}, "
                   "in tx no", True, cep)
        self._send_fpdu(cep, rdma.terminate(rdma.TERM_ERROR_LAYER_LLP, rdma.LLP_ETYPE_MPA,
                                            ecode),
                        f"siw_send_terminate: LLP/MPA ecode {ecode} ({cep.state.name})")

    def _qp_rx(self, cep: Cep) -> None:
        """siw_tcp_rx_data in RDMA mode, for what the CM cares about: the peer's RTR (the
        first FPDU after a reply that picked one: ESTABLISHED, siw_rtr_data_ready), a
        zero-length Read Request answered with a zero-length Read Response, a Terminate
        (siw_proc_terminate: the connection is dropped, SIW_CM_WORK_CLOSE_LLP)."""
        while cep.rx and cep.ident in self._ceps:
            try:
                f = unframe_fpdu(bytes(cep.rx))
            except MpaFormatError:
                return  # wait for the rest of the FPDU
            del cep.rx[:f.wire_length]
            try:
                seg = ddp.parse_segment(f.ulpdu)
            except ddp.DdpFormatError as exc:
                self._note("segment_dropped", "siw_tcp_rx_data", reason=str(exc))
                continue
            opcode = seg.opcode
            if opcode == ddp.Opcode.TERMINATE:
                self._klog("debug", "siw_proc_terminate", "TERM received", True, cep)
                cep.qp_state = SiwQpState.TERMINATE
                self._work(cep, SiwWork.CLOSE_LLP)
                return
            if opcode == ddp.Opcode.READ_REQUEST and seg.read_request is not None:
                rreq = seg.read_request
                if rreq.size == 0:
                    self._send_fpdu(cep, rdma.read_response(rreq.sink_stag, rreq.sink_to),
                                    "siw_qp_sq_process: zero-length RDMA Read Response")
            if cep.wait_rtr:
                cep.wait_rtr = False
                self._upcall(cep, IwEvent.ESTABLISHED, 0)  # siw_rtr_data_ready

    # ---- helpers ---------------------------------------------------------------------

    def _passive(self, conn: int, fn: str) -> Cep:
        cep = self._ceps.get(conn)
        if cep is None or cep.listener or cep.active:
            raise CmError(EINVAL, f"{fn}: no connection request {conn}")
        return cep

    def _new_cep(self, state: SiwState) -> Cep:
        cep = Cep(self._next, state)
        self._next += 1
        self._ceps[cep.ident] = cep
        self._klog("debug", "siw_cep_alloc", "new endpoint", True, cep)
        return cep

    def _forget(self, cep: Cep) -> None:
        if not cep.held:  # iw_cm's reference keeps a CLOSED endpoint until accept/reject
            self._ceps.pop(cep.ident, None)
        if cep.sock is not None:
            self._by_sock.pop(cep.sock, None)
            cep.sock = None

    def _release_socket(self, cep: Cep, fn: str, *, abort: bool = False) -> None:
        """sock_release from ``fn``: tcp_close sends a FIN, or a RST when unread data
        remain (or when ``abort``)."""
        sock = cep.sock
        if sock is None:
            return
        self._by_sock.pop(sock, None)
        cep.sock = None
        if abort or cep.rx:
            why = "sock_release with unread data" if cep.rx else "sock_release"
            self.tcp.abort(sock, self._now, f"{fn}: {why}")
        else:
            self.tcp.shutdown(sock, self._now, f"{fn}: sock_release")

    def _set(self, cep: Cep, new: SiwState, fn: str) -> None:
        old = cep.state
        cep.state = new
        if self.trace is not None and old != new:
            self.trace.emit(make_record(self._now, self.name, "state_changed", fn,
                                        {"conn": cep.ident, "old": old.name,
                                         "new": new.name}))

    def _upcall(self, cep: Cep, event: IwEvent, status: int) -> None:
        """siw_cm_upcall: IRD/ORD for ESTABLISHED and CONNECT_REPLY (swapped for
        CONNECT_REQUEST); private data with the RFC 6581 block hidden when enhanced, and
        the addresses, for CONNECT_REQUEST and CONNECT_REPLY."""
        ird = ord_ = 0
        if event in (IwEvent.ESTABLISHED, IwEvent.CONNECT_REPLY):
            ird, ord_ = cep.ird, cep.ord
        elif event == IwEvent.CONNECT_REQUEST:
            ird, ord_ = cep.ord, cep.ird
        pdata = b""
        plen = 0
        loc = rem = b""
        lport = rport = 0
        if event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY):
            if cep.pd_len:
                pdata, plen = cep.pdata, cep.pd_len
                if cep.enhanced:  # "Hide MPA V2 IRD/ORD control"
                    pdata, plen = pdata[4:], (plen - 4) & 0xFF
            loc, lport, rem, rport = cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port
        self._klog("debug", "siw_cm_upcall", f"[QP {cep.ident if cep.qp else 4294967295}]: "
                   f"reason={int(event)}, status={status}", True, cep)
        listener = cep.listen_cep if event == IwEvent.CONNECT_REQUEST else None
        up = Upcall(event, cep.ident, status, self._now, loc, lport, rem, rport, pdata, plen,
                    ird, ord_, listener)
        self._upcalls.append(up)
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, "upcall", "siw_cm_upcall",
                                        {"conn": cep.ident, "event": event.name,
                                         "status": status}))

    def _klog(self, level: str, fn: str, text: str, dynamic: bool,
              cep: Cep | None = None) -> None:
        """A kernel log line (siw_dbg_cep / siw_dbg are ibdev_dbg: dynamic debug)."""
        if self.trace is None:
            return
        if cep is not None:
            text = f"CEP[0x{0xffff888100000000 + cep.ident * 0x200:016x}] {fn}: {text}"
        self.trace.emit(make_record(self._now, self.name, "kernel_log", fn,
                                    {"level": level, "text": text, "dynamic_debug": dynamic}))

    def _note(self, kind: str, fn: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, kind, fn, dict(fields)))

    @staticmethod
    def _addr(ip: bytes | None, port: int) -> str:
        from mpa_emu.wire.addr import ip_text

        return f"{ip_text(ip) if ip else '0.0.0.0'}:{port}"
