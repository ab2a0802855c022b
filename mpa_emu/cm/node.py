"""The per-connection ``irdma_cm_node`` and the listener, small and slotted.

Fields keep the kernel's names (``tcp_cntxt`` members are flattened onto the node; the
``tcp_cntxt`` property gives the kernel's grouping as a snapshot). The fields written
only a few times per connection live in one :class:`NodeSettings` record that nodes with
equal values share. Refcounts are kept only as far as they decide when a node is freed
or leaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from mpa_emu.stacks.irdma.mpa_policy import Negotiated, Rdma0Op
from mpa_emu.stacks.irdma.offload.nic import HwQp, stored_key
from mpa_emu.stacks.irdma.states import CM_UNKNOWN, LISTENER_ACTIVE
from mpa_emu.wire.flow import FlowKey
from mpa_emu.wire.interning import SharedRecords
from mpa_emu.wire.segment import Segment, Transmit


class SendEntry:
    """``irdma_timer_entry`` of type SEND: one retransmittable frame."""

    __slots__ = ("due", "live", "node", "retranscount", "transmit")

    def __init__(self, node: CmNode, transmit: Transmit, due: int, retrans: int) -> None:
        self.node = node
        self.transmit = transmit
        self.due = due
        self.retranscount = retrans
        self.live = True


class CloseEntry:
    """``irdma_timer_entry`` of type CLOSE (TIME_WAIT, ``sqbuf == NULL``)."""

    __slots__ = ("due", "live", "node")

    def __init__(self, node: CmNode, due: int) -> None:
        self.node = node
        self.due = due
        self.live = True


@dataclass(frozen=True, slots=True)
class TcpContext:
    """``struct irdma_tcp_context`` as a read-only snapshot."""

    client: bool
    loc_id: int
    loc_seq_num: int
    loc_ack_num: int
    rem_ack_num: int
    rcv_nxt: int
    rcv_wnd: int
    snd_wnd: int
    max_snd_wnd: int
    snd_wscale: int
    rcv_wscale: int
    mss: int


class Listener:
    """``irdma_cm_listener``: one ``create_listen`` (a parent; wildcard parents hold one
    child per local address for the SYN qhash, ``irdma_add_mqh``)."""

    __slots__ = ("backlog", "children", "ident", "ipv4", "listener_state", "loc_addr",
                 "loc_port", "pend_accepts_cnt", "qhash_set", "refcnt", "reused_node",
                 "tos", "vlan_id", "wildcard")

    def __init__(self, ident: int, loc_addr: bytes, loc_port: int, ipv4: bool,
                 vlan_id: int, backlog: int, wildcard: bool) -> None:
        self.ident = ident
        self.loc_addr = loc_addr
        self.loc_port = loc_port
        self.ipv4 = ipv4
        self.vlan_id = vlan_id
        self.backlog = backlog
        self.wildcard = wildcard
        self.listener_state = LISTENER_ACTIVE
        self.pend_accepts_cnt = 0
        self.refcnt = 1
        self.reused_node = False
        self.qhash_set = False
        self.tos = 0
        self.children: list[ChildListener] = []


class ChildListener:
    """A wildcard listener's per-address child: it only holds a SYN qhash rule."""

    __slots__ = ("loc_addr", "qhash_set", "vlan_id")

    def __init__(self, loc_addr: bytes, vlan_id: int) -> None:
        self.loc_addr = loc_addr
        self.vlan_id = vlan_id
        self.qhash_set = True


REFCOUNT_SATURATED: Final = 0xC000_0000
"""``REFCOUNT_SATURATED`` of ``refcount_t``: where a count goes once ``refcount_dec`` hit
zero. Far from zero, so later gets and puts never free the node (it leaks, as in the
kernel)."""


# Bits of CmNode._flags: the node's yes/no fields read only a few times per connection,
# in one int (a slot each would cost 8 bytes per connection). The flags read on nearly
# every input stay slots of their own: a property costs the cycle more than it saves.
_QP_LINKED: Final = 0x1
_HELD_BY_APP: Final = 0x2
_ACK_RCVD: Final = 0x4
_QP_ERROR: Final = 0x8
_RCV_MARK_EN: Final = 0x10
_SND_MARK_EN: Final = 0x20
_ACCEPT_PEND: Final = 0x40


