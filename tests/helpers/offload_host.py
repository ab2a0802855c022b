"""A stand-in host around one offloaded QP for the disconnect decision table (hw.c AEs,
irdma_cm_disconn_true)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mpa_emu.stacks.contract.events import IwEvent, Transmit
from mpa_emu.stacks.irdma.offload import OffloadedQp

from helpers.offload_peer import P_RCV, P_SEQ, REPLY, from_peer, qp_init, rtr_read_fpdu
from mpa_emu.stacks.irdma import disconnect


class Host:
    """Just enough of a CM core for one offloaded connection."""

    def __init__(self, qp: OffloadedQp) -> None:
        self.nic_qp: OffloadedQp | None = qp
        self.conn = qp.init.conn
        self.node_alive = True
        self.up = True
        self.upcalls: list[tuple[IwEvent, int, int]] = []
        self.close_due: int | None = None
        self.wire: list[Transmit] = []
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.rts_woken: list[int] = []
        self.accelerated = True

    # DisconnectHost
    def qp(self, conn: int) -> OffloadedQp | None:
        return self.nic_qp if conn == self.conn else None

    def has_node(self, conn: int) -> bool:
        return self.node_alive

    def link_up(self) -> bool:
        return self.up

    def _send_cm_event(self, conn: int, event: IwEvent, status: int, now_ns: int) -> None:
        self.upcalls.append((event, status, now_ns))

    def _cm_close(self, conn: int, now_ns: int) -> int:
        self.node_alive = False
        self.close_due = None
        return 0

    def _schedule_close_entry(self, conn: int, now_ns: int) -> bool:
        if self.close_due is not None:
            return False
        self.close_due = now_ns + disconnect.CLOSE_TIMER_NS
        return True

    def _collect_qp_frames(self, conn: int) -> None:
        if self.nic_qp is not None:
            self.wire.extend(self.nic_qp.frames_to_send())

    def _rts_ae_received(self, conn: int, now_ns: int) -> None:
        self.rts_woken.append(now_ns)

    def _cm_node(self, conn: int) -> Any:
        return SimpleNamespace(accelerated=self.accelerated) if self.node_alive else None

    def _record(self, kind: str, fn: str, now_ns: int, **fields: Any) -> None:
        self.records.append((kind, fields))

    # driving
    def deliver(self, seg_args: dict[str, Any], now_ns: int) -> None:
        assert self.nic_qp is not None
        self.nic_qp.receive(from_peer(self.nic_qp, **seg_args), now_ns)
        self.pump(now_ns)

    def pump(self, now_ns: int) -> None:
        assert self.nic_qp is not None
        self._collect_qp_frames(self.conn)
        while (ae := self.nic_qp.next_ae()) is not None:
            disconnect.on_ae(self, self.conn, ae, now_ns)
        self._collect_qp_frames(self.conn)

    def run_timers(self, until_ns: int) -> None:
        if self.close_due is not None and self.close_due <= until_ns:
            due, self.close_due = self.close_due, None
            disconnect.handle_close_entry(self, self.conn, due)


def passive_host() -> Host:
    qp = OffloadedQp(qp_init(active=False))
    host = Host(qp)
    qp.send_lsmm(REPLY, 0)
    host.deliver({"seq": P_RCV, "ack": P_SEQ + len(REPLY), "payload": rtr_read_fpdu()}, 1)
    host.wire.clear()
    return host


PEER_SEQ = P_RCV + len(rtr_read_fpdu())
READ_RESPONSE_FPDU_LEN = 2 + 14 + 4
"""The passive NIC's answer to the read0 RTR: ULPDU_LENGTH, the RFC 5041 section 4.2
tagged header (no pad: 16 bytes are a multiple of 4) and the CRC (RFC 5044 section 4.1);
RFC 5040 section 5.3 makes every Read Request get one."""
OUR_SEQ = P_SEQ + len(REPLY) + READ_RESPONSE_FPDU_LEN
