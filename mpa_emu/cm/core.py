"""The CM core of one emulated host: the driver's ``irdma_cm_core`` plus its local stack.

Sans-IO: frames and verbs go in with ``now_ns``; frames to send (:meth:`frames_to_send`),
upcalls (:meth:`next_event`) and the next deadline (:meth:`get_timer`) come out. Time is
virtual: nanoseconds at the boundary, jiffies of ``CmConfig.hz`` inside.

Every input a node sees is looked up in :mod:`mpa_emu.cm.transitions`; the row's action is
a ``_act_<name>`` method below. What the kernel does asynchronously (the ordered
``iwarp-event-wq``, the AH/qhash completion that sends the passive SYN-ACK) runs after
the input that caused it, before the call returns (or at ``CmConfig.ah_latency_ns``).

Loopback connections (spec 7.5) run their full exchange inside the core: their frames
appear in :meth:`frames_to_send` with ``loopback=True`` for capture, are already delivered
to the local peer node, and must not be put on the wire.

Other modules use these documented attributes and methods: :attr:`listeners` (newest
first), :meth:`nodes_on` (the (local address, VLAN) index used by
``irdma_cm_teardown_connections``), :meth:`node_objects`, :meth:`qp`, :meth:`upcall`,
:meth:`cm_close`, :meth:`qhash_ctrl` and the ``DisconnectHost``/``TeardownHost``
methods of :mod:`mpa_emu.cm.disconnect` and :mod:`mpa_emu.cm.teardown`.
"""

from __future__ import annotations

import errno
import heapq
import importlib
import random
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from mpa_emu.cm.config import CmConfig
from mpa_emu.cm.errors import CmError
from mpa_emu.cm.events import (
    ECONNREFUSED,
    ECONNRESET,
    EINVAL,
    IwEvent,
    Transmit,
    Upcall,
)
from mpa_emu.cm.mpa_frames import (
    MPA_V2_HDR,
    MpaParams,
    MpaParseError,
    Negotiated,
    Rdma0Op,
    build_mpa_frame,
    parse_mpa,
)
from mpa_emu.cm.netdevs import NetdevList
from mpa_emu.cm.node import (
    REFCOUNT_SATURATED,
    ChildListener,
    CloseEntry,
    CmNode,
    Listener,
    SendEntry,
)
from mpa_emu.cm.pdata import as_u8
from mpa_emu.cm.states import (
    NO_VLAN,
    SEND_RESET_EVENT,
    VLAN_N_VID,
    CmEventType,
    CmState,
    Input,
    ListenerState,
)
from mpa_emu.cm.tcp import (
    MIN_MTU_IPV4,
    MIN_MTU_IPV6,
    MTU_TO_MSS_IPV4,
    MTU_TO_MSS_IPV6,
    SEQ_MOD,
    check_seq,
    process_options,
    syn_options,
)
from mpa_emu.cm.timing import backoff_gap, jiffies_to_ns, ns_to_jiffies
from mpa_emu.cm.transitions import TABLE, Row, unreachable_row_ran
from mpa_emu.cm.view import ListenerView, NodeView, QpView
from mpa_emu.mpa import MAX_PRIV_DATA_LEN
from mpa_emu.segment import ACK, FIN, RST, SYN, Segment
from mpa_emu.trace import Trace, TraceRecord

S = CmState
ENOMEM = errno.ENOMEM
EADDRINUSE = errno.EADDRINUSE
EADDRNOTAVAIL = errno.EADDRNOTAVAIL
MASK32 = SEQ_MOD - 1
IRD_ORD_MAX = 0xFFFF

# ip_tos2prio (net/ipv4/route.c), indexed by IPTOS_TOS(tos) >> 1: rt_tos2priority.
_TOS2PRIO = (0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4)

QpFactory = Callable[[Any], Any]
DEFAULT_CONFIG = CmConfig()


def rt_tos2priority(tos: int) -> int:
    """Linux ``rt_tos2priority``: the 802.1p priority the kernel derives from a TOS."""
    return _TOS2PRIO[(tos & 0x1E) >> 1]


def is_loopback(local_ip: bytes, remote_ip: bytes) -> bool:
    """``irdma_ipv4_is_lpb`` / ``irdma_ipv6_is_lpb``: 127/8 or ::1, or both ends equal."""
    if local_ip == remote_ip:
        return True
    if len(remote_ip) == 4:
        return remote_ip[0] == 127
    return remote_ip == bytes(15) + b"\x01"


IsnChooser = Callable[[bytes, int, bytes, int], "int | None"]
"""``(local ip, local port, remote ip, remote port) -> ISN`` of a new node, or None for
the seeded generator's (replay takes each connection's ISN from the recording)."""

_HOOKS: dict[tuple[str, str], Any] = {}


def _hook(module: str, name: str) -> Any:
    """``module.name`` of an optional module owned elsewhere (imported once), or None."""
    key = (module, name)
    if key not in _HOOKS:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            found = None
        _HOOKS[key] = found if callable(found) else None
    return _HOOKS[key]


class _KernelHang(Exception):
    """irdma_process_options would spin forever on this segment."""


