"""Read-only snapshots of the core's nodes and listeners for users and other modules."""

from __future__ import annotations

from dataclasses import dataclass

from mpa_emu.stacks.irdma.node import CmNode, Listener
from mpa_emu.stacks.irdma.states import CmState, ListenerState


@dataclass(frozen=True, slots=True)
class NodeView:
    """One ``irdma_cm_node`` as seen from outside, with the kernel's field names.

    ``client`` is ``tcp_cntxt.client`` (the active side); ``vlan_id`` is 0xFFFF when
    untagged; ``send_rdma0_op`` is ``"read"`` or ``"write"``; ``refcnt`` counts the
    references the kernel would hold (base, retransmission entry, queued events, pending
    qhash completion).
    """

    conn: int
    state: CmState
    client: bool
    loc_addr: bytes
    loc_port: int
    rem_addr: bytes
    rem_port: int
    vlan_id: int
    loc_seq_num: int
    loc_ack_num: int
    rem_ack_num: int
    rcv_nxt: int
    snd_wnd: int
    snd_wscale: int
    rcv_wscale: int
    mss: int
    mpa_frame_rev: int
    ird_size: int
    ord_size: int
    send_rdma0_op: str
    passive_state: int
    accept_pend: bool
    ack_rcvd: bool
    accelerated: bool
    do_lpb: bool
    ah_valid: bool
    refcnt: int
    retransmitting: bool
    close_timer: bool
    listener: int | None
    offloaded_qp: bool
    qhash_set: bool = False
    """The connection's own TCP_ESTABLISHED qhash entry is installed (``irdma_connect``,
    the passive SYN's completion); cleared when the QP takes over."""
    qp_error: bool = False
    """The QP went to ERR before offload (``irdma_modify_qp(RTS)`` will fail)."""

    @classmethod
    def of(cls, n: CmNode) -> NodeView:
        """Snapshot a node."""
        st = n.settings
        return cls(
            conn=n.conn, state=n.state, client=n.client, loc_addr=n.loc_addr,
            loc_port=n.loc_port, rem_addr=n.rem_addr, rem_port=n.rem_port,
            vlan_id=n.vlan_id, loc_seq_num=n.loc_seq_num, loc_ack_num=n.loc_ack_num,
            rem_ack_num=n.rem_ack_num, rcv_nxt=n.rcv_nxt, snd_wnd=st.snd_wnd,
            snd_wscale=st.snd_wscale, rcv_wscale=st.rcv_wscale, mss=st.mss,
            mpa_frame_rev=st.mpa_frame_rev, ird_size=st.ird_size, ord_size=st.ord_size,
            send_rdma0_op=st.send_rdma0_op.value, passive_state=st.passive_state,
            accept_pend=n.accept_pend, ack_rcvd=n.ack_rcvd, accelerated=n.accelerated,
            do_lpb=n.do_lpb, ah_valid=n.ah_valid, refcnt=n.refcnt,
            retransmitting=n.send_entry is not None, close_timer=n.close_entry is not None,
            listener=st.listener.ident if st.listener is not None else None,
            offloaded_qp=n.qp is not None, qhash_set=n.qhash_set, qp_error=n.qp_error)


@dataclass(frozen=True, slots=True)
class ListenerView:
    """One listener (``irdma_cm_listener``) as seen from outside."""

    ident: int
    loc_addr: bytes
    loc_port: int
    ipv4: bool
    vlan_id: int
    wildcard: bool
    backlog: int
    pend_accepts_cnt: int
    state: ListenerState
    refcnt: int
    children: tuple[tuple[bytes, int, bool], ...]
    """(address, vlan_id, qhash_set) of each wildcard child."""
    qhash_set: bool = False
    """A specific listener's own TCP_SYN qhash entry is installed."""

    @property
    def syn_qhash_installed(self) -> bool:
        """Whether a TCP_SYN qhash entry steers SYNs to this listener: its own
        (``qhash_set``) for a specific address, any child's for a wildcard listener."""
        return self.qhash_set or any(child[2] for child in self.children)

    @classmethod
    def of(cls, lst: Listener) -> ListenerView:
        """Snapshot a listener."""
        return cls(lst.ident, lst.loc_addr, lst.loc_port, lst.ipv4, lst.vlan_id,
                   lst.wildcard, lst.backlog, lst.pend_accepts_cnt, lst.listener_state,
                   lst.refcnt, tuple((c.loc_addr, c.vlan_id, c.qhash_set)
                                     for c in lst.children), lst.qhash_set)


@dataclass(frozen=True, slots=True)
class QpView:
    """The QP of one connection, read-only, with the kernel's state names.

    ``iwarp_state`` is ``iwqp->iwarp_state`` (what the driver last asked for:
    ``IDLE``, ``RTS``, ``CLOSING``, ``TERMINATE``, ``ERROR``...), ``hw_iwarp_state`` and
    ``hw_tcp_state`` the copies the AEs keep, ``ibqp_state`` the verbs state
    (``RTS``, ``SQD``, ``ERR``...), and ``tcp_state`` the NIC's own TCP state of the
    offloaded connection (``NON_EXISTENT`` before offload). ``offloaded`` tells whether
    the NIC holds the connection's TCP context (after a successful RTS).
    """

    conn: int
    offloaded: bool
    iwarp_state: str
    hw_iwarp_state: str
    ibqp_state: str
    hw_tcp_state: str
    tcp_state: str
