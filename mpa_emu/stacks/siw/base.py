"""The state and bookkeeping every part of siw's CM shares: the endpoints, the work
queue, upcalls (siw_cm_upcall), kernel log lines, the socket release."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace, make_record
from mpa_emu.stacks.deadlines import Deadlines
from mpa_emu.stacks.siw.cep import Cep
from mpa_emu.stacks.siw.params import SiwParams
from mpa_emu.stacks.siw.qp_rx import Completion, Mr
from mpa_emu.stacks.siw.states import SiwState, SiwWork
from mpa_emu.stacks.tcp import LINUX, TcpStack


class SiwBase:
    """What :class:`~mpa_emu.stacks.siw.core.SiwCore` holds, and its shared helpers."""

    def __init__(self, name: str, mac: bytes, params: Mapping[str, int | bool] | None = None,
                 *, seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        self.name = name
        self.mac = mac
        self.params = SiwParams.from_mapping(params or {})
        self.trace = trace
        self.tcp = TcpStack(name, mac, LINUX, seed=seed, mtu=mtu, trace=trace)
        self._ceps: dict[int, Cep] = {}
        self._mpa_timers = Deadlines(self._holds_mpa_timer)
        """The endpoints' MPA timers (``Cep.mpa_timer``), by endpoint id."""
        self._by_sock: dict[int, Cep] = {}
        self._listen_by_tcp: dict[int, Cep] = {}
        self._upcalls: deque[Upcall] = deque()
        self._workq: deque[tuple[int, SiwWork]] = deque()
        """siw_cm_wq: work queued by socket callbacks, run after the segments of the
        same instant (softirq before the work queue)."""
        self._unclaimed: dict[int, tuple[int, bytearray]] = {}
        """Accepted sockets whose SIW_CM_WORK_ACCEPT has not run: listener cep, bytes."""
        self._addresses: dict[bytes, int | None] = {}
        self._mrs: dict[int, Mr] = {}
        """The device's memory regions by STag index (``stag >> 8``, siw_mem_id2obj)."""
        self._done: dict[int, list[Completion]] = {}
        """Receive completions of connections whose endpoint is gone."""
        self._next = 1
        self._now = 0
        self._watch: NodeWatch | None = None
        self._watched: set[int] = set()
        """Endpoints the watch was told of (node_created), until freed."""

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each connection endpoint (not listeners): created once its
        4-tuple is known, each state change (a :class:`SiwState`), freed when forgotten
        (:class:`mpa_emu.stacks.contract.api.WatchedCore`)."""
        self._watch = watch

    def _holds_mpa_timer(self, ident: int, at: int) -> bool:
        cep = self._ceps.get(ident)
        return cep is not None and cep.mpa_timer == at

    def _new_cep(self, state: SiwState) -> Cep:
        cep = Cep(self._next, state)
        self._next += 1
        self._ceps[cep.ident] = cep
        self._klog("debug", "siw_cep_alloc", "new endpoint", True, cep)
        return cep

    def _forget(self, cep: Cep) -> None:
        if not cep.held:  # iw_cm's reference keeps a CLOSED endpoint until accept/reject
            self._ceps.pop(cep.ident, None)
            if cep.ident in self._watched and self._watch is not None:
                self._watched.discard(cep.ident)
                self._watch.node_freed(cep.ident)
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
        watch = self._watch
        if watch is not None and old != new and cep.rem_port:
            if cep.ident not in self._watched:
                self._watched.add(cep.ident)
                watch.node_created(cep.ident, cep.loc_port, cep.rem_addr, cep.rem_port)
            watch.state_changed(cep.ident, new)
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
        if event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY) and cep.pd_len:
            pdata, plen = cep.pdata, cep.pd_len
            if cep.enhanced:  # "Hide MPA V2 IRD/ORD control"
                pdata, plen = pdata[4:], (plen - 4) & 0xFF
        # siw_cm_upcall fills the addresses for CONNECT_REQUEST and CONNECT_REPLY only;
        # the other events carry the connection's here (iw_cm keeps them on the cm_id).
        loc, lport, rem, rport = cep.loc_addr, cep.loc_port, cep.rem_addr, cep.rem_port
        self._klog("debug", "siw_cm_upcall", f"[QP {cep.ident if cep.qp else 4294967295}]: "
                   f"reason={int(event)}, status={status}", True, cep)
        listener = cep.listen_cep if event == IwEvent.CONNECT_REQUEST else None
        if event == IwEvent.ESTABLISHED:
            cep.established = True
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
