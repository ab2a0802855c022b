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
from collections.abc import Mapping
from errno import ECONNRESET, EINVAL, ENOMEM, EOPNOTSUPP

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.siw.cep import (
    FLAG_CRC,
    FLAG_ENHANCED,
    FLAG_GSO_EXP,
    FLAG_REJECT,
    IRD_ORD_MASK,
    V2_PEER_TO_PEER,
    V2_READ_RTR,
    V2_WRITE_RTR,
    Cep,
    CepView,
    ListenerView,
    QpView,
    dbg_cep,
)
from mpa_emu.stacks.siw.params import (
    MPA_MAX_PRIVDATA,
    MPAREP_TIMEOUT_NS,
    MPAREQ_TIMEOUT_NS,
    RTR_READ,
    RTR_WRITE,
    SIW_MAX_IRD_QP,
    SIW_MAX_ORD_QP,
)
from mpa_emu.stacks.siw.qp import SiwQp
from mpa_emu.stacks.siw.states import SiwQpState, SiwState, SiwWork
from mpa_emu.stacks.tcp import TcpEvent
from mpa_emu.stacks.verb_args import check_verb_args
from mpa_emu.wire.mpa import KEY_REQ
from mpa_emu.wire.segment import Segment, Transmit

S = SiwState

_SCENARIO_TCP_NAMES = {"SYN_RECV": "SYN_RECEIVED", "FIN_WAIT1": "FIN_WAIT_1",
                       "FIN_WAIT2": "FIN_WAIT_2"}
"""Linux's socket state names (tcp_states.h) as scenario files spell TCP states."""


