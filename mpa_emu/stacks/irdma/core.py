"""The CM core of one emulated host: the driver's ``irdma_cm_core`` plus its local stack.

Sans-IO: frames and verbs go in with ``now_ns``; frames to send (:meth:`CmCore.frames_to_send`),
upcalls (:meth:`CmCore.next_event`) and the next deadline (:meth:`CmCore.get_timer`) come out.
Time is virtual: nanoseconds at the boundary, jiffies of ``CmConfig.hz`` inside.

The core is an orchestrator around a few collaborators that never call it back:

* :mod:`mpa_emu.stacks.irdma.transitions` (the table) and :mod:`mpa_emu.stacks.irdma.actions` (the
rows'
  bodies): every input a node sees is one row; see the theory of operation there;
* :class:`~mpa_emu.stacks.irdma.nodes.NodeTable`: nodes by key, id and local address; listeners;
* :class:`~mpa_emu.stacks.irdma.timers.CoreTimer` and
:class:`~mpa_emu.stacks.irdma.timers.Deferred`: the
  shared core timer and the asynchronous completions;
* :class:`~mpa_emu.stacks.irdma.offload.nic.Nic`: the QPs of offloaded flows and their deadlines;
* :mod:`mpa_emu.stacks.irdma.send`, :mod:`mpa_emu.stacks.irdma.upcalls`,
:mod:`mpa_emu.stacks.irdma.leaks`.

What the kernel does asynchronously (the ordered ``iwarp-event-wq``, the AH/qhash
completion that sends the passive SYN-ACK) runs after the input that caused it, before
the call returns (or at ``CmConfig.ah_latency_ns``).

Loopback connections (``irdma_ipv4_is_lpb``/``irdma_ipv6_is_lpb``) run their full exchange
inside the core: their frames appear in :meth:`CmCore.frames_to_send` with
``loopback=True`` for capture, are already delivered to the local peer node, and must not
be put on the wire.

The actions reach the core through :class:`~mpa_emu.stacks.irdma.contract.CoreOps`, the base class
the core is built on (its state and the mechanics a row runs on; the core gives the
methods that need the table, the reference counting and the disconnect path). The
disconnect path after offload (:mod:`mpa_emu.stacks.irdma.disconnect`) and the teardown by address
(:mod:`mpa_emu.stacks.irdma.teardown`) reach it through the underscore names of their protocols
(``DisconnectHost``, ``TeardownHost``).
"""

from __future__ import annotations

import errno
import random
from collections import deque
from errno import EINVAL
from typing import Any, Final, cast

from mpa_emu.stacks.contract.api import NodeWatch, SendCompletion
from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.events import IwEvent, Upcall
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma import disconnect, log_lines, refs, send, states, teardown, upcalls
from mpa_emu.stacks.irdma.actions import KernelHang
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.contract import Outcome, Rx, VerbArgs
from mpa_emu.stacks.irdma.device import DeviceVerbs
from mpa_emu.stacks.irdma.leaks import leak_report
from mpa_emu.stacks.irdma.limits import VERB_RANGES
from mpa_emu.stacks.irdma.mpa_policy import MPA_V2_HDR, Rdma0Op
from mpa_emu.stacks.irdma.netdevs import NetdevList
from mpa_emu.stacks.irdma.node import ChildListener, CmNode, Listener
from mpa_emu.stacks.irdma.nodes import (
    IsnChooser,
    NodeTable,
    is_loopback,
    make_cm_node,
    record_ird_ord,
)
from mpa_emu.stacks.irdma.offload.nic import HwQp, Nic, QpFactory, StoredKey
from mpa_emu.stacks.irdma.offload.qp import OffloadedQp, QpError
from mpa_emu.stacks.irdma.pdata import as_u8, check_conn_pdata
from mpa_emu.stacks.irdma.states import NO_VLAN, VLAN_N_VID, CmState, Input
from mpa_emu.stacks.irdma.table_views import TableViews
from mpa_emu.stacks.irdma.tcp import MIN_MTU_IPV4, MIN_MTU_IPV6, check_seq_refusal
from mpa_emu.stacks.irdma.teardown import ListenerLike
from mpa_emu.stacks.irdma.timers import CoreTimer, Deferred, timer_tick
from mpa_emu.stacks.irdma.timing import jiffies_to_ns
from mpa_emu.stacks.irdma.transitions import TABLE, unreachable_row_ran
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.segment import ACK, FIN, RST, SYN, Segment, Transmit
from mpa_emu.wire.sends import sends_of_segments
from mpa_emu.wire.seq import MASK as MASK32

ENOMEM: Final = errno.ENOMEM
EADDRINUSE: Final = errno.EADDRINUSE
EADDRNOTAVAIL: Final = errno.EADDRNOTAVAIL

DEFAULT_CONFIG: Final = CmConfig()


