"""Every function of ``drivers/infiniband/hw/cxgb4/cm.c`` and what models it here.

An entry names the ``Cxgb4Core`` method (a verb or a view), or the handler function of
:mod:`~mpa_emu.stacks.cxgb4.cm`, ``upcalls``, ``opening``, ``rdma`` or ``closing`` (or
another object, as a dotted path) that models the function, or says why nothing does:
plumbing with no packet-level behaviour (references, skb pools, tid tables, locking), or
a path the model leaves out (SRQ, the ``enable_fw_ofld_conn`` filter path, ARP failures,
negative advice).
:data:`FUNCTIONS` is the file's function list as read at :data:`KERNEL_VERSION`;
``mpa-emu kernel-map --stack cxgb4`` prints :data:`KERNEL_MAP`. The tests
``tests/stacks/cxgb4/test_cxgb4_kernel_map.py`` and ``tests/stacks/test_kernel_maps.py``
check that the map covers every function once and that every named object exists.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from mpa_emu.stacks.base import MODELLED, NOT_YET, PLUMBING, KernelMap, MapEntry

KERNEL_VERSION = "5.8"
"""The mainline release whose cm.c the map was read from: the file has the XArray tid
tables, the SRQ paths (``read_tcb``, ``complete_cached_srq_buffers``),
``in_dev_for_each_ifa_rcu`` (Linux 5.3) and still ``uninitialized_var`` (gone in 5.9)
and ``prandom_u32`` (the ISS of ``send_connect``): the 5.3 to 5.8 trees, pinned to the
newest of them."""

SOURCE = "drivers/infiniband/hw/cxgb4/cm.c"

FUNCTIONS: tuple[str, ...] = (
    "deref_cm_id", "ref_cm_id", "deref_qp", "ref_qp", "start_ep_timer", "stop_ep_timer",
    "c4iw_l2t_send", "c4iw_ofld_send", "release_tid", "set_emss", "state_read",
    "__state_set", "state_set", "alloc_ep_skb_list", "alloc_ep", "remove_ep_tid",
    "insert_ep_tid", "get_ep_from_tid", "get_ep_from_stid", "_c4iw_free_ep",
    "release_ep_resources", "status2errno", "get_skb", "get_real_dev",
    "arp_failure_discard", "mpa_start_arp_failure", "_put_ep_safe", "_put_pass_ep_safe",
    "queue_arp_failure_cpl", "pass_accept_rpl_arp_failure", "act_open_req_arp_failure",
    "abort_arp_failure", "send_flowc", "send_halfclose", "read_tcb", "send_abort_req",
    "send_abort", "send_connect", "send_mpa_req", "send_mpa_reject", "send_mpa_reply",
    "act_establish", "close_complete_upcall", "peer_close_upcall", "peer_abort_upcall",
    "connect_reply_upcall", "connect_request_upcall", "established_upcall",
    "update_rx_credits", "process_mpa_reply", "process_mpa_request", "rx_data",
    "complete_cached_srq_buffers", "abort_rpl", "send_fw_act_open_req",
    "act_open_has_tid", "neg_adv_str", "set_tcp_window", "import_ep", "c4iw_reconnect",
    "act_open_rpl", "pass_open_rpl", "close_listsrv_rpl", "accept_cr", "reject_cr",
    "pass_accept_req", "pass_establish", "peer_close", "finish_peer_abort", "peer_abort",
    "close_con_rpl", "terminate", "fw4_ack", "c4iw_reject_cr", "c4iw_accept_cr",
    "pick_local_ipaddrs", "get_lladdr", "pick_local_ip6addrs", "c4iw_connect",
    "create_server6", "create_server4", "c4iw_create_listen", "c4iw_destroy_listen",
    "c4iw_ep_disconnect", "active_ofld_conn_reply", "passive_ofld_conn_reply",
    "t4_tcb_get_field64", "t4_tcb_get_field32", "read_tcb_rpl", "deferred_fw6_msg",
    "build_cpl_pass_accept_req", "send_fw_pass_open_req", "rx_pkt", "process_timeout",
    "process_timedout_eps", "process_work", "ep_timeout", "sched", "set_tcb_rpl",
    "fw6_msg", "peer_abort_intr", "c4iw_cm_init", "c4iw_cm_term",
)
"""Every function defined in cm.c, in file order (103)."""

_CORE = "mpa_emu.stacks.cxgb4.core.Cxgb4Core."
_CM = "mpa_emu.stacks.cxgb4.cm."
_UPCALLS = "mpa_emu.stacks.cxgb4.upcalls."
_CLOSING = "mpa_emu.stacks.cxgb4.closing."
_RDMA = "mpa_emu.stacks.cxgb4.rdma."
_OPENING = "mpa_emu.stacks.cxgb4.opening."
_TCP = "mpa_emu.stacks.cxgb4.tcp."


@dataclass(frozen=True, slots=True)
class Cxgb4Entry:
    """One cm.c function: the objects that model it (none for plumbing) and a note."""

    function: str
    models: tuple[str, ...]
    note: str = ""


def _m(function: str, *models: str, note: str = "") -> Cxgb4Entry:
    return Cxgb4Entry(function, tuple(m if "." in m else _CORE + m for m in models), note)


def _p(function: str, note: str) -> Cxgb4Entry:
    return Cxgb4Entry(function, (), note)


ENTRIES: tuple[Cxgb4Entry, ...] = (
    _p("deref_cm_id", "Endpoint.has_cm_id cleared: upcalls stop"),
    _p("ref_cm_id", "Endpoint.has_cm_id set"),
    _p("deref_qp", "refcount"),
    _p("ref_qp", "refcount"),
    _m("start_ep_timer", _CM + "start_ep_timer"),
    _m("stop_ep_timer", _CM + "stop_ep_timer"),
    _p("c4iw_l2t_send", "work request to the adapter: the shared TCP's send"),
    _p("c4iw_ofld_send", "work request to the adapter"),
    _p("release_tid", "tid table"),
    _m("set_emss", _TCP + "advertised_mss", note="the MSS side of the MTU choice"),
    _p("state_read", "locking"),
    _m("__state_set", _CM + "state_set"),
    _m("state_set", _CM + "state_set", note="with its pr_debug line"),
    _p("alloc_ep_skb_list", "skb pool"),
    _m("alloc_ep", _CM + "alloc_ep"),
    _p("remove_ep_tid", "tid table"),
    _p("insert_ep_tid", "tid table"),
    _p("get_ep_from_tid", "the core's socket -> endpoint table"),
    _p("get_ep_from_stid", "the core's listener table"),
    _p("_c4iw_free_ep", "refcount; release_ep_resources drops the endpoint"),
    _m("release_ep_resources", _CM + "release_ep_resources"),
    _m("status2errno", _OPENING + "act_open_rpl", note="CONN_RESET -> -ECONNRESET, timeouts"),
    _p("get_skb", "skb pool"),
    _p("get_real_dev", "netdev lookup"),
    _p("arp_failure_discard", "ARP failures not modelled"),
    _p("mpa_start_arp_failure", "ARP failures not modelled"),
    _p("_put_ep_safe", "ARP failure path"),
    _p("_put_pass_ep_safe", "ARP failure path"),
    _p("queue_arp_failure_cpl", "ARP failure path"),
    _p("pass_accept_rpl_arp_failure", "ARP failures not modelled"),
    _p("act_open_req_arp_failure", "ARP failures not modelled (an unresolved neighbour "
       "refuses connect at once)"),
    _p("abort_arp_failure", "ARP failures not modelled"),
    _p("send_flowc", "flow context of the adapter's TCP (its numbers live in the TCP)"),
    _m("send_halfclose", _CLOSING + "send_halfclose"),
    _p("read_tcb", "SRQ not modelled"),
    _m("send_abort_req", _CLOSING + "send_abort"),
    _m("send_abort", _CLOSING + "send_abort"),
    _m("send_connect", _TCP + "Cxgb4Tcp", _TCP + "cxgb4_shape", _TCP + "cxgb4_iss",
       note="the SYN's options, MSS and ISS"),
    _m("send_mpa_req", _OPENING + "send_mpa_req", "mpa_emu.stacks.cxgb4.frames.mpa_request"),
    _m("send_mpa_reject", _OPENING + "send_mpa_reject", "mpa_emu.stacks.cxgb4.frames.mpa_reply"),
    _m("send_mpa_reply", _OPENING + "send_mpa_reply", "mpa_emu.stacks.cxgb4.frames.mpa_reply"),
    _m("act_establish", _OPENING + "act_establish"),
    _m("close_complete_upcall", _UPCALLS + "close_complete_upcall"),
    _m("peer_close_upcall", _UPCALLS + "peer_close_upcall"),
    _m("peer_abort_upcall", _UPCALLS + "peer_abort_upcall"),
    _m("connect_reply_upcall", _UPCALLS + "connect_reply_upcall"),
    _m("connect_request_upcall", _UPCALLS + "connect_request_upcall"),
    _m("established_upcall", _UPCALLS + "established_upcall"),
    _p("update_rx_credits", "receive credits: the adapter's window stays at rcv_win"),
    _m("process_mpa_reply", _OPENING + "process_mpa_reply", _OPENING + "_negotiate_reply",
       "mpa_emu.stacks.cxgb4.mpa_rx.accumulate"),
    _m("process_mpa_request", _OPENING + "process_mpa_request",
       "mpa_emu.stacks.cxgb4.mpa_rx.accumulate"),
    _m("rx_data", _OPENING + "rx_data"),
    _p("complete_cached_srq_buffers", "SRQ not modelled"),
    _m("abort_rpl", _CLOSING + "abort_rpl"),
    _p("send_fw_act_open_req", "enable_fw_ofld_conn filter path not modelled"),
    _p("act_open_has_tid", "tid table"),
    _p("neg_adv_str", "negative advice not modelled"),
    _m("set_tcp_window", _TCP + "cxgb4_shape", note="rcv_win / snd_win"),
    _p("import_ep", "L2T, route and queue selection"),
    _m("c4iw_reconnect", _CLOSING + "c4iw_reconnect"),
    _m("act_open_rpl", _OPENING + "act_open_rpl", note="CPL_ERR_CONN_EXIST retries not modelled"),
    _p("pass_open_rpl", "the server is installed at once"),
    _p("close_listsrv_rpl", "the server is removed at once"),
    _m("accept_cr", _OPENING + "pass_accept_req", note="the SYN-ACK is the shared TCP's"),
    _p("reject_cr", "a listener in LISTEN always takes the SYN; see pass_accept_req"),
    _m("pass_accept_req", _OPENING + "pass_accept_req"),
    _m("pass_establish", _OPENING + "pass_accept_req"),
    _m("peer_close", _CLOSING + "peer_close"),
    _p("finish_peer_abort", "SRQ not modelled"),
    _m("peer_abort", _CLOSING + "peer_abort"),
    _m("close_con_rpl", _CLOSING + "close_con_rpl", "_check_fin_acked"),
    _m("terminate", _RDMA + "terminate", _RDMA + "rdma_rx"),
    _p("fw4_ack", "the MPA reply is taken as acknowledged at once (c4iw_accept_cr)"),
    _m("c4iw_reject_cr", "reject", _OPENING + "c4iw_reject_cr"),
    _m("c4iw_accept_cr", "accept", _OPENING + "c4iw_accept_cr"),
    _p("pick_local_ipaddrs", "connect to INADDR_ANY not modelled"),
    _p("get_lladdr", "connect to the IPv6 any address not modelled"),
    _p("pick_local_ip6addrs", "connect to the IPv6 any address not modelled"),
    _m("c4iw_connect", "connect"),
    _p("create_server6", "server tid"),
    _p("create_server4", "server tid"),
    _m("c4iw_create_listen", "create_listen"),
    _m("c4iw_destroy_listen", "destroy_listen"),
    _m("c4iw_ep_disconnect", _CLOSING + "c4iw_ep_disconnect", "disconnect", "modify_qp_err",
       "close"),
    _p("active_ofld_conn_reply", "enable_fw_ofld_conn filter path not modelled"),
    _p("passive_ofld_conn_reply", "enable_fw_ofld_conn filter path not modelled"),
    _p("t4_tcb_get_field64", "SRQ not modelled"),
    _p("t4_tcb_get_field32", "SRQ not modelled"),
    _p("read_tcb_rpl", "SRQ not modelled"),
    _p("deferred_fw6_msg", "firmware messages"),
    _p("build_cpl_pass_accept_req", "enable_fw_ofld_conn filter path not modelled"),
    _p("send_fw_pass_open_req", "enable_fw_ofld_conn filter path not modelled"),
    _p("rx_pkt", "enable_fw_ofld_conn filter path not modelled"),
    _m("process_timeout", _CLOSING + "process_timeout"),
    _m("process_timedout_eps", "handle_timer"),
    _p("process_work", "work queue: the core handles events in order"),
    _m("ep_timeout", "handle_timer"),
    _p("sched", "work queue"),
    _p("set_tcb_rpl", "TCB updates"),
    _p("fw6_msg", "firmware messages"),
    _p("peer_abort_intr", "wake-ups before peer_abort"),
    _p("c4iw_cm_init", "module init"),
    _p("c4iw_cm_term", "module exit"),
)


LEGEND = ("kind: E emulated (packet and state level), P plumbing (adapter work requests, "
          "tid tables, references, locks), N a path the model leaves out (the note names it)")


def _map_entry(e: Cxgb4Entry) -> MapEntry:
    number = FUNCTIONS.index(e.function) + 1
    if e.models:
        return MapEntry(number, e.function, "E", e.models, e.note, MODELLED)
    if "not modelled" in e.note:
        return MapEntry(number, e.function, "N", (), e.note, NOT_YET)
    return MapEntry(number, e.function, "P", (), e.note, PLUMBING)


KERNEL_MAP = KernelMap(source=SOURCE, kernel_version=KERNEL_VERSION, functions=FUNCTIONS,
                       entries=tuple(_map_entry(e) for e in ENTRIES), prefix="c4iw_",
                       legend=LEGEND, also=())
"""cxgb4's map, the registry's ``STACKS["cxgb4"].kernel_map``: a function with models
is emulated; one without is plumbing, or a path left out when its note says "not
modelled"."""


def resolve(path: str) -> Any:
    """The object a dotted path names (module attribute, or ``Class.method``)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)
