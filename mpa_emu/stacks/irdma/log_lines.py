"""What irdma's cm.c writes to the kernel log at the points the model reaches, as trace
records of kind ``kernel_log``.

Each :class:`LogLine` keeps the kernel's format string as cm.c has it, its level and
whether dynamic debug must be on to see it (``ibdev_dbg``: only with
``echo 'module irdma +p' > /sys/kernel/debug/dynamic_debug/control``). Every line of
cm.c is an ``ibdev_dbg`` but one: ``irdma_make_cm_node``'s ``ibdev_warn`` about a TOS
mismatch between the listener and the client.

The record's ``text`` is the format filled in as the kernel prints it, without the
device prefix ``ibdev_printk`` adds and without the trailing newline:

* ``%p``: the kernel prints a hashed pointer (16 hex digits, the upper 8 zero on a
  64-bit machine; NULL as 16 zeros). The emulator has no pointers: it prints a stable
  stand-in derived from the host, the object and its id, so the same object has the same
  "pointer" in every line of a run.
* ``%pI4`` of the node's ``loc_addr``/``rem_addr``: those arrays hold the address in
  host order, and ``%pI4`` prints the first four bytes of memory, so on a little-endian
  machine (x86_64, where E810 and X722 live) 192.0.2.1 prints as ``1.2.0.192``. The
  emulator prints it so.
* ``%pS``: the caller's symbol with its offset; the offsets of a build are not modelled
  and print as ``+0x?/0x?``.

Lines are emitted only when the core keeps a trace (the call sites test ``cm.trace``
first, as for every other record), and only for the irdma profile (a core playing a siw
or plain MPA v1 peer does not run cm.c).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mpa_emu.stacks.irdma.nodes import rt_tos2priority

if TYPE_CHECKING:
    from mpa_emu.stacks.irdma.contract import CoreOps
    from mpa_emu.stacks.irdma.node import CmNode, Listener

Level = Literal["debug", "info", "warn", "err"]
"""The kernel's log levels as the record names them."""

NULL = "0000000000000000"
"""How ``%p`` prints a NULL pointer."""


@dataclass(frozen=True, slots=True)
class LogLine:
    """One ``ibdev_dbg``/``ibdev_warn`` call of cm.c: its function, level, the format
    string as the source has it, and whether only dynamic debug shows it."""

    fn: str
    level: Level
    fmt: str
    dynamic_debug: bool = True


def _dbg(fn: str, fmt: str) -> LogLine:
    return LogLine(fn, "debug", fmt, True)


SEND_CM_EVENT = _dbg("irdma_send_cm_event", "CM: cm_node %p cm_id=%p state=%d accel=%d "
                     "event_type=%d status=%d\n")
"""Printed before every upcall. The arguments come as ``accelerated, state``: the value
after ``state=`` is ``accelerated`` and the one after ``accel=`` the node state."""
CREATE_EVENT = _dbg("irdma_create_event", "CM: node=%p event=%p type=%u dst=%pI4 "
                    "src=%pI4\n")
"""``dst`` prints the local address and ``src`` the remote one."""
SEND_RESET = _dbg("irdma_send_reset", "CM: caller: %pS cm_node %p cm_id=%p accel=%d "
                  "state=%d rem_port=0x%04x, loc_port=0x%04x rem_addr=%pI4 "
                  "loc_addr=%pI4\n")
ACTIVE_OPEN_ERR = _dbg("irdma_active_open_err", "CM: cm_node=%p state=%d\n")
PASSIVE_OPEN_ERR = _dbg("irdma_passive_open_err", "CM: cm_node=%p state =%d\n")
MSS_OPTION = _dbg("irdma_process_options", "CM: MSS Length: %d Offset: %d Size: %d\n")
UNSUPPORTED_OPTION = _dbg("irdma_process_options", "CM: Unsupported TCP Option: %x\n")
OPTIONS_RESET = _dbg("irdma_handle_tcp_options", "CM: Node %p, Sending Reset\n")
NEGOTIATED = _dbg("irdma_negotiate_mpa_v2_ird_ord", "CM: MPAV2 Negotiated ORD: %d, "
                  "IRD: %d\n")
