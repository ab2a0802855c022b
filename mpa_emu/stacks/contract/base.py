"""The mechanics every stack's core shares, written once: :class:`CoreBase`.

Each core (irdma's :class:`~mpa_emu.stacks.irdma.core.CmCore`, siw's and cxgb4's) holds
one :class:`CoreBase` as ``base`` and goes through it for:

* the state change, :meth:`CoreBase.set_state`: sets a node's state, records the
  ``state_changed`` trace record naming the kernel function that made the change, and
  tells the :class:`~mpa_emu.stacks.contract.api.NodeWatch` (with
  :meth:`CoreBase.node_created` and :meth:`CoreBase.node_freed` for a node's two ends);
* the trace emitter, :meth:`CoreBase.record` (:meth:`CoreBase.record_at` for a record at
  another instant than the input's);
* the kernel-log line, :meth:`CoreBase.kernel_log` (a ``kernel_log`` record, see
  :mod:`mpa_emu.stacks.contract.trace`);
* the upcall queue, :meth:`CoreBase.push` (an upcall with its ``upcall`` record) and
  :meth:`CoreBase.next_event` (what the driver takes).

A class held by the core rather than a base class: irdma's core is compiled in the
compiled build (docs/compiling.md), and interpreted classes (siw's and cxgb4's cores)
cannot subclass a compiled one; and the functions a core is split into (irdma's actions,
timers, disconnect path) are given it and use its public methods.
"""

from __future__ import annotations

from collections import deque
from enum import IntEnum
from typing import Any, Protocol, TypeVar

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.contract.events import Upcall
from mpa_emu.stacks.contract.trace import Trace, make_record

S = TypeVar("S", bound=IntEnum)

Ports = tuple[int, bytes, int]
"""A connection's local port, remote address and remote port, as the watch is told."""


class HasState(Protocol[S]):
    """A node whose state :meth:`CoreBase.set_state` changes: an irdma ``CmNode``, a siw
    ``Cep``, a cxgb4 ``Endpoint`` or ``ListenEp``."""

    state: S


class CoreBase:
    """One core's shared mechanics (see the module docstring).

    ``host`` names the host in the trace records, ``trace`` receives them (None: nothing
    is recorded), ``watch`` follows the nodes (None: nobody does). ``now_ns`` is the
    virtual time of the input being processed, which the core sets as each input comes
    in; every record made through this object carries it.
    """

    def __init__(self, host: str, trace: Trace | None, watch: NodeWatch | None = None) -> None:
        self.host = host
        self.trace = trace
        self.watch = watch
        self.now_ns = 0
        self.upcalls: deque[Upcall] = deque()
        """The upcalls not yet taken by :meth:`next_event`, oldest first."""
        self.watched: set[int] = set()
        """The nodes the watch was told of (:meth:`node_created`), until freed."""
        self.transitions_only = False
        """A core whose every state change is a transition of its table (irdma: a row of
        :mod:`mpa_emu.stacks.irdma.transitions`) sets this: :meth:`set_state` then
        refuses a change while no transition runs (:attr:`in_transition`)."""
        self.in_transition = 0
        """How many transitions are running (nested: an ACK's row runs the MPA row)."""

    # ---- the trace -------------------------------------------------------------------

    def record(self, kind: str, fn: str, **fields: Any) -> None:
        """One trace record of ``kind`` at :attr:`now_ns`, naming the kernel function
        ``fn`` behind it."""
        trace = self.trace
        if trace is not None:
            trace.emit(make_record(self.now_ns, self.host, kind, fn, fields))

    def record_at(self, now_ns: int, kind: str, fn: str, **fields: Any) -> None:
        """:meth:`record` at ``now_ns`` (work that runs at its own instant: a QP's
        asynchronous event, a disconnect worker)."""
        trace = self.trace
        if trace is not None:
            trace.emit(make_record(now_ns, self.host, kind, fn, fields))

    def kernel_log(self, level: str, fn: str, text: str, *, dynamic_debug: bool = False,
                   **fields: Any) -> None:
        """A line the driver writes to the kernel log: a ``kernel_log`` record of ``fn``
        with ``level`` (``"debug"``, ``"info"``, ``"warn"``, ``"err"``), the ``text`` as
        the kernel prints it, whether it is a dynamic-debug line, and ``fields`` (irdma's
        ``conn``)."""
        trace = self.trace
        if trace is not None:
            values: dict[str, Any] = {"level": level, "text": text,
                                      "dynamic_debug": dynamic_debug}
            values.update(fields)
            trace.emit(make_record(self.now_ns, self.host, "kernel_log", fn, values))

    # ---- nodes -------------------------------------------------------------------------

    def set_state(self, node: HasState[S], new: S, fn: str, conn: int, *,
                  ports: Ports | None = None, tell: bool = True) -> None:
        """Move ``node`` (connection or listener ``conn``) to ``new`` on behalf of the
        kernel function ``fn``: its ``state_changed`` record, and the watch's notice for
        a node it was told of. ``ports`` (local port, remote address, remote port) tell
        the watch of the node at its first change, for a stack that knows a node's
        4-tuple only later than its creation (siw, cxgb4); ``tell`` False keeps a node
        that is not a connection (a listener) from the watch. Nothing happens when the
        node is already in ``new``. A change outside a transition of a core that has
        them (:attr:`transitions_only`) raises ``RuntimeError``: an emulator bug."""
        old = node.state
        if old == new:
            return
        if self.transitions_only and not self.in_transition:
            raise RuntimeError(f"{fn}: {old.name} -> {new.name} outside the transition "
                               "table")
        node.state = new
        if self.trace is not None:
            self.record("state_changed", fn, conn=conn, old=old.name, new=new.name)
        watch = self.watch
        if tell and watch is not None:
            if ports is not None and conn not in self.watched:
                self.watched.add(conn)
                watch.node_created(conn, ports[0], ports[1], ports[2])
            if conn in self.watched:
                watch.state_changed(conn, new)

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        """Tell the watch of connection ``conn`` on these ports, once (irdma: when
        ``irdma_make_cm_node`` makes it)."""
        watch = self.watch
        if watch is not None and conn not in self.watched:
            self.watched.add(conn)
            watch.node_created(conn, loc_port, rem, rem_port)

    def node_freed(self, conn: int) -> None:
        """Tell the watch that ``conn``'s node is gone (if it was told of it)."""
        if conn in self.watched:
            self.watched.discard(conn)
            watch = self.watch
            if watch is not None:
                watch.node_freed(conn)

    def watch_nodes(self, watch: NodeWatch | None) -> None:
        """From now on tell ``watch`` (None: nobody) of the nodes."""
        self.watch = watch

    # ---- upcalls -----------------------------------------------------------------------

    def push(self, up: Upcall, fn: str, fields: dict[str, Any] | None = None) -> None:
        """Queue ``up`` for the application, with its ``upcall`` record naming the
        kernel function ``fn`` that delivers it (``fields``: what a stack adds to the
        record; a dict rather than keywords, so that a core without a trace builds
        none)."""
        self.upcalls.append(up)
        trace = self.trace
        if trace is not None:
            values: dict[str, Any] = {"conn": up.conn, "event": up.event.name,
                                      "status": up.status}
            if fields:
                values.update(fields)
            trace.emit(make_record(self.now_ns, self.host, "upcall", fn, values))

    def next_event(self) -> Upcall | None:
        """The oldest upcall not yet taken, None when there is none."""
        upcalls = self.upcalls
        return upcalls.popleft() if upcalls else None
