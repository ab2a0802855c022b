"""The NIC side of a host after ``OFFLOADED``: its QPs, which flows they own, and when
each one next needs the clock.

Once ``irdma_cm_init_tsa_conn`` has handed a connection to the hardware, the NIC's TCP
engine answers every segment of that flow and the CM never sees them again
(``irdma_receive_ilq`` is only reached by the flows the NIC does not own). :class:`Nic`
keeps that steering: the QP per flow (the node-table key), and the QPs' deadlines in one
heap so the core can offer a single next deadline. A QP outlives its CM node while its
TCP still has retransmissions running, and is released when they are done.

The flow of a connection whose node is filed in the node table is steered through that
node (``CmNode.qp``): the NIC is given the table and keeps its own entries only where
the table's answer would be wrong (a QP whose node is gone, or a node whose QP the NIC
no longer steers to), which saves a second table entry per connection.

The QP itself is anything that behaves as :class:`NicQp`;
:class:`~mpa_emu.stacks.irdma.offload.qp.OffloadedQp` is the emulator's own. This module never calls
the CM core: the core asks, the NIC answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from heapq import heappop, heappush
from typing import NamedTuple, Protocol, TypeAlias

from mpa_emu.stacks.irdma.offload.iwqp import IwQp
from mpa_emu.stacks.irdma.offload.qp import OffloadedQp, QpInit
from mpa_emu.stacks.irdma.offload.states import Ae, IwarpState, TcpState
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.interning import shared_flow_int
from mpa_emu.wire.segment import Segment, Transmit


class StoredKey(NamedTuple):
    """A :data:`FlowKey` as a CM node keeps it (``CmNode.key``) and the node table and
    this NIC file it. Equal to (and hashed as) the plain tuple. Declared as a named tuple
    because the compiled build keeps a value declared as a plain fixed-size tuple
    unboxed and boxes a new copy wherever it is read: declared so, one tuple per
    connection is shared by the node and both tables, as in the pure build. The NIC's
    methods take their keys as this type for the same reason: a key passed down as a
    plain tuple would be boxed anew for every table it is looked up in."""

    loc_addr: bytes
    loc_port: int
    rem_addr: bytes
    rem_port: int
    vlan_id: int


def stored_key(key: FlowKey) -> StoredKey:
    """``key`` as a :class:`StoredKey`, its ports and VLAN id shared
    (:func:`~mpa_emu.wire.interning.shared_flow_int`): the two ends of a connection on
    one host, and every connection to one listener, then hold one int per value."""
    if isinstance(key, StoredKey):
        return key
    # The fields as objects: a StoredKey(...) call would have the compiled build box the
    # shared ints anew.
    fields: tuple[object, ...] = (key[0], shared_flow_int(key[1]), key[2],
                                  shared_flow_int(key[3]), shared_flow_int(key[4]))
    return tuple.__new__(StoredKey, fields)


class NicQp(Protocol):
    """What the CM core and the disconnect path use of one hardware QP."""

    @property
    def init(self) -> QpInit:
        """The connection context the QP was created with (``irdma_init_tcp_ctx``)."""

    @property
    def iwqp(self) -> IwQp:
        """The driver's copies of the QP's states (``struct irdma_qp``)."""

    @property
    def tcp_state(self) -> TcpState:
        """The NIC's own TCP state of the connection."""

    @property
    def ae_tcp_state(self) -> TcpState:
        """The TCP state carried by the AEQE last returned by :meth:`next_ae`."""

    @property
    def ae_iwarp_state(self) -> IwarpState:
        """The iWARP state carried by the AEQE last returned by :meth:`next_ae`."""

    @property
    def ae_frame(self) -> bytes | None:
        """The received frame an abnormal AE reports (the kernel's ``q2`` buffer), for
        the Terminate it answers with."""

    @property
    def tcp_alive(self) -> bool:
        """The QP's TCP connection can still send or answer (not CLOSED or TIME_WAIT)."""

    def send_lsmm(self, mpa_reply: bytes, now_ns: int) -> None:
        """Send the passive side's MPA reply as the QP's first message (LSMM)."""

    def send_rtr(self, now_ns: int) -> None:
        """Send the active side's ready-to-receive message (the MPA v2 RTR)."""

    def receive(self, frame: Segment, now_ns: int) -> None:
        """One segment of the flow this QP owns."""

    def modify_qp(self, target: str, now_ns: int, *, reset_tcp_conn: bool | None = None,
                  term: bytes | None = None, send_fin: bool = False) -> None:
        """Move the QP to ``"sqd"`` (graceful), ``"err"`` (abortive) or ``"terminate"``
        (send the Terminate ``term``, then with ``send_fin`` the FIN)."""

    def handle_timer(self, now_ns: int) -> None:
        """Fire what is due at ``now_ns``."""

    def get_timer(self) -> int | None:
        """Absolute ns of the next deadline, None when idle."""

    def frames_to_send(self) -> list[Transmit]:
        """Drain the frames the QP put on the wire."""

    def next_ae(self) -> Ae | None:
        """Pop the next asynchronous event, None when there is none."""


QpFactory = Callable[[QpInit], NicQp]
"""Builds the QP of a connection being offloaded (``OffloadedQp`` by default)."""

HwQp: TypeAlias = OffloadedQp | NicQp
"""A QP as the NIC and the core hold it: the same as :class:`NicQp`, spelled so that the
compiled build calls the emulator's own :class:`~mpa_emu.stacks.irdma.offload.qp.OffloadedQp`
directly (a call through a protocol is a generic Python method call)."""


class QpOwner(Protocol):
    """A node-table entry as the NIC reads it."""

    @property
    def qp(self) -> HwQp | None:
        """The QP the node handed its flow to, None before the offload."""