PARSE_MPA = (
    _dbg("irdma_parse_mpa", "CM: ietf buffer small (%x)\n"),
    _dbg("irdma_parse_mpa", "CM: private_data too big %d\n"),
    _dbg("irdma_parse_mpa", "CM: unsupported mpa rev = %d\n"),
    _dbg("irdma_parse_mpa", "CM: rev %d\n"),
    _dbg("irdma_parse_mpa", "CM: Unexpected MPA Key received\n"),
    _dbg("irdma_parse_mpa", "CM: ietf buffer len(%x + %x != %x)\n"),
    _dbg("irdma_parse_mpa", "CM: ietf buffer large len = %d\n"),
)
"""The lines of ``irdma_parse_mpa``'s checks 1 to 7, in the kernel's order (check 8, the
IRD/ORD negotiation, fails without a line)."""
STATE_FOR_REJECT = _dbg("irdma_handle_rcv_mpa", "CM: state for reject\n")
WRONG_STATE = _dbg("irdma_handle_rcv_mpa", "CM: wrong cm_node state =%d\n")
BAD_EVENT_TYPE = _dbg("irdma_cm_event_handler", "CM: bad event type = %d\n")
FIN_BAD_STATE = _dbg("irdma_handle_fin_pkt", "CM: bad state node state = %d\n")
RST_PKT = _dbg("irdma_handle_rst_pkt", "CM: caller: %pS cm_node=%p state=%d "
               "rem_port=0x%04x loc_port=0x%04x rem_addr=%pI4 loc_addr=%pI4\n")
SEQ_ERR = _dbg("irdma_check_seq", "CM: seq number err\n")
CHECK_SYN_FAIL = _dbg("irdma_handle_synack_pkt", "CM: check syn fail\n")
NO_LISTENER = _dbg("irdma_receive_ilq", "CM: no listener found\n")
TOS_MISMATCH = LogLine("irdma_make_cm_node", "warn",
                       "application TOS[%d] and remote client TOS[%d] mismatch\n", False)
LISTENER_DCB = _dbg("irdma_make_cm_node", "DCB: listener: TOS:[%d] UP:[%d]\n")
ACCEPT_VLAN = _dbg("irdma_accept", "CM: Accept vlan_id=%d\n")
SLOW_CONNECTION_ACCEPT = _dbg("irdma_accept", "CM: Slow Connection: cm_node=%p, "
                              "loc_port=%d, rem_port=%d, cm_id=%p\n")
SLOW_CONNECTION_CONNECTED = _dbg("irdma_cm_event_connected", "CM: Slow Connection: "
                                 "cm_node=%p, loc_port=%d, rem_port=%d, cm_id=%p\n")
CALL_CLOSE = _dbg("irdma_qp_disconnect", "CM: Call close API\n")
CREATE_LISTEN = _dbg("irdma_create_listen", "CM: loc_port=0x%04x loc_addr=%pI4 "
                     "cm_listen_node=%p cm_id=%p qhash_set=%d vlan_id=%d\n")
LISTENER_FREED = _dbg("irdma_dec_refcnt_listen", "CM: loc_port=0x%04x loc_addr=%pI4 "
                      "cm_listen_node=%p cm_id=%p qhash_set=%d vlan_id=%d "
                      "apbvt_del=%d\n")
DESTROYED_BEFORE_ESTABLISHED = _dbg("irdma_destroy_connection",
                                    "CM: node destroyed before established\n")

CATALOGUE: tuple[LogLine, ...] = (
    SEND_CM_EVENT, CREATE_EVENT, SEND_RESET, ACTIVE_OPEN_ERR, PASSIVE_OPEN_ERR, MSS_OPTION,
    UNSUPPORTED_OPTION, OPTIONS_RESET, NEGOTIATED, *PARSE_MPA, STATE_FOR_REJECT,
    WRONG_STATE, BAD_EVENT_TYPE, FIN_BAD_STATE, RST_PKT,
    SEQ_ERR, CHECK_SYN_FAIL, NO_LISTENER, TOS_MISMATCH, LISTENER_DCB, ACCEPT_VLAN,
    SLOW_CONNECTION_ACCEPT, SLOW_CONNECTION_CONNECTED, CALL_CLOSE, CREATE_LISTEN,
    LISTENER_FREED, DESTROYED_BEFORE_ESTABLISHED)
"""Every line the model emits."""

_CONVERSION = re.compile(r"%(pI4|pS|p|0?\d*[dux])")


