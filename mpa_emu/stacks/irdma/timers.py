"""The CM's clocks: the one shared core timer with its send and close entries
(``irdma_schedule_cm_timer``, ``irdma_cm_timer_tick``), and the deferred wake-ups of the
asynchronous kernel work (the AH/qhash completion, the wait for the RTS AE).

The kernel keeps one ``cm_core->tcp_timer`` for every node. Each node has at most one
send entry (a frame to retransmit) and one close entry (TIME_WAIT, or the QP's close
timer); ``irdma_schedule_cm_timer`` arms the timer only when it is not already pending
(``timer_pending`` then ``add_timer``, never ``mod_timer``), so an entry due earlier
than the pending expiry waits for the next tick. :class:`CoreTimer` keeps the entries in
a heap by due jiffy and the one expiry in :attr:`CoreTimer.expires`; what a due entry
does (retransmit, expire, free) is the core's business.

Stale heap items (an entry cleaned up, or rescheduled to a later jiffy) stay in the heap
and are skipped: the entry's ``live`` flag and its ``due`` decide.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush
from typing import Final, Protocol

from mpa_emu.stacks.contract.base import CoreBase
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.node import CloseEntry, CmNode, SendEntry
from mpa_emu.stacks.irdma.states import (
    CM_CLOSED,
    CM_OFFLOADED,
    IN_CLOSE_TIMER,
    IN_RETRANS_EXPIRED,
    Input,
)
from mpa_emu.stacks.irdma.timing import backoff_gap
from mpa_emu.wire.segment import Transmit

Entry = SendEntry | CloseEntry

COMPACT_MIN: Final = 1024
"""Heap length from which :class:`CoreTimer` drops the items of cleaned-up entries."""


class CoreTimer:
    """``cm_core->tcp_timer`` and the entries hanging off the nodes."""

    __slots__ = ("_compact_at", "_heap", "_seq", "expires", "hz")

    def __init__(self, hz: int) -> None:
        self.hz = hz
        self.expires: int | None = None
        """The jiffy the timer fires at, None when it is not pending."""
        self._heap: list[tuple[int, int, Entry]] = []
        self._seq = 0
        self._compact_at = COMPACT_MIN

    def _push(self, entry: Entry) -> None:
        heap = self._heap
        if len(heap) >= self._compact_at:
            self._compact()
        self._seq += 1
        heappush(heap, (entry.due, self._seq, entry))

    def _compact(self) -> None:
        # An entry cleaned up (live False, never live again) would wait in the heap until
        # its due jiffy, a second away, holding its frame: with many connections opening
        # per second that is most of their memory. Dropping such items early changes no
        # pop order, as (due, seq) is unique. Amortised O(1): the next compaction waits
        # until the heap has doubled.
        heap = self._heap
        heap[:] = [item for item in heap if item[2].live]
        heapify(heap)
        self._compact_at = max(COMPACT_MIN, 2 * len(heap))

    def arm(self, due: int, now_j: int) -> None:
        """``add_timer`` only when the timer is not pending (``irdma_schedule_cm_timer``
        checks ``timer_pending`` and never moves an armed expiry earlier)."""
        if self.expires is None:
            self.expires = due if due > now_j else now_j + 1

    def arm_send(self, node: CmNode, tx: Transmit, now_j: int, retrans: int) -> SendEntry:
        """A send entry for ``tx``, first resend one second (``HZ``) from now."""
        entry = SendEntry(node, tx, now_j + self.hz, retrans)
        node.send_entry = entry
        self._push(entry)
        self.arm(entry.due, now_j)
        return entry

    def arm_close(self, node: CmNode, now_j: int) -> CloseEntry:
        """A close entry due in ``HZ/10`` (the kernel's TIME_WAIT and QP close timer)."""
        entry = CloseEntry(node, now_j + self.hz // 10)
        node.close_entry = entry
        self._push(entry)
        self.arm(entry.due, now_j)
        return entry

    def requeue(self, entry: SendEntry, due: int) -> None:
        """Keep a send entry for its next resend at jiffy ``due``."""
        entry.due = due
        self._push(entry)

    def due(self, j: int) -> list[Entry]:
        """The timer fired at jiffy ``j``: it is no longer pending, and these live
        entries are due (in due order, then in the order they were queued)."""
        self.expires = None
        heap = self._heap
        out: list[Entry] = []
        while heap and heap[0][0] <= j:
            _, _, entry = heappop(heap)
            if entry.live and entry.due <= j:
                out.append(entry)
        return out

    def settle(self, j: int, drop_offloaded: Callable[[CmNode], None]) -> None:
        """After a tick: skip stale items, hand send entries of nodes that went
        ``OFFLOADED`` meanwhile to ``drop_offloaded`` (the tick frees them without a
        resend), and re-arm for the earliest entry left."""
        heap = self._heap
        while heap:
            due, _, entry = heap[0]
            if not entry.live or entry.due != due:
                heappop(heap)
            elif isinstance(entry, SendEntry) and entry.node.state == CM_OFFLOADED:
                heappop(heap)
                drop_offloaded(entry.node)
            else:
                break
        if heap:
            self.arm(heap[0][0], j)


class Deferred:
    """Wake-ups of work the kernel does asynchronously: the completion of the
    conn-established qhash / AH (``"qhash"``, ``CmConfig.ah_latency_ns`` after the SYN)
    and the end of the wait for the RTS AE (``"rts"``, ``rts_ae_timeout_ns``)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str, CmNode]] = []
        self._seq = 0

    def add(self, at_ns: int, kind: str, node: CmNode) -> None:
        """Wake ``node`` for ``kind`` at ``at_ns``."""
        self._seq += 1
        heappush(self._heap, (at_ns, self._seq, kind, node))

    def deadline(self) -> int | None:
        """The earliest wake-up that still has something to do, None when none."""
        heap = self._heap
        while heap and _stale(heap[0]):
            heappop(heap)
        return heap[0][0] if heap else None

    def pop(self) -> tuple[str, CmNode]:
        """Take the wake-up :meth:`deadline` returned."""
        _, _, kind, node = heappop(self._heap)
        return kind, node


def _stale(item: tuple[int, int, str, CmNode]) -> bool:
    """A wake-up with nothing left to do (node freed, RTS already seen, qhash done)."""
    t, _, kind, node = item
    if node.refcnt <= 0:
        return True
    if kind == "rts":
        return node.rts_deadline != t
    return not node.qhash_pending


# ---- irdma_cm_timer_tick ----------------------------------------------------------------

class TickHost(Protocol):
    """What the tick needs from the core (:class:`mpa_emu.stacks.irdma.core.CmCore`)."""

    timer: CoreTimer
    stats: dict[str, int]

    config: CmConfig
    @property
    def base(self) -> CoreBase:
        """The contract's mechanics: the trace (``base.record``)."""

    def _transmit(self, tx: Transmit) -> None:
        """Queue a frame."""

    def _rem_ref(self, node: CmNode) -> None:
        """``irdma_rem_ref_cm_node``."""

    def _dispatch(self, node: CmNode, inp: Input, rx: None) -> object:
        """Run the node's row for ``inp``."""

    def _qp_close_entry_due(self, node: CmNode) -> bool:
        """Run the QP branch of ``irdma_handle_close_entry`` if the QP owns the entry."""


def timer_tick(cm: TickHost, j: int) -> None:
    """``irdma_cm_timer_tick`` at jiffy ``j``: every due entry runs on a temporary node
    reference (``irdma_timer_list_prep``); then the timer is re-armed for the earliest
    entry left, or stays idle."""
    for entry in cm.timer.due(j):
        if not entry.live:
            continue
        node = entry.node
        node.refcnt += 1  # irdma_timer_list_prep
        if isinstance(entry, CloseEntry):
            cm.base.record("timer_fired", "irdma_handle_close_entry", conn=node.conn,
                           state=node.state.name)
            if not cm._qp_close_entry_due(node):
                cm._dispatch(node, IN_CLOSE_TIMER, None)
        else:
            _send_entry_due(cm, node, entry, j)
        cm._rem_ref(node)
    cm.timer.settle(j, lambda node: free_retrans_entry(cm, node))


def free_retrans_entry(cm: TickHost, node: CmNode) -> None:
    """``irdma_free_retrans_entry``: the entry goes, with its node reference."""
    entry = node.send_entry
    if entry is not None:
        entry.live = False
        node.send_entry = None
        cm._rem_ref(node)


def _send_entry_due(cm: TickHost, node: CmNode, entry: SendEntry, j: int) -> None:
    """One send entry of ``irdma_cm_timer_tick``: freed (OFFLOADED, CLOSED), expired
    (``irdma_retrans_expired``: the ``RETRANS_EXPIRED`` row), or resent (unless
    ``ack_rcvd``) and backed off."""
    if node.state in (CM_OFFLOADED, CM_CLOSED):
        cm.base.record("timer_fired", "irdma_cm_timer_tick", conn=node.conn, state=node.state.name,
                       action="entry freed, no retransmission")
        free_retrans_entry(cm, node)
        return
    cfg = cm.config
    if entry.retranscount == 0:
        cm.base.record("timer_fired", "irdma_cm_timer_tick", conn=node.conn, state=node.state.name,
                       action="retransmissions exhausted")
        free_retrans_entry(cm, node)
        cm._dispatch(node, IN_RETRANS_EXPIRED, None)
        return
    number = cfg.retrans - entry.retranscount + 1
    if not node.ack_rcvd:
        orig = entry.transmit
        cm.stats["pkt_retrans"] += 1
        cm._transmit(Transmit(orig.segment, f"irdma_cm_timer_tick: retransmit #{number} of "
                             f"{orig.comment}", orig.loopback, orig.conn))
    else:
        cm.base.record("timer_fired", "irdma_cm_timer_tick", conn=node.conn, state=node.state.name,
                       action=f"resend #{number} skipped: ack_rcvd")
    entry.retranscount -= 1
    gap = backoff_gap(cfg.hz, cfg.retrans - entry.retranscount,
                      int_shift=cfg.quirks.backoff_int_shift)
    cm.timer.requeue(entry, j + gap)