class CmCore(TableViews, DeviceVerbs):
    """One emulated host's irdma connection manager (see the module docstring).

    ``name`` names the host in traces, ``mac`` is its port's address, ``seed`` seeds the
    ISNs, ``trace`` receives the structured records (None: nothing is recorded) and
    ``qp_factory`` builds the QP of an offloaded connection (the emulator's own
    :class:`~mpa_emu.stacks.irdma.offload.qp.OffloadedQp` by default); ``isn`` may choose a new
    node's ISN instead of the seeded generator; ``watch`` (a ``NodeWatch``) is told of
    every node's creation, state changes and free, and of its QP's events.
    """

    def __init__(self, name: str, mac: bytes, config: CmConfig = DEFAULT_CONFIG, *,
                 seed: int = 0, trace: Trace | None = None,
                 qp_factory: QpFactory | None = None,
                 isn: IsnChooser | None = None, watch: NodeWatch | None = None) -> None:
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
        self.base = CoreBase(name, trace, watch)
        self.base.transitions_only = True  # every change is a row's (transitions.py)
        self.prefer = Rdma0Op(config.rtr_preference)
        self.nodes = NodeTable()
        self.timer = CoreTimer(config.hz)
        self.deferred = Deferred()
        self.nic = Nic(qp_factory, self.nodes.by_key)
        self.leaks = {}
        self.stats = dict.fromkeys((
            "backlog_drops", "connect_errs", "passive_errs", "pkt_retrans", "rejects", "accepts",
            "nodes_created", "nodes_destroyed", "listen_created", "listen_destroyed"), 0)
        self._link_up = True
        self.rf_reset = False
        """``rf->reset``: a device reset is in progress (CQP commands are dropped)."""
        self.ilq_stuck = False
        """irdma_process_options looped on a zero-length option: the CM receive path
        never returns, so every later CM segment is lost."""
        self.netdevs = NetdevList()
        """The host's devices in registration order (``for_each_netdev``)."""
        self._rng = random.Random(seed)
        self._isn = isn
        self._hz = config.hz
        self._addresses = {}
        self._neigh: dict[bytes, bytes | None] = {}
        self._outbox = []
        self._work = deque()
        self._loop = deque()
        self.qp_close_entries = set()
        self._tick_jiffy = -1
        self._tick_at_ns = 0

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
            due = self.get_timer()
            if due is None or due > now_ns:
                break
            self._enter(due)
            self._fire(due)
            self._finish()
        self._enter(now_ns)

    def get_timer(self) -> int | None:
        """Absolute ns of the next deadline (core timer, qhash completion, RTS wait, QP
        timers: the earliest), None when idle."""
        expires = self.timer.expires
        best = None if expires is None else self._tick_ns(expires)
        t = self.deferred.deadline()
        if t is not None and (best is None or t < best):
            best = t
        t = self.nic.deadline()
        if t is not None and (best is None or t < best):
            best = t
        return best

    def frames_to_send(self) -> list[Transmit]:
        """Drain the outbox (loopback frames included, marked, already delivered)."""
        out, self._outbox = self._outbox, []
        return out

    def next_event(self) -> Upcall | None:
        """Pop the next upcall to the application, None when there is none."""
        return self.base.next_event()

    # ---- verbs -------------------------------------------------------------------

    def create_listen(self, ip: bytes | None, port: int, *, backlog: int = 16,
                      ipv6: bool = False, vlan: int | None = None, now_ns: int = 0,
                      tos: int = 0) -> int:
        """``irdma_create_listen``: listen on ``ip`` (None = wildcard) and ``port``.

        ``vlan`` overrides the VLAN looked up from the address. Returns the listener id.
        A matching ACTIVE listener makes the kernel return -ENOMEM; a matching one being
        destroyed is reused, its backlog count reset to 0 (``irdma_make_listen_node``
        with ``listener->reused_node``).
        """
        if not 0 < port < 0x10000:
            raise CmError(EINVAL, f"listen port {port} out of range 1..65535")
        problem = VERB_RANGES["backlog"].problem(backlog)
        if problem is not None:
            raise CmError(EINVAL, f"backlog: {problem}")
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
        table = self.nodes
        found = table.find_listener(addr, ipv4, port, vlan_id, states.LISTENER_EITHER)
        if found is not None and found.listener_state == states.LISTENER_ACTIVE:
            raise CmError(ENOMEM, "a matching listener is active (irdma_make_listen_node)")
        self._enter(now_ns)
        lst = table.make_listen_node(found, addr, port, ipv4, vlan_id, backlog, wildcard,
                                     tos, self.netdevs.walk(self._addresses, ipv4))
        self.stats["listen_created"] += 1
        log_lines.listen_created(self, lst)
        self._finish()
        return lst.ident

    def destroy_listen(self, listener: int, *, now_ns: int) -> None:
        """``irdma_destroy_listen``: RST the pending nodes, release the listener."""
        lst = self.nodes.listener_ids.get(listener)
        if lst is None or lst.listener_state != states.LISTENER_ACTIVE:
            raise CmError(EINVAL, f"no active listener {listener}")
        self._enter(now_ns)
        lst.listener_state = states.LISTENER_PASSIVE
        self.base.record("listen_destroyed", "irdma_cm_del_listen", listener=listener)
        refs.dec_refcnt_listen(self, lst, free_hanging=True)
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
            private_data = as_u8("connect", "irdma_connect", private_data, self.base.record)
        check_conn_pdata("irdma_connect", private_data, self.config.mpa_rev)
        for name, value in (("ird", ird), ("ord", ord)):
            problem = VERB_RANGES[name].problem(value)
            if problem is not None:
                raise CmError(EINVAL, f"{name}: {problem}")
        vlan_id = self._addresses[local_ip]
        if vlan_id >= VLAN_N_VID and self.config.dcb_vlan_mode:
            vlan_id = 0
        table = self.nodes
        next_port = table.next_port
        if local_port is None:
            local_port, next_port = table.free_port(local_ip, remote_ip, remote_port,
                                                    vlan_id)
        key = (local_ip, local_port, remote_ip, remote_port, vlan_id)
        if key in table.by_key:
            raise CmError(EADDRINUSE, "a node with this 4-tuple exists")
        lpb = is_loopback(local_ip, remote_ip)
        rem_mac = self.mac if lpb else self._neigh.get(remote_ip)
        if rem_mac is None:
            raise CmError(ENOMEM, "neighbour not resolved (irdma_make_cm_node)")
        self._enter(now_ns)
        table.next_port = next_port
        node = self._make_cm_node(key, rem_mac, lpb, tos)
        node.client = True
        node.update_settings(rcv_wscale=2)  # IRDMA_CM_DEFAULT_RCV_WND_SCALE
        record_ird_ord(node, ird, ord, self.config)
        node.pdata = bytes(private_data)
        node.update_settings(pdata_size=len(private_data))
        node.ah_valid = True  # cm_create_ah(wait=true)
        node.qhash_set = True
        node.cm_id = True
        node.qp_linked = True
        self._dispatch(node, states.IN_CONNECT, None)
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
        self._check_accept_waiting(node, "accept")
        self._check_held(node, "accept")
        if node.state not in (states.CM_MPAREQ_RCVD, states.CM_LISTENER_DESTROYED):
            raise CmError(EINVAL, f"accept in state {node.state.name}: no MPA request "
                          "is pending")
        if self.config.quirks.conn_pdata_u8:
            private_data = as_u8("accept", "irdma_accept", private_data, self.base.record)
        check_conn_pdata("irdma_accept", private_data, node.settings.mpa_frame_rev)
        self._enter(now_ns)
        # irdma_accept: cm_node->vlan_id = irdma_get_vlan_ipv4(loc_addr) (IPv6:
        # irdma_netdev_vlan_ipv6), 0xFFFF for an untagged or unknown address, before any
        # check and without the dcb_vlan_mode conversion of irdma_make_cm_node.
        self._set_node_vlan(node, self._addresses.get(node.loc_addr, NO_VLAN),
                            "irdma_accept")
        outcome = self._dispatch(node, states.IN_ACCEPT, VerbArgs(bytes(private_data)))
        self._finish()
        if outcome.error is not None:
            raise outcome.error

    def reject(self, conn: int, *, private_data: bytes = b"", now_ns: int) -> None:
        """``irdma_reject`` -> ``irdma_cm_reject``: MPA reply with R, private data and
        FIN in one segment. ``pdata_len`` is a u8 (``Quirks.reject_pdata_u8``): a longer
        buffer's length wraps mod 256, as ``rdma_reject``/``iw_cm_reject`` pass it, and the
        trace says so; with the quirk off, over the limit (``len + 24 > 544``) raises
        :class:`CmError` and sends nothing. A passive node the application does not hold
        (no CONNECT_REQUEST delivered, or already given back) is refused. On an active
        node it does nothing, as the kernel."""
        node = self._verb_node(conn)
        if not node.client:
            self._check_accept_waiting(node, "reject")
            self._check_held(node, "reject")
        if self.config.quirks.reject_pdata_u8:
            private_data = as_u8("reject", "irdma_reject", private_data, self.base.record)
        plen = len(private_data)
        if plen + MPA_V2_HDR > 544:
            raise CmError(EINVAL, f"reject private data of {plen} bytes: {plen} + 24 > "
                          "544 (irdma_reject)")
        if not node.client and node.state not in (states.CM_MPAREQ_RCVD,
                                                  states.CM_LISTENER_DESTROYED):
            raise CmError(EINVAL, f"reject in state {node.state.name}: no MPA request "
                          "is pending")
        self._enter(now_ns)
        self.stats["rejects"] += 1
        if node.client:
            self.base.record("verb_ignored", "irdma_cm_reject", conn=conn,
                             reason="active node: irdma_cm_reject returns 0")
        else:
            self._dispatch(node, states.IN_REJECT, VerbArgs(bytes(private_data)))
        self._finish()

    def close(self, conn: int, *, now_ns: int) -> None:
        """``irdma_cm_close``: RST in the early states, free when CLOSED, OFFLOADED,
        MPAREJ_RCVD...; -EINVAL (CmError) in FIN_WAIT*/LAST_ACK/TIME_WAIT/CLOSING, and
        for an early-state node that only its retransmission entry keeps (the caller's
        reference is gone: the kernel would free it under the timer)."""
        node = self._verb_node(conn)
        if node.state == states.CM_LISTENING:
            # only irdma_receive_ilq holds it, stuck in irdma_process_options: no cm_id
            # leads to it, so irdma_cm_close is never called on it
            raise CmError(EINVAL, f"irdma_cm_close on connection {conn}: the node is "
                          "held only by the receive path stuck in irdma_process_options")
        self._enter(now_ns)
        self._dispatch(node, states.IN_CLOSE, None)
        self._finish()

    def _cm_close(self, conn: int, now_ns: int) -> int:
        """``irdma_cm_close`` for the disconnect path: like :meth:`close` but returns
        -EINVAL instead of raising (as ``irdma_qp_disconnect`` ignores it) and 0 for a
        node already gone."""
        node = self.nodes.by_conn.get(conn)
        if node is None:
            return 0
        self._enter(now_ns)
        try:
            self._dispatch(node, states.IN_CLOSE, None)
        except CmError as exc:
            return -exc.errno
        self._finish()
        return 0

    def disconnect(self, conn: int, *, graceful: bool, now_ns: int) -> None:
        """After offload: move the QP to SQD (FIN) or ERR (RST if TCP is alive), as
        ``irdma_modify_qp`` does (:func:`mpa_emu.stacks.irdma.disconnect.modify_qp`)."""
        node = self._verb_node(conn)
        if node.qp is None:
            raise CmError(EINVAL, f"connection {conn} has no offloaded QP "
                          f"(state {node.state.name})")
        self._enter(now_ns)
        disconnect.modify_qp(self, conn, "sqd" if graceful else "err", self.base.now_ns)
        self._drain_qp(node.key)
        self._finish()

    def post_send(self, conn: int, payload: bytes, *, now_ns: int) -> None:
        """``irdma_post_send`` of an RDMA Send (IRDMA_OP_TYPE_SEND): the NIC QP cuts it
        into DDP segments that fit the MSS, the next MSN (RFC 5041 section 5.1). Only an
        offloaded QP in RTS takes it (-EINVAL otherwise)."""
        node = self._verb_node(conn)
        qp = node.qp
        if not isinstance(qp, OffloadedQp):
            raise CmError(EINVAL, f"post_send: connection {conn} has no offloaded QP "
                          f"(state {node.state.name})")
        self._enter(now_ns)
        try:
            qp.post_send(bytes(payload), self.base.now_ns)
        except QpError as exc:  # not in RTS, or a FIN requested
            raise CmError(EINVAL, f"post_send: {exc}") from None
        self._drain_qp(node.key)
        self._finish()

    # ---- inspection (node, conns, listener, nodes_on, local_keys, qp: TableViews) ----

    def leak_report(self) -> list[tuple[int, CmState, str | None]]:
        """Every node still in the table with the reason the kernel keeps it (None when
        the emulator cannot name one: that would be a bug). Each is recorded in the
        trace as ``kernel_leak``."""
        return leak_report(self)

    # ---- for the disconnect and teardown paths (DisconnectHost, TeardownHost) ------

    def _send_cm_event(self, conn: int, event: IwEvent, status: int, now_ns: int) -> None:
        """``irdma_send_cm_event`` for the disconnect path (DISCONNECT and CLOSE from
        ``irdma_cm_disconn_true``)."""
        self._enter(now_ns)
        node = self.nodes.by_conn.get(conn)
        if node is not None:
            upcalls.send_cm_event(self, event, node, status)

    def _schedule_close_entry(self, conn: int, now_ns: int) -> bool:
        """``irdma_schedule_cm_timer(CLOSE)`` with the QP as the entry: due in HZ/10 on
        the shared core timer (armed only when idle, as ``irdma_schedule_cm_timer``
        does); on expiry ``mpa_emu.stacks.irdma.disconnect.handle_close_entry(core, conn, now_ns)``
        runs. False when the node already has a close entry (-EINVAL)."""
        node = self.nodes.by_conn.get(conn)
        if node is None or node.close_entry is not None:
            return False
        self._enter(now_ns)
        self.qp_close_entries.add(node.conn)
        self.timer.arm_close(node, self._jiffies)
        return True

    def completions(self, conn: int) -> list[SendCompletion]:
        """The Sends the connection's QP has taken, oldest first, each a SUCCESS
        completion: irdma's NIC model keeps no receive queue, so the Sends among the
        last FPDUs it kept (untagged queue 0, joined by MSN, complete once the segment
        with L set is in; RFC 5041 section 4.4). Empty before offload or once freed."""
        qp = self.qp(conn)
        received = getattr(qp, "received", None) if qp is not None else None
        if not received:
            return []
        return [SendCompletion("SUCCESS", data)
                for data in sends_of_segments([m.ulpdu for m in received])]

    def has_node(self, conn: int) -> bool:
        """``iwqp->cm_node != NULL``: the node of ``conn`` is still in the table."""
        return self.nodes.by_conn.get(conn) is not None

    def link_up(self) -> bool:
        """``iwdev->iw_status``: False after :meth:`link_down`."""
        return self._link_up

    def _collect_qp_frames(self, conn: int) -> None:
        """Move the QP's frames (and AEs) of ``conn`` into the core."""
        node = self.nodes.by_conn.get(conn)
        if node is not None and node.qp is not None:
            self._drain_qp(node.key)

    def _rts_ae_received(self, conn: int, now_ns: int) -> None:
        """Wake ``irdma_accept`` (ESTABLISHED upcall) or ``irdma_cm_event_connected``
        (CONNECT_REPLY(0)) waiting for the RTS AE."""
        node = self.nodes.by_conn.get(conn)
        if node is None or node.rts_deadline is None:
            return
        self._enter(now_ns)
        if node.client:
            upcalls.connected_complete(self, node)
        else:
            upcalls.accept_complete(self, node)

    def _record(self, kind: str, fn: str, now_ns: int, **fields: Any) -> None:
        """Emit one trace record on behalf of another module."""
        self.base.record_at(max(now_ns, self.base.now_ns), kind, fn, **fields)

    def _cm_node(self, conn: int) -> CmNode | None:
        """The node object of ``conn`` (read it, do not keep it)."""
        return self.nodes.by_conn.get(conn)

    def _has_driver_qp(self, conn: int) -> bool:
        """``cm_node->iwqp != NULL``: active nodes from connect on, passive from accept."""
        n = self.nodes.by_conn.get(conn)
        return n is not None and (n.client or n.qp is not None)

    def _reset_node(self, conn: int, now_ns: int) -> None:
        """The NULL-checked teardown of a node without QP: CM RST and free (the
        ``TEARDOWN`` row)."""
        node = self.nodes.by_conn.get(conn)
        if node is None:
            return
        self._enter(now_ns)
        self._dispatch(node, states.IN_TEARDOWN, None)

    def _listen_list(self) -> list[Listener]:
        """``cm_core->listen_list``, newest first."""
        return list(self.nodes.listeners)

    def _manage_syn_qhash(self, addr: bytes, port: int, vlan: int, ipv4: bool, add: bool,
                         now_ns: int) -> bool:
        """``irdma_manage_qhash(TCP_SYN, ADD|DELETE)``: the steering rule lives on the
        listener or child that holds it, so there is nothing to fail here."""
        return True

    def _new_child_listener(self, parent: ListenerLike, addr: bytes, vlan: int
                           ) -> ChildListener:
        """A wildcard child for ``addr`` (``kmemdup`` of the parent), not yet linked."""
        return ChildListener(addr, vlan)

    def _if_notify_one(self, ip: bytes, vlan_id: int, *, ifup: bool) -> None:
        """``irdma_if_notify`` for one address added or removed."""
        teardown.if_notify(self, ip, vlan=self._notify_vlan(vlan_id), ipv4=len(ip) == 4,
                           ifup=ifup, now_ns=self.base.now_ns)

    def _notify_vlan(self, vlan_id: int) -> int:
        """The VLAN ``irdma_if_notify`` compares: 0xFFFF when the notifier passes the
        lower device (quirk ``if_notify_lower_dev``)."""
        return NO_VLAN if self.config.quirks.if_notify_lower_dev else vlan_id

    # ---- for the actions (CoreOps) -------------------------------------------------

    def _dispatch(self, node: CmNode, inp: Input, rx: Rx) -> Outcome:
        """Run the row of ``(node.state, inp)`` and check where it left the node."""
        r = TABLE[(node.state, inp)]
        if not r.reachable:
            unreachable_row_ran(r, self.base.record)
        self.base.in_transition += 1
        try:
            result = r.run(self, node, r, rx)
        finally:
            self.base.in_transition -= 1
        after = node.state if node.refcnt > 0 else states.CM_CLOSED
        assert after in r.allowed, (
            f"{r.kernel_fn} {r.state.name}/{r.input.value} ended in {after.name}, "
            f"table allows {sorted(s.name for s in r.allowed)}")
        return result

    def _rem_ref(self, node: CmNode) -> None:
        """``irdma_rem_ref_cm_node``: drop one reference, destroy at zero."""
        refs.rem_ref(self, node)

    def _drain_qp(self, key: StoredKey) -> None:
        """Take the QP's frames and asynchronous events; keep its deadline."""
        node = self.nodes.by_key.get(key)
        qp: HwQp | None = self.nic.flow_qp(key, None if node is None else node.qp)
        if qp is not None:
            self._drain_flow(key, qp, node)

    def _drain_flow(self, key: StoredKey, qp: HwQp, node: CmNode | None) -> None:
        # a QP whose node is gone still names its connection in its init record
        conn = node.conn if node is not None else qp.init.conn
        frames = qp.frames_to_send()
        if frames:
            lpb = node.do_lpb if node is not None else is_loopback(key[0], key[2])
            for tx in frames:
                if lpb and not tx.loopback:
                    tx = Transmit(tx.segment, tx.comment, True, tx.conn)
                self._transmit(tx)
        ae = qp.next_ae()
        while ae is not None:
            disconnect.on_ae(self, conn, ae, self.base.now_ns)
            ae = qp.next_ae()
        self.nic.track(key, qp, node_alive=key in self.nodes.by_key)

    def _establish_complete(self, node: CmNode) -> None:
        """``complete(&cm_node->establish_comp)``: disconnect workers waiting in
        ``irdma_send_cm_event`` go on
        (:func:`mpa_emu.stacks.irdma.disconnect.establish_complete`)."""
        if node.qp is not None:
            disconnect.establish_complete(self, node.conn, self.base.now_ns)

    # ---- internals: time and work ---------------------------------------------------

    def _enter(self, now_ns: int) -> None:
        if now_ns > self.base.now_ns:
            self.base.now_ns = now_ns

    def _tick_ns(self, expires: int) -> int:
        """The ns of the core timer's expiry jiffy ``expires`` (the last one remembered)."""
        if expires != self._tick_jiffy:
            self._tick_jiffy = expires
            self._tick_at_ns = jiffies_to_ns(expires, self._hz)
        return self._tick_at_ns

    def _fire(self, due: int) -> None:
        """Fire the source whose deadline :meth:`get_timer` gave as ``due``: the core
        timer, else the deferred completions, else the QPs (the first on a tie)."""
        expires = self.timer.expires
        if expires is not None and self._tick_ns(expires) == due:
            # a late caller fires the tick late, as a late softirq would: at "jiffies"
            timer_tick(self, max(expires, self._jiffies))
        elif self.deferred.deadline() == due:
            kind, node = self.deferred.pop()
            if kind == "qhash":
                self._qhash_done(node)
            elif kind == "rts" and node.rts_deadline is not None \
                    and node.rts_deadline <= self.base.now_ns:
                upcalls.rts_timeout(self, node)
        else:
            key = self.nic.pop_due()
            qp: HwQp | None = self.nic.qp(key)
            if qp is not None:
                qp.handle_timer(self.base.now_ns)
                self._drain_qp(key)

    def _finish(self) -> None:
        """Run what the kernel does after the input: queued CM events (ordered), zero-
        latency qhash completions, and loopback frames."""
        work, loop = self._work, self._loop
        while work or loop:
            if work:
                node, etype = work.popleft()
                if etype is not None:
                    upcalls.event_handler(self, node, etype)
                else:
                    self._qhash_done(node)
            else:
                self._receive_one(loop.popleft())

    def _qhash_done(self, node: CmNode) -> None:
        """``irdma_ilq_ah_cb`` + ``irdma_send_syn_cqp_callback`` (the ``QHASH_DONE``
        row), then the completion's reference is dropped."""
        if not node.qhash_pending:
            return
        node.qhash_pending = False
        node.refcnt += 1
        self._dispatch(node, states.IN_QHASH_DONE, None)
        node.refcnt -= 1
        self._rem_ref(node)

    def _qp_close_entry_due(self, node: CmNode) -> bool:
        """The tick found ``node``'s close entry due: when the QP scheduled it
        (:meth:`_schedule_close_entry`) the QP branch of ``irdma_handle_close_entry`` runs
        (:func:`mpa_emu.stacks.irdma.disconnect.handle_close_entry`) and True is returned."""
        if node.conn not in self.qp_close_entries:
            return False
        self.qp_close_entries.discard(node.conn)
        entry = node.close_entry
        if entry is not None:
            entry.live = False
            node.close_entry = None
        disconnect.handle_close_entry(self, node.conn, self.base.now_ns)
        return True

    # ---- internals: nodes and listeners ------------------------------------------------

    def _check_ip(self, ip: bytes) -> None:
        if len(ip) not in (4, 16):
            raise CmError(EINVAL, f"IP address must be 4 or 16 bytes, got {len(ip)}")

    def _verb_node(self, conn: int) -> CmNode:
        node = self.nodes.by_conn.get(conn)
        if node is None:
            raise CmError(EINVAL, f"no connection {conn} (never existed or already freed)")
        return node

    @staticmethod
    def _check_accept_waiting(node: CmNode, verb: str) -> None:
        """``irdma_accept`` still waits for the RTS AE (``wait_event_interruptible_timeout``
        up to ``IRDMA_MAX_TIMEOUT``), which the model cannot block on. In the kernel
        ucma holds the id's handler lock around ``rdma_accept``, so this call would run
        only after that accept returned: its ESTABLISHED (or its error path) has taken
        iw_cm's id out of CONN_RECV, and ``iw_cm_accept``/``iw_cm_reject`` return
        -EINVAL without a change (``before_iw_cm``)."""
        if node.rts_deadline is not None:
            raise CmError(EINVAL, f"{verb} on connection {node.conn}: irdma_accept is "
                          "still waiting for the RTS AE; the call would run after it "
                          "returned, with the id no longer in CONN_RECV", before_iw_cm=True)

    @staticmethod
    def _check_held(node: CmNode, verb: str) -> None:
        """A passive node reaches ``irdma_accept``/``irdma_reject`` only as the
        ``provider_data`` of its CONNECT_REQUEST, until a reject or a failed accept gives
        it back: refuse one the application does not hold."""
        if not node.held_by_app:
            raise CmError(EINVAL, f"{verb} on connection {node.conn}: the application "
                          "holds no handle to it (no CONNECT_REQUEST delivered, or given "
                          "back by a reject or a failed accept)")

    def _set_node_vlan(self, node: CmNode, vlan_id: int, fn: str) -> None:
        """Give ``node`` a new VLAN, filed under its new node-table key and index, where
        ``irdma_find_node`` and ``irdma_teardown_list_prep`` compare the VLAN."""
        old = node.vlan_id
        if vlan_id == old:
            return
        if node.qp is not None:  # the QP's flow keeps the key the QP was created with
            self.nic.rekeying(node, node.key, (*node.key[:4], vlan_id))
        self.nodes.rekey_vlan(node, vlan_id)
        if self.trace is not None:
            self.base.record("vlan_changed", fn, conn=node.conn, old=old, new=vlan_id)

    def _make_cm_node(self, key: FlowKey, rem_mac: bytes, lpb: bool, tos: int,
                      listener: Listener | None = None) -> CmNode:
        """``irdma_make_cm_node`` after the neighbour was resolved."""
        conn = self.nodes.new_conn()
        chosen = self._isn(key[0], key[1], key[2], key[3]) if self._isn is not None else None
        node = make_cm_node(conn, key, rem_mac, lpb, tos, self.config,
                            self._rng.getrandbits(32) if chosen is None else chosen & MASK32,
                            listener)
        self.nodes.add(node)
        self.stats["nodes_created"] += 1
        if self.trace is not None:
            self.base.record("node_created", "irdma_make_cm_node", conn=node.conn, loc=key[0],
                             loc_port=key[1], rem=key[2], rem_port=key[3], vlan=key[4],
                             isn=node.loc_seq_num, loopback=lpb)
        self.base.node_created(node.conn, key[1], key[2], key[3])
        return node

    # ---- internals: the receive path ---------------------------------------------------

    def _receive_one(self, seg: Segment) -> None:
        """``irdma_receive_ilq`` + ``irdma_process_pkt``."""
        if self.trace is not None:
            self.base.record("segment_received", "irdma_receive_ilq", flags=seg.flag_text,
                             seq=seg.seq, ack=seg.ack, len=len(seg.payload), sport=seg.sport,
                             dport=seg.dport)
        if len(seg.src_ip) not in (4, 16) or len(seg.dst_ip) != len(seg.src_ip):
            self._drop(seg, "irdma_receive_ilq", "not an IPv4 or IPv6 TCP segment")
            return
        vlan_id = NO_VLAN if seg.vlan is None else seg.vlan & 0xFFF
        # Boxed once for every table the segment is looked up in (a plain fixed-size
        # tuple is boxed anew at each use in the compiled build; see StoredKey), and
        # then the node's own key, which those tables hold as the very same object. The
        # cast only types the lookup key: it is a plain tuple, equal to and hashed as the
        # StoredKey it finds, and nothing reads its field names (a real StoredKey made
        # per segment costs the cycle 2.5% more instructions).
        key = cast(StoredKey, (seg.dst_ip, seg.dport, seg.src_ip, seg.sport, vlan_id))
        node = self.nodes.by_key.get(key)
        if node is not None:
            key = node.key
        qp: HwQp | None = self.nic.flow_qp(key, None if node is None else node.qp)
        if qp is not None:
            # the NIC owns this flow: its TCP engine answers, the CM never sees it
            if node is not None or not seg.flags & SYN or seg.flags & ACK:
                qp.receive(seg, self.base.now_ns)
                self._drain_flow(key, qp, node)  # the node table is as before the QP ran
                return
            self.nic.release(key)  # a new connection on the tuple of a finished QP
        if self.ilq_stuck:
            # irdma_process_options never returned: the ILQ's receive path spins, so no
            # later segment reaches the CM (offloaded QPs are served by the hardware)
            self._drop(seg, "irdma_receive_ilq", "receive path stuck in "
                      "irdma_process_options (zero-length option loop)")
            return
        if node is None:
            node = self._passive_node(seg, key)
            if node is None:
                return
        elif node.state == states.CM_OFFLOADED:
            self._drop(seg, "irdma_receive_ilq", "OFFLOADED: the hardware owns the flow",
                      node)
            return
        else:
            node.refcnt += 1
        try:
            self._process_pkt(node, seg)
        except KernelHang as hang:
            self.ilq_stuck = True
            self._record_leak(node, f"receive path stuck in irdma_process_options: {hang}")
            self.base.record("kernel_bug", "irdma_process_options", conn=node.conn,
                             reason=f"infinite loop on {hang}; the segment is lost and the "
                             "lookup reference never released")
            return
        self._rem_ref(node)

    def _passive_node(self, seg: Segment, key: FlowKey) -> CmNode | None:
        """No node for the segment: only a SYN without ACK that a qhash rule steers to
        the CM and a listener takes creates one (``irdma_receive_ilq``); it is still
        UNKNOWN, its SYN row makes it LISTENING."""
        fn = "irdma_receive_ilq"
        if not seg.flags & SYN or seg.flags & ACK:
            self._drop(seg, fn, "no node for this 4-tuple and not a SYN")
            return None
        ipv4 = len(seg.dst_ip) == 4
        table = self.nodes
        if not table.syn_steered(seg.dst_ip, ipv4, seg.dport, key[4]):
            send.host_stack(self, seg)
            return None
        lst = table.find_listener(seg.dst_ip, ipv4, seg.dport, key[4],
                                  states.LISTENER_ACTIVE)
        if self.trace is not None:
            log_lines.passive_lookup(self, lst, seg.tos)
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
            # irdma_make_cm_node stores VLAN 0, but irdma_receive_ilq looks untagged
            # segments up with 0xFFFF: later segments of this flow miss the node
            vlan_id = 0
        lst.refcnt += 1  # the find_listener reference, kept by the node
        node = self._make_cm_node((key[0], key[1], key[2], key[3], vlan_id), rem_mac, lpb,
                                  max(lst.tos, seg.tos), lst)
        node.cm_id = True
        if seg.flags & (RST | FIN):
            self._drop(seg, fn, "SYN with RST or FIN: node freed", node)
            self._rem_ref(node)
            return None
        node.refcnt += 1
        return node

    def _process_pkt(self, node: CmNode, seg: Segment) -> None:
        """``irdma_process_pkt``: classify, check, dispatch. RST first (with cleanup),
        then SYN/SYN-ACK, then ACK (after ``irdma_check_seq``) followed by the FIN it
        may carry, then a FIN alone."""
        flags = seg.flags
        if flags & RST:
            if self.trace is not None:
                log_lines.rst_pkt(self, node)
            send.cleanup(self, node)  # irdma_handle_rst_pkt cleans up first
            self._dispatch(node, states.IN_RST, seg)
            return
        if flags & SYN:
            self._dispatch(node, states.IN_SYNACK if flags & ACK else states.IN_SYN, seg)
            return
        if flags & ACK:
            if not self._check_seq(node, seg, "irdma_handle_ack_pkt"):
                return
            outcome = self._dispatch(node, states.IN_ACK_DATA if seg.payload else states.IN_ACK,
                                    seg)
            if flags & FIN and not outcome.stop:
                self._dispatch(node, states.IN_FIN, seg)
            return
        if flags & FIN:
            if self._check_seq(node, seg, "irdma_process_pkt"):
                self._dispatch(node, states.IN_FIN, seg)
            return
        self._dispatch(node, states.IN_NONE, seg)

    def _check_seq(self, node: CmNode, seg: Segment, fn: str) -> bool:
        """``irdma_check_seq``: False (and the drop recorded) when it refuses."""
        why = check_seq_refusal(seg.seq, seg.ack, loc_seq_num=node.loc_seq_num,
                                rcv_nxt=node.rcv_nxt, rcv_wnd=node.settings.rcv_wnd)
        if why is not None:
            if self.trace is not None:
                log_lines.emit(self, log_lines.SEQ_ERR, conn=node.conn)
            self._drop(seg, fn, why, node)
        return why is None