def cformat(fmt: str, *args: object) -> str:
    """``fmt`` filled in as the kernel's ``vsnprintf`` would for the conversions cm.c
    uses: ``%d %u %x %04x`` take integers, ``%p %pI4 %pS`` take the text to print (see
    :func:`pointer`, :func:`pi4`, :func:`caller`). The trailing newline is dropped."""
    values = iter(args)

    def fill(m: re.Match[str]) -> str:
        spec = m.group(1)
        value = next(values)
        if spec.startswith("p"):
            return str(value)
        assert isinstance(value, int)
        return ("%" + spec.replace("u", "d")) % value

    text = _CONVERSION.sub(fill, fmt)
    return text.rstrip("\n")


def pointer(host: str, kind: str, ident: object) -> str:
    """A stand-in for the hashed ``%p`` of object ``kind`` number ``ident`` on ``host``:
    16 hex digits, the upper 8 zero, the same for the same object."""
    digest = hashlib.blake2b(f"{host}/{kind}/{ident}".encode(), digest_size=4).hexdigest()
    return "00000000" + digest


def pi4(addr: bytes) -> str:
    """``%pI4`` of a host-order address array on a little-endian machine: its first four
    bytes reversed (192.0.2.1 -> ``1.2.0.192``)."""
    return ".".join(str(b) for b in reversed(addr[:4]))


def caller(fn: str) -> str:
    """``%pS`` of a return address in ``fn`` (offsets not modelled)."""
    return f"{fn}+0x?/0x? [irdma]"


def fields(line: LogLine, *args: object, conn: int | None = None) -> dict[str, object]:
    """The fields of the ``kernel_log`` record of ``line`` filled with ``args``: level,
    text, dynamic_debug, and the connection when there is one."""
    return {"level": line.level, "text": cformat(line.fmt, *args),
            "dynamic_debug": line.dynamic_debug, "conn": conn}


def plays_irdma(core: object) -> bool:
    """Whether ``core`` runs cm.c (the irdma profile; a core without a config counts)."""
    config = getattr(core, "config", None)
    return getattr(config, "profile", "irdma") == "irdma"


def emit(cm: CoreOps, line: LogLine, *args: object, conn: int | None = None) -> None:
    """One ``kernel_log`` record (:func:`fields`) from ``line.fn``; the caller has checked
    ``cm.trace``. Nothing for a core that does not play irdma."""
    if cm.config.profile != "irdma":
        return
    cm.base.kernel_log(line.level, line.fn, cformat(line.fmt, *args),
                       dynamic_debug=line.dynamic_debug, conn=conn)


def node_ptr(cm: CoreOps, node: CmNode) -> str:
    """``%p`` of the node."""
    return pointer(cm.name, "cm_node", node.conn)


def cm_id_ptr(cm: CoreOps, node: CmNode) -> str:
    """``%p`` of the node's ``cm_id`` (NULL when it has none). A passive node holds its
    listener's ``cm_id`` (``irdma_receive_ilq``: ``cm_info.cm_id = listener->cm_id``)
    until ``irdma_accept`` gives it the connection's own."""
    if not node.cm_id:
        return NULL
    lst = node.settings.listener
    if not node.client and not node.qp_linked and lst is not None:
        return pointer(cm.name, "listen_cm_id", lst.ident)
    return pointer(cm.name, "cm_id", node.conn)


def listener_ptr(cm: CoreOps, lst: Listener) -> str:
    """``%p`` of a listen node."""
    return pointer(cm.name, "cm_listen_node", lst.ident)


def listener_cm_id_ptr(cm: CoreOps, lst: Listener, *, active: bool) -> str:
    """``%p`` of a listen node's ``cm_id`` (NULL once ``irdma_cm_del_listen`` cleared
    it)."""
    return pointer(cm.name, "listen_cm_id", lst.ident) if active else NULL


def send_cm_event(cm: CoreOps, node: CmNode, event: int, status: int) -> None:
    """``irdma_send_cm_event``'s line, before the upcall."""
    emit(cm, SEND_CM_EVENT, node_ptr(cm, node), cm_id_ptr(cm, node), int(node.accelerated),
         int(node.state), event, status, conn=node.conn)


