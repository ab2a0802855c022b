"""A core tells a watcher (mpa_emu.stacks.contract.api.NodeWatch) of its nodes as they change, with
typed values: irdma_connect makes the node and irdma_send_syn moves it to SYN_SENT;
irdma_cm_close on a SYN_SENT node sends RST and irdma_destroy_connection frees it."""

from __future__ import annotations

from mpa_emu.stacks.contract.api import NodeWatch
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.states import CmState

from mpa_emu.wire.segment import ACK, RST, SYN

A, B = bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])


class Notes:
    def __init__(self) -> None:
        self.log: list[tuple[object, ...]] = []

    def node_created(self, conn: int, loc_port: int, rem: bytes, rem_port: int) -> None:
        self.log.append(("created", conn, loc_port, rem, rem_port))

    def state_changed(self, conn: int, state: CmState) -> None:
        self.log.append(("state", conn, state))

    def node_freed(self, conn: int) -> None:
        self.log.append(("freed", conn))

    def qp_event(self, time_ns: int, conn: int, ae: str) -> None:
        self.log.append(("ae", time_ns, conn, ae))


def test_a_connect_closed_early_is_told_step_by_step() -> None:
    notes = Notes()
    watch: NodeWatch = notes
    core = CmCore("a", b"\x02" * 6, watch=watch)
    core.add_address(A)
    core.set_neighbour(B, b"\x04" * 6)
    conn = core.connect(A, B, 31000, local_port=40000, now_ns=0)
    core.close(conn, now_ns=1)
    assert notes.log == [("created", conn, 40000, B, 31000), ("state", conn, CmState.SYN_SENT),
                         ("freed", conn)]
    assert [tx.segment.flags for tx in core.frames_to_send()] == [SYN, RST | ACK]


def test_a_core_without_a_watch_tells_no_one() -> None:
    core = CmCore("a", b"\x02" * 6)
    core.add_address(A)
    core.set_neighbour(B, b"\x04" * 6)
    core.close(core.connect(A, B, 31000, now_ns=0), now_ns=1)
    assert len(core.frames_to_send()) == 2
