"""erdma's connection manager (drivers/infiniband/hw/erdma/erdma_cm.c) over the Linux
TCP stack (:class:`~mpa_emu.stacks.tcp.TcpStack` with :data:`~mpa_emu.stacks.tcp.LINUX`),
as erdma runs it: a kernel socket carries the TCP handshake and the MPA exchange, then
erdma_modify_qp_state_to_rts hands the connection to the device.

Sans-IO: segments and verbs go in with ``now_ns``; segments, upcalls (erdma_cm_upcall)
and the next deadline come out. The socket callbacks become the TCP stack's events; the
work erdma queues on its single-threaded ``erdma_cm_wq`` runs in order after the segment
or verb that queued it (:mod:`mpa_emu.stacks.erdma.work`). Unlike siw, erdma_connect does
not block: kernel_bindconnect is non-blocking and the request goes out from
ERDMA_CM_WORK_CONNECTED, with CONNECT_TIMEOUT (10 s) on the handshake; a TCP failure is
a CONNECT_REPLY upcall (ERDMA_CM_WORK_PEER_CLOSE in CONNECTING), not the verb's error.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Mapping
from errno import ECONNRESET, EINVAL, EOPNOTSUPP

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.erdma.cep import FLAG_REJECT, Cep, CepView, ListenerView, QpView
from mpa_emu.stacks.erdma.params import ERDMA_MAX_IRD, ERDMA_MAX_ORD, MPA_MAX_PRIVDATA
from mpa_emu.stacks.erdma.states import ErdmaQpState, ErdmaState, ErdmaWork
from mpa_emu.stacks.erdma.work import ErdmaWorkQueue
from mpa_emu.stacks.verb_args import check_verb_args
from mpa_emu.wire import erdma_mpa, mpa, untagged
from mpa_emu.wire.segment import Segment, Transmit

S = ErdmaState
Q = ErdmaQpState

_SCENARIO_TCP_NAMES = {"SYN_RECV": "SYN_RECEIVED", "FIN_WAIT1": "FIN_WAIT_1",
                       "FIN_WAIT2": "FIN_WAIT_2"}
"""Linux's socket state names (tcp_states.h) as scenario files spell TCP states."""