class NodeSettings(NamedTuple):
    """The fields of ``irdma_cm_node`` (and its ``tcp_cntxt``) that are written only a
    few times per connection (at ``irdma_make_cm_node``, by the TCP options, the MPA
    negotiation, ``irdma_record_ird_ord``, accept and reject) and that nearly every
    connection of a host holds with the same values. A node holds one record, shared
    (:data:`SETTINGS`): read a field as ``node.settings.mss``, write with
    ``node.update_settings(mss=...)``, which puts the shared record with the change in
    place, so nodes never see each other's writes. Every field holds exactly its declared
    type (never a bool for an int)."""

    tos: int
    """IP TOS of the node's frames."""
    user_pri: int
    """802.1p priority (``rt_tos2priority(tos)``)."""
    rem_mac: bytes
    """The peer's (or, on loopback, our own) MAC address."""
    rcv_wnd: int
    """``tcp_cntxt.rcv_wnd`` (a u32; the header field is cut to 16 bits)."""
    rcv_wscale: int
    """``tcp_cntxt.rcv_wscale``."""
    mss: int
    """``tcp_cntxt.mss``."""
    snd_wscale: int
    """``tcp_cntxt.snd_wscale``."""
    snd_wnd: int
    """``tcp_cntxt.snd_wnd``."""
    max_snd_wnd: int
    """``tcp_cntxt.max_snd_wnd``."""
    mpa_frame_rev: int
    """MPA revision of the connection (1 or 2)."""
    mpav2_ird_ord: int
    """The IRD/ORD word of an MPA v2 request or reply."""
    ird_size: int
    """Inbound RDMA reads."""
    ord_size: int
    """Outbound RDMA reads."""
    rdma0_write: int
    """``send_rdma0_op``, the RTR's zero-length operation: 1 for a write, 0 for a read
    (an int: an enum member would hash in Python code each time a record is shared)."""
    pdata_size: int
    """Length of the private data (``pdata.size``)."""
    lsmm_size: int
    """Length of the MPA reply the QP sends as its LSMM."""
    passive_state: int
    """Peer resets seen after the CONNECT_REQUEST (``SEND_RESET_EVENT``)."""
    listener: Listener | None
    """The listener of a passive node, None on the active side."""


    @property
    def send_rdma0_op(self) -> Rdma0Op:
        """``send_rdma0_op``: the RTR's zero-length operation (from :attr:`rdma0_write`)."""
        return RDMA0_OPS[self.rdma0_write]


SETTINGS: Final[SharedRecords[NodeSettings]] = SharedRecords(NodeSettings, NodeSettings._fields)
"""The shared node settings records, and the steps between them."""

# The fields CmNode's record_* methods write together (SETTINGS.changed_fields).
_MADE: Final[tuple[str, ...]] = (
    "tos", "user_pri", "rem_mac", "mpa_frame_rev", "ird_size", "ord_size", "rcv_wscale",
    "rcv_wnd", "mss", "listener")
_IRD_ORD: Final[tuple[str, ...]] = ("ird_size", "ord_size")
_LSMM: Final[tuple[str, ...]] = ("lsmm_size", "pdata_size")
_TCP_OPTIONS: Final[tuple[str, ...]] = ("mss", "snd_wscale", "snd_wnd", "max_snd_wnd")
_MPA: Final[tuple[str, ...]] = ("mpa_frame_rev", "pdata_size")
_MPA_NEGOTIATED: Final[tuple[str, ...]] = (
    "mpa_frame_rev", "pdata_size", "ird_size", "ord_size", "mpav2_ird_ord", "rdma0_write")

RDMA0_OPS: Final = (Rdma0Op.READ_ZERO, Rdma0Op.WRITE_ZERO)
"""The :class:`Rdma0Op` of each ``NodeSettings.rdma0_write`` code."""


def rdma0_code(op: Rdma0Op) -> int:
    """``NodeSettings.rdma0_write`` for ``op``."""
    return 1 if op is Rdma0Op.WRITE_ZERO else 0


INITIAL_SETTINGS: Final = NodeSettings(
    tos=0, user_pri=0, rem_mac=b"", rcv_wnd=0xFFFF, rcv_wscale=2,
    mss=1460, snd_wscale=0, snd_wnd=0, max_snd_wnd=0, mpa_frame_rev=2, mpav2_ird_ord=0,
    ird_size=0, ord_size=0, rdma0_write=0, pdata_size=0, lsmm_size=0,
    passive_state=0, listener=None)
"""The settings of a node ``CmNode()`` just made (``irdma_make_cm_node`` then fills
them in, :func:`mpa_emu.stacks.irdma.nodes.make_cm_node`)."""