class SiwCore(SiwQp):
    """One siw host: its endpoints (``struct siw_cep``) over a Linux-shaped TCP."""

    def __init__(self, name: str, mac: bytes, params: Mapping[str, int | bool] | None = None,
                 *, seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        super().__init__(name, mac, params, seed=seed, trace=trace, mtu=mtu)

    # ---- addresses -----------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """An address comes up on the siw device's netdev."""
        self.base.now_ns = max(self.base.now_ns, now_ns)
        self._addresses[ip] = vlan
        self.tcp.add_address(ip, vlan)

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """An address goes: siw_cm.c has no teardown by address; the sockets stay."""
        self.base.now_ns = now_ns
        self._addresses.pop(ip, None)
        self.tcp.remove_address(ip)

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The link goes down: siw_netdev_event reports a port error only; no endpoint
        changes (nothing modelled: returns no removed address)."""
        self.base.now_ns = now_ns
        return []

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """A neighbour entry of the host's IP stack."""
        self.tcp.set_neighbour(ip, mac)

    # ---- the sans-IO loop ------------------------------------------------------------

    def receive(self, frame: Segment, now_ns: int) -> None:
        """A segment from the wire, through the Linux TCP stack to the socket callbacks."""
        self.base.now_ns = now_ns
        self.tcp.receive(frame, now_ns)
        self._drain()

    def handle_timer(self, now_ns: int) -> None:
        """TCP timers and the MPA timers due at ``now_ns``."""
        self.base.now_ns = now_ns
        deadline = self.tcp.get_timer()
        if deadline is not None and deadline <= now_ns:
            self.tcp.handle_timer(now_ns)
            self._drain()
        self._run_work()
        for ident in self._mpa_timers.due(now_ns):
            cep = self._ceps.get(ident)
            if cep is not None and cep.mpa_timer is not None and cep.mpa_timer <= now_ns:
                cep.mpa_timer = None
                self._work(cep, SiwWork.MPATIMEOUT)
        self._drain()

    def get_timer(self) -> int | None:
        """The earliest TCP or MPA deadline (now, while work is queued)."""
        if self._workq:
            return self.base.now_ns
        best = self.tcp.get_timer()
        at = self._mpa_timers.earliest()
        return at if best is None or (at is not None and at < best) else best

    def frames_to_send(self) -> list[Transmit]:
        """Segments built since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event."""
        return self.base.next_event()

    # ---- verbs: listen ---------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        """siw_create_listen: a listening socket (bound to the wildcard or ``ip``) and
        its endpoint in LISTENING; returns the listener id."""
        check_verb_args("listen", port=port, backlog=backlog, vlan=vlan)
        del vlan
        self.base.now_ns = max(self.base.now_ns, now_ns)
        if ip is not None and ip not in self._addresses:
            self.base.kernel_log("debug", "siw_create_listen", "socket bind error: -99",
                                 dynamic_debug=True)
            raise CmError(errno.EADDRNOTAVAIL, "siw_create_listen: not a local address")
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, "siw_create_listen: port out of range")
        if self.tcp.listener_bound(ip, port):
            self.base.kernel_log("debug", "siw_create_listen", "socket bind error: -98",
                                 dynamic_debug=True)
            raise CmError(errno.EADDRINUSE, "siw_create_listen: address in use")
        cep = self._new_cep(S.IDLE)
        cep.listener = True
        cep.tcp_listener = self.tcp.listen(ip, port, backlog, ipv6=ipv6)
        cep.cm_id = True
        cep.loc_addr = ip or b""
        cep.loc_port = port
        cep.backlog = backlog
        self._listen_by_tcp[cep.tcp_listener] = cep
        self.base.set_state(cep, S.LISTENING, "siw_create_listen", cep.ident, ports=cep.ports())
        self.base.kernel_log("debug", "siw_create_listen",
                             f"Listen at laddr {self._addr(ip, port)}", dynamic_debug=True)
        return cep.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """siw_destroy_listen -> siw_drop_listeners: the listening endpoint CLOSED, its
        socket released."""
        self.base.now_ns = now_ns
        cep = self._ceps.get(listener)
        if cep is None or not cep.listener:
            raise CmError(EINVAL, f"no listener {listener}")
        dbg_cep(self.base, cep, "siw_drop_listeners", f"drop cep, state {int(cep.state)}")
        if cep.tcp_listener is not None:
            self.tcp.unlisten(cep.tcp_listener)
            self._listen_by_tcp.pop(cep.tcp_listener, None)
        cep.cm_id = False
        self.base.set_state(cep, S.CLOSED, "siw_drop_listeners", cep.ident, ports=cep.ports())
        del self._ceps[cep.ident]

    # ---- verbs: connect, accept, reject ------------------------------------------------

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        """siw_connect: refuse private data over MPA_MAX_PRIVDATA (-EINVAL) and IRD/ORD
        over the device's (-ENOMEM), open the socket (kernel_bindconnect); the MPA
        request follows when it connects (:meth:`_connected`)."""
        check_verb_args("connect", port=remote_port, local_port=local_port,
                        private_data=private_data, ird=ird, ord=ord)
        self.base.now_ns = now_ns
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
            self.base.kernel_log("debug", "siw_connect", f"kernel_bindconnect: error -{err}",
                                 dynamic_debug=True)
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
        self.base.set_state(cep, S.CONNECTING, "siw_connect", cep.ident, ports=cep.ports())
        return cep.ident

    def _connected(self, cep: Cep) -> None:
        """siw_connect after kernel_bindconnect: the request's bits (revision from
        mpa_version, GSO with try_gso, C with mpa_crc_required; for rev 2 the S flag and
        the RFC 6581 block with IRD/ORD, P2P and rtr_type with peer_to_peer), the
        request sent (siw_send_mpareqrep) and the MPA timer armed (MPAREQ_TIMEOUT)."""
        p = self.params
        version = p.mpa_version
        if version > 2:
            self.base.kernel_log("warn", "siw_connect", "Setting MPA version to 2")
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
        self.base.set_state(cep, S.AWAIT_MPAREP, "siw_connect", cep.ident, ports=cep.ports())
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
        check_verb_args("accept", private_data=private_data, ird=ird, ord=ord)
        self.base.now_ns = now_ns
        cep = self._passive(conn, "siw_accept")
        cep.pdata = b""  # "Free lingering inbound private data"
        cep.pd_len = 0
        cep.mpa_timer = None  # siw_cancel_mpatimer
        held, cep.held = cep.held, False
        if cep.state != S.RECVD_MPAREQ:
            dbg_cep(self.base, cep, "siw_accept", "out of state")
            self._refused_while_waiting_rtr(cep, "siw_accept")
            if held:
                self._forget(cep)
            raise CmError(ECONNRESET, f"siw_accept: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        want_ird = cep.ird if ird is None else ird
        want_ord = cep.ord if ord is None else ord
        if want_ord > SIW_MAX_ORD_QP or want_ird > SIW_MAX_IRD_QP:
            dbg_cep(self.base, cep, "siw_accept", f"[QP {cep.ident}]: ord {want_ord} (max "
                    f"{SIW_MAX_ORD_QP}), ird {want_ird} (max {SIW_MAX_IRD_QP})")
            self._accept_error(cep)
            raise CmError(EINVAL, "siw_accept: ird/ord over the device's maximum")
        max_priv = MPA_MAX_PRIVDATA - (4 if cep.enhanced else 0)
        if len(private_data) > max_priv:
            dbg_cep(self.base, cep, "siw_accept", f"[QP {cep.ident}]: private data length: "
                    f"{len(private_data)} (max {max_priv})")
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
        self._qp_to_rts(cep)
        cep.wait_rtr = wait_rtr
        self.base.set_state(cep, S.RDMA_MODE, "siw_accept", cep.ident, ports=cep.ports())
        self._send_mpareqrep(cep, private_data, "siw_send_mpareqrep (siw_accept): "
                             "RECVD_MPAREQ -> RDMA_MODE")
        if not wait_rtr:
            self._upcall(cep, IwEvent.ESTABLISHED, 0)

    def _refused_while_waiting_rtr(self, cep: Cep, fn: str) -> None:
        """A second accept or reject on a responder that accepted and still waits for the
        peer's RTR: rdma_cm lets it through (its id stays in RDMA_CM_CONNECT until
        ESTABLISHED), iw_cm moves the id out of CONN_RECV (iw_cm_accept's error path,
        or iw_cm_reject before the driver), yet siw upcalls ESTABLISHED when the RTR
        comes (siw_rtr_data_ready): cm_conn_est_handler's BUG_ON, the kernel's own."""
        if cep.cm_id and not cep.active and not cep.established:
            self.base.record("kernel_bug", fn, conn=cep.ident,
                             what="refused on an endpoint still waiting for the RTR: iw_cm's id "
                            "leaves CONN_RECV, and the ESTABLISHED that follows meets "
                            "cm_conn_est_handler's BUG_ON")

    def _accept_error(self, cep: Cep) -> None:
        """siw_accept's error path: socket released, endpoint CLOSED, no upcall."""
        self._release_socket(cep, "siw_accept (error)")
        self.base.set_state(cep, S.CLOSED, "siw_accept", cep.ident, ports=cep.ports())
        self._forget(cep)

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """siw_reject: in RECVD_MPAREQ, for a request of revision 1 or more, the reply
        header with R set (the block too when the request had S) and the private data;
        then sock_release (a FIN, or a RST when unread bytes remain)."""
        check_verb_args("reject", private_data=private_data)
        self.base.now_ns = now_ns
        cep = self._passive(conn, "siw_reject")
        cep.mpa_timer = None
        held, cep.held = cep.held, False
        if cep.state != S.RECVD_MPAREQ:
            dbg_cep(self.base, cep, "siw_reject", "out of state")
            self._refused_while_waiting_rtr(cep, "siw_reject")
            if held:
                self._forget(cep)  # "put last reference"
            raise CmError(ECONNRESET, f"siw_reject: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        if len(private_data) > 0xFF:  # iw_cm_reject and siw_reject take a u8 length
            self.base.record("kernel_quirk", "siw_reject", what="u8 private data length wraps",
                             length=len(private_data))
            private_data = private_data[:len(private_data) & 0xFF]
        dbg_cep(self.base, cep, "siw_reject", f"cep->state {int(cep.state)}, pd_len "
                f"{len(private_data)}")
        if cep.rev >= 1:
            cep.flags |= FLAG_REJECT
            self._send_mpareqrep(cep, private_data, "siw_send_mpareqrep (siw_reject): "
                                 "RECVD_MPAREQ -> CLOSED")
        self._release_socket(cep, "siw_reject")
        self.base.set_state(cep, S.CLOSED, "siw_reject", cep.ident, ports=cep.ports())
        self._forget(cep)

    # ---- verbs: close ------------------------------------------------------------------

    def close(self, conn: int, *, now_ns: int) -> None:
        """iw_cm's close of a connection: a passive endpoint not yet accepted is rejected
        without private data (iw_destroy_cm_id calls iw_reject); otherwise the QP leaves
        RTS and siw_qp_cm_drop closes the socket."""
        self.base.now_ns = now_ns
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
        sock_release sends a FIN (a RST only when unread bytes remain). On a responder
        that accepted and still waits for the peer's RTR, iw_cm waits for ESTABLISHED
        first (IWCM_F_CONNECT_WAIT): the disconnect runs when it goes up."""
        self._disconnect(conn, graceful, now_ns, via_iw_cm=True)

    def _disconnect(self, conn: int, graceful: bool, now_ns: int, *, via_iw_cm: bool) -> None:
        """The QP leaves RTS and the connection drops; ``via_iw_cm`` when the call went
        through iw_cm (which may make it wait), not straight to the QP."""
        self.base.now_ns = now_ns
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"no connection {conn}")
        if cep.state == S.CONNECTING:
            self._release_socket(cep, "siw_connect", abort=True)
            self.base.set_state(cep, S.CLOSED, "siw_connect", cep.ident, ports=cep.ports())
            self._forget(cep)
            return
        if not cep.qp or cep.state not in (S.AWAIT_MPAREP, S.RDMA_MODE):
            raise CmError(EINVAL, f"siw: connection {conn} ({cep.state.name}) has no QP "
                          "to disconnect")
        if via_iw_cm and cep.cm_id and not cep.active and not cep.established:
            # iw_cm_disconnect and destroy_cm_id wait on IWCM_F_CONNECT_WAIT, which
            # iw_cm_accept set and only ESTABLISHED clears (cm_conn_est_handler): the
            # QP is left alone until the peer's RTR; dropping it now would upcall CLOSE
            # on an id in CONN_RECV (cm_close_handler: BUG()).
            earlier = cep.deferred_disconnect
            cep.deferred_disconnect = graceful if earlier is None else earlier and graceful
            self.base.record("verb_deferred", "iw_cm_disconnect", conn=conn, graceful=graceful,
                             why="IWCM_F_CONNECT_WAIT: waiting for ESTABLISHED (the peer's RTR)")
            return
        if cep.qp_state == SiwQpState.RTS:
            cep.qp_state = SiwQpState.CLOSING if graceful else SiwQpState.ERROR
            self._flush(cep)  # siw_qp_nextstate_from_rts: siw_rq_flush
        self._cm_drop(cep)

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """ib_modify_qp(ERR): from RTS siw_qp_cm_drop; before RTS
        (siw_qp_nextstate_from_idle) the QP only goes to ERROR, and the reply that
        arrives later fails siw_proc_mpareply (CONNECT_REPLY -EINVAL). It goes to the QP
        straight, not through iw_cm: on a responder still waiting for the RTR the drop
        upcalls CLOSE before ESTABLISHED, the kernel's own BUG() (a kernel_bug record)."""
        self.base.now_ns = now_ns
        cep = self._ceps.get(conn)
        if cep is not None and cep.qp and cep.qp_state in (SiwQpState.IDLE, SiwQpState.RTR):
            cep.qp_state = SiwQpState.ERROR
            return
        self._disconnect(conn, False, now_ns, via_iw_cm=False)

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
        tcp = _SCENARIO_TCP_NAMES.get(tcp or "CLOSED", tcp or "CLOSED")
        return QpView(cep.qp_state.name, tcp, cep.crc)

    def listener(self, ident: int) -> ListenerView | None:
        """The listening endpoint ``ident`` (None once destroyed)."""
        cep = self._ceps.get(ident)
        if cep is None or not cep.listener:
            return None
        return ListenerView(cep.state, cep.loc_addr or None, cep.loc_port, cep.backlog)

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
                self.tcp.abort(ev.sock, self.base.now_ns)
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
                self.base.kernel_log("debug", "siw_connect", f"kernel_bindconnect: error -{err}",
                                     dynamic_debug=True)
                self.base.record("verb_failed", "siw_connect", verb="connect", errno=err,
                                 error=f"kernel_bindconnect: {errno.errorcode.get(err, err)}")
                cep.cm_id = False
                self.base.set_state(cep, S.CLOSED, "siw_connect", cep.ident, ports=cep.ports())
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
            graceful = cep.deferred_disconnect
            if graceful is not None and cep.established and cep.ident in self._ceps:
                # cm_conn_est_handler woke the application's waiting iw_cm_disconnect
                cep.deferred_disconnect = None
                self.disconnect(cep.ident, graceful=graceful, now_ns=self.base.now_ns)
        else:
            dbg_cep(self.base, cep, "siw_cm_llp_data_ready", f"unexpected data, state "
                    f"{int(cep.state)}")

    def _accept_work(self, sock: int) -> None:
        """SIW_CM_WORK_ACCEPT: siw_accept_newconn for the listener that queued it."""
        lident, queued = self._unclaimed.pop(sock, (0, bytearray()))
        lcep = self._ceps.get(lident)
        if lcep is None or lcep.state != S.LISTENING or self.tcp.state(sock) is None:
            self.tcp.abort(sock, self.base.now_ns)  # "Connection already aborted by peer..?"
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
        self.base.set_state(cep, S.AWAIT_MPAREQ, "siw_accept_newconn", cep.ident, ports=cep.ports())
        self._queue_mpa_timer(cep)
        if queued:
            dbg_cep(self.base, lcep, "siw_accept_newconn", "immediate mpa request")
            cep.rx += queued
            self._work(cep, SiwWork.READ_MPAHDR)

    def _queue_mpa_timer(self, cep: Cep) -> None:
        """siw_cm_queue_work(SIW_CM_WORK_MPATIMEOUT): MPAREQ_TIMEOUT while awaiting the
        reply, MPAREP_TIMEOUT otherwise."""
        delay = MPAREQ_TIMEOUT_NS if cep.state == S.AWAIT_MPAREP else MPAREP_TIMEOUT_NS
        cep.mpa_timer = self._mpa_timers.arm(cep.ident, self.base.now_ns + delay)
        dbg_cep(self.base, cep, "siw_cm_queue_work", f"[QP {cep.ident if cep.qp else -1}]: "
                f"work type: {int(SiwWork.MPATIMEOUT)}, timeout {delay // 1_000_000}")

    def _work(self, cep: Cep, work: SiwWork) -> None:
        """siw_cm_work_handler for one work item."""
        if cep.ident not in self._ceps:
            return
        self.base.record("siw_work", "siw_cm_work_handler", conn=cep.ident, work=work.name,
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
                dbg_cep(self.base, cep, "siw_cm_work_handler", f"out of state: {int(cep.state)}")
            release = rv != 0 and rv != -errno.EAGAIN
        elif work == SiwWork.PEER_CLOSE:
            if cep.cm_id:
                if cep.state == S.AWAIT_MPAREP:
                    self._upcall(cep, IwEvent.CONNECT_REPLY, -ECONNRESET)
                elif cep.state == S.RDMA_MODE:
                    # "IW_CM_EVENT_DISCONNECT is given just to transition IWCM into CLOSING"
                    self._upcall(cep, IwEvent.DISCONNECT, 0)
                    self._close_upcall(cep, "siw_cm_work_handler")
            elif cep.state == S.RECVD_MPAREQ:
                dbg_cep(self.base, cep, "siw_cm_work_handler", "mpa req recvd, wait for ULP")
            elif cep.state == S.AWAIT_MPAREQ:
                dbg_cep(self.base, cep, "siw_cm_work_handler", "no mpareq: drop listener")
                cep.listen_cep = None
            release = True
        elif work == SiwWork.CLOSE_LLP:
            self._close_llp(cep)
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
        dbg_cep(self.base, cep, "siw_cm_work_handler", f"release: timer="
                f"{'y' if cep.mpa_timer is not None else 'n'}, QP[{cep.ident}]")
        cep.mpa_timer = None
        self.base.set_state(cep, S.CLOSED, f"siw_cm_work_handler ({work.name})", cep.ident,
                            ports=cep.ports())
        if cep.qp:
            cep.qp_state = SiwQpState.ERROR  # siw_qp_llp_close
            self._flush(cep)
        self._release_socket(cep, f"siw_cm_work_handler ({work.name})")
        cep.cm_id = False
        self._forget(cep)

    def _passive(self, conn: int, fn: str) -> Cep:
        """The passive endpoint iw_cm holds an id for. siw_accept and siw_reject find
        their endpoint in ``id->provider_data``, which cm_conn_req_handler sets from the
        CONNECT_REQUEST upcall (siw_proc_mpareq): an endpoint still in AWAIT_MPAREQ has
        no id, so the verb never reaches siw and changes nothing (its MPA timer keeps
        running and frees it, SIW_CM_WORK_MPATIMEOUT)."""
        cep = self._ceps.get(conn)
        if cep is None or cep.listener or cep.active:
            raise CmError(EINVAL, f"{fn}: no connection request {conn}")
        if not cep.held and not cep.cm_id:
            raise CmError(EINVAL, f"{fn}: connection {conn} is in {cep.state.name}: no "
                          "CONNECT_REQUEST was delivered for it")
        return cep
