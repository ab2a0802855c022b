"""The state and bookkeeping every part of siw's CM shares: the endpoints, the work
queue, upcalls (siw_cm_upcall), the socket release. The state change, the trace, the
kernel log and the upcall queue are the contract's (:class:`CoreBase`, ``self.base``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.deadlines import Deadlines
from mpa_emu.stacks.siw.cep import Cep, dbg_cep
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
        self.base = CoreBase(name, trace)
        """The contract's mechanics: state changes, trace, kernel log, upcall queue."""
        self.tcp = TcpStack(name, mac, LINUX, seed=seed, mtu=mtu, trace=trace)
        self._ceps: dict[int, Cep] = {}
        self._mpa_timers = Deadlines(self._holds_mpa_timer)
        """The endpoints' MPA timers (``Cep.mpa_timer``), by endpoint id."""
        self._by_sock: dict[int, Cep] = {}
        self._listen_by_tcp: dict[int, Cep] = {}
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

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each connection endpoint (not listeners): created once its
        4-tuple is known, each state change (a :class:`SiwState`), freed when forgotten
        (:class:`mpa_emu.stacks.contract.api.WatchedCore`)."""
        self.base.watch_nodes(watch)

    def _holds_mpa_timer(self, ident: int, at: int) -> bool:
        cep = self._ceps.get(ident)
        return cep is not None and cep.mpa_timer == at

    def _new_cep(self, state: SiwState) -> Cep:
        cep = Cep(self._next, state)
        self._next += 1
        self._ceps[cep.ident] = cep
        dbg_cep(self.base, cep, "siw_cep_alloc", "new endpoint")
        return cep

    def _forget(self, cep: Cep) -> None:
        if not cep.held:  # iw_cm's reference keeps a CLOSED endpoint until accept/reject
            self._ceps.pop(cep.ident, None)
            self.base.node_freed(cep.ident)
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
            self.tcp.abort(sock, self.base.now_ns, f"{fn}: {why}")
        else:
            self.tcp.shutdown(sock, self.base.now_ns, f"{fn}: sock_release")

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
        dbg_cep(self.base, cep, "siw_cm_upcall", f"[QP {cep.ident if cep.qp else 4294967295}]"
                f": reason={int(event)}, status={status}")
        listener = cep.listen_cep if event == IwEvent.CONNECT_REQUEST else None
        if event == IwEvent.ESTABLISHED:
            cep.established = True
        self.base.push(Upcall(event, cep.ident, status, self.base.now_ns, loc, lport, rem,
                              rport, pdata, plen, ird, ord_, listener), "siw_cm_upcall")

    @staticmethod
    def _addr(ip: bytes | None, port: int) -> str:
        from mpa_emu.wire.addr import ip_text

        return f"{ip_text(ip) if ip else '0.0.0.0'}:{port}"