class CmCore:
    """One emulated host's irdma connection manager (see the module docstring)."""

    def __init__(self, name: str, mac: bytes, config: CmConfig = DEFAULT_CONFIG, *,
                 seed: int = 0, trace: Trace | None = None,
                 qp_factory: QpFactory | None = None,
                 isn: IsnChooser | None = None) -> None:
        if len(mac) != 6:
            raise ValueError(f"MAC must be 6 bytes, got {len(mac)}")
        if config.gen not in (1, 2):
            raise ValueError(f"gen must be 1 or 2, got {config.gen}")
        if config.hz <= 0 or config.retrans < 0:
            raise ValueError("hz must be positive and retrans not negative")
        self.name = name
        self.mac = mac
        self.config = config
        self.trace = trace
        self._link_up = True
        self._rng = random.Random(seed)
        self._isn = isn
        self._qp_factory = qp_factory
        self._addresses: dict[bytes, int] = {}
        self.netdevs = NetdevList()
        """The host's devices in registration order (``for_each_netdev``)."""
        self._neigh: dict[bytes, bytes | None] = {}
        self._nodes: dict[tuple[bytes, int, bytes, int, int], CmNode] = {}
        self._by_conn: dict[int, CmNode] = {}
        self._by_local: dict[tuple[bytes, int], dict[int, CmNode]] = {}
        self.listeners: list[Listener] = []
        """Parent listeners, newest first (``cm_core->listen_list``)."""
        self._listener_ids: dict[int, Listener] = {}
        self._next_conn = 1
        self._next_listener = 1
        self._next_port = 49152
        self._outbox: list[Transmit] = []
        self._upcalls: deque[Upcall] = deque()
        self._work: deque[tuple[str, CmNode, CmEventType]] = deque()
        self._loop: deque[Segment] = deque()
        self._timer_at: int | None = None
        self._heap: list[tuple[int, int, SendEntry | CloseEntry]] = []
        self._deferred: list[tuple[int, int, str, CmNode]] = []
        self._qp_heap: list[tuple[int, int, tuple[bytes, int, bytes, int, int]]] = []
        self._qp_due: dict[tuple[bytes, int, bytes, int, int], int] = {}
        """The deadline last queued per QP, so an unchanged one is not queued again."""
        self._qps: dict[tuple[bytes, int, bytes, int, int], Any] = {}
        self._seq = 0
        self._now_ns = 0
        self._leaks: dict[int, str] = {}
        self.rf_reset = False
        """``rf->reset``: a device reset is in progress (CQP commands are dropped)."""
        self._ilq_stuck = False
        """irdma_process_options looped on a zero-length option: the CM receive path
        never returns, so every later CM segment is lost."""
        self._qp_close_entries: set[int] = set()
        self._accept_pdata = b""
        self._accept_failure: CmError | None = None
        """The return value of a failing ``irdma_accept``, raised when the verb ends."""
        self._reject_pdata = b""
        self._mpa_reject_flag = False
        self._hz = config.hz
        self._prefer = Rdma0Op(config.rtr_preference)
        self._actions: dict[str, Callable[[CmNode, Segment | None, Row], bool]] = {
            name[5:]: getattr(self, name) for name in dir(self) if name.startswith("_act_")}
        missing = {r.action for r in TABLE.values()} - set(self._actions)
        assert not missing, f"transition actions without a method: {missing}"
        self.stats: dict[str, int] = dict.fromkeys(
            ("backlog_drops", "connect_errs", "passive_errs", "pkt_retrans", "rejects",
             "accepts", "nodes_created", "nodes_destroyed", "listen_created",
             "listen_destroyed"), 0)

    # ---- local stack -------------------------------------------------------------

    def add_address(self, ip: bytes, *, vlan: int | None = None, now_ns: int = 0) -> None:
        """Configure a local address (on VLAN ``vlan``, untagged when None)."""
        self._check_ip(ip)
        if vlan is not None and not 0 <= vlan < VLAN_N_VID:
            raise CmError(EINVAL, f"VLAN id {vlan} out of range 0..4095")
        self._enter(now_ns)
        vlan_id = NO_VLAN if vlan is None else vlan
        self.netdevs.register(vlan_id)
        self._addresses[ip] = vlan_id
        self._if_notify_one(ip, vlan_id, ifup=True)
        self._finish()

    def remove_address(self, ip: bytes, *, now_ns: int) -> None:
        """Remove a local address: ``irdma_if_notify(ifup=False)`` and its teardown."""
        if ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{ip.hex()} is not a local address")
        self._enter(now_ns)
        vlan_id = self._addresses.pop(ip)
        self._if_notify_one(ip, vlan_id, ifup=False)
        self._finish()

    def link_down(self, *, now_ns: int) -> list[bytes]:
        """The port went down: ``irdma_netdevice_event(NETDEV_DOWN)`` only clears
        ``iw_status`` (the NIC then resets no TCP connection); the CM tears nothing down.
        IPv4 addresses survive a link down. addrconf removes the IPv6 ones unless
        ``keep_addr_on_down``, and each removal fires ``irdma_inet6addr_event`` ->
        ``irdma_if_notify(ifup=False)``. Returns the addresses removed."""
        self._enter(now_ns)
        self._link_up = False
        self.netdevs.up = False
        self._tr("link_down", "irdma_netdevice_event", iw_status=0)
        removed: list[bytes] = []
        if not self.config.keep_addr_on_down:
            for ip, vlan_id in list(self._addresses.items()):
                if len(ip) == 16:
                    del self._addresses[ip]
                    removed.append(ip)
                    self._if_notify_one(ip, vlan_id, ifup=False)
        self._finish()
        return removed

    def set_neighbour(self, ip: bytes, mac: bytes | None) -> None:
        """Set the neighbour (ARP/ND) entry of ``ip``; None = not NUD_VALID."""
        self._check_ip(ip)
        if mac is not None and len(mac) != 6:
            raise CmError(EINVAL, f"MAC must be 6 bytes, got {len(mac)}")
        self._neigh[ip] = mac

    def addresses(self) -> dict[bytes, int | None]:
        """Local addresses and their VLAN (None when untagged)."""
        return {ip: (None if v == NO_VLAN else v) for ip, v in self._addresses.items()}

    # ---- sans-IO -----------------------------------------------------------------

    def receive(self, frame: Segment, now_ns: int) -> None:
        """``irdma_receive_ilq``: one frame from the wire. Never raises for anything a
        peer sends: the kernel's reaction happens and the trace says why."""
        self._enter(now_ns)
        self._receive_one(frame)
        self._finish()

    def handle_timer(self, now_ns: int) -> None:
        """Fire everything due at or before ``now_ns``, in time order."""
        while True:
            due = self._next_due()
            if due is None or due[0] > now_ns:
                break
            self._enter(due[0])
            self._fire(due[1])
            self._finish()
        self._enter(now_ns)

    def get_timer(self) -> int | None:
        """Absolute ns of the next deadline (core timer, qhash completion, RTS wait, QP
        timers), None when idle."""
        due = self._next_due()
        return None if due is None else due[0]

    def frames_to_send(self) -> list[Transmit]:
        """Drain the outbox (loopback frames included, marked, already delivered)."""
        out, self._outbox = self._outbox, []
        return out

    def next_event(self) -> Upcall | None:
        """Pop the next upcall to the application, None when there is none."""
        return self._upcalls.popleft() if self._upcalls else None

    # ---- verbs -------------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0,
                      tos: int = 0) -> int:
        """``irdma_create_listen``: listen on ``ip`` (None = wildcard) and ``port``.

        ``vlan`` overrides the VLAN looked up from the address. Returns the listener id.
        A matching ACTIVE listener makes the kernel return -ENOMEM; a matching one being
        destroyed is reused (backlog count reset to 0, errata 9).
        """
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, f"listen port {port} out of range 1..65535")
        if backlog < 0:
            raise CmError(EINVAL, "backlog must not be negative")
        ipv4 = not ipv6
        if ip is not None:
            self._check_ip(ip)
            ipv4 = len(ip) == 4
        if self.config.mtu < (MIN_MTU_IPV4 if ipv4 else MIN_MTU_IPV6):
            raise CmError(EINVAL, f"MTU {self.config.mtu} too small for listening")
        wildcard = ip is None or ip == bytes(len(ip))
        addr = bytes(4 if ipv4 else 16) if ip is None else ip
        if wildcard:
            vlan_id = NO_VLAN
        elif vlan is not None:
            vlan_id = vlan
        else:
            vlan_id = self._addresses.get(addr, NO_VLAN)
        if vlan_id >= VLAN_N_VID and self.config.dcb_vlan_mode:
            vlan_id = 0
        found = self._find_listener(addr, ipv4, port, vlan_id, ListenerState.EITHER)
        if found is not None and found.listener_state == ListenerState.ACTIVE:
            raise CmError(ENOMEM, "a matching listener is active (irdma_make_listen_node)")
        self._enter(now_ns)
        if found is not None:
            lst = found
            lst.refcnt += 1  # the reference irdma_find_listener took is kept
            lst.reused_node = True
        else:
            lst = Listener(self._next_listener, addr, port, ipv4, vlan_id, backlog,
                           wildcard)
            self._next_listener += 1
            self.listeners.insert(0, lst)
            self._listener_ids[lst.ident] = lst
        lst.ipv4 = ipv4
        lst.vlan_id = vlan_id
        lst.pend_accepts_cnt = 0
        lst.backlog = backlog
        lst.listener_state = ListenerState.ACTIVE
        lst.tos = tos
        if not lst.reused_node:
            if wildcard:
                # irdma_add_mqh_4/6: for_each_netdev order, each child list_add-ed
                for a, v in self.netdevs.walk(self._addresses, ipv4):
                    lst.children.insert(0, ChildListener(a, v))
                    lst.vlan_id = v  # quirk: the parent keeps the last child's VLAN
            else:
                lst.qhash_set = True
        self.stats["listen_created"] += 1
        self._tr("listen_created", "irdma_create_listen", listener=lst.ident,
                 addr=addr, port=port, vlan=vlan_id, reused=lst.reused_node)
        self._finish()
        return lst.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """``irdma_destroy_listen``: RST the pending nodes, release the listener."""
        lst = self._listener_ids.get(listener)
        if lst is None or lst.listener_state != ListenerState.ACTIVE:
            raise CmError(EINVAL, f"no active listener {listener}")
        self._enter(now_ns)
        lst.listener_state = ListenerState.PASSIVE
        self._tr("listen_destroyed", "irdma_cm_del_listen", listener=listener)
        self._dec_refcnt_listen(lst, free_hanging=True)
        self._finish()

    def connect(self, local_ip: bytes, remote_ip: bytes, remote_port: int, *,
                local_port: int | None = None, private_data: bytes = b"", ird: int = 16,
                ord: int = 16, now_ns: int, tos: int = 0) -> int:
        """``irdma_connect``: create the active node and send the SYN. Returns the
        connection id. Failures raise :class:`CmError` before anything changes."""
        self._check_ip(local_ip)
        self._check_ip(remote_ip)
        if len(local_ip) != len(remote_ip):
            raise CmError(EINVAL, "local and remote address families differ")
        if not 0 < remote_port < 0x10000 or (local_port is not None
                                             and not 0 < local_port < 0x10000):
            raise CmError(EINVAL, "port 0 or out of range (irdma_connect)")
        ipv4 = len(local_ip) == 4
        if self.config.mtu < (MIN_MTU_IPV4 if ipv4 else MIN_MTU_IPV6):
            raise CmError(EINVAL, f"MTU {self.config.mtu} too small")
        if local_ip not in self._addresses:
            raise CmError(EADDRNOTAVAIL, f"{local_ip.hex()} is not a local address")
        if self.config.quirks.conn_pdata_u8:
            private_data = as_u8("connect", "irdma_connect", private_data, self._tr)
        if len(private_data) > MAX_PRIV_DATA_LEN:
            raise CmError(EINVAL, f"private data of {len(private_data)} bytes overflows "
                          "pdata_buf[512]")
        if not (0 <= ird <= IRD_ORD_MAX and 0 <= ord <= IRD_ORD_MAX):
            raise CmError(EINVAL, "ird/ord out of range")
        vlan_id = self._addresses[local_ip]
        if vlan_id >= VLAN_N_VID and self.config.dcb_vlan_mode:
            vlan_id = 0
        next_port = self._next_port
        if local_port is None:
            local_port, next_port = self._free_port(local_ip, remote_ip, remote_port,
                                                    vlan_id)
        key = (local_ip, local_port, remote_ip, remote_port, vlan_id)
        if key in self._nodes:
            raise CmError(EADDRINUSE, "a node with this 4-tuple exists")
        lpb = is_loopback(local_ip, remote_ip)
        rem_mac = self.mac if lpb else self._neigh.get(remote_ip)
        if rem_mac is None:
            raise CmError(ENOMEM, "neighbour not resolved (irdma_make_cm_node)")
        self._enter(now_ns)
        self._next_port = next_port
        node = self._make_cm_node(key, rem_mac, lpb, tos)
        node.client = True
        node.rcv_wscale = 2  # IRDMA_CM_DEFAULT_RCV_WND_SCALE
        self._record_ird_ord(node, ird, ord)
        node.pdata = bytes(private_data)
        node.pdata_size = len(private_data)
        node.ah_valid = True  # cm_create_ah(wait=true)
        node.qhash_set = True
        node.cm_id = True
        node.qp_linked = True
        self._dispatch(node, Input.CONNECT, None)
        self._finish()
        return node.conn

    def accept(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """``irdma_accept``. The reply goes out through the offloaded QP (LSMM); the
        ESTABLISHED upcall follows the QP's RTS event.

        Misuse (an active or unknown connection, one the application does not hold, no
        request pending, private data over PD_Length) raises :class:`CmError` and
        changes nothing. The failures ``irdma_accept`` itself returns raise
        :class:`CmError` with that errno after the kernel's error path ran (the node's
        reference dropped, so it is freed unless something else still holds it):
        listener destroyed, -EINVAL; a peer RST before the accept (``passive_state``
        2), -ECONNRESET. Only the wait for the RTS AE cannot block here: no RTR within
        ``rts_ae_timeout_ns`` comes later as an ESTABLISHED upcall with -ECONNRESET."""
        node = self._verb_node(conn)
        if node.client:
            raise CmError(EINVAL, "accept on an active connection")
        self._check_held(node, "accept")
        if node.state not in (S.MPAREQ_RCVD, S.LISTENER_DESTROYED):
            raise CmError(EINVAL, f"accept in state {node.state.name}: no MPA request "
                          "is pending")
        if self.config.quirks.conn_pdata_u8:
            private_data = as_u8("accept", "irdma_accept", private_data, self._tr)
        if len(private_data) + MPA_V2_HDR > 0xFFFF:
            raise CmError(EINVAL, "private data does not fit PD_Length")
        self._enter(now_ns)
        # irdma_accept: cm_node->vlan_id = irdma_get_vlan_ipv4(loc_addr) (IPv6:
        # irdma_netdev_vlan_ipv6), 0xFFFF for an untagged or unknown address, before any
        # check and without the dcb_vlan_mode conversion of irdma_make_cm_node.
        self._set_node_vlan(node, self._addresses.get(node.loc_addr, NO_VLAN), "irdma_accept")
        self._accept_pdata = bytes(private_data)
        self._accept_failure = None
        self._dispatch(node, Input.ACCEPT, None)
        self._finish()
        failure, self._accept_failure = self._accept_failure, None
        if failure is not None:
            raise failure

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """``irdma_reject`` -> ``irdma_cm_reject``: MPA reply with R, private data and
        FIN in one segment. Over the limit (``len + 24 > 544``, or over 255 with the u8
        quirk) raises :class:`CmError` and sends nothing, as does a passive node the
        application does not hold (no CONNECT_REQUEST delivered, or already given back).
        On an active node it does nothing, as the kernel."""
        node = self._verb_node(conn)
        if not node.client:
            self._check_held(node, "reject")
        if self.config.quirks.reject_pdata_u8:
            private_data = as_u8("reject", "irdma_reject", private_data, self._tr)
        plen = len(private_data)
        if plen + MPA_V2_HDR > 544:
            raise CmError(EINVAL, f"reject private data of {plen} bytes: {plen} + 24 > "
                          "544 (irdma_reject)")
        if not node.client and node.state not in (S.MPAREQ_RCVD, S.LISTENER_DESTROYED):
            raise CmError(EINVAL, f"reject in state {node.state.name}: no MPA request "
                          "is pending")
        self._enter(now_ns)
        self.stats["rejects"] += 1
        if node.client:
            self._tr("verb_ignored", "irdma_cm_reject", conn=conn,
                     reason="active node: irdma_cm_reject returns 0")
        else:
            self._reject_pdata = bytes(private_data)
            self._dispatch(node, Input.REJECT, None)
        self._finish()

    def close(self, conn: int, *, now_ns: int) -> None:
        """``irdma_cm_close`` (spec 2.3): RST in the early states, free when CLOSED,
        OFFLOADED, MPAREJ_RCVD...; -EINVAL (CmError) in FIN_WAIT*/LAST_ACK/TIME_WAIT/
        CLOSING, and for an early-state node that only its retransmission entry keeps
        (the caller's reference is gone: the kernel would free it under the timer)."""
        node = self._verb_node(conn)
        if node.state == S.LISTENING:
            # only irdma_receive_ilq holds it, stuck in irdma_process_options: no cm_id
            # leads to it, so irdma_cm_close is never called on it
            raise CmError(EINVAL, f"irdma_cm_close on connection {conn}: the node is "
                          "held only by the receive path stuck in irdma_process_options")
        action = TABLE[(node.state, Input.CLOSE)].action
        if action == "close_einval":
            raise CmError(EINVAL, f"irdma_cm_close in state {node.state.name}")
        if action == "close_reset" and node.send_entry is not None and node.refcnt == 1:
            # irdma_cleanup_retrans_entry drops the entry's reference with refcount_dec,
            # which must not reach zero: only the entry keeps this node, the caller holds
            # none (its base reference went with an earlier RST or a listener destroy)
            raise CmError(EINVAL, f"irdma_cm_close in state {node.state.name}: the node "
                          "is held only by its retransmission entry, not by the caller")
        self._enter(now_ns)
        self._dispatch(node, Input.CLOSE, None)
        self._finish()

    def cm_close(self, conn: int, now_ns: int) -> int:
        """``irdma_cm_close`` for the disconnect path: like :meth:`close` but returns
        -EINVAL instead of raising (as ``irdma_qp_disconnect`` ignores it) and 0 for a
        node already gone."""
        node = self._by_conn.get(conn)
        if node is None:
            return 0
        if TABLE[(node.state, Input.CLOSE)].action == "close_einval":
            return -EINVAL
        self._enter(now_ns)
        self._dispatch(node, Input.CLOSE, None)
        self._finish()
        return 0

    def modify_qp_err(self, conn: int, *, now_ns: int) -> None:
        """``ib_modify_qp(IB_QPS_ERR)`` on the QP of ``conn``. After offload it is the
        abortive :meth:`disconnect`. Before, only an active node has a QP (bound by
        ``irdma_connect``): it goes to ERR with no TCP state, nothing is sent and the CM
        carries on, but ``irdma_modify_qp(RTS)`` in ``irdma_cm_event_connected`` then
        fails (``iwarp_state > RTS``): no RTR goes out (see :meth:`qp_error`)."""
        node = self._verb_node(conn)
        if node.qp is not None:
            self.disconnect(conn, graceful=False, now_ns=now_ns)
            return
        if not node.client:
            raise CmError(EINVAL, f"connection {conn} has no QP yet (passive, not "
                          "accepted)")
        self._enter(now_ns)
        self.qp_error(conn)
        self._finish()

    def qp_error(self, conn: int) -> None:
        """Mark the driver QP of an active node before offload as moved to ERR
        (``irdma_modify_qp(ERR)`` with ``hw_tcp_state`` 0: no reset, no disconnect)."""
        node = self._by_conn.get(conn)
        if node is None or node.qp is not None or node.qp_error:
            return
        node.qp_error = True
        self._tr("qp_state", "irdma_modify_qp", conn=conn, iwarp_state="ERROR",
                 reason="QP moved to ERR before offload: nothing sent")

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """After offload: move the QP to SQD (FIN) or ERR (RST if TCP is alive)."""
        node = self._verb_node(conn)
        if node.qp is None:
            raise CmError(EINVAL, f"connection {conn} has no offloaded QP "
                          f"(state {node.state.name})")
        self._enter(now_ns)
        target = "sqd" if graceful else "err"
        hook = self._disconnect_hook("modify_qp")
        if hook is not None:
            hook(self, conn, target, self._now_ns)
        else:
            node.qp.modify_qp(target, self._now_ns)
        self._drain_qp(node.key)
        self._finish()

    # ---- inspection --------------------------------------------------------------

    def node(self, conn: int) -> NodeView | None:
        """A read-only snapshot of connection ``conn``, None once freed."""
        n = self._by_conn.get(conn)
        return None if n is None else NodeView.of(n)

    def conns(self) -> list[int]:
        """Ids of the nodes in the node table, in creation order."""
        return sorted(self._by_conn)

    def listener(self, ident: int) -> ListenerView | None:
        """A snapshot of a listener still in the listen list."""
        lst = self._listener_ids.get(ident)
        return None if lst is None else ListenerView.of(lst)

    def node_objects(self) -> Iterator[CmNode]:
        """The live node objects (for teardown); do not keep them."""
        return iter(list(self._by_conn.values()))

    def nodes_on(self, ip: bytes, vlan_id: int) -> list[CmNode]:
        """Nodes whose local address is ``ip`` on ``vlan_id`` (0xFFFF untagged): the
        selection of ``irdma_teardown_list_prep`` without scanning the table."""
        return list(self._by_local.get((ip, vlan_id), {}).values())

    def local_keys(self) -> list[tuple[bytes, int]]:
        """The (local address, VLAN id) keys of the node index: one per local address in
        use, so a teardown can match addresses without touching every node."""
        return list(self._by_local)

    def qp(self, conn: int) -> Any:
        """The offloaded QP of a connection, None before offload."""
        n = self._by_conn.get(conn)
        return None if n is None else n.qp

    def qp_state(self, conn: int) -> QpView | None:
        """The QP of ``conn``: the offloaded QP's states, or for an active node before
        offload its driver QP (``IDLE``, or ``ERROR`` after :meth:`modify_qp_err`); None
        for a passive node not accepted yet or a freed node."""
        n = self._by_conn.get(conn)
        if n is None:
            return None
        if n.qp is not None:
            iw = n.qp.iwqp
            return QpView(conn, True, iw.iwarp_state.name, iw.hw_iwarp_state.name,
                          iw.ibqp_state.name, iw.hw_tcp_state.name, n.qp.tcp_state.name)
        if not n.client:
            return None
        iwarp = "ERROR" if n.qp_error else "IDLE"
        return QpView(conn, False, iwarp, iwarp, "ERR" if n.qp_error else "RTR",
                      "NON_EXISTENT", "NON_EXISTENT")

    def teardown_connections(self, ip: bytes | None = None, *, vlan: int | None = None,
                             disconnect_all: bool = False, now_ns: int) -> list[int]:
        """``irdma_cm_teardown_connections(iwdev, ipaddr, nfo, disconnect_all)``: every
        node on ``ip`` and ``vlan`` (None = untagged, 0xFFFF), or all of them, has its QP
        moved to ERR. Returns the conn ids selected."""
        if not disconnect_all:
            if ip is None:
                raise CmError(EINVAL, "teardown needs an address or disconnect_all")
            self._check_ip(ip)
        if vlan is not None and not 0 <= vlan < VLAN_N_VID:
            raise CmError(EINVAL, f"VLAN id {vlan} out of range 0..4095")
        fn = _hook("mpa_emu.cm.teardown", "teardown_connections")
        if fn is None:
            raise CmError(EINVAL, "teardown is not available")
        self._enter(now_ns)
        selected: list[int] = fn(self, ip if ip is not None else bytes(4),
                                 NO_VLAN if vlan is None else vlan, disconnect_all,
                                 self._now_ns)
        self._finish()
        return selected

    def device_reset(self, *, now_ns: int) -> list[int]:
        """A reset of the PCI function (``rf->reset``): every connection is torn down
        (``irdma_cm_teardown_connections`` with ``disconnect_all``), no CQP command
        reaches the hardware (so nothing is sent), ``irdma_cm_disconn`` runs for each QP
        and the CLOSE upcalls follow; the hardware QPs are gone afterwards. Returns the
        conn ids torn down."""
        fn = _hook("mpa_emu.cm.teardown", "device_reset")
        if fn is None:
            raise CmError(EINVAL, "teardown is not available")
        self._enter(now_ns)
        selected: list[int] = fn(self, self._now_ns)
        for key in list(self._qps):
            self._release_qp(key)
        self._finish()
        return selected

    def leak_report(self) -> list[tuple[int, CmState, str | None]]:
        """Every node still in the table with the reason the kernel keeps it (None when
        the emulator cannot name one: that would be a bug). Each is recorded in the
        trace as ``kernel_leak``."""
        out: list[tuple[int, CmState, str | None]] = []
        for conn in self.conns():
            n = self._by_conn[conn]
            reason = self._leak_reason(n)
            out.append((conn, n.state, reason))
            self._tr("kernel_leak", "irdma_rem_ref_cm_node", conn=conn,
                     state=n.state.name, refcnt=n.refcnt, reason=reason)
        return out

    # ---- hooks for the offload and teardown modules ------------------------------

    def upcall(self, event: IwEvent, conn: int, status: int = 0) -> None:
        """Deliver an upcall for ``conn`` (``irdma_send_cm_event``), e.g. DISCONNECT or
        CLOSE from ``irdma_cm_disconn_true``."""
        node = self._by_conn.get(conn)
        if node is None:
            return
        self._upcall(event, node, status)

    def qhash_ctrl(self, ip: bytes, vlan_id: int, *, ifup: bool) -> None:
        """``irdma_qhash_ctrl`` for every wildcard listener of the family: enable or
        disable the child SYN qhash of ``ip``, creating a child on ``ifup``; specific
        listeners on ``ip`` get their SYN qhash added or removed."""
        ipv4 = len(ip) == 4
        for lst in self.listeners:
            if lst.ipv4 != ipv4:
                continue
            if lst.wildcard:
                child = next((c for c in lst.children if c.loc_addr == ip), None)
                if child is not None:
                    child.qhash_set = ifup
                elif ifup:
                    lst.children.insert(0, ChildListener(ip, vlan_id))
            elif lst.loc_addr == ip and lst.vlan_id == vlan_id:
                lst.qhash_set = ifup

    def schedule_close_entry(self, conn: int, now_ns: int) -> bool:
        """``irdma_schedule_cm_timer(CLOSE)`` with the QP as the entry: due in HZ/10 on
        the shared core timer (errata 4 arming); on expiry
        ``mpa_emu.cm.disconnect.handle_close_entry(core, conn, now_ns)`` runs. False when
        the node already has a close entry (-EINVAL)."""
        node = self._by_conn.get(conn)
        if node is None or node.close_entry is not None:
            return False
        self._enter(now_ns)
        return self._schedule_close(node, qp=True)

    def offloaded_qp(self, conn: int) -> Any:
        """The NIC QP of ``conn``, None before offload or after the node is gone."""
        n = self._by_conn.get(conn)
        return None if n is None else n.qp

    def has_node(self, conn: int) -> bool:
        """``iwqp->cm_node != NULL``: the node of ``conn`` is still in the table."""
        return conn in self._by_conn

    def link_up(self) -> bool:
        """``iwdev->iw_status``: False after :meth:`link_down`."""
        return self._link_up

    def send_cm_event(self, conn: int, event: IwEvent, status: int, now_ns: int) -> None:
        """``irdma_send_cm_event`` for the disconnect path (DISCONNECT, CLOSE)."""
        self._enter(now_ns)
        self.upcall(event, conn, status)

    def collect_qp_frames(self, conn: int) -> None:
        """Move the QP's frames (and AEs) of ``conn`` into the core."""
        node = self._by_conn.get(conn)
        if node is not None and node.qp is not None:
            self._drain_qp(node.key)

    def rts_ae_received(self, conn: int, now_ns: int) -> None:
        """Wake ``irdma_accept`` (ESTABLISHED upcall) or ``irdma_cm_event_connected``
        (CONNECT_REPLY(0)) waiting for the RTS AE."""
        node = self._by_conn.get(conn)
        if node is None or node.rts_deadline is None:
            return
        self._enter(now_ns)
        if node.client:
            self._connected_complete(node)
        else:
            self._accept_complete(node)

    def record(self, kind: str, fn: str, now_ns: int, **fields: Any) -> None:
        """Emit one trace record on behalf of another module."""
        if self.trace is not None:
            self.trace.emit(TraceRecord(max(now_ns, self._now_ns), self.name, kind, fn,
                                        fields))

    def node_index(self) -> dict[tuple[bytes, int], list[int]]:
        """Conn ids by (16-byte ``loc_addr`` key, VLAN id), for teardown selection."""
        return {(ip.ljust(16, b"\0"), vlan): list(nodes)
                for (ip, vlan), nodes in self._by_local.items()}

    def all_conns(self) -> list[int]:
        """Every node in the table (``cm_hash_tbl``)."""
        return list(self._by_conn)

    def cm_node(self, conn: int) -> CmNode | None:
        """The node object of ``conn`` (read it, do not keep it)."""
        return self._by_conn.get(conn)

    def has_driver_qp(self, conn: int) -> bool:
        """``cm_node->iwqp != NULL``: active nodes from connect on, passive from accept."""
        n = self._by_conn.get(conn)
        return n is not None and (n.client or n.qp is not None)

    def reset_node(self, conn: int, now_ns: int) -> None:
        """The NULL-checked teardown of a node without QP: CM RST and free."""
        node = self._by_conn.get(conn)
        if node is None:
            return
        self._enter(now_ns)
        self._cleanup(node)
        self._set_state(node, S.CLOSED, "irdma_cm_teardown_connections")
        node.refcnt += 1
        if not self._send_reset(node, "irdma_send_reset: irdma_cm_teardown_connections "
                                      "-> CLOSED"):
            node.refcnt -= 1
        self._rem_ref(node)

    def listen_list(self) -> list[Listener]:
        """``cm_core->listen_list``, newest first."""
        return list(self.listeners)

    def manage_syn_qhash(self, addr: bytes, port: int, vlan: int, ipv4: bool, add: bool,
                         now_ns: int) -> bool:
        """``irdma_manage_qhash(TCP_SYN, ADD|DELETE)``: the steering rule lives on the
        listener or child that holds it, so there is nothing to fail here."""
        return True

    def new_child_listener(self, parent: Listener, addr: bytes, vlan: int) -> ChildListener:
        """A wildcard child for ``addr`` (``kmemdup`` of the parent), not yet linked."""
        return ChildListener(addr, vlan)

    def _if_notify_one(self, ip: bytes, vlan_id: int, *, ifup: bool) -> None:
        """``irdma_if_notify`` for one address added or removed; without the teardown
        module only the address's qhash rule changes."""
        notify = self._if_notify_hook()
        if notify is not None:
            notify(self, ip, vlan=self._notify_vlan(vlan_id), ipv4=len(ip) == 4, ifup=ifup,
                   now_ns=self._now_ns)
        else:
            self.qhash_ctrl(ip, vlan_id, ifup=ifup)

    def _notify_vlan(self, vlan_id: int) -> int:
        """The VLAN ``irdma_if_notify`` compares: 0xFFFF when the notifier passes the
        lower device (quirk ``if_notify_lower_dev``)."""
        return NO_VLAN if self.config.quirks.if_notify_lower_dev else vlan_id

    # ---- internals: time and work -------------------------------------------------

    def _enter(self, now_ns: int) -> None:
        if now_ns > self._now_ns:
            self._now_ns = now_ns

    @property
    def _jiffies(self) -> int:
        return ns_to_jiffies(self._now_ns, self._hz)

    def _push_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _next_due(self) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        if self._timer_at is not None:
            best = (jiffies_to_ns(self._timer_at, self._hz), "tick")
        deferred = self._deferred
        while deferred and self._deferred_stale(deferred[0]):
            heapq.heappop(deferred)
        if self._deferred and (best is None or self._deferred[0][0] < best[0]):
            best = (self._deferred[0][0], "deferred")
        while self._qp_heap and not self._qp_live(self._qp_heap[0]):
            heapq.heappop(self._qp_heap)
        if self._qp_heap and (best is None or self._qp_heap[0][0] < best[0]):
            best = (self._qp_heap[0][0], "qp")
        return best

    @staticmethod
    def _deferred_stale(item: tuple[int, int, str, CmNode]) -> bool:
        """A deferred wake-up with nothing left to do (node freed, RTS already seen)."""
        t, _, kind, node = item
        if node.refcnt <= 0:
            return True
        if kind == "rts":
            return node.rts_deadline != t
        return not node.qhash_pending

    def _qp_live(self, item: tuple[int, int, tuple[bytes, int, bytes, int, int]]) -> bool:
        qp = self._qps.get(item[2])
        if qp is None:
            return False
        t = qp.get_timer()
        return t is not None and t == item[0]

    def _fire(self, source: str) -> None:
        if source == "tick":
            assert self._timer_at is not None
            # a late caller fires the tick late, as a late softirq would: at "jiffies"
            self._tick(max(self._timer_at, self._jiffies))
        elif source == "deferred":
            _, _, kind, node = heapq.heappop(self._deferred)
            if kind == "qhash":
                self._qhash_done(node)
            elif kind == "rts" and node.rts_deadline is not None \
                    and node.rts_deadline <= self._now_ns:
                self._rts_timeout(node)
        else:
            _, _, key = heapq.heappop(self._qp_heap)
            self._qp_due.pop(key, None)
            qp = self._qps.get(key)
            if qp is not None:
                qp.handle_timer(self._now_ns)
                self._drain_qp(key)

    def _finish(self) -> None:
        """Run what the kernel does after the input: queued CM events (ordered), zero-
        latency qhash completions, and loopback frames."""
        work, loop = self._work, self._loop
        while work or loop:
            if work:
                kind, node, etype = work.popleft()
                if kind == "event":
                    self._event_handler(node, etype)
                else:
                    self._qhash_done(node)
            else:
                self._receive_one(loop.popleft())

    # ---- internals: tracing --------------------------------------------------------

    def _tr(self, kind: str, fn: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(TraceRecord(self._now_ns, self.name, kind, fn, fields))

    def _drop(self, seg: Segment, fn: str, reason: str, node: CmNode | None = None) -> None:
        if self.trace is not None:
            self._tr("segment_dropped", fn, reason=reason,
                     conn=None if node is None else node.conn,
                     state=None if node is None else node.state.name,
                     flags=seg.flag_text, seq=seg.seq, ack=seg.ack, len=len(seg.payload))

    def _set_state(self, node: CmNode, new: CmState, fn: str) -> None:
        if node.state != new:
            if self.trace is not None:
                self._tr("state_changed", fn, conn=node.conn, old=node.state.name,
                         new=new.name)
            node.state = new

    # ---- internals: node table, references -------------------------------------

    def _check_ip(self, ip: bytes) -> None:
        if len(ip) not in (4, 16):
            raise CmError(EINVAL, f"IP address must be 4 or 16 bytes, got {len(ip)}")

    def _verb_node(self, conn: int) -> CmNode:
        node = self._by_conn.get(conn)
        if node is None:
            raise CmError(EINVAL, f"no connection {conn} (never existed or already freed)")
        return node

    def _set_node_vlan(self, node: CmNode, vlan_id: int, fn: str) -> None:
        """Give ``node`` a new VLAN and file it under its new node-table key and
        (local address, VLAN) index, where ``irdma_find_node`` and
        ``irdma_teardown_list_prep`` compare the VLAN."""
        old = node.vlan_id
        if vlan_id == old:
            return
        key = (node.loc_addr, node.loc_port, node.rem_addr, node.rem_port, vlan_id)
        if self._nodes.get(node.key) is node:
            del self._nodes[node.key]
        self._nodes.setdefault(key, node)  # a node already on that key is found first
        local = self._by_local.get((node.loc_addr, old))
        if local is not None:
            local.pop(node.conn, None)
            if not local:
                del self._by_local[(node.loc_addr, old)]
        self._by_local.setdefault((node.loc_addr, vlan_id), {})[node.conn] = node
        node.vlan_id = vlan_id
        node.key = key
        if self.trace is not None:
            self._tr("vlan_changed", fn, conn=node.conn, old=old, new=vlan_id)

    @staticmethod
    def _check_held(node: CmNode, verb: str) -> None:
        """A passive node reaches ``irdma_accept``/``irdma_reject`` only as the
        ``provider_data`` of its CONNECT_REQUEST, until a reject or a failed accept gives
        it back: refuse one the application does not hold."""
        if not node.held_by_app:
            raise CmError(EINVAL, f"{verb} on connection {node.conn}: the application "
                          "holds no handle to it (no CONNECT_REQUEST delivered, or given "
                          "back by a reject or a failed accept)")

    def _free_port(self, local_ip: bytes, remote_ip: bytes, remote_port: int,
                   vlan_id: int) -> tuple[int, int]:
        """An ephemeral port (49152..65535, in turn) and the counter after it."""
        port = self._next_port
        for _ in range(0x4000):
            nxt = 49152 + (port - 49152 + 1) % 0x4000
            if (local_ip, port, remote_ip, remote_port, vlan_id) not in self._nodes \
                    and not any(lst.loc_port == port for lst in self.listeners):
                return port, nxt
            port = nxt
        raise CmError(EADDRINUSE, "no free local port")

    def _make_cm_node(self, key: tuple[bytes, int, bytes, int, int], rem_mac: bytes,
                      lpb: bool, tos: int) -> CmNode:
        """``irdma_make_cm_node`` after the neighbour was resolved."""
        conn = self._next_conn
        self._next_conn += 1
        node = CmNode(conn, key[0], key[1], key[2], key[3], key[4])
        node.key = key
        cfg = self.config
        node.tos = tos
        node.user_pri = rt_tos2priority(tos)
        node.rem_mac = rem_mac
        node.do_lpb = lpb
        node.mpa_frame_rev = cfg.mpa_rev
        node.ird_size = cfg.max_ird
        node.ord_size = cfg.max_ord
        node.rcv_wscale = cfg.rcv_wscale
        # irdma_make_cm_node: tcp_cntxt.rcv_wnd is a u32; only the header field is cut
        # to 16 bits (htons in irdma_form_*_cm_frame, see _form)
        node.rcv_wnd = 0x3FFFC >> cfg.rcv_wscale
        chosen = self._isn(key[0], key[1], key[2], key[3]) if self._isn is not None else None
        node.loc_seq_num = self._rng.getrandbits(32) if chosen is None else chosen & 0xFFFFFFFF
        node.mss = cfg.mtu - (MTU_TO_MSS_IPV4 if node.ipv4 else MTU_TO_MSS_IPV6)
        self._nodes[key] = node
        self._by_conn[conn] = node
        self._by_local.setdefault((key[0], key[4]), {})[conn] = node
        self.stats["nodes_created"] += 1
        if self.trace is not None:
            self._tr("node_created", "irdma_make_cm_node", conn=conn, loc=key[0],
                     loc_port=key[1], rem=key[2], rem_port=key[3], vlan=key[4],
                     isn=node.loc_seq_num, loopback=lpb)
        return node

    def _record_ird_ord(self, node: CmNode, ird: int, ord_: int) -> None:
        """``irdma_record_ird_ord``."""
        ird = min(ird, self.config.max_ird)
        if ord_ > self.config.max_ord:
            ord_ = self.config.max_ord
        elif ord_ == 0 and node.send_rdma0_op is Rdma0Op.READ_ZERO:
            ord_ = 1
        node.ird_size = ird
        node.ord_size = ord_

    def _rem_ref(self, node: CmNode) -> None:
        """``irdma_rem_ref_cm_node``: drop one reference, destroy at zero."""
        if node.refcnt <= 0:
            self._tr("kernel_bug", "irdma_rem_ref_cm_node", conn=node.conn,
                     reason="reference dropped on a freed node (refcount underflow, "
                            "use after free: spec 8.4.1)")
            return
        node.refcnt -= 1
        if node.refcnt == 0:
            self._destroy_connection(node)

    def _destroy_connection(self, node: CmNode) -> None:
        """``irdma_destroy_connection`` after the final put."""
        if self._nodes.get(node.key) is node:
            del self._nodes[node.key]
        self._by_conn.pop(node.conn, None)
        local = self._by_local.get((node.loc_addr, node.vlan_id))
        if local is not None:
            local.pop(node.conn, None)
            if not local:
                del self._by_local[(node.loc_addr, node.vlan_id)]
        self._leaks.pop(node.conn, None)
        self.stats["nodes_destroyed"] += 1
        lst = node.listener
        if not node.accelerated and node.accept_pend and lst is not None:
            lst.pend_accepts_cnt -= 1
        if node.close_entry is not None:
            node.close_entry.live = False
            node.close_entry = None
        if node.send_entry is not None:
            # off cm_hash_tbl, the node is never seen by irdma_timer_list_prep again
            node.send_entry.live = False
            node.send_entry = None
            self._tr("kernel_leak", "irdma_destroy_connection", conn=node.conn,
                     reason="freed with a retransmission entry: the entry and its buffer "
                            "are never freed, nothing resends them")
        node.rts_deadline = None
        node.ah_valid = False
        if node.qp is not None:
            # the QP outlives the node while its TCP still has timers running
            qp = node.qp
            node.qp = None
            if qp.get_timer() is None and not getattr(qp, "tcp_alive", False):
                self._release_qp(node.key)
        if self.trace is not None:
            self._tr("node_freed", "irdma_destroy_connection", conn=node.conn,
                     state=node.state.name)
        if lst is not None:
            self._dec_refcnt_listen(lst, free_hanging=False)

    def _dec_refcnt_listen(self, lst: Listener, *, free_hanging: bool) -> None:
        """``irdma_dec_refcnt_listen``."""
        if free_hanging:
            pending = [n for n in self._by_conn.values()
                       if n.listener is lst and not n.accelerated]
            for n in pending:
                n.refcnt += 1  # irdma_reset_list_prep
                r = TABLE[(n.state, Input.DESTROY_LISTEN)]
                self._run(n, r, None)
                if r.action == "ignore":
                    self._rem_ref(n)
        lst.refcnt -= 1
        if lst.refcnt == 0:
            if lst in self.listeners:
                self.listeners.remove(lst)
            self._listener_ids.pop(lst.ident, None)
            self.stats["listen_destroyed"] += 1
            self._tr("listener_freed", "irdma_dec_refcnt_listen", listener=lst.ident)

    def _find_listener(self, addr: bytes, ipv4: bool, port: int, vlan_id: int,
                       mask: ListenerState) -> Listener | None:
        """``irdma_find_listener`` (newest rules, spec 7.2)."""
        for lst in self.listeners:
            if lst.ipv4 != ipv4 or lst.loc_port != port or not lst.listener_state & mask:
                continue
            if lst.wildcard or (lst.loc_addr == addr and lst.vlan_id == vlan_id):
                return lst
        return None

    def _syn_steered(self, addr: bytes, ipv4: bool, port: int, vlan_id: int) -> bool:
        """A SYN qhash rule (a specific listener or a wildcard child) steers this SYN
        to the CM; otherwise it goes to the host stack."""
        for lst in self.listeners:
            if lst.ipv4 != ipv4 or lst.loc_port != port:
                continue
            if lst.wildcard:
                if any(c.qhash_set and c.loc_addr == addr and c.vlan_id == vlan_id
                       for c in lst.children):
                    return True
            elif lst.qhash_set and lst.loc_addr == addr and lst.vlan_id == vlan_id:
                return True
        return False

    # ---- internals: frames --------------------------------------------------------

    def _form(self, node: CmNode, flags: int, options: bytes = b"",
              payload: bytes = b"") -> Segment | None:
        """``irdma_form_ah_cm_frame`` (GEN_2) / ``irdma_form_uda_cm_frame`` (GEN_1)."""
        gen1 = self.config.gen == 1
        if not gen1 and not node.ah_valid:
            return None
        seq = node.loc_seq_num
        if flags & ACK:
            node.loc_ack_num = node.rcv_nxt
            ack = node.rcv_nxt
        else:
            ack = 0
        if flags & SYN:
            node.loc_seq_num = (node.loc_seq_num + 1) & MASK32
        else:
            node.loc_seq_num = (node.loc_seq_num + len(payload)) & MASK32
        if flags & FIN:
            node.loc_seq_num = (node.loc_seq_num + 1) & MASK32
        ip_id = 0
        ttl = 64
        if gen1:
            if node.ipv4:
                node.loc_id = (node.loc_id + 1) & 0xFFFF
                ip_id = node.loc_id
            else:
                ttl = 128
        return Segment(
            src_mac=self.mac, dst_mac=node.rem_mac, src_ip=node.loc_addr,
            dst_ip=node.rem_addr, sport=node.loc_port, dport=node.rem_port, seq=seq,
            ack=ack, flags=flags, window=node.rcv_wnd & 0xFFFF, options=options,
            payload=payload,
            vlan=node.vlan_id if node.vlan_id < VLAN_N_VID else None, pcp=node.user_pri,
            ttl=ttl, tos=node.tos, ip_id=ip_id, df=True)

    def _transmit(self, tx: Transmit) -> None:
        self._outbox.append(tx)
        if self.trace is not None:
            seg = tx.segment
            self._tr("segment_sent", tx.comment.split(":", 1)[0], conn=tx.conn,
                     comment=tx.comment, flags=seg.flag_text, seq=seg.seq, ack=seg.ack,
                     len=len(seg.payload), loopback=tx.loopback)
        if tx.loopback:
            self._loop.append(tx.segment)

    def _schedule_send(self, node: CmNode, seg: Segment, comment: str, *,
                       retrans: bool, close_when_complete: bool = False) -> None:
        """``irdma_schedule_cm_timer(SEND)``: transmit now; keep for resends."""
        tx = Transmit(seg, comment, node.do_lpb, node.conn)
        if node.send_entry is not None:
            # The kernel overwrites the entry without freeing it; callers clean up first.
            node.send_entry.live = False
            self._record_leak(node, "irdma_schedule_cm_timer overwrote a live send "
                              "entry: the old entry's node reference is never dropped")
            self._tr("kernel_leak", "irdma_schedule_cm_timer", conn=node.conn,
                     reason="send entry overwritten: its node reference leaks")
        node.refcnt += 1
        self._transmit(tx)
        if not retrans:
            node.refcnt -= 1  # irdma_cleanup_retrans_entry of the entry just made
            node.send_entry = None
            if close_when_complete:
                self._rem_ref(node)
            return
        j = self._jiffies
        entry = SendEntry(node, tx, j + self._hz, self.config.retrans)
        node.send_entry = entry
        heapq.heappush(self._heap, (entry.due, self._push_seq(), entry))
        self._arm(entry.due, j)

    def _schedule_close(self, node: CmNode, *, qp: bool = False) -> bool:
        if node.close_entry is not None:
            return False
        j = self._jiffies
        entry = CloseEntry(node, j + self._hz // 10)
        node.close_entry = entry
        if qp:
            self._qp_close_entries.add(node.conn)
        heapq.heappush(self._heap, (entry.due, self._push_seq(), entry))
        self._arm(entry.due, j)
        return True

    def _arm(self, due: int, now_j: int) -> None:
        """``add_timer`` only when the timer is not pending (errata 4)."""
        if self._timer_at is None:
            self._timer_at = due if due > now_j else now_j + 1

    def _cleanup(self, node: CmNode) -> None:
        """``irdma_cleanup_retrans_entry``: stop retransmitting."""
        entry = node.send_entry
        if entry is not None:
            entry.live = False
            node.send_entry = None
            node.refcnt -= 1
            if node.refcnt <= 0:
                # irdma_free_retrans_entry drops the entry's reference with refcount_dec,
                # which must not reach zero: refcount_t warns "decrement hit 0; leaking
                # memory" and saturates, so the node is never freed (a late SYN-ACK
                # entry held the last reference)
                node.refcnt = REFCOUNT_SATURATED
                self._record_leak(node, "refcount_dec hit 0 in irdma_free_retrans_entry "
                                  "(the retransmission entry held the last reference): "
                                  "refcount saturated, the node is never freed")
                self._tr("kernel_bug", "irdma_free_retrans_entry", conn=node.conn,
                         reason="refcount_t: decrement hit 0; leaking memory")

    def _send_syn(self, node: CmNode, sendack: bool, comment: str) -> bool:
        """``irdma_send_syn``: SYN or SYN|ACK with MSS, window scale and EOL."""
        seg = self._form(node, SYN | (ACK if sendack else 0),
                         syn_options(node.mss, node.rcv_wscale))
        if seg is None:
            self._tr("send_failed", "irdma_send_syn", conn=node.conn, reason="no AH")
            return False
        self._schedule_send(node, seg, comment, retrans=True)
        return True

    def _send_ack(self, node: CmNode, comment: str) -> None:
        """``irdma_send_ack``: a pure ACK, sent once, no timer."""
        seg = self._form(node, ACK)
        if seg is None:
            self._tr("send_failed", "irdma_send_ack", conn=node.conn, reason="no AH")
            return
        self._transmit(Transmit(seg, comment, node.do_lpb, node.conn))

    def _send_fin(self, node: CmNode, comment: str) -> bool:
        """``irdma_send_fin``: ACK|FIN, retransmitted."""
        seg = self._form(node, ACK | FIN)
        if seg is None:
            self._tr("send_failed", "irdma_send_fin", conn=node.conn, reason="no AH")
            return False
        self._schedule_send(node, seg, comment, retrans=True)
        return True

    def _send_reset(self, node: CmNode, comment: str) -> bool:
        """``irdma_send_reset``: RST|ACK once; consumes one node reference when sent.
        On GEN_2 without a valid AH nothing is sent and nothing consumed (errata 1)."""
        seg = self._form(node, RST | ACK)
        if seg is None:
            self._tr("send_failed", "irdma_send_reset", conn=node.conn,
                     reason="no valid AH (irdma_form_ah_cm_frame): no RST, no put")
            return False
        self._schedule_send(node, seg, comment, retrans=False, close_when_complete=True)
        return True

    def _mpa_params(self, node: CmNode) -> MpaParams:
        return MpaParams(rev=node.mpa_frame_rev, ird_size=node.ird_size,
                         ord_size=node.ord_size, mpav2_ird_ord=node.mpav2_ird_ord,
                         send_rdma0_op=node.send_rdma0_op, markers=self.config.iw_ooo,
                         p2p=self.config.p2p)

    def _cm_build_mpa_frame(self, node: CmNode, *, request: bool, private_data: bytes,
                            reject: bool = False) -> bytes:
        """``irdma_cm_build_mpa_frame`` with the private data appended."""
        frame = build_mpa_frame(self._mpa_params(node), request=request,
                                private_data=private_data, reject=reject)
        if self.config.iw_ooo and node.mpa_frame_rev == 2:
            # irdma_build_mpa_v2 enables receive markers on every v2 frame it builds:
            # request, accept reply and reject alike
            node.rcv_mark_en = True
        return frame

    def _send_mpa_request(self, node: CmNode, comment: str) -> bool:
        """``irdma_send_mpa_request``."""
        frame = self._cm_build_mpa_frame(node, request=True, private_data=node.pdata)
        if not frame:
            self._tr("send_failed", "irdma_send_mpa_request", conn=node.conn,
                     reason=f"mpa_frame_rev {node.mpa_frame_rev}: header size 0")
            return False
        seg = self._form(node, ACK, payload=frame)
        if seg is None:
            self._tr("send_failed", "irdma_send_mpa_request", conn=node.conn,
                     reason="no AH")
            return False
        self._schedule_send(node, seg, comment, retrans=True)
        return True

    # ---- internals: receive path ---------------------------------------------------

    def _receive_one(self, seg: Segment) -> None:
        """``irdma_receive_ilq`` + ``irdma_process_pkt``."""
        if self.trace is not None:
            self._tr("segment_received", "irdma_receive_ilq", flags=seg.flag_text,
                     seq=seg.seq, ack=seg.ack, len=len(seg.payload),
                     sport=seg.sport, dport=seg.dport)
        if len(seg.src_ip) not in (4, 16) or len(seg.dst_ip) != len(seg.src_ip):
            self._drop(seg, "irdma_receive_ilq", "not an IPv4 or IPv6 TCP segment")
            return
        vlan_id = NO_VLAN if seg.vlan is None else seg.vlan & 0xFFF
        key = (seg.dst_ip, seg.dport, seg.src_ip, seg.sport, vlan_id)
        qp = self._qps.get(key)
        if qp is not None:
            if key in self._nodes or not seg.flags & SYN or seg.flags & ACK:
                qp.receive(seg, self._now_ns)
                self._drain_qp(key)
                return
            self._release_qp(key)  # a new connection on the tuple of a finished QP
        if self._ilq_stuck:
            # irdma_process_options never returned: the ILQ's receive path spins, so no
            # later segment reaches the CM (offloaded QPs are served by the hardware)
            self._drop(seg, "irdma_receive_ilq", "receive path stuck in "
                       "irdma_process_options (zero-length option loop)")
            return
        node = self._nodes.get(key)
        if node is None:
            node = self._passive_node(seg, key)
            if node is None:
                return
        elif node.state == S.OFFLOADED:
            self._drop(seg, "irdma_receive_ilq", "OFFLOADED: the hardware owns the flow",
                       node)
            return
        else:
            node.refcnt += 1
        try:
            self._process_pkt(node, seg)
        except _KernelHang as hang:
            self._ilq_stuck = True
            self._record_leak(node, f"receive path stuck in irdma_process_options: {hang}")
            self._tr("kernel_bug", "irdma_process_options", conn=node.conn,
                     reason=f"infinite loop on {hang}; the segment is lost and the "
                            "lookup reference never released")
            return
        self._rem_ref(node)

    def _passive_node(self, seg: Segment, key: tuple[bytes, int, bytes, int, int],
                      ) -> CmNode | None:
        """No node: only a SYN without ACK may create one (spec 2.1 step 4)."""
        fn = "irdma_receive_ilq"
        if not seg.flags & SYN or seg.flags & ACK:
            self._drop(seg, fn, "no node for this 4-tuple and not a SYN")
            return None
        ipv4 = len(seg.dst_ip) == 4
        if not self._syn_steered(seg.dst_ip, ipv4, seg.dport, key[4]):
            self._host_stack(seg)
            return None
        lst = self._find_listener(seg.dst_ip, ipv4, seg.dport, key[4], ListenerState.ACTIVE)
        if lst is None:
            self._drop(seg, fn, "no active listener (irdma_find_listener)")
            return None
        lpb = is_loopback(seg.dst_ip, seg.src_ip)
        rem_mac = self.mac if lpb else self._neigh.get(seg.src_ip)
        if rem_mac is None:
            self._drop(seg, "irdma_make_cm_node", "neighbour of the source not resolved")
            return None
        vlan_id = key[4]
        if vlan_id >= VLAN_N_VID and self.config.dcb_vlan_mode:
            vlan_id = 0  # errata 13: later untagged segments look up 0xFFFF and miss
        lst.refcnt += 1  # the find_listener reference, kept by the node
        node = self._make_cm_node((key[0], key[1], key[2], key[3], vlan_id), rem_mac, lpb,
                                  max(lst.tos, seg.tos))
        node.listener = lst
        node.cm_id = True
        if seg.flags & (RST | FIN):
            self._drop(seg, fn, "SYN with RST or FIN: node freed", node)
            self._rem_ref(node)
            return None
        self._set_state(node, S.LISTENING, fn)
        node.refcnt += 1
        return node

    def _host_stack(self, seg: Segment) -> None:
        """A SYN no qhash rule steers to the CM goes to the host's Linux stack."""
        if not self.config.host_stack_rst:
            self._drop(seg, "irdma_receive_ilq",
                       "no listener: SYN left to the host stack (silent)")
            return
        if seg.dst_ip not in self._addresses:
            # the host stack has no such address (removed, the VLAN device kept):
            # ip_route_input finds no local route and the packet is dropped
            self._drop(seg, "irdma_receive_ilq",
                       "no listener: the host stack has no such address (dropped)")
            return
        self._drop(seg, "irdma_receive_ilq", "no listener: host stack answers with RST")
        rst = Segment(src_mac=self.mac, dst_mac=seg.src_mac, src_ip=seg.dst_ip,
                      dst_ip=seg.src_ip, sport=seg.dport, dport=seg.sport, seq=0,
                      ack=(seg.seq + 1 + len(seg.payload)) & MASK32, flags=RST | ACK,
                      window=0, vlan=seg.vlan, pcp=seg.pcp, ttl=64, tos=seg.tos)
        self._transmit(Transmit(rst, "tcp_v4_send_reset: host stack, no socket"
                                if seg.ipv4 else "tcp_v6_send_reset: host stack, no socket",
                                is_loopback(seg.dst_ip, seg.src_ip), None))

    def _process_pkt(self, node: CmNode, seg: Segment) -> None:
        """``irdma_process_pkt``: classify, check, dispatch."""
        flags = seg.flags
        if flags & RST:
            self._cleanup(node)  # irdma_handle_rst_pkt cleans up first
            self._dispatch(node, Input.RST, seg)
            return
        if flags & SYN:
            self._dispatch(node, Input.SYNACK if flags & ACK else Input.SYN, seg)
            return
        if flags & ACK:
            if not self._check_seq(node, seg, "irdma_handle_ack_pkt"):
                return
            err = self._dispatch(node, Input.ACK_DATA if seg.payload else Input.ACK, seg)
            if flags & FIN and not err:
                self._dispatch(node, Input.FIN, seg)
            return
        if flags & FIN:
            if self._check_seq(node, seg, "irdma_process_pkt"):
                self._dispatch(node, Input.FIN, seg)
            return
        self._dispatch(node, Input.NONE, seg)

    def _check_seq(self, node: CmNode, seg: Segment, fn: str) -> bool:
        if check_seq(seg.seq, seg.ack, loc_seq_num=node.loc_seq_num, rcv_nxt=node.rcv_nxt,
                     rcv_wnd=node.rcv_wnd):
            return True
        if seg.ack != node.loc_seq_num:
            why = f"ack {seg.ack} != loc_seq_num {node.loc_seq_num}"
        else:
            why = f"seq {seg.seq} outside [{node.rcv_nxt}, rcv_nxt + {node.rcv_wnd}]"
        self._drop(seg, fn, f"irdma_check_seq: {why}", node)
        return False

    def _dispatch(self, node: CmNode, inp: Input, seg: Segment | None) -> bool:
        """Look the row up and run it."""
        return self._run(node, TABLE[(node.state, inp)], seg)

    def _run(self, node: CmNode, r: Row, seg: Segment | None) -> bool:
        if not r.reachable:
            unreachable_row_ran(r, self._tr)
        result = self._actions[r.action](node, seg, r)
        after = node.state if node.refcnt > 0 else S.CLOSED
        assert after in r.allowed, (
            f"{r.kernel_fn} {r.state.name}/{r.input.value} ended in {after.name}, "
            f"table allows {sorted(s.name for s in r.allowed)}")
        return result

    def _tcp_options(self, node: CmNode, seg: Segment, *, passive: bool) -> bool:
        """``irdma_handle_tcp_options``; True on error (after the kernel's reset)."""
        if seg.options:
            res = process_options(seg.options, syn=bool(seg.flags & SYN), ipv4=node.ipv4,
                                  mss=node.mss, snd_wscale=node.snd_wscale)
            if res.hang and self.config.quirks.zero_len_option_loop:
                raise _KernelHang(res.error)
            if res.error is not None:
                self._drop(seg, "irdma_process_options", res.error, node)
                if passive:
                    self._passive_open_err(node, reset=True)
                else:
                    self._active_open_err(node, reset=True)
                return True
            node.mss = res.mss
            node.snd_wscale = res.snd_wscale
        node.snd_wnd = (seg.window << (node.snd_wscale & 31)) & MASK32
        node.max_snd_wnd = max(node.max_snd_wnd, node.snd_wnd)
        return False

    def _active_open_err(self, node: CmNode, *, reset: bool) -> None:
        """``irdma_active_open_err``."""
        self._cleanup(node)
        self.stats["connect_errs"] += 1
        old = node.state.name
        if reset:
            node.refcnt += 1
            if not self._send_reset(node, f"irdma_send_reset: irdma_active_open_err "
                                          f"{old} -> CLOSED"):
                node.refcnt -= 1
        self._set_state(node, S.CLOSED, "irdma_active_open_err")
        self._create_event(node, CmEventType.ABORTED)

    def _passive_open_err(self, node: CmNode, *, reset: bool) -> None:
        """``irdma_passive_open_err``."""
        self._cleanup(node)
        self.stats["passive_errs"] += 1
        old = node.state.name
        self._set_state(node, S.CLOSED, "irdma_passive_open_err")
        if reset:
            if not self._send_reset(node, f"irdma_send_reset: irdma_passive_open_err "
                                          f"{old} -> CLOSED"):
                # Unless another put follows (the SYN path does one), the node stays.
                self._record_leak(node, "irdma_passive_open_err: RST not sent (no AH), "
                                  "its reference is not consumed: CLOSED node with a "
                                  "leaked reference")
        else:
            self._rem_ref(node)

    def _create_event(self, node: CmNode, etype: CmEventType) -> None:
        """``irdma_create_event``: queue on the ordered event queue (+1 ref)."""
        if not node.cm_id:
            return
        node.refcnt += 1
        self._work.append(("event", node, etype))
        if self.trace is not None:
            self._tr("event_queued", "irdma_cm_post_event", conn=node.conn, event=etype.name)

    # ---- transition actions (names from transitions.py) ---------------------------

    def _act_ignore(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        if seg is not None:
            self._drop(seg, r.kernel_fn, f"{node.state.name}: {r.note}", node)
        return False

    def _act_misuse(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        raise CmError(EINVAL, f"{r.kernel_fn} in state {node.state.name}")

    def _act_cleanup(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        if seg is not None and seg.payload:
            self._drop(seg, r.kernel_fn, f"{node.state.name}: payload ignored, not ACKed",
                       node)
        return False

    def _act_active_open_err_reset(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._active_open_err(node, reset=True)
        return False

    def _act_active_open_err(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._active_open_err(node, reset=False)
        return False

    def _act_passive_open_err_reset(self, node: CmNode, seg: Segment | None,
                                    r: Row) -> bool:
        if node.state == S.MPAREQ_RCVD:
            self._tr("kernel_bug", r.kernel_fn, conn=node.conn,
                     reason="node freed while the application holds it: a later "
                            "accept/reject is a use-after-free (errata 6)")
        self._passive_open_err(node, reset=True)
        return False

    def _act_passive_open_err(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._passive_open_err(node, reset=False)
        return False

    def _act_passive_open(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_handle_syn_pkt`` in LISTENING: the passive open."""
        assert seg is not None and node.listener is not None
        lst = node.listener
        if lst.pend_accepts_cnt > lst.backlog:
            self.stats["backlog_drops"] += 1
            self._drop(seg, r.kernel_fn, f"backlog: pend_accepts_cnt "
                       f"{lst.pend_accepts_cnt} > backlog {lst.backlog}", node)
            self._passive_open_err(node, reset=False)
            return False
        if self._tcp_options(node, seg, passive=True):
            self._passive_open_err(node, reset=False)
            return False
        node.rcv_nxt = (seg.seq + 1) & MASK32
        node.accept_pend = True
        lst.pend_accepts_cnt += 1
        self._set_state(node, S.SYN_RCVD, r.kernel_fn)
        # cm_create_ah(wait=false) (GEN_2) / irdma_add_qh (GEN_1): the SYN-ACK is sent by
        # the completion of the conn-established qhash, which holds a node reference.
        node.refcnt += 1
        node.qhash_pending = True
        latency = self.config.ah_latency_ns
        if latency <= 0:
            self._work.append(("qhash", node, CmEventType.UNKNOWN))
        else:
            heapq.heappush(self._deferred,
                           (self._now_ns + latency, self._push_seq(), "qhash", node))
        return False

    def _qhash_done(self, node: CmNode) -> None:
        """``irdma_ilq_ah_cb`` + ``irdma_send_syn_cqp_callback``."""
        if not node.qhash_pending:
            return
        node.qhash_pending = False
        node.refcnt += 1
        self._run(node, TABLE[(node.state, Input.QHASH_DONE)], None)
        node.refcnt -= 1
        self._rem_ref(node)  # the qhash completion's reference

    def _act_send_synack(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        if self.config.gen == 2:
            node.ah_valid = not self.config.ah_create_fails
        node.qhash_set = True
        self._send_syn(node, True, f"irdma_send_syn: {node.state.name} "
                                   "(SYN|ACK from irdma_send_syn_cqp_callback)")
        return False

    def _act_reset_again(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        node.refcnt += 1
        if not self._send_reset(node, f"irdma_send_reset: {r.kernel_fn} CLOSED"):
            node.refcnt -= 1
        return False

    def _act_synack_active_open(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_handle_synack_pkt`` in SYN_SENT."""
        assert seg is not None
        self._cleanup(node)
        if seg.ack != node.loc_seq_num:
            self._drop(seg, "irdma_check_syn",
                       f"SYN-ACK ack {seg.ack} != loc_seq_num {node.loc_seq_num}", node)
            self._active_open_err(node, reset=True)
            return False
        node.rem_ack_num = seg.ack
        if self._tcp_options(node, seg, passive=False):
            return False
        self._cleanup(node)
        node.rcv_nxt = (seg.seq + 1) & MASK32
        self._send_ack(node, "irdma_send_ack: SYN_SENT -> MPAREQ_SENT")
        if not self._send_mpa_request(node, "irdma_send_mpa_request: SYN_SENT -> "
                                            "MPAREQ_SENT"):
            return False  # quirk: stays in SYN_SENT, nothing reported (errata 8)
        self._set_state(node, S.MPAREQ_SENT, r.kernel_fn)
        return False

    def _act_synack_reset_closed(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        node.loc_seq_num = seg.ack
        self._cleanup(node)
        self._set_state(node, S.CLOSED, r.kernel_fn)
        self._send_reset(node, f"irdma_send_reset: {r.kernel_fn} LISTENING -> CLOSED")
        return False

    def _act_synack_reset_again(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        node.loc_seq_num = seg.ack
        return self._act_reset_again(node, seg, r)

    def _act_ack_reset_closed(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        self._set_state(node, S.CLOSED, r.kernel_fn)
        self._send_reset(node, f"irdma_send_reset: {r.kernel_fn} LISTENING -> CLOSED")
        return False

    def _act_free_closed(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        self._set_state(node, S.CLOSED, r.kernel_fn)
        self._rem_ref(node)
        return False

    def _act_fin_wait1_acked(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        self._set_state(node, S.FIN_WAIT2, r.kernel_fn)
        return False

    def _act_syn_rcvd_ack(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """Third handshake ACK, maybe with the MPA request."""
        assert seg is not None
        self._cleanup(node)
        if self._tcp_options(node, seg, passive=True):
            return True
        node.rem_ack_num = seg.ack
        self._set_state(node, S.ESTABLISHED, r.kernel_fn)
        if seg.payload:
            node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
            self._dispatch(node, Input.MPA, seg)
        return False

    def _act_mpareq_acked(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        node.rem_ack_num = seg.ack
        node.ack_rcvd = True
        return False

    def _act_established_data(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        self._cleanup(node)
        node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
        self._dispatch(node, Input.MPA, seg)
        return False

    def _act_mpareq_sent_data(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        node.rem_ack_num = seg.ack
        node.rcv_nxt = (seg.seq + len(seg.payload)) & MASK32
        node.ack_rcvd = False
        self._dispatch(node, Input.MPA, seg)
        return False

    def _parse(self, node: CmNode, seg: Segment, initiator: bool) -> bool:
        """``irdma_parse_mpa`` applied to the node; False after the error reaction."""
        q = self.config.quirks
        res = parse_mpa(seg.payload, node_rev=node.mpa_frame_rev, initiator=initiator,
                        ird_size=node.ird_size, ord_size=node.ord_size,
                        mpav2_ird_ord=node.mpav2_ird_ord,
                        send_rdma0_op=node.send_rdma0_op, require_p2p=self.config.p2p,
                        prefer=self._prefer, tail=q.v2_pdata_tail)
        if isinstance(res, MpaParseError):
            if res.step > 4:
                node.mpa_frame_rev = seg.payload[17]
            if res.negotiated is not None:
                # irdma_negotiate_mpa_v2_ird_ord changed the node before failing; the
                # abort upcall (irdma_get_cmevent_info) reports these values
                self._apply_negotiated(node, res.negotiated)
            self._drop(seg, "irdma_parse_mpa",
                       f"step {res.step}: {res.reason} (-{errno.errorcode[res.errno]})",
                       node)
            if initiator:
                self._active_open_err(node, reset=True)
            else:
                self._passive_open_err(node, reset=True)
            return False
        if res.markers and not initiator and not self.config.accept_markers:
            self._drop(seg, "irdma_parse_mpa", "M flag set and the profile refuses "
                       "markers", node)
            self._passive_open_err(node, reset=True)
            return False
        node.mpa_frame_rev = res.rev
        if res.negotiated is not None:
            self._apply_negotiated(node, res.negotiated)
            if self.trace is not None:
                self._tr("mpa_negotiated", "irdma_negotiate_mpa_v2_ird_ord", conn=node.conn,
                         ird=node.ird_size, ord=node.ord_size, rtr=node.send_rdma0_op.value)
        node.pdata = res.private_data if (q.v2_pdata_plus4 or res.rev == 1) \
            else res.user_data
        node.pdata_size = len(node.pdata)
        if res.markers:
            node.snd_mark_en = True
        self._mpa_reject_flag = res.reject
        return True

    @staticmethod
    def _apply_negotiated(node: CmNode, neg: Negotiated) -> None:
        node.ird_size = neg.ird_size
        node.ord_size = neg.ord_size
        node.mpav2_ird_ord = neg.mpav2_ird_ord
        node.send_rdma0_op = neg.send_rdma0_op

    def _act_mpa_request(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_handle_rcv_mpa`` in ESTABLISHED: the MPA request."""
        assert seg is not None
        if not self._parse(node, seg, initiator=False):
            return False
        if self._mpa_reject_flag:
            self._tr("mpa_note", r.kernel_fn, conn=node.conn,
                     reason="R flag on a request: logged and ignored")
        self._set_state(node, S.MPAREQ_RCVD, r.kernel_fn)
        self._send_ack(node, "irdma_send_ack: ESTABLISHED -> MPAREQ_RCVD")
        node.passive_state = 0
        self._create_event(node, CmEventType.MPA_REQ)
        return False

    def _act_mpa_reply(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_handle_rcv_mpa`` in MPAREQ_SENT: the MPA reply or reject."""
        assert seg is not None
        if not self._parse(node, seg, initiator=True):
            return False
        self._cleanup(node)
        if self._mpa_reject_flag:
            self._set_state(node, S.MPAREJ_RCVD, r.kernel_fn)
            etype = CmEventType.MPA_REJECT
            comment = "irdma_send_ack: MPAREQ_SENT -> MPAREJ_RCVD"
        else:
            self._set_state(node, S.OFFLOADED, r.kernel_fn)
            etype = CmEventType.CONNECTED
            comment = "irdma_send_ack: MPAREQ_SENT -> OFFLOADED"
        self._send_ack(node, comment)
        self._create_event(node, etype)
        return False

    def _act_mpa_unexpected(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        assert seg is not None
        if self._parse(node, seg, initiator=False):
            self._drop(seg, r.kernel_fn, f"MPA frame in {node.state.name}: event UNKNOWN "
                       "(bad event type)", node)
        return False

    def _act_fin_to_last_ack(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        old = node.state.name
        node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
        self._cleanup(node)
        self._set_state(node, S.LAST_ACK, r.kernel_fn)
        self._send_fin(node, f"irdma_send_fin: {old} -> LAST_ACK")
        return False

    def _act_fin_abort(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._create_event(node, CmEventType.ABORTED)
        node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
        self._cleanup(node)
        self._set_state(node, S.CLOSED, r.kernel_fn)
        node.refcnt += 1
        if not self._send_reset(node, "irdma_send_reset: irdma_handle_fin_pkt "
                                      "MPAREQ_SENT -> CLOSED"):
            node.refcnt -= 1
        return False

    def _act_fin_simultaneous(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
        self._cleanup(node)
        self._set_state(node, S.CLOSING, r.kernel_fn)
        self._send_ack(node, "irdma_send_ack: FIN_WAIT1 -> CLOSING")
        return False

    def _act_fin_time_wait(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
        self._cleanup(node)
        self._set_state(node, S.TIME_WAIT, r.kernel_fn)
        self._send_ack(node, "irdma_send_ack: FIN_WAIT2 -> TIME_WAIT")
        self._schedule_close(node)
        return False

    def _act_fin_again_free(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        node.rcv_nxt = (node.rcv_nxt + 1) & MASK32
        self._cleanup(node)
        self._set_state(node, S.CLOSED, r.kernel_fn)
        self._rem_ref(node)
        return False

    def _act_rst_active(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """RST in SYN_SENT/MPAREQ_SENT: the MPA v2 -> v1 retry."""
        if node.mpa_frame_rev == 2 and self.config.quirks.mpa_v1_fallback:
            old = node.state.name
            node.mpa_frame_rev = 1
            self._set_state(node, S.SYN_SENT, r.kernel_fn)
            if not self._send_syn(node, False, f"irdma_send_syn: {old} -> SYN_SENT "
                                              "(MPA v1 retry after RST)"):
                self._active_open_err(node, reset=False)
        else:
            self._active_open_err(node, reset=False)
        return False

    def _act_rst_indicated(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        node.passive_state += 1
        return False

    # local actions

    def _act_connect(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._set_state(node, S.SYN_SENT, r.kernel_fn)
        self._send_syn(node, False, "irdma_send_syn: UNKNOWN -> SYN_SENT")
        return False

    def _act_accept(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_accept`` from MPAREQ_RCVD."""
        pdata = self._accept_pdata
        node.passive_state += 1
        if node.passive_state == SEND_RESET_EVENT:
            self._accept_failed(node, -ECONNRESET, "peer reset before accept",
                                returned=True)
            return False
        reply = self._cm_build_mpa_frame(node, request=False, private_data=pdata)
        node.lsmm_size = len(reply)
        node.pdata_size = len(pdata)
        node.cm_id = True
        node.qp_linked = True
        self.stats["accepts"] += 1
        self._init_tsa_conn(node, r.kernel_fn)
        node.qhash_set = False
        if self.config.gen == 2:
            node.ah_valid = False  # cm_free_ah
        qp = node.qp
        if qp is None:
            return False
        if self.config.gen == 2:
            node.rts_deadline = self._now_ns + self.config.rts_ae_timeout_ns
            heapq.heappush(self._deferred,
                           (node.rts_deadline, self._push_seq(), "rts", node))
        qp.send_lsmm(reply, self._now_ns)
        self._drain_qp(node.key)
        if self.config.gen == 1:
            self._accept_complete(node)
        return False

    def _accept_failed(self, node: CmNode, status: int, why: str, *,
                       returned: bool) -> None:
        """The error path of ``irdma_accept``: the node's reference is dropped and
        ``status`` is the verb's return value (``returned``), or, after the RTS wait,
        the ESTABLISHED upcall's status."""
        self._tr("accept_failed", "irdma_accept", conn=node.conn, status=status,
                 reason=why)
        node.held_by_app = False
        if returned:
            self._accept_failure = CmError(-status, f"irdma_accept on connection "
                                           f"{node.conn}: {why}; the node was released")
        else:
            self._upcall(IwEvent.ESTABLISHED, node, status)
        self._rem_ref(node)

    def _act_accept_listener_destroyed(self, node: CmNode, seg: Segment | None,
                                       r: Row) -> bool:
        self._accept_failed(node, -EINVAL, "listener destroyed", returned=True)
        return False

    def _accept_complete(self, node: CmNode) -> None:
        node.rts_deadline = None
        self._upcall(IwEvent.ESTABLISHED, node, 0)
        node.accelerated = True
        if node.accept_pend and node.listener is not None:
            node.listener.pend_accepts_cnt -= 1
            node.accept_pend = False
        self._establish_complete(node)

    def _rts_timeout(self, node: CmNode) -> None:
        node.rts_deadline = None
        if node.client:
            self._tr("slow_connection", "irdma_cm_event_connected", conn=node.conn,
                     reason="no RTS AE within 12 s (logged only)")
            self._connected_complete(node)
        else:
            self._accept_failed(node, -ECONNRESET, "Slow Connection: no RTS AE (RTR) "
                                "within rts_ae_timeout_ns", returned=False)

    def _act_reject(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_cm_reject`` from MPAREQ_RCVD."""
        pdata = self._reject_pdata
        self._cleanup(node)
        node.pdata_size = len(pdata)
        node.passive_state += 1
        if node.passive_state == SEND_RESET_EVENT:
            self._tr("reject_silent", r.kernel_fn, conn=node.conn,
                     reason="peer reset before: freed, no packet")
            self._set_state(node, S.CLOSED, r.kernel_fn)
            self._rem_ref(node)
            return False
        frame = self._cm_build_mpa_frame(node, request=False, private_data=pdata,
                                         reject=True)
        seg_out = self._form(node, ACK | FIN, payload=frame)
        if seg_out is None:
            self._set_state(node, S.CLOSED, r.kernel_fn)
            if not self._send_reset(node, "irdma_send_reset: irdma_cm_reject -> CLOSED"):
                self._tr("kernel_leak", r.kernel_fn, conn=node.conn,
                         reason="reject and RST both failed (no AH)")
            return False
        self._set_state(node, S.FIN_WAIT1, "irdma_send_mpa_reject")
        self._schedule_send(node, seg_out,
                            "irdma_send_mpa_reject: MPAREQ_RCVD -> FIN_WAIT1", retrans=True)
        return False

    def _act_reject_listener_destroyed(self, node: CmNode, seg: Segment | None,
                                       r: Row) -> bool:
        node.held_by_app = False
        self._cleanup(node)
        node.passive_state += 1
        if node.passive_state == SEND_RESET_EVENT:
            self._set_state(node, S.CLOSED, r.kernel_fn)
        self._rem_ref(node)
        return False

    def _act_close_reset(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._cleanup(node)
        if not self._send_reset(node, f"irdma_send_reset: irdma_cm_close "
                                      f"{node.state.name}"):
            self._record_leak(node, "irdma_cm_close: RST not sent (no AH), base "
                              "reference not consumed")
            self._tr("kernel_leak", r.kernel_fn, conn=node.conn,
                     reason=self._leaks[node.conn])
        return False

    def _act_close_fin(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._set_state(node, S.LAST_ACK, r.kernel_fn)
        self._send_fin(node, "irdma_send_fin: CLOSE_WAIT -> LAST_ACK")
        return False

    def _act_close_einval(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        return True

    def _act_close_free(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._rem_ref(node)
        return False

    def _act_listener_reset(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        """``irdma_dec_refcnt_listen`` for one pending node (temp reference held)."""
        self._cleanup(node)
        old = node.state
        if not self._send_reset(node, f"irdma_send_reset: irdma_dec_refcnt_listen "
                                      f"{old.name} -> LISTENER_DESTROYED"):
            self._set_state(node, S.CLOSED, r.kernel_fn)
            self._record_leak(node, "listener destroyed, RST not sent (no AH): CLOSED "
                              "with a leaked reference (errata 1, spec 7.4)")
            self._tr("kernel_leak", r.kernel_fn, conn=node.conn,
                     reason=self._leaks[node.conn])
            return False
        self._set_state(node, S.LISTENER_DESTROYED, r.kernel_fn)
        if old != S.MPAREQ_RCVD:
            self._rem_ref(node)
        return False

    def _act_expire_free(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        self._set_state(node, S.CLOSED, r.kernel_fn)
        self._rem_ref(node)
        return False

    def _act_expire_reset(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        old = node.state.name
        self._set_state(node, S.CLOSED, r.kernel_fn)
        if not self._send_reset(node, f"irdma_send_reset: irdma_retrans_expired {old} "
                                      "-> CLOSED"):
            self._record_leak(node, "retransmissions expired, RST not sent (no AH)")
        return False

    def _act_expire_abort(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        old = node.state.name
        self._set_state(node, S.CLOSED, r.kernel_fn)
        node.refcnt += 1
        if not self._send_reset(node, f"irdma_send_reset: irdma_retrans_expired {old} "
                                      "-> CLOSED"):
            node.refcnt -= 1
        self._create_event(node, CmEventType.ABORTED)
        return False

    def _act_close_entry_free(self, node: CmNode, seg: Segment | None, r: Row) -> bool:
        entry = node.close_entry
        if entry is not None:
            entry.live = False
            node.close_entry = None
        self._rem_ref(node)
        return False

    # ---- timer tick ----------------------------------------------------------------

    def _tick(self, j: int) -> None:
        """``irdma_cm_timer_tick`` at jiffy ``j``."""
        self._timer_at = None
        heap = self._heap
        due_now: list[SendEntry | CloseEntry] = []
        while heap and heap[0][0] <= j:
            _, _, entry = heapq.heappop(heap)
            if entry.live and entry.due <= j:
                due_now.append(entry)
        for entry in due_now:
            if not entry.live:
                continue
            node = entry.node
            node.refcnt += 1  # irdma_timer_list_prep
            if isinstance(entry, CloseEntry):
                self._tr("timer_fired", "irdma_handle_close_entry", conn=node.conn,
                         state=node.state.name)
                if node.conn in self._qp_close_entries:
                    self._qp_close_entries.discard(node.conn)
                    entry.live = False
                    node.close_entry = None
                    hook = self._disconnect_hook("handle_close_entry")
                    if hook is not None:
                        hook(self, node.conn, self._now_ns)
                else:
                    self._run(node, TABLE[(node.state, Input.CLOSE_TIMER)], None)
            else:
                self._send_entry_due(node, entry, j)
            self._rem_ref(node)
        while heap:
            due, _, entry = heap[0]
            if not entry.live or entry.due != due:
                heapq.heappop(heap)
            elif isinstance(entry, SendEntry) and entry.node.state == S.OFFLOADED:
                heapq.heappop(heap)
                self._free_retrans_entry(entry.node)
            else:
                break
        if heap:
            self._arm(heap[0][0], j)

    def _free_retrans_entry(self, node: CmNode) -> None:
        entry = node.send_entry
        if entry is not None:
            entry.live = False
            node.send_entry = None
            self._rem_ref(node)

    def _send_entry_due(self, node: CmNode, entry: SendEntry, j: int) -> None:
        if node.state in (S.OFFLOADED, S.CLOSED):
            self._tr("timer_fired", "irdma_cm_timer_tick", conn=node.conn,
                     state=node.state.name, action="entry freed, no retransmission")
            self._free_retrans_entry(node)
            return
        if entry.retranscount == 0:
            self._tr("timer_fired", "irdma_cm_timer_tick", conn=node.conn,
                     state=node.state.name, action="retransmissions exhausted")
            self._free_retrans_entry(node)
            self._run(node, TABLE[(node.state, Input.RETRANS_EXPIRED)], None)
            self._set_state(node, S.CLOSED, "irdma_cm_timer_tick")
            return
        number = self.config.retrans - entry.retranscount + 1
        if not node.ack_rcvd:
            orig = entry.transmit
            self.stats["pkt_retrans"] += 1
            self._transmit(Transmit(orig.segment, f"irdma_cm_timer_tick: retransmit "
                                    f"#{number} of {orig.comment}", orig.loopback,
                                    orig.conn))
        else:
            self._tr("timer_fired", "irdma_cm_timer_tick", conn=node.conn,
                     state=node.state.name, action=f"resend #{number} skipped: ack_rcvd")
        entry.retranscount -= 1
        gap = backoff_gap(self._hz, self.config.retrans - entry.retranscount,
                          int_shift=self.config.quirks.backoff_int_shift)
        entry.due = j + gap
        heapq.heappush(self._heap, (entry.due, self._push_seq(), entry))

    # ---- events and upcalls --------------------------------------------------------

    def _event_handler(self, node: CmNode, etype: CmEventType) -> None:
        """``irdma_cm_event_handler`` for one queued event."""
        if etype == CmEventType.MPA_REQ:
            node.held_by_app = True
            self._upcall(IwEvent.CONNECT_REQUEST, node, 0)
        elif etype == CmEventType.CONNECTED:
            if node.cm_id and node.state == S.OFFLOADED:
                self._event_connected(node)
        elif etype == CmEventType.MPA_REJECT:
            if node.cm_id and node.state != S.OFFLOADED:
                self._upcall(IwEvent.CONNECT_REPLY, node, -ECONNREFUSED)
        elif etype == CmEventType.ABORTED:
            if node.cm_id and node.state != S.OFFLOADED:
                self._event_connect_error(node)
        else:
            self._tr("event_dropped", "irdma_cm_event_handler", conn=node.conn,
                     event=etype.name, reason="bad event type")
        self._rem_ref(node)

    def _event_connect_error(self, node: CmNode) -> None:
        """``irdma_event_connect_error``."""
        if not node.client:
            self._tr("kernel_bug", "irdma_event_connect_error", conn=node.conn,
                     reason="ABORTED on a passive node: cm_id->provider_data is the "
                            "listener, read as a QP (spec 8.4.5); no upcall")
            return
        if not node.qp_linked:
            return
        node.qp_linked = False
        self._upcall(IwEvent.CONNECT_REPLY, node, -ECONNRESET)
        self._rem_ref(node)

    def _event_connected(self, node: CmNode) -> None:
        """``irdma_cm_event_connected``: offload, RTR, CONNECT_REPLY(0)."""
        if node.qp_error:
            self._connected_qp_error(node)
            return
        self._init_tsa_conn(node, "irdma_cm_event_connected")
        node.qhash_set = False
        qp = node.qp
        if qp is None:
            return
        if self.config.gen == 2:
            node.rts_deadline = self._now_ns + self.config.rts_ae_timeout_ns
            heapq.heappush(self._deferred,
                           (node.rts_deadline, self._push_seq(), "rts", node))
        qp.send_rtr(self._now_ns)
        self._drain_qp(node.key)
        if self.config.gen == 1:
            self._connected_complete(node)

    def _connected_qp_error(self, node: CmNode) -> None:
        """``irdma_cm_event_connected`` on a QP already in ERR: the RTR WQE is posted
        but ``irdma_modify_qp(RTS)`` returns -EINVAL (``iwarp_state > RTS``), so the QP
        never transmits it and no TCP context is loaded; the return value is ignored,
        the RTS AE never comes, and CONNECT_REPLY(0) follows the wait (GEN_2: 12 s,
        "Slow Connection" logged only). The peer's accept then times out."""
        self._set_state(node, S.OFFLOADED, "irdma_cm_event_connected")
        node.qhash_set = False
        self._tr("modify_qp_failed", "irdma_modify_qp", conn=node.conn, target="RTS",
                 errno=-EINVAL, reason="iwarp_state ERROR > RTS: no RTR is sent")
        if self.config.gen == 2:
            node.rts_deadline = self._now_ns + self.config.rts_ae_timeout_ns
            heapq.heappush(self._deferred,
                           (node.rts_deadline, self._push_seq(), "rts", node))
        else:
            self._connected_complete(node)

    def _connected_complete(self, node: CmNode) -> None:
        node.rts_deadline = None
        self._upcall(IwEvent.CONNECT_REPLY, node, 0)
        node.accelerated = True
        if self.config.gen == 2:
            node.ah_valid = False  # cm_free_ah
        self._establish_complete(node)

    def _establish_complete(self, node: CmNode) -> None:
        """``complete(&cm_node->establish_comp)``: disconnect workers waiting in
        ``irdma_send_cm_event`` go on (``mpa_emu.cm.disconnect.establish_complete``)."""
        hook = self._disconnect_hook("establish_complete")
        if hook is not None and node.qp is not None:
            hook(self, node.conn, self._now_ns)

    def _upcall(self, event: IwEvent, node: CmNode, status: int) -> None:
        """``irdma_send_cm_event``."""
        pdata = b""
        plen = past = 0
        ird = ord_ = 0
        if event in (IwEvent.CONNECT_REQUEST, IwEvent.CONNECT_REPLY):
            plen = node.pdata_size & 0xFF if self.config.quirks.pdata_len_u8 \
                else node.pdata_size
            pdata = node.pdata[:plen]
            if node.mpa_frame_rev == 2 and self.config.quirks.v2_pdata_plus4:
                # The last 4 bytes copied (irdma_parse_mpa) lie past the frame.
                past = max(0, len(pdata) - max(0, node.pdata_size - 4))
            ird = node.ird_size
            ord_ = node.ord_size if event == IwEvent.CONNECT_REPLY else 0
        elif event == IwEvent.ESTABLISHED:
            ird, ord_ = node.ird_size, node.ord_size
        up = Upcall(event, node.conn, status, self._now_ns, node.loc_addr, node.loc_port,
                    node.rem_addr, node.rem_port, pdata, plen, ird, ord_,
                    node.listener.ident if node.listener is not None else None, past)
        self._upcalls.append(up)
        if self.trace is not None:
            self._tr("upcall", "irdma_send_cm_event", conn=node.conn, event=event.name,
                     status=status, private_data_len=plen, ird=ird, ord=ord_)

    # ---- offload -------------------------------------------------------------------

    def _init_tsa_conn(self, node: CmNode, fn: str) -> None:
        """``irdma_cm_init_tsa_conn`` + ``irdma_init_tcp_ctx``: OFFLOADED and the QP."""
        self._set_state(node, S.OFFLOADED, fn)
        init_fields = dict(
            conn=node.conn, active=node.client, gen=self.config.gen, local_mac=self.mac,
            remote_mac=node.rem_mac, local_ip=node.loc_addr, remote_ip=node.rem_addr,
            local_port=node.loc_port, remote_port=node.rem_port,
            vlan=node.vlan_id if node.vlan_id < VLAN_N_VID else None, pcp=node.user_pri,
            tos=node.tos, ttl=64, snd_nxt=node.loc_seq_num, rcv_nxt=node.rcv_nxt,
            snd_wnd=node.snd_wnd, snd_wscale=node.snd_wscale, rcv_wscale=node.rcv_wscale,
            mss=node.mss, rtr_op=node.send_rdma0_op.value, ird=node.ird_size,
            ord=node.ord_size, mpa_rev=node.mpa_frame_rev, crc=True,
            snd_markers=node.snd_mark_en, rcv_markers=node.rcv_mark_en)
        factory = self._qp_factory
        if factory is None:
            qp_init = _hook("mpa_emu.offload.qp", "QpInit")
            qp_class = _hook("mpa_emu.offload.qp", "OffloadedQp")
            if qp_init is None or qp_class is None:
                self._tr("offload_missing", fn, conn=node.conn,
                         reason="mpa_emu.offload is not available: no QP")
                return
            qp = qp_class(qp_init(**init_fields))
        else:
            qp = factory(init_fields)
        node.qp = qp
        self._qps[node.key] = qp

    def _drain_qp(self, key: tuple[bytes, int, bytes, int, int]) -> None:
        """Take the QP's frames and asynchronous events; keep its deadline."""
        qp = self._qps.get(key)
        if qp is None:
            return
        node = self._nodes.get(key)
        # a QP whose node is gone still names its connection in its init record
        conn = node.conn if node is not None else getattr(getattr(qp, "init", None),
                                                           "conn", 0)
        frames = qp.frames_to_send()
        if frames:
            lpb = node.do_lpb if node is not None else is_loopback(key[0], key[2])
            for tx in frames:
                if lpb and not tx.loopback:
                    tx = Transmit(tx.segment, tx.comment, True, tx.conn)
                self._transmit(tx)
        ae = qp.next_ae()
        if ae is not None:
            on_ae = self._disconnect_hook("on_ae")
            while ae is not None:
                if on_ae is not None:
                    on_ae(self, conn, ae, self._now_ns)
                elif getattr(ae, "name", "") == "RTS":
                    self.rts_ae_received(conn, self._now_ns)
                ae = qp.next_ae()
        t = qp.get_timer()
        if t is not None:
            if self._qp_due.get(key) != t:
                self._qp_due[key] = t
                self._seq += 1
                heapq.heappush(self._qp_heap, (t, self._seq, key))
        else:
            self._qp_due.pop(key, None)
            # A QP whose TCP can still answer (FIN_WAIT_2, or ERROR with the connection
            # alive: RST) keeps its flow after the node is gone.
            if key not in self._nodes and not getattr(qp, "tcp_alive", False):
                self._release_qp(key)

    def _release_qp(self, key: tuple[bytes, int, bytes, int, int]) -> None:
        """Stop routing a flow to a QP whose node is gone and whose TCP is done."""
        self._qps.pop(key, None)
        self._qp_due.pop(key, None)

    # ---- optional modules of other owners ----------------------------------------

    def _if_notify_hook(self) -> Callable[..., None] | None:
        fn: Callable[..., None] | None = _hook("mpa_emu.cm.teardown", "if_notify")
        return fn

    def _disconnect_hook(self, name: str) -> Callable[..., None] | None:
        fn: Callable[..., None] | None = _hook("mpa_emu.cm.disconnect", name)
        return fn

    # ---- leaks ---------------------------------------------------------------------

    def _record_leak(self, node: CmNode, reason: str) -> None:
        """Name why the kernel keeps ``node``; the first cause stays (a later symptom
        of the same leak does not replace it)."""
        self._leaks.setdefault(node.conn, reason)

    def _leak_reason(self, n: CmNode) -> str | None:
        known = self._leaks.get(n.conn)
        if known is not None:
            return known
        st = n.state
        if n.send_entry is not None or n.close_entry is not None or n.qhash_pending:
            return None  # still counting down: not a leak
        reasons = {
            S.FIN_WAIT2: "FIN_WAIT2 has no timer and the peer never sent its FIN "
                         "(errata 10)",
            S.MPAREJ_RCVD: "MPAREJ_RCVD waits for the peer's FIN or irdma_cm_close "
                           "(spec 4.6)",
            S.MPAREQ_RCVD: "MPA request indicated; the application has not accepted or "
                           "rejected (no timeout, spec 5.5)",
            S.CLOSING: "CLOSING has no retransmission entry: the ACK of our FIN never "
                       "came (spec 8.4.6)",
            S.LISTENER_DESTROYED: "listener destroyed while the application held the "
                                  "request: waits for accept/reject (spec 7.4)",
            S.OFFLOADED: "offloaded: the QP owns the connection until it is closed",
        }
        if st in reasons:
            return reasons[st]
        if st == S.ESTABLISHED and not n.client:
            return "passive ESTABLISHED without an MPA request: no timeout (spec 5.5)"
        if st == S.SYN_SENT:
            return ("SYN_SENT without a retransmission entry: a bare ACK passing "
                    "irdma_check_seq ran cleanup (irdma_handle_ack_pkt), or the MPA "
                    "request could not be built (errata 8): no timer, no timeout")
        if st == S.SYN_RCVD:
            return "SYN_RCVD without a SYN-ACK entry (AH failure, errata 2)"
        if st == S.CLOSED and n.refcnt > 0:
            return "CLOSED node with a leaked reference"
        if st in (S.LAST_ACK, S.FIN_WAIT1) and not n.ah_valid and self.config.gen == 2:
            # irdma_send_fin -> irdma_form_ah_cm_frame: no AH (the asynchronous AH of a
            # passive node not created yet, or failed), so no FIN and no entry
            return (f"{st.name} without a FIN entry: the FIN could not be built without "
                    "an AH, nothing retransmits it and no timer ends the node")
        return None