class ErdmaCore(ErdmaWorkQueue):
    """One erdma host: its endpoints (``struct erdma_cep``) over a Linux-shaped TCP."""

    def __init__(self, name: str, mac: bytes, params: Mapping[str, int | bool] | None = None,
                 *, seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        super().__init__(name, mac, params, seed=seed, trace=trace, mtu=mtu)

    # ---- addresses -----------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """An address comes up on the erdma device's netdev."""
        self._now = max(self._now, now_ns)
        self._addresses[ip] = vlan
        self.tcp.add_address(ip, vlan)

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """An address goes: erdma_cm.c has no teardown by address; the sockets stay."""
        self._now = now_ns
        self._addresses.pop(ip, None)
        self.tcp.remove_address(ip)

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The link goes down: erdma_cm.c does nothing (no address is removed)."""
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
        """TCP timers, queued work and the delayed works (MPATIMEOUT, CONNECTTIMEOUT) due
        at ``now_ns``."""
        self._now = now_ns
        deadline = self.tcp.get_timer()
        if deadline is not None and deadline <= now_ns:
            self.tcp.handle_timer(now_ns)
            self._drain()
        self._run_work()
        for ident in self._mpa_timers.due(now_ns):
            cep = self._ceps.get(ident)
            if cep is not None and cep.mpa_timer is not None and cep.mpa_timer <= now_ns:
                cep.mpa_timer = None  # the work runs: "cep->mpa_timer = NULL"
                self._work(cep, ErdmaWork(cep.timer_work))
                self._drain()
        self._run_work()

    def get_timer(self) -> int | None:
        """The earliest TCP or delayed-work deadline (now, while work is queued)."""
        if self._workq:
            return self._now
        best = self.tcp.get_timer()
        at = self._mpa_timers.earliest()
        return at if best is None or (at is not None and at < best) else best

    def frames_to_send(self) -> list[Transmit]:
        """Segments built since the last call."""
        return self.tcp.frames_to_send()

    def next_event(self) -> Upcall | None:
        """The next iw_cm event."""
        return self._upcalls.popleft() if self._upcalls else None

    # ---- verbs: listen ---------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0) -> int:
        """erdma_create_listen: AF_INET only (-EAFNOSUPPORT), one socket bound to the
        address or, for the wildcard, to the device's netdev (sk_bound_dev_if); the
        endpoint in LISTENING. Returns the listener id."""
        check_verb_args("listen", port=port, backlog=backlog, vlan=vlan)
        del vlan
        self._now = max(self._now, now_ns)
        if ipv6 or (ip is not None and len(ip) != 4):
            raise CmError(errno.EAFNOSUPPORT, "erdma_create_listen: AF_INET only")
        if ip is not None and ip not in self._addresses:
            raise CmError(errno.EADDRNOTAVAIL, "erdma_create_listen: bind: not a local "
                          "address")
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, "erdma_create_listen: port out of range")
        if self.tcp.listener_bound(ip, port):
            raise CmError(errno.EADDRINUSE, "erdma_create_listen: bind: address in use")
        cep = self._new_cep()
        cep.listener = True
        cep.tcp_listener = self.tcp.listen(ip, port, backlog)
        cep.cm_id = True
        cep.loc_addr = ip or b""
        cep.loc_port = port
        cep.backlog = backlog
        self._listen_by_tcp[cep.tcp_listener] = cep
        self._set(cep, S.LISTENING, "erdma_create_listen")
        return cep.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """erdma_destroy_listen -> erdma_drop_listeners: the cm_id dropped, the
        listening socket released, CLOSED."""
        self._now = now_ns
        cep = self._ceps.get(listener)
        if cep is None or not cep.listener:
            raise CmError(EINVAL, f"no listener {listener}")
        if cep.tcp_listener is not None:
            self.tcp.unlisten(cep.tcp_listener)
            self._listen_by_tcp.pop(cep.tcp_listener, None)
        cep.cm_id = False
        self._set(cep, S.CLOSED, "erdma_drop_listeners")
        del self._ceps[cep.ident]

    # ---- verbs: connect, accept, reject ------------------------------------------------

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int) -> int:
        """erdma_connect: refuse private data over MPA_MAX_PRIVDATA, IRD/ORD over the
        device's (-EINVAL each) and anything but AF_INET (-EAFNOSUPPORT); bind the QP,
        hold the private data, open the socket without blocking (kernel_bindconnect,
        O_NONBLOCK: -EINPROGRESS) and arm CONNECT_TIMEOUT."""
        check_verb_args("connect", port=remote_port, local_port=local_port,
                        private_data=private_data, ird=ird, ord=ord)
        self._now = now_ns
        if len(private_data) > MPA_MAX_PRIVDATA:
            raise CmError(EINVAL, f"erdma_connect: private data of {len(private_data)} "
                          f"bytes over MPA_MAX_PRIVDATA ({MPA_MAX_PRIVDATA})")
        if ird > ERDMA_MAX_IRD or ord > ERDMA_MAX_ORD:
            raise CmError(EINVAL, f"erdma_connect: ird {ird} / ord {ord} over the device's "
                          f"max_ird {ERDMA_MAX_IRD} / max_ord {ERDMA_MAX_ORD}")
        if len(local_ip) != 4 or len(remote_ip) != 4:
            raise CmError(errno.EAFNOSUPPORT, "erdma_connect: AF_INET only")
        if not 0 < remote_port < 0x10000:
            raise CmError(EINVAL, "erdma_connect: port 0 or out of range")
        try:
            sock = self.tcp.connect(local_ip, remote_ip, remote_port, local_port, now_ns)
        except OSError as exc:
            err = exc.errno or EINVAL
            raise CmError(err, f"erdma_connect: kernel_bindconnect: {exc.strerror}") \
                from None
        cep = self._new_cep()
        cep.sock = sock
        self._by_sock[sock] = cep
        cep.active = True
        cep.qp = True
        cep.cc = self.params.cc  # qp->attrs.cc = dev->attrs.cc (erdma_create_qp)
        cep.cookie = self._new_cookie()
        cep.cm_id = True
        cep.ird, cep.ord = ird, ord
        cep.private_data = bytes(private_data)
        addrs = self.tcp.addresses(sock)
        assert addrs is not None
        cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port = addrs
        self._set(cep, S.CONNECTING, "erdma_connect")
        self._queue_work(cep, ErdmaWork.CONNECTTIMEOUT)
        return cep.ident

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int,
               ird: int | None = None, ord: int | None = None) -> None:
        """erdma_accept: lingering private data freed, the MPA timer cancelled; out of
        RECVD_MPAREQ -ECONNRESET; ORD or IRD over the device's max_ord, private data over
        MPA_MAX_PRIVDATA: -EINVAL and the error path; else RDMA_MODE, the QP to RTS
        (the CC compromise), the reply (own CC and cookie in the extension) and
        ESTABLISHED at once (no RTR). ``ird``/``ord``: the application's
        ``iw_cm_conn_param`` (default: what CONNECT_REQUEST reported, the device's)."""
        check_verb_args("accept", private_data=private_data, ird=ird, ord=ord)
        self._now = now_ns
        cep = self._passive(conn, "erdma_accept")
        cep.held = False  # erdma_cep_put: iw_cm's reference
        if cep.mpa.pd_len:  # "Free lingering inbound private data"
            cep.mpa.pd_len = 0
            cep.mpa.pdata = None
        cep.mpa_timer = None  # erdma_cancel_mpatimer
        if cep.state != S.RECVD_MPAREQ:
            self._forget(cep)
            raise CmError(ECONNRESET, f"erdma_accept: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        want_ird = ERDMA_MAX_IRD if ird is None else ird
        want_ord = ERDMA_MAX_ORD if ord is None else ord
        # "params->ird > dev->attrs.max_ord": the IRD is checked against max_ord too
        if want_ord > ERDMA_MAX_ORD or want_ird > ERDMA_MAX_ORD:
            self._accept_error(cep)
            raise CmError(EINVAL, f"erdma_accept: ird {want_ird} / ord {want_ord} over the "
                          f"device's max_ord {ERDMA_MAX_ORD}")
        if len(private_data) > MPA_MAX_PRIVDATA:
            self._accept_error(cep)
            raise CmError(EINVAL, f"erdma_accept: private data of {len(private_data)} "
                          f"bytes over MPA_MAX_PRIVDATA ({MPA_MAX_PRIVDATA})")
        cep.ird, cep.ord = want_ird, want_ord
        cep.cm_id = True
        cep.qp = True
        cep.cc = self.params.cc
        cep.cookie = self._new_cookie()
        self._set(cep, S.RDMA_MODE, "erdma_accept")
        self._modify_qp_rts(cep, "erdma_accept")
        # ext_data.bits = 0, then the QP's CC; ext_data.cookie = the QP's cookie
        cep.mpa.ext = bytearray(cep.cookie.to_bytes(4, "big")
                                + (cep.cc & erdma_mpa.EXT_FLAG_CC).to_bytes(4, "big"))
        self._send_mpareqrep(cep, private_data, "erdma_send_mpareqrep (erdma_accept): "
                             "RECVD_MPAREQ -> RDMA_MODE")
        self._upcall(cep, IwEvent.ESTABLISHED, 0)

    def _accept_error(self, cep: Cep) -> None:
        """erdma_accept's error path: the socket released, CLOSED, cm_id and QP unbound,
        no upcall."""
        self._release_socket(cep, "erdma_accept (error)")
        self._set(cep, S.CLOSED, "erdma_accept")
        cep.cm_id = False
        cep.qp = False
        self._forget(cep)

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """erdma_reject: the MPA timer cancelled; out of RECVD_MPAREQ -ECONNRESET; for a
        request of MPA_REVISION_EXT_1 (always, erdma_recv_mpa_rr took no other) the
        reply header with R set, the request's own extension echoed and the private
        data; then sock_release (a FIN, or a RST when unread bytes remain), CLOSED."""
        check_verb_args("reject", private_data=private_data)
        self._now = now_ns
        cep = self._passive(conn, "erdma_reject")
        cep.held = False
        cep.mpa_timer = None
        if cep.state != S.RECVD_MPAREQ:
            self._forget(cep)
            raise CmError(ECONNRESET, f"erdma_reject: endpoint in {cep.state.name}, not "
                          "RECVD_MPAREQ")
        if len(private_data) > 0xFF:  # iw_cm_reject and erdma_reject take a u8 length
            self._note("kernel_quirk", "erdma_reject", what="u8 private data length wraps",
                       length=len(private_data))
            private_data = private_data[:len(private_data) & 0xFF]
        if cep.mpa.rev == erdma_mpa.REVISION_EXT_1:
            cep.mpa.hdr[16] |= FLAG_REJECT
            self._send_mpareqrep(cep, private_data, "erdma_send_mpareqrep (erdma_reject): "
                                 "RECVD_MPAREQ -> CLOSED")
        self._release_socket(cep, "erdma_reject")
        self._set(cep, S.CLOSED, "erdma_reject")
        self._forget(cep)

    def _passive(self, conn: int, fn: str) -> Cep:
        """The passive endpoint iw_cm holds an id for (``id->provider_data``, set from
        the CONNECT_REQUEST upcall): one still in AWAIT_MPAREQ has none, so the verb
        never reaches erdma."""
        cep = self._ceps.get(conn)
        if cep is None or cep.listener or cep.active:
            raise CmError(EINVAL, f"{fn}: no connection request {conn}")
        if not cep.held and not cep.cm_id:
            raise CmError(EINVAL, f"{fn}: connection {conn} is in {cep.state.name}: no "
                          "CONNECT_REQUEST was delivered for it")
        return cep

    # ---- verbs: close ------------------------------------------------------------------

    def close(self, conn: int, *, now_ns: int) -> None:
        """iw_cm's close of a connection: a passive endpoint not yet accepted is rejected
        without private data (iw_destroy_cm_id calls iw_reject); otherwise a graceful
        disconnect."""
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
        """iw_cm_disconnect: the QP to SQD (graceful) or ERR (abortive), which
        erdma_modify_qp maps to ERDMA_QPS_IWARP_CLOSING or ERROR; from RTS
        erdma_modify_qp_state_iwarp stops the QP on the device and calls
        erdma_qp_cm_drop (CLOSE 0, the socket released). A QP not yet in RTS only goes
        to ERROR: the reply that arrives later fails erdma_proc_mpareply (-EINVAL)."""
        self._now = now_ns
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"no connection {conn}")
        if not cep.qp:
            raise CmError(EINVAL, f"erdma: connection {conn} ({cep.state.name}) has no QP "
                          "to disconnect")
        self._modify_qp(cep, Q.CLOSING if graceful else Q.ERROR)
        self._run_work()

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """ib_modify_qp(ERR) straight to the QP (erdma_modify_qp_state_iwarp to
        ERROR)."""
        self._now = now_ns
        cep = self._ceps.get(conn)
        if cep is None or cep.listener or not cep.qp:
            raise CmError(EINVAL, f"erdma: connection {conn} has no QP")
        self._modify_qp(cep, Q.ERROR)
        self._run_work()

    def _modify_qp(self, cep: Cep, new: ErdmaQpState) -> None:
        """erdma_modify_qp_state_iwarp for CLOSING or ERROR: from IDLE/RTR only ERROR
        moves (the QP leaves the cep); from RTS the device stops the QP
        (erdma_modify_qp_state_to_stop) and the connection drops (erdma_qp_cm_drop); a
        CLOSING QP goes to ERROR."""
        if cep.qp_state in (Q.IDLE, Q.RTR):
            if new == Q.ERROR:
                cep.qp_state = Q.ERROR
        elif cep.qp_state == Q.RTS:
            cep.qp_state = new
            abort = new == Q.ERROR and self.params.abort_sends_rst
            self._qp_cm_drop(cep, abort=abort)
        elif cep.qp_state == Q.CLOSING and new == Q.ERROR:
            cep.qp_state = Q.ERROR

    # ---- the QP's data verbs -------------------------------------------------------------

    def post_send(self, conn: int, payload: bytes, *, now_ns: int) -> None:
        """erdma_post_send of an IB_WR_SEND (an ERDMA_OP_SEND SQE, the doorbell rung) on an
        RTS QP: the device sends it. erdma_post_send checks no QP state (only the SQ's
        room, -ENOMEM), and what the device does with an SQE on a QP not in RTS is not in
        the driver: the model refuses it with -EINVAL, as
        :class:`~mpa_emu.stacks.contract.api.PostsSends` has every stack do. The wire
        is not in the driver either: the model sends RFC 5041/5040 untagged Send segments
        (QN 0, the next MSN from 1, MO, L on the last) in RFC 5044 FPDUs without markers
        and with a zero CRC field (no CRC negotiated), one per TCP segment of the
        socket's MSS (docs/stacks/erdma.md)."""
        self._now = max(self._now, now_ns)
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"erdma_post_send: no connection {conn}")
        if not cep.qp or cep.qp_state != Q.RTS or cep.state != S.RDMA_MODE \
                or cep.sock is None:
            raise CmError(EINVAL, f"erdma_post_send: connection {conn} ({cep.state.name}) "
                          "has no QP in RTS")
        cep.tx_msn += 1
        room = untagged.send_room(self.tcp.mss(cep.sock))
        segments = untagged.send_segments(bytes(payload), cep.tx_msn, room)
        for index, ulpdu in enumerate(segments):
            self.tcp.send(cep.sock, mpa.frame_fpdu(ulpdu, crc=0), self._now,
                          f"erdma device: RDMA Send MSN {cep.tx_msn} (FPDU {index + 1} of "
                          f"{len(segments)})")
        self._drain()
        self._run_work()

    def post_recv(self, conn: int, length: int, *, now_ns: int = 0) -> None:
        """erdma_post_recv: an RQE of ``length`` bytes for the peer's next Send. The RQ
        is the QP's from its creation, so a buffer posted before erdma_accept binds the
        QP waits there."""
        self._now = max(self._now, now_ns)
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            raise CmError(EINVAL, f"erdma_post_recv: no connection {conn}")
        if not 0 <= length < 1 << 32:
            raise CmError(EINVAL, f"erdma_post_recv: length {length} out of range")
        cep.rq.recvq.append(length)

    def completions(self, conn: int) -> list[tuple[str, bytes]]:
        """Receive completions of ``conn`` so far: (status, bytes placed), oldest first."""
        cep = self._ceps.get(conn)
        return [] if cep is None else list(cep.completions)

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """irdma_cm_teardown_connections is irdma's: erdma has no such path."""
        raise CmError(EOPNOTSUPP, "teardown by address is irdma's "
                      "(irdma_cm_teardown_connections); erdma has none")

    def device_reset(self, *, now_ns: int) -> list[int]:
        """A PCI function reset is irdma's: erdma_cm.c has no reset path."""
        raise CmError(EOPNOTSUPP, "erdma_cm.c has no device reset path")

    # ---- views ---------------------------------------------------------------------------

    def node(self, conn: int) -> CepView | None:
        """The endpoint ``conn`` (None once freed)."""
        cep = self._ceps.get(conn)
        if cep is None or cep.listener:
            return None
        return CepView(cep.state, cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port,
                       cep.ird, cep.ord, cep.cc, cep.mpa.cookie, cep.mpa_timer)

    def qp_state(self, conn: int) -> QpView | None:
        """The QP of ``conn`` (None without one)."""
        cep = self._ceps.get(conn)
        if cep is None or not cep.qp:
            return None
        tcp = self.tcp.state(cep.sock) if cep.sock is not None else None
        tcp = _SCENARIO_TCP_NAMES.get(tcp or "CLOSED", tcp or "CLOSED")
        return QpView(cep.qp_state.name, tcp, False)

    def listener(self, ident: int) -> ListenerView | None:
        """The listening endpoint ``ident`` (None once destroyed)."""
        cep = self._ceps.get(ident)
        if cep is None or not cep.listener:
            return None
        return ListenerView(cep.state, cep.loc_addr or None, cep.loc_port, cep.backlog)

    def conns(self) -> list[int]:
        """Endpoints of connections that still exist."""
        return [c.ident for c in self._ceps.values() if not c.listener]