def create_event(cm: CoreOps, node: CmNode, etype: int) -> None:
    """``irdma_create_event``'s line."""
    loc_addr, _lp, rem_addr, _rp, _vlan = node.key
    emit(cm, CREATE_EVENT, node_ptr(cm, node),
         pointer(cm.name, "event", f"{node.conn}/{etype}/{cm.base.now_ns}"), etype,
         pi4(loc_addr), pi4(rem_addr), conn=node.conn)


def send_reset(cm: CoreOps, node: CmNode, comment: str) -> None:
    """``irdma_send_reset``'s line; the caller is named by the frame's comment
    (``irdma_send_reset: irdma_cm_close ...``)."""
    who = comment.split(": ", 1)[1].split(" ", 1)[0] if ": " in comment else "?"
    loc_addr, loc_port, rem_addr, rem_port, _vlan = node.key
    emit(cm, SEND_RESET, caller(who), node_ptr(cm, node), cm_id_ptr(cm, node),
         int(node.accelerated), int(node.state), rem_port, loc_port, pi4(rem_addr),
         pi4(loc_addr), conn=node.conn)


def rst_pkt(cm: CoreOps, node: CmNode) -> None:
    """``irdma_handle_rst_pkt``'s line, as the RST arrives."""
    loc_addr, loc_port, rem_addr, rem_port, _vlan = node.key
    emit(cm, RST_PKT, caller("irdma_process_pkt"), node_ptr(cm, node), int(node.state),
         rem_port, loc_port, pi4(rem_addr), pi4(loc_addr), conn=node.conn)


def listener_line(cm: CoreOps, line: LogLine, lst: Listener, *, active: bool,
                  apbvt_del: bool | None = None) -> None:
    """``irdma_create_listen``'s line, or ``irdma_dec_refcnt_listen``'s as the listen node
    is freed (with ``apbvt_del``)."""
    args: list[object] = [lst.loc_port, pi4(lst.loc_addr), listener_ptr(cm, lst),
                          listener_cm_id_ptr(cm, lst, active=active), int(lst.qhash_set),
                          lst.vlan_id]
    if apbvt_del is not None:
        args.append(int(apbvt_del))
    emit(cm, line, *args)


def option_lines(cm: CoreOps, node: CmNode, options: bytes) -> None:
    """The lines ``irdma_process_options`` logs while it walks ``options``: one per MSS
    option (before its checks) and one per option it does not know. A zero-length
    option makes the kernel log its line forever; the emulator logs it once."""
    size = len(options)
    offset = 0
    while offset < size:
        kind = options[offset]
        if kind == 0:  # OPTION_NUM_EOL
            return
        if kind == 1:  # OPTION_NUM_NONE
            offset += 1
            continue
        length = options[offset + 1] if offset + 1 < size else 0
        if kind == 2:  # OPTION_NUM_MSS
            emit(cm, MSS_OPTION, length, offset, size, conn=node.conn)
            if length != 4:
                return
        elif kind != 3:  # OPTION_NUM_WINDOW_SCALE is taken silently
            emit(cm, UNSUPPORTED_OPTION, kind, conn=node.conn)
        if length == 0:
            return
        offset += length


def listen_created(cm: CoreOps, lst: Listener) -> None:
    """The ``listen_created`` trace record of ``irdma_create_listen`` and, with a trace,
    its log line."""
    cm.base.record("listen_created", "irdma_create_listen", listener=lst.ident, addr=lst.loc_addr,
                   port=lst.loc_port, vlan=lst.vlan_id, reused=lst.reused_node)
    if cm.trace is not None:
        listener_line(cm, CREATE_LISTEN, lst, active=True)


def passive_lookup(cm: CoreOps, lst: Listener | None, client_tos: int) -> None:
    """``irdma_receive_ilq``'s line when no listener takes a SYN; else
    ``irdma_make_cm_node``'s for a listener's node, before the neighbour is resolved: the
    warning when the SYN's TOS is not the listener's, then the DCB line (TOS the larger of
    the two, UP ``rt_tos2priority`` of it; not in DSCP mode)."""
    if lst is None:
        emit(cm, NO_LISTENER)
        return
    listener_tos = lst.tos
    if listener_tos != client_tos:
        emit(cm, TOS_MISMATCH, listener_tos, client_tos)
    tos = max(listener_tos, client_tos)
    emit(cm, LISTENER_DCB, tos, rt_tos2priority(tos))
