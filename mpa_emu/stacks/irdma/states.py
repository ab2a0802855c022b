"""The kernel's state and input vocabulary (cm.h), with the kernel's names and values."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Final

from mpa_emu.wire import flow as wire_flow


class CmState(IntEnum):
    """``enum irdma_cm_node_state`` without the ``IRDMA_CM_STATE_`` prefix.

    The numeric order matters: ``irdma_dec_refcnt_listen`` compares ``state >=
    FIN_WAIT1``.
    """

    UNKNOWN = 0
    INITED = 1
    LISTENING = 2
    SYN_RCVD = 3
    SYN_SENT = 4
    ONE_SIDE_ESTABLISHED = 5
    ESTABLISHED = 6
    ACCEPTING = 7
    MPAREQ_SENT = 8
    MPAREQ_RCVD = 9
    MPAREJ_RCVD = 10
    OFFLOADED = 11
    FIN_WAIT1 = 12
    FIN_WAIT2 = 13
    CLOSE_WAIT = 14
    TIME_WAIT = 15
    LAST_ACK = 16
    CLOSING = 17
    LISTENER_DESTROYED = 18
    CLOSED = 19


class CmEventType(IntEnum):
    """``enum irdma_cm_event_type``: the internal events posted to the ordered
    ``iwarp-event-wq`` by ``irdma_create_event``."""

    UNKNOWN = 0
    ESTABLISHED = 1
    MPA_REQ = 2
    MPA_CONNECT = 3
    MPA_ACCEPT = 4
    MPA_REJECT = 5
    MPA_ESTABLISHED = 6
    CONNECTED = 7
    RESET = 8
    ABORTED = 9


class ListenerState(IntEnum):
    """``enum irdma_cm_listener_state`` (a bit mask; EITHER is a search mask only)."""

    PASSIVE = 1
    ACTIVE = 2
    EITHER = 3


class Input(Enum):
    """What a node reacts to: the packet classes of ``irdma_process_pkt``, the verbs
    (``irdma_connect``, ``irdma_accept``, ``irdma_cm_reject``, ``irdma_cm_close``,
    ``irdma_destroy_listen``), the timers and the asynchronous completions. ``ACK`` and
    ``ACK_DATA`` have passed ``irdma_check_seq``; ``MPA`` is ``irdma_handle_rcv_mpa``,
    reached from the ``ACK_DATA`` rows; ``FIN`` is ``irdma_handle_fin_pkt``, reached
    after an accepted ACK or for a FIN-only segment that passed ``irdma_check_seq``;
    ``NONE`` is a segment with no SYN, ACK, RST or FIN; ``TEARDOWN`` is
    ``irdma_cm_teardown_connections`` reaching a node without QP."""

    SYN = "SYN"
    SYNACK = "SYNACK"
    ACK = "ACK"
    ACK_DATA = "ACK_DATA"
    MPA = "MPA"
    FIN = "FIN"
    RST = "RST"
    NONE = "NONE"
    CONNECT = "connect"
    ACCEPT = "accept"
    REJECT = "reject"
    CLOSE = "close"
    DESTROY_LISTEN = "destroy_listen"
    RETRANS_EXPIRED = "retrans_expired"
    CLOSE_TIMER = "close_timer"
    QHASH_DONE = "qhash_done"
    TEARDOWN = "teardown"

    # Every frame looks its row up by (state, input): Enum's own hash runs Python code
    # on each lookup. Members are singletons, so identity is a faithful hash.
    __hash__ = object.__hash__


# atomic passive_state values (cm.h)
PASSIVE_STATE_INDICATED: Final = 0
DO_NOT_SEND_RESET_EVENT: Final = 1
SEND_RESET_EVENT: Final = 2

NO_VLAN: Final = wire_flow.NO_VLAN
"""The kernel's "no VLAN" sentinel for vlan_id (:data:`mpa_emu.wire.flow.NO_VLAN`);
VLAN_N_VID is 4096."""
VLAN_N_VID: Final = 4096

# Every member as a module-level ``Final`` name. In the compiled build such a name is a
# C static, while ``CmState.X`` is an attribute lookup through ``EnumType.__getattr__`` on
# every use (Python 3.11): the per-frame code reads the members through these.
CM_UNKNOWN: Final = CmState.UNKNOWN
CM_INITED: Final = CmState.INITED
CM_LISTENING: Final = CmState.LISTENING
CM_SYN_RCVD: Final = CmState.SYN_RCVD
CM_SYN_SENT: Final = CmState.SYN_SENT
CM_ONE_SIDE_ESTABLISHED: Final = CmState.ONE_SIDE_ESTABLISHED
CM_ESTABLISHED: Final = CmState.ESTABLISHED
CM_ACCEPTING: Final = CmState.ACCEPTING
CM_MPAREQ_SENT: Final = CmState.MPAREQ_SENT
CM_MPAREQ_RCVD: Final = CmState.MPAREQ_RCVD
CM_MPAREJ_RCVD: Final = CmState.MPAREJ_RCVD
CM_OFFLOADED: Final = CmState.OFFLOADED
CM_FIN_WAIT1: Final = CmState.FIN_WAIT1
CM_FIN_WAIT2: Final = CmState.FIN_WAIT2
CM_CLOSE_WAIT: Final = CmState.CLOSE_WAIT
CM_TIME_WAIT: Final = CmState.TIME_WAIT
CM_LAST_ACK: Final = CmState.LAST_ACK
CM_CLOSING: Final = CmState.CLOSING
CM_LISTENER_DESTROYED: Final = CmState.LISTENER_DESTROYED
CM_CLOSED: Final = CmState.CLOSED

CM_EVENT_UNKNOWN: Final = CmEventType.UNKNOWN
CM_EVENT_ESTABLISHED: Final = CmEventType.ESTABLISHED
CM_EVENT_MPA_REQ: Final = CmEventType.MPA_REQ
CM_EVENT_MPA_CONNECT: Final = CmEventType.MPA_CONNECT
CM_EVENT_MPA_ACCEPT: Final = CmEventType.MPA_ACCEPT
CM_EVENT_MPA_REJECT: Final = CmEventType.MPA_REJECT
CM_EVENT_MPA_ESTABLISHED: Final = CmEventType.MPA_ESTABLISHED
CM_EVENT_CONNECTED: Final = CmEventType.CONNECTED
CM_EVENT_RESET: Final = CmEventType.RESET
CM_EVENT_ABORTED: Final = CmEventType.ABORTED

LISTENER_PASSIVE: Final = ListenerState.PASSIVE
LISTENER_ACTIVE: Final = ListenerState.ACTIVE
LISTENER_EITHER: Final = ListenerState.EITHER

IN_SYN: Final = Input.SYN
IN_SYNACK: Final = Input.SYNACK
IN_ACK: Final = Input.ACK
IN_ACK_DATA: Final = Input.ACK_DATA
IN_MPA: Final = Input.MPA
IN_FIN: Final = Input.FIN
IN_RST: Final = Input.RST
IN_NONE: Final = Input.NONE
IN_CONNECT: Final = Input.CONNECT
IN_ACCEPT: Final = Input.ACCEPT
IN_REJECT: Final = Input.REJECT
IN_CLOSE: Final = Input.CLOSE
IN_DESTROY_LISTEN: Final = Input.DESTROY_LISTEN
IN_RETRANS_EXPIRED: Final = Input.RETRANS_EXPIRED
IN_CLOSE_TIMER: Final = Input.CLOSE_TIMER
IN_QHASH_DONE: Final = Input.QHASH_DONE
IN_TEARDOWN: Final = Input.TEARDOWN
