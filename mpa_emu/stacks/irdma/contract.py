"""The contract between the transition table, its actions and the core.

:class:`Row` is one line of :mod:`mpa_emu.stacks.irdma.transitions`; an :data:`Action` is the
plain function a row runs, ``action(cm, node, row, rx) -> Outcome``; :class:`CoreOps` is
all an action may touch of the core, and the base class the core
(:class:`mpa_emu.stacks.irdma.core.CmCore`) is built on; the actions never import the core, so
the layers stay acyclic:
``contract`` <- ``send``, ``upcalls`` <- ``actions`` <- ``transitions`` <- ``core``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.contract.trace import Trace
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.mpa_policy import Rdma0Op
from mpa_emu.stacks.irdma.node import CmNode
from mpa_emu.stacks.irdma.nodes import NodeTable
from mpa_emu.stacks.irdma.offload.nic import Nic, StoredKey
from mpa_emu.stacks.irdma.states import CmEventType, CmState, Input
from mpa_emu.stacks.irdma.timers import CoreTimer, Deferred
from mpa_emu.stacks.irdma.timing import ns_to_jiffies
from mpa_emu.wire.segment import Segment, Transmit


@dataclass(frozen=True, slots=True)
class VerbArgs:
    """What a verb hands its row: the private data of ``irdma_accept`` (the MPA reply)
    or ``irdma_reject`` (the reject frame)."""

    private_data: bytes = b""


Rx = Segment | VerbArgs | None
"""What a row receives: the segment for the packet inputs (and ``MPA``), the verb's
arguments for accept and reject, None for the other local inputs and the timers."""


class Outcome:
    """What an action tells the code that dispatched it.

    ``stop``: the kernel function returned an error, so the caller does not go on with
    the rest of the segment (``irdma_handle_ack_pkt`` failing means its FIN is not
    processed). ``error``: the verb fails with this error once the input is fully
    processed (``irdma_accept`` returning -errno after its error path ran). Actions
    return the shared :data:`GO_ON` or :data:`STOP`, or an ``Outcome`` with an error.
    """

    __slots__ = ("error", "stop")

    def __init__(self, stop: bool, error: CmError | None = None) -> None:
        self.stop = stop
        self.error = error

    def __repr__(self) -> str:
        return f"Outcome(stop={self.stop}, error={self.error!r})"


GO_ON: Final = Outcome(False)
"""The action ran; the rest of the segment (a FIN after the ACK) is processed."""
STOP: Final = Outcome(True)
"""The kernel function returned an error: nothing more of this segment is processed."""


Action = Callable[["CoreOps", CmNode, "Row", Rx], Outcome]
"""A row's body: ``action(cm, node, row, rx) -> Outcome``."""


@dataclass(frozen=True, slots=True)
class Row:
    """One (state, input) row of the transition table.

    ``run`` is the action; ``action`` its name, for traces, tests and the docs.
    ``next_state`` is where the row normally leaves the node, ``may_reach`` the other
    states its error paths reach; the core checks after every row that the node is in
    one of them (``allowed``; a node whose last reference went counts as ``CLOSED``).
    ``kernel_fn`` is the cm.c function the row models, ``note`` what it does, and
    ``reachable`` False for the rows no input sequence can exercise.
    """

    state: CmState
    input: Input
    run: Action
    next_state: CmState
    may_reach: frozenset[CmState]
    kernel_fn: str
    note: str = ""
    reachable: bool = True
    action: str = ""
    allowed: frozenset[CmState] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", self.run.__name__)
        object.__setattr__(self, "allowed", self.may_reach | {self.next_state})