class CmNode:
    """``irdma_cm_node``: one half connection in the node table."""

    __slots__ = (
        "_flags", "accelerated", "ah_valid", "client", "close_entry",
        "cm_id", "conn", "do_lpb", "ipv4", "key", "loc_ack_num", "loc_id", "loc_seq_num",
        "pdata", "qhash_pending", "qhash_set", "qp", "rcv_nxt", "refcnt", "rem_ack_num",
        "rts_deadline", "send_entry", "settings", "state",
    )

    def __init__(self, conn: int, key: FlowKey) -> None:
        self.conn = conn
        self.key = stored_key(key)
        """The node-table key of ``irdma_find_node``: addresses, ports and VLAN (the
        node's ``loc_addr``, ``loc_port``, ``rem_addr``, ``rem_port`` and ``vlan_id``,
        which the table holds anyway, so the node keeps them only here)."""
        self._flags = 0
        self.state = CM_UNKNOWN
        self.refcnt = 1
        # Read for nearly every frame or input: slots of their own, not _flags bits.
        self.do_lpb = False
        """Loopback: frames stay inside the host."""
        self.client = False
        """``tcp_cntxt.client``: the active side."""
        self.accelerated = False
        """The connection was handed to the NIC (``cm_node->accelerated``)."""
        self.ah_valid = False
        """The address handle was created (``cm_node->ah``)."""
        self.cm_id = False
        """``cm_node->cm_id != NULL``."""
        self.ipv4 = len(key[0]) == 4
        """The node's addresses are IPv4."""
        self.qhash_set = False
        """The connection's qhash rule is installed."""
        self.qhash_pending = False
        """The conn-established qhash/AH completion has not arrived yet."""
        self.settings = INITIAL_SETTINGS
        """The node's per-connection settings, one record shared by every node with the
        same values (written through :meth:`update_settings`)."""
        self.loc_id = 0x3B47
        """``tcp_cntxt.loc_id``: the last IPv4 id of a GEN_1 frame (a slot: on GEN_1 it
        changes with every frame)."""
        self.loc_seq_num = 0
        self.loc_ack_num = 0
        self.rem_ack_num = 0
        self.rcv_nxt = 0
        self.pdata = b""
        """Private data (a slot: it may differ for every connection)."""
        self.send_entry: SendEntry | None = None
        self.close_entry: CloseEntry | None = None
        self.qp: HwQp | None = None
        """The NIC's QP the flow was handed to (``irdma_cm_init_tsa_conn``), None before."""
        self.rts_deadline: int | None = None

    def update_settings(self, **changes: object) -> None:
        """Fields of :attr:`settings` changed, by name (``update_settings(mss=1460)``):
        the shared record with them in place."""
        if len(changes) == 1:
            for name, value in changes.items():
                self.settings = SETTINGS.changed_field(self.settings, name, value)
        else:
            self.settings = SETTINGS.changed(self.settings, changes)

    def record_made(self, *, tos: int, user_pri: int, rem_mac: bytes, mpa_frame_rev: int,
                    ird_size: int, ord_size: int, rcv_wscale: int, rcv_wnd: int, mss: int,
                    listener: Listener | None) -> None:
        """The settings ``irdma_make_cm_node`` gives a new node."""
        self._update(_MADE, (tos, user_pri, rem_mac, mpa_frame_rev, ird_size, ord_size,
                             rcv_wscale, rcv_wnd, mss, listener))

    def record_ird_ord(self, ird_size: int, ord_size: int) -> None:
        """IRD and ORD at once (``irdma_record_ird_ord``)."""
        self._update(_IRD_ORD, (ird_size, ord_size))

    def record_lsmm(self, lsmm_size: int, pdata_size: int) -> None:
        """The MPA reply ``irdma_accept`` hands the QP as its LSMM, and its private
        data length."""
        self._update(_LSMM, (lsmm_size, pdata_size))

    def record_tcp_options(self, mss: int, snd_wscale: int, snd_wnd: int) -> None:
        """What ``irdma_handle_tcp_options`` stores: the MSS and window scale the
        options gave, the peer's scaled window and the largest one seen."""
        self._update(_TCP_OPTIONS,
                     (mss, snd_wscale, snd_wnd, max(self.settings.max_snd_wnd, snd_wnd)))

    def record_mpa(self, rev: int, pdata_size: int, neg: Negotiated | None) -> None:
        """What ``irdma_parse_mpa`` stores: the revision, the private data length and
        the IRD/ORD and RTR ``irdma_negotiate_mpa_v2_ird_ord`` settled on, if any."""
        if neg is None:
            self._update(_MPA, (rev, pdata_size))
        else:
            self._update(_MPA_NEGOTIATED,
                         (rev, pdata_size, neg.ird_size, neg.ord_size, neg.mpav2_ird_ord,
                          rdma0_code(neg.send_rdma0_op)))

    def _update(self, names: tuple[str, ...], values: tuple[object, ...]) -> None:
        # update_settings for the fixed sets of fields above, named by constant tuples
        self.settings = SETTINGS.changed_fields(self.settings, names, values)

    @property
    def loc_addr(self) -> bytes:
        """Local address (4 or 16 bytes)."""
        return self.key[0]

    @property
    def loc_port(self) -> int:
        """Local TCP port."""
        return self.key[1]

    @property
    def rem_addr(self) -> bytes:
        """Remote address."""
        return self.key[2]

    @property
    def rem_port(self) -> int:
        """Remote TCP port."""
        return self.key[3]

    @property
    def vlan_id(self) -> int:
        """VLAN id, 0xFFFF when untagged (changed only with the key,
        :meth:`mpa_emu.stacks.irdma.nodes.NodeTable.rekey_vlan`)."""
        return self.key[4]

    @property
    def qp_linked(self) -> bool:
        """``iwqp->cm_node`` points to this node."""
        return bool(self._flags & _QP_LINKED)

    @qp_linked.setter
    def qp_linked(self, value: bool) -> None:
        self._flags = self._flags | _QP_LINKED if value else self._flags & ~_QP_LINKED

    @property
    def accept_pend(self) -> bool:
        """The passive node counts in the listener's ``pend_accepts_cnt`` (a bit of the
        flags: with it the node's bool fields fit 8 bytes, and the node one size class
        smaller)."""
        return bool(self._flags & _ACCEPT_PEND)

    @accept_pend.setter
    def accept_pend(self, value: bool) -> None:
        self._flags = self._flags | _ACCEPT_PEND if value else self._flags & ~_ACCEPT_PEND

    @property
    def ack_rcvd(self) -> bool:
        """The last frame sent was acknowledged (no resend needed)."""
        return bool(self._flags & _ACK_RCVD)

    @ack_rcvd.setter
    def ack_rcvd(self, value: bool) -> None:
        self._flags = self._flags | _ACK_RCVD if value else self._flags & ~_ACK_RCVD

    @property
    def held_by_app(self) -> bool:
        """A passive node the CONNECT_REQUEST upcall handed to the application
        (``event.provider_data``, the only way ``irdma_accept``/``irdma_reject`` get it)
        and not yet given back by a reject or a failed accept."""
        return bool(self._flags & _HELD_BY_APP)

    @held_by_app.setter
    def held_by_app(self, value: bool) -> None:
        self._flags = self._flags | _HELD_BY_APP if value else self._flags & ~_HELD_BY_APP

    @property
    def qp_error(self) -> bool:
        """The driver QP was moved to ERR before offload (``iwarp_state`` ERROR), so
        ``irdma_modify_qp(RTS)`` will fail."""
        return bool(self._flags & _QP_ERROR)

    @qp_error.setter
    def qp_error(self, value: bool) -> None:
        self._flags = self._flags | _QP_ERROR if value else self._flags & ~_QP_ERROR

    @property
    def rcv_mark_en(self) -> bool:
        """MPA markers expected on receive."""
        return bool(self._flags & _RCV_MARK_EN)

    @rcv_mark_en.setter
    def rcv_mark_en(self, value: bool) -> None:
        self._flags = self._flags | _RCV_MARK_EN if value else self._flags & ~_RCV_MARK_EN

    @property
    def snd_mark_en(self) -> bool:
        """MPA markers to be sent."""
        return bool(self._flags & _SND_MARK_EN)

    @snd_mark_en.setter
    def snd_mark_en(self, value: bool) -> None:
        self._flags = self._flags | _SND_MARK_EN if value else self._flags & ~_SND_MARK_EN

    @property
    def tcp_cntxt(self) -> TcpContext:
        """The kernel's ``tcp_cntxt`` grouping, as a snapshot."""
        s = self.settings
        return TcpContext(self.client, self.loc_id, self.loc_seq_num, self.loc_ack_num,
                          self.rem_ack_num, self.rcv_nxt, s.rcv_wnd, s.snd_wnd,
                          s.max_snd_wnd, s.snd_wscale, s.rcv_wscale, s.mss)


def segment_key(seg: Segment, vlan_id: int) -> tuple[bytes, int, bytes, int, int]:
    """The node-table key a received segment looks up (local = destination)."""
    return (seg.dst_ip, seg.dport, seg.src_ip, seg.sport, vlan_id)
