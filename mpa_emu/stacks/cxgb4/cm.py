"""What cm.c's handlers share of one adapter, and the helpers every one of them calls.

:class:`Cxgb4Cm` is the state a handler is given: the endpoint and listener tables (the
driver's tid tables), the endpoint timers, the adapter's TCP, the module parameters and
the contract's mechanics (``base``: the state change, the trace, the kernel log, the
upcall queue). The handlers are plain functions ``handler(cm, ep, ...)`` named after the
cm.c functions they model, grouped as cm.c groups them:

* here: ``__state_set``/``state_set`` (:func:`state_set`, the one place a state
  changes), ``alloc_ep``, the endpoint timer, ``release_ep_resources``;
* :mod:`mpa_emu.stacks.cxgb4.upcalls`: the iw_cm upcalls;
* :mod:`mpa_emu.stacks.cxgb4.opening`: the CPL handlers of a connection's set-up and the
  MPA exchange (``pass_accept_req``, ``act_establish``, ``process_mpa_request``,
  ``c4iw_accept_cr`` ...);
* :mod:`mpa_emu.stacks.cxgb4.rdma`: RDMA mode, the firmware after ``FW_RI_INIT_WR``;
* :mod:`mpa_emu.stacks.cxgb4.closing`: the timeout and the close and abort paths
  (``c4iw_ep_disconnect``, ``peer_close``, ``peer_abort`` ...).

``Cxgb4Core`` (:mod:`mpa_emu.stacks.cxgb4.core`) holds one and calls them.
"""

from __future__ import annotations

from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.cxgb4.endpoint import Endpoint, ListenEp
from mpa_emu.stacks.cxgb4.params import Cxgb4Params
from mpa_emu.stacks.cxgb4.states import (
    STATE_TEXT,
    EpState,
)
from mpa_emu.stacks.cxgb4.tcp import Cxgb4Tcp
from mpa_emu.stacks.deadlines import Deadlines

S = EpState
SECOND = 1_000_000_000

# CPL status values of act_open_rpl / peer_abort that the model produces (enum CPL_error,
# drivers/net/ethernet/chelsio/cxgb4/t4_msg.h).
CPL_ERR_CONN_RESET = 20
CPL_ERR_XMIT_TIMEDOUT = 31
CPL_ERR_FINWAIT2_TIMEDOUT = 33


class Cxgb4Cm:
    """One adapter's connection manager state, given to every handler (see the module
    docstring)."""

    def __init__(self, p: Cxgb4Params, tcp: Cxgb4Tcp, base: CoreBase) -> None:
        self.p = p
        self.tcp = tcp
        self.base = base
        """The contract's mechanics: state changes, trace, kernel log, upcall queue."""
        self.eps: dict[int, Endpoint] = {}
        """The endpoints not yet released, by connection id."""
        self.ep_timers = Deadlines(self._holds_ep_timer)
        """The endpoints' timers (``Endpoint.timer_due``), by connection id."""
        self.by_sock: dict[int, Endpoint] = {}
        self.listeners: dict[int, ListenEp] = {}
        self.by_tcp_listener: dict[int, ListenEp] = {}
        self.fin_sent: set[int] = set()
        """Sockets whose FIN went out and whose CPL_CLOSE_CON_RPL has not come."""
        self.next_conn = 1

    def _holds_ep_timer(self, conn: int, at: int) -> bool:
        ep = self.eps.get(conn)
        return ep is not None and ep.timer_due == at


def unwatch(cm: Cxgb4Cm, ep: Endpoint) -> None:
    if ep.conn not in cm.eps:
        cm.base.node_freed(ep.conn)


def state_set(cm: Cxgb4Cm, ep: Endpoint | ListenEp, new: EpState, fn: str, *,
               logged: bool = False) -> None:
    """``__state_set`` (``logged``: ``state_set``, which prints the change): the one
    place an endpoint's or listener's state changes. The watch hears of endpoints
    only, created with their 4-tuple at their first change."""
    if logged:
        cm.base.kernel_log("debug", "state_set",
                             f"{STATE_TEXT[ep.state]} -> {STATE_TEXT[new]}",
                             dynamic_debug=True)
    if isinstance(ep, Endpoint):
        cm.base.set_state(ep, new, fn, ep.conn,
                            ports=(ep.local_port, ep.remote_ip, ep.remote_port))
    else:
        cm.base.set_state(ep, new, fn, ep.ident, tell=False)


def alloc_ep(cm: Cxgb4Cm, initiator: bool, addrs: tuple[bytes, int, bytes, int]) -> Endpoint:
    ep = Endpoint(cm.next_conn, initiator, addrs[0], addrs[1], addrs[2], addrs[3],
                  state=S.IDLE)
    cm.next_conn += 1
    cm.eps[ep.conn] = ep
    return ep


def ep_send(cm: Cxgb4Cm, ep: Endpoint, data: bytes, comment: str) -> None:
    if ep.sock is not None:
        cm.tcp.send(ep.sock, data, cm.base.now_ns, comment)


def start_ep_timer(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``start_ep_timer``: ``ep_timeout_secs`` from now (pr_err if already running)."""
    if ep.timer_due is not None:
        cm.base.kernel_log("err", "start_ep_timer", f"start_ep_timer timer already started! "
                             f"ep#{ep.conn}")
        return
    ep.timer_due = cm.ep_timers.arm(ep.conn,
                                       cm.base.now_ns + cm.p.ep_timeout_secs * SECOND)


def stop_ep_timer(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``stop_ep_timer``."""
    ep.timer_due = None


def release_ep_resources(cm: Cxgb4Cm, ep: Endpoint) -> None:
    """``release_ep_resources``: the endpoint leaves the tables (a request the ULP
    still holds stays until it answers)."""
    if ep.sock is not None:
        cm.by_sock.pop(ep.sock, None)
        cm.fin_sent.discard(ep.sock)
    stop_ep_timer(cm, ep)
    if not ep.held:
        cm.eps.pop(ep.conn, None)
        unwatch(cm, ep)


def release_if_dead(cm: Cxgb4Cm, ep: Endpoint) -> None:
    if ep.state == S.DEAD and ep.sock not in cm.by_sock:
        cm.eps.pop(ep.conn, None)
        unwatch(cm, ep)