class CoreOps:
    """What an action (and the send, upcall and reference helpers) may use of the core:
    the core's state and the mechanics a row runs on, as the base class
    :class:`~mpa_emu.stacks.irdma.core.CmCore` builds on. A class rather than a protocol, so that
    the compiled build calls these methods and reads these attributes directly (a call
    through a protocol is a generic Python method call). The methods that need the
    table, the reference counting or the disconnect path (which sit above the actions)
    are declared here and given by the core.

    Everything here is internal to :mod:`mpa_emu.stacks.irdma`; applications use the verbs of
    :class:`~mpa_emu.stacks.irdma.core.CmCore`.
    """

    name: str
    mac: bytes
    config: CmConfig
    trace: Trace | None
    base: CoreBase
    """The contract's mechanics: the state changes (the one setter, which refuses a
    change outside a row: ``transitions_only``), the trace, the kernel log, the upcall
    queue, the node watch (replay), the virtual time."""
    stats: dict[str, int]
    leaks: dict[int, str]
    """Nodes the kernel would keep forever, with the reason (see ``cm.leaks``)."""
    qp_close_entries: set[int]
    """Connections whose close entry the QP scheduled (irdma_qp_disconnect's path)."""
    prefer: Rdma0Op
    nodes: NodeTable
    timer: CoreTimer
    deferred: Deferred
    nic: Nic
    _hz: int
    _addresses: dict[bytes, int]
    _outbox: list[Transmit]
    _work: deque[tuple[CmNode, CmEventType | None]]
    _loop: deque[Segment]

    @property
    def _jiffies(self) -> int:
        """:attr:`now_ns` in jiffies of ``CmConfig.hz``."""
        return ns_to_jiffies(self.base.now_ns, self._hz)

    def _drop(self, seg: Segment, fn: str, reason: str, node: CmNode | None = None) -> None:
        """Record that ``fn`` dropped ``seg`` and why."""
        if self.trace is not None:
            self.base.record("segment_dropped", fn, reason=reason,
                             conn=None if node is None else node.conn,
                             state=None if node is None else node.state.name, flags=seg.flag_text,
                             seq=seg.seq, ack=seg.ack, len=len(seg.payload))

    def _dispatch(self, node: CmNode, inp: Input, rx: Rx) -> Outcome:
        """Run the row of ``(node.state, inp)`` (nested: ACK with data -> MPA)."""
        raise NotImplementedError("CmCore gives _dispatch")

    def _transmit(self, tx: Transmit) -> None:
        """Queue ``tx`` for ``frames_to_send``; a loopback frame is also delivered to
        this core right after the current input."""
        self._outbox.append(tx)
        if self.trace is not None:
            seg = tx.segment
            self.base.record("segment_sent", tx.comment.split(":", 1)[0], conn=tx.conn,
                             comment=tx.comment, flags=seg.flag_text, seq=seg.seq, ack=seg.ack,
                             len=len(seg.payload), loopback=tx.loopback)
        if tx.loopback:
            self._loop.append(tx.segment)

    def _rem_ref(self, node: CmNode) -> None:
        """``irdma_rem_ref_cm_node``: drop a reference, destroy at zero."""
        raise NotImplementedError("CmCore gives _rem_ref")

    def _post(self, node: CmNode, etype: CmEventType | None) -> None:
        """Queue a CM event for ``irdma_cm_event_handler``, or (``etype`` None) the
        qhash completion, to run after the current input in order."""
        self._work.append((node, etype))

    def _drain_qp(self, key: StoredKey) -> None:
        """Take the QP's frames and asynchronous events; keep its deadline."""
        raise NotImplementedError("CmCore gives _drain_qp")

    def _establish_complete(self, node: CmNode) -> None:
        """``complete(&cm_node->establish_comp)``: parked disconnect workers go on."""
        raise NotImplementedError("CmCore gives _establish_complete")

    def _record_leak(self, node: CmNode, reason: str) -> None:
        """Name why the kernel keeps ``node``; the first cause stays (a later symptom
        of the same leak does not replace it)."""
        self.leaks.setdefault(node.conn, reason)

    def _has_address(self, ip: bytes) -> bool:
        """Whether ``ip`` is one of the host's addresses."""
        return ip in self._addresses
