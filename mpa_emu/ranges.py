"""Allowed ranges of configuration values, and the one check every entry point uses.

A :class:`Range` is an inclusive integer interval with the reason for it: the C type
the kernel keeps the value in and, where the type allows more than makes sense, what
narrows it. Tables of ranges (``{name: Range}``) live next to what they configure: a
stack's in its own folder (its :attr:`ConfigRecord.ranges
<mpa_emu.stacks.base.ConfigRecord.ranges>`), the emulator's own (seeds, virtual times,
counts) here in :data:`EMULATOR_RANGES`, the verbs' and the hosts' as scenario files
and the CLI take them here too (:data:`FRONT_VERB_RANGES`, :data:`HOST_RANGES`); a
stack checks its parameters with the same :func:`check_value` and :func:`check_fields`.

Scenario files, the Python API and the CLI check against the same table, so a value
refused in one is refused in all, with the same allowed range in the message::

    retrans: expected an integer 0..4294967295 (u32 retranscount of struct
    irdma_timer_entry, cm.h), got 9223372036854775807
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mpa_emu.errors import MpaEmuError

U8_MAX = 0xFF
U16_MAX = 0xFFFF
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
INT_MAX = 0x7FFF_FFFF
"""The largest C ``int`` (32 bits on every Linux target)."""


class RangeError(MpaEmuError, ValueError):
    """A value outside its :class:`Range` (or of the wrong type): the message names the
    key, the allowed range and its reason, and the value given."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Range:
    """Integers ``lo..hi`` (both included); ``why`` names the kernel type (or the
    emulator's reason) behind the bounds."""

    lo: int
    hi: int
    why: str

    def text(self) -> str:
        """``0..4294967295``."""
        return f"{self.lo}..{self.hi}"

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` (None when it is an integer in range; a bool is
        not an integer here)."""
        if isinstance(value, bool) or not isinstance(value, int):
            shown = f'"{value}"' if isinstance(value, str) else repr(value)
            return f"expected an integer {self.text()} ({self.why}), got {shown}"
        if not self.lo <= value <= self.hi:
            return f"expected an integer {self.text()} ({self.why}), got {value}"
        return None


def check_value(key: str, value: object, allowed: Range) -> None:
    """Raise :class:`RangeError` when ``value`` is not an integer within ``allowed``."""
    problem = allowed.problem(value)
    if problem is not None:
        raise RangeError(key, problem)


def check_fields(obj: object, table: Mapping[str, Range]) -> None:
    """Check every attribute of ``obj`` named in ``table`` (a dataclass of settings:
    each stack's configuration checks itself with its own table)."""
    for name, allowed in table.items():
        check_value(name, getattr(obj, name), allowed)


VIRTUAL_NS_MAX = 1 << 62
"""The latest virtual time anything may be scheduled at, in ns (about 146 years): far
beyond any retransmission schedule, and every sum of two such times still fits the
unsigned 64-bit nanosecond timestamps of pcapng."""

EMULATOR_RANGES: Mapping[str, Range] = {
    "seed": Range(0, U64_MAX, "a 64-bit seed: every component's seed is derived from it"),
    "time_ns": Range(0, VIRTUAL_NS_MAX, "virtual ns; pcapng timestamps are u64 ns"),
    "latency_ns": Range(0, 60_000_000_000, "virtual ns of one-way wire latency, "
                                           "at most a minute"),
    "max_events": Range(1, 1_000_000_000, "events before the safety stop; memory stays "
                                          "bounded, time does not"),
    "connect_count": Range(1, 100_000, "connects of one [[connect]] entry"),
    "nth": Range(1, U32_MAX, "which matching frame, counted from 1"),
    "drop_count": Range(1, U32_MAX, "frames dropped by one rule"),
    "expect_count": Range(0, U32_MAX, "matches expected"),
}
"""The emulator's own values that no kernel type bounds: the network's seed and
latency, times and counts in scenario files."""

FRONT_VERB_RANGES: Mapping[str, Range] = {
    "port": Range(1, U16_MAX, "u16 loc_port/rem_port of struct irdma_cm_node; port 0 is "
                              "refused by irdma_connect"),
    "backlog": Range(0, INT_MAX, "int backlog of irdma_create_listen and struct "
                                 "irdma_cm_listener"),
    "ird": Range(0, U32_MAX, "u32 ird of struct iw_cm_conn_param (include/rdma/iw_cm.h), "
                             "clamped to max_hw_ird by irdma_record_ird_ord"),
    "ord": Range(0, U32_MAX, "u32 ord of struct iw_cm_conn_param (include/rdma/iw_cm.h), "
                             "clamped to max_hw_ord by irdma_record_ird_ord"),
    "vlan": Range(0, 4094, "u16 vlan_id below VLAN_N_VID (4096); 4095 is reserved"),
}
"""Arguments of the verbs (listen, connect) as the scenario files and the CLI give them,
for every stack: the types of irdma's cm.h, the narrowest (port 0 is refused at load;
each stack's core still refuses what its own driver does)."""

HOST_RANGES: Mapping[str, Range] = {
    "mtu": Range(68, U16_MAX, "u16 mtu of struct irdma_sc_vsi; 68 is IPv4's minimum "
                              "(RFC 791)"),
}
"""A host's own settings as the scenario files give them (``mtu``), for every stack."""
