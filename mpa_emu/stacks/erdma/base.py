"""The state and bookkeeping every part of erdma's CM shares: the endpoints, the work
queue (``erdma_cm_wq``), the one state setter, the upcall (erdma_cm_upcall), trace notes
and the socket release."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace, make_record
from mpa_emu.stacks.deadlines import Deadlines
from mpa_emu.stacks.erdma.cep import Cep
from mpa_emu.stacks.erdma.params import (
    CONNECT_TIMEOUT_NS,
    ERDMA_MAX_IRD,
    ERDMA_MAX_ORD,
    MPAREP_TIMEOUT_NS,
    MPAREQ_TIMEOUT_NS,
    ErdmaParams,
)
from mpa_emu.stacks.erdma.states import ErdmaState, ErdmaWork
from mpa_emu.stacks.tcp import LINUX, TcpStack


class ErdmaBase:
    """What :class:`~mpa_emu.stacks.erdma.core.ErdmaCore` holds, and its shared
    helpers."""

    def __init__(self, name: str, mac: bytes, params: Mapping[str, int | bool] | None = None,
                 *, seed: int = 0, trace: Trace | None = None, mtu: int = 1500) -> None:
        self.name = name
        self.mac = mac
        self.params = ErdmaParams.from_mapping(params or {})
        self.trace = trace
        self.tcp = TcpStack(name, mac, LINUX, seed=seed, mtu=mtu, trace=trace)
        self._cookies = random.Random(f"erdma-qp-cookie:{seed}:{name}")
        """The device's QP cookies (create_qp_cmd: ERDMA_CMDQ_CREATE_QP_RESP_COOKIE),
        drawn from the seed: the same seed gives the same frames."""
        self._ceps: dict[int, Cep] = {}
        self._mpa_timers = Deadlines(self._holds_mpa_timer)
        """The endpoints' delayed works (``Cep.mpa_timer``), by endpoint id."""
        self._by_sock: dict[int, Cep] = {}
        self._listen_by_tcp: dict[int, Cep] = {}
        self._upcalls: deque[Upcall] = deque()
        self._workq: deque[tuple[int, ErdmaWork]] = deque()
        """erdma_cm_wq (create_singlethread_workqueue): work queued by socket callbacks
        and verbs, run in order after the segment or verb that queued it."""
        self._unclaimed: dict[int, tuple[int, bytearray]] = {}
        """Accepted sockets whose ERDMA_CM_WORK_ACCEPT has not run: listener, bytes."""
        self._addresses: dict[bytes, int | None] = {}
        self._next = 1
        self._now = 0
        self._watch: NodeWatch | None = None
        self._watched: set[int] = set()

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """Tell ``watch`` of each connection endpoint (not listeners): created once its
        4-tuple is known, each state change (an :class:`ErdmaState`), freed when
        forgotten (:class:`mpa_emu.stacks.contract.api.WatchedCore`)."""
        self._watch = watch

    def _new_cep(self) -> Cep:
        """erdma_cep_alloc: a zeroed endpoint in ERDMA_EPSTATE_IDLE."""
        cep = Cep(self._next, ErdmaState.IDLE)
        self._next += 1
        self._ceps[cep.ident] = cep
        return cep

    def _new_cookie(self) -> int:
        return self._cookies.getrandbits(32)

    def _forget(self, cep: Cep) -> None:
        """The last reference drops (__erdma_cep_dealloc), unless iw_cm still holds it."""
        if not cep.held:
            self._ceps.pop(cep.ident, None)
            if cep.ident in self._watched and self._watch is not None:
                self._watched.discard(cep.ident)
                self._watch.node_freed(cep.ident)
        if cep.sock is not None:
            self._by_sock.pop(cep.sock, None)
            cep.sock = None

    def _release_socket(self, cep: Cep, fn: str, *, abort: bool = False) -> None:
        """erdma_socket_disassoc + sock_release from ``fn``: tcp_close sends a FIN, or a
        RST when unread bytes remain (or when ``abort``)."""
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

    def _set(self, cep: Cep, new: ErdmaState, fn: str) -> None:
        """``cep->state = new`` in ``fn``: the one place a state changes."""
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
        """erdma_cm_upcall: a zeroed ``struct iw_cm_event``; CONNECT_REQUEST carries the
        device's max_ird/max_ord (not the peer's: the frame has none); CONNECT_REQUEST
        and CONNECT_REPLY carry ``mpa.hdr``'s PD_Length and ``mpa.pdata`` when both are
        there (the u8 ``private_data_len`` of iw_cm_event) and the socket's addresses.
        Every other event has IRD and ORD 0."""
        ird = ord_ = 0
        if event == IwEvent.CONNECT_REQUEST:
            ird, ord_ = ERDMA_MAX_IRD, ERDMA_MAX_ORD
        pdata = b""
        plen = 0
        if event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY):
            pd_len = cep.mpa.pd_len
            buf = cep.mpa.pdata
            if pd_len and buf is not None:
                if len(buf) < pd_len:
                    self._note("kernel_quirk", "erdma_cm_upcall",
                               what="private data passed up before it all arrived",
                               pd_len=pd_len, received=len(buf))
                pdata = bytes(buf[:pd_len]).ljust(pd_len, b"\0")
                plen = pd_len & 0xFF  # struct iw_cm_event: u8 private_data_len
                if pd_len > 0xFF:
                    self._note("kernel_quirk", "erdma_cm_upcall",
                               what="u8 private_data_len wraps", pd_len=pd_len)
        listener = cep.listen_cep if event == IwEvent.CONNECT_REQUEST else None
        if event == IwEvent.ESTABLISHED:
            cep.established = True
        up = Upcall(event, cep.ident, status, self._now, cep.loc_addr, cep.loc_port,
                    cep.rem_addr, cep.rem_port, pdata, plen, ird, ord_, listener)
        self._upcalls.append(up)
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, "upcall", "erdma_cm_upcall",
                                        {"conn": cep.ident, "event": event.name,
                                         "status": status}))

    def _queue_work(self, cep: Cep, work: ErdmaWork) -> None:
        """erdma_cm_queue_work: MPATIMEOUT becomes ``cep->mpa_timer`` with
        MPAREP_TIMEOUT (10 s) in AWAIT_MPAREP and MPAREQ_TIMEOUT (20 s) in any other
        state; CONNECTTIMEOUT becomes ``cep->mpa_timer`` with CONNECT_TIMEOUT (10 s);
        any other work runs at once, in order."""
        if work == ErdmaWork.MPATIMEOUT:
            delay = MPAREP_TIMEOUT_NS if cep.state == ErdmaState.AWAIT_MPAREP \
                else MPAREQ_TIMEOUT_NS
        elif work == ErdmaWork.CONNECTTIMEOUT:
            delay = CONNECT_TIMEOUT_NS
        else:
            self._workq.append((cep.ident, work))
            return
        cep.mpa_timer = self._mpa_timers.arm(cep.ident, self._now + delay)
        cep.timer_work = int(work)

    def _holds_mpa_timer(self, ident: int, at: int) -> bool:
        cep = self._ceps.get(ident)
        return cep is not None and cep.mpa_timer == at

    def _note(self, kind: str, fn: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(make_record(self._now, self.name, kind, fn, dict(fields)))