class Nic:
    """The QPs of one host by flow, and their deadlines.

    ``nodes`` is the host's node table by key (``cm_hash_tbl``); the NIC only reads it.
    The QP of ``key`` is ``nodes[key].qp`` unless the NIC's own table has an entry for
    ``key``, which then wins (a QP, or None for "none"). The core tells the NIC before a
    node that holds a QP leaves or joins the table (:meth:`unfiling`, :meth:`rekeying`),
    so every answer stays what a NIC with a table of its own would give.
    """

    __slots__ = ("_due", "_factory", "_heap", "_nodes", "_own", "_seq")

    def __init__(self, factory: QpFactory | None = None,
                 nodes: Mapping[FlowKey, QpOwner] | None = None) -> None:
        self._factory: QpFactory = OffloadedQp if factory is None else factory
        self._nodes: Mapping[FlowKey, QpOwner] = {} if nodes is None else nodes
        self._own: dict[FlowKey, HwQp | None] = {}
        """The flows the node table cannot answer for: a QP whose node is gone or not
        filed under the key, or None where the filed node's QP is no longer steered."""
        self._heap: list[tuple[int, int, StoredKey]] = []
        self._due: dict[StoredKey, int] = {}
        """The deadline last queued per QP, so an unchanged one is not queued again; a heap
        item is current while it is its QP's entry here."""
        self._seq = 0

    def offload(self, key: StoredKey, init: QpInit, *, filed: bool) -> HwQp:
        """Create the QP of ``key`` (``irdma_cm_init_tsa_conn``); from now on the NIC
        owns the flow. ``filed``: the node being offloaded is the one the node table
        files under ``key`` (and will hold the returned QP), so the table steers it."""
        qp = self._factory(init)
        self._due.pop(key, None)  # a QP that had the flow before: its deadline is gone
        if filed:
            self._own.pop(key, None)
        else:
            self._own[key] = qp
        return qp

    def qp(self, key: StoredKey) -> HwQp | None:
        """The QP owning ``key``, None when the CM owns the flow."""
        node = self._nodes.get(key)
        return self.flow_qp(key, None if node is None else node.qp)

    def flow_qp(self, key: StoredKey, node_qp: HwQp | None) -> HwQp | None:
        """:meth:`qp` for a caller that already looked ``key`` up in the node table:
        ``node_qp`` is the QP of the node filed under it (None without one)."""
        own = self._own
        if own and key in own:
            return own[key]
        return node_qp

    def unfiling(self, node: QpOwner, key: StoredKey) -> None:
        """``node`` is about to leave the node table (destroyed, or given a new VLAN):
        when it is the node filed under ``key`` and holds a QP, the NIC's answer for
        ``key`` moves into its own table."""
        qp = node.qp
        if qp is None or self._nodes.get(key) is not node:
            return
        own = self._own
        if key not in own:
            own[key] = qp
        elif own[key] is None:
            del own[key]  # no node left to mask: the table now answers None itself

    def rekeying(self, node: QpOwner, key: StoredKey, new_key: FlowKey) -> None:
        """``node`` is about to move from ``key`` to ``new_key`` (a new VLAN). The QP's
        flow keeps the key it was created with: ``key`` stays steered to it, and
        ``new_key``, where the table files the node unless another node holds it
        already, is not."""
        self.unfiling(node, key)
        if node.qp is not None and new_key not in self._nodes:
            self._own.setdefault(new_key, None)

    def track(self, key: StoredKey, qp: HwQp, *, node_alive: bool) -> None:
        """Note the QP's next deadline after it ran; a QP whose node is gone and whose
        TCP has nothing left to do and can no longer answer is released."""
        t = qp.get_timer()
        if t is not None:
            if self._due.get(key) != t:
                self._due[key] = t
                self._seq += 1
                heappush(self._heap, (t, self._seq, key))
        else:
            self._due.pop(key, None)
            # A QP whose TCP can still answer (FIN_WAIT_2, or ERROR with the connection
            # alive: RST) keeps its flow after the node is gone.
            if not node_alive and not qp.tcp_alive:
                self.release(key)

    def node_freed(self, key: StoredKey, qp: HwQp) -> None:
        """The CM node of ``key`` was destroyed: its QP stays while its TCP runs or can
        still answer."""
        if qp.get_timer() is None and not qp.tcp_alive:
            self.release(key)

    def release(self, key: StoredKey) -> None:
        """Stop steering ``key`` to a QP (its node is gone and its TCP is done, or a new
        connection reuses the tuple)."""
        node = self._nodes.get(key)
        if node is not None and node.qp is not None:
            self._own[key] = None  # the node stays filed, its QP answers no more
        else:
            self._own.pop(key, None)
        self._due.pop(key, None)

    def release_all(self) -> None:
        """A device reset: the hardware loses every QP, none answers any more."""
        own = self._own
        own.clear()
        for key, node in self._nodes.items():
            if node.qp is not None:
                own[key] = None
        self._due.clear()

    def deadline(self) -> int | None:
        """The earliest QP deadline still current, None when no QP waits."""
        heap = self._heap
        while heap and not self._live(heap[0]):
            heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self) -> StoredKey:
        """Take the QP whose deadline :meth:`deadline` returned."""
        _, _, key = heappop(self._heap)
        self._due.pop(key, None)
        return key

    def _live(self, item: tuple[int, int, StoredKey]) -> bool:
        # The deadline the flow's QP last had (:meth:`track` notes it after every run of
        # the QP; a QP that no longer steers the flow has none): an item is current while
        # it is that deadline.
        return self._due.get(item[2]) == item[0]
