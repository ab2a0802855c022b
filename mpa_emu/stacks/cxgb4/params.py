"""The knobs of iw_cxgb4: its module parameters (cm.c) and two settings that are not
module parameters (the firmware's per-QP IRD/ORD limit and cm.c's
``RELAXED_IRD_NEGOTIATION``), with the kernel's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

WHERE_MODULE = "module parameter of iw_cxgb4"

ParamSpec = tuple[str, type, int | bool, int, int, str, str]
"""name, kind, default, minimum, maximum, where, doc."""

PARAM_SPECS: tuple[ParamSpec, ...] = (
    ("peer2peer", bool, True, 0, 1, WHERE_MODULE,
     "Support peer2peer ULPs: offer and require an RTR (MPA v2 A bit), ORD 0 -> 1 on "
     "connect, IRD 0 -> 1 on accept"),
    ("p2p_type", int, 1, 0, 15, WHERE_MODULE,
     "RDMAP opcode of the RTR: 1 = zero-length RDMA Read, 0 = zero-length RDMA Write; "
     "other values offer no RTR type"),
    ("mpa_rev", int, 2, 0, 2, WHERE_MODULE,
     "MPA revision of requests: 1 = RFC 5044, 2 = RFC 6581 (v2, retried as v1 after a "
     "RST); 0 makes a ULP reject an abort"),
    ("markers_enabled", bool, False, 0, 1, WHERE_MODULE, "ask for MPA markers (M)"),
    ("crc_enabled", bool, True, 0, 1, WHERE_MODULE, "ask for the MPA CRC (C)"),
    ("ep_timeout_secs", int, 60, 1, 86400, WHERE_MODULE,
     "endpoint timer: MPA request/reply wait and close wait, in seconds"),
    ("c4iw_max_read_depth", int, 32, 1, 0x3FFF, WHERE_MODULE, "per-connection max ORD/IRD"),
    ("enable_tcp_timestamps", bool, False, 0, 1, WHERE_MODULE, "TCP timestamps option"),
    ("enable_tcp_sack", bool, False, 0, 1, WHERE_MODULE, "TCP SACK-permitted option"),
    ("enable_tcp_window_scaling", bool, True, 0, 1, WHERE_MODULE, "TCP window scale option"),
    ("rcv_win", int, 256 * 1024, 1024, 1 << 30, WHERE_MODULE,
     "TCP receive window in bytes (sets the window scale)"),
    ("snd_win", int, 128 * 1024, 1024, 1 << 30, WHERE_MODULE, "TCP send window in bytes"),
    ("dack_mode", int, 0, 0, 3, WHERE_MODULE,
     "delayed ACK mode written with each RX_DATA_ACK (carried, not modelled)"),
    ("max_ordird_qp", int, 32, 1, 0x3FFF,
     "firmware parameter MAXORDIRD_QP read by cxgb4 at probe (8 when the firmware does "
     "not answer; 32 is an assumption for current T5/T6 firmware)",
     "the adapter's per-QP IRD/ORD limit"),
    ("relaxed_ird_negotiation", bool, True, 0, 1,
     "constant in cm.c (#define RELAXED_IRD_NEGOTIATION 1): 0 means a rebuilt iw_cxgb4",
     "adjust IRD/ORD to the peer's instead of failing the connection"),
)


@dataclass(frozen=True, slots=True)
class Cxgb4Params:
    """One host's iw_cxgb4 settings (every field named as in :data:`PARAM_SPECS`)."""

    peer2peer: bool = True
    p2p_type: int = 1
    mpa_rev: int = 2
    markers_enabled: bool = False
    crc_enabled: bool = True
    ep_timeout_secs: int = 60
    c4iw_max_read_depth: int = 32
    enable_tcp_timestamps: bool = False
    enable_tcp_sack: bool = False
    enable_tcp_window_scaling: bool = True
    rcv_win: int = 256 * 1024
    snd_win: int = 128 * 1024
    dack_mode: int = 0
    max_ordird_qp: int = 32
    relaxed_ird_negotiation: bool = True

    @classmethod
    def from_mapping(cls, values: Mapping[str, int | bool]) -> Cxgb4Params:
        """Build from ``{name: value}`` (missing names keep their defaults). An unknown
        name or a value out of range raises ValueError with a one-line message."""
        specs = {spec[0]: spec for spec in PARAM_SPECS}
        out: dict[str, Any] = {}
        for name, value in values.items():
            spec = specs.get(name)
            if spec is None:
                raise ValueError(f"cxgb4 has no parameter {name!r} "
                                 f"(known: {', '.join(sorted(specs))})")
            kind, low, high = spec[1], spec[3], spec[4]
            if not isinstance(value, int) or not low <= int(value) <= high:
                raise ValueError(f"cxgb4 parameter {name} must be an integer in "
                                 f"{low}..{high}, got {value!r}")
            out[name] = bool(value) if kind is bool else int(value)
        return replace(cls(), **out)

    @property
    def cur_max_read_depth(self) -> int:
        """``cur_max_read_depth``: ``min(max_ordird_qp, c4iw_max_read_depth)``."""
        return min(self.max_ordird_qp, self.c4iw_max_read_depth)

    @property
    def wscale(self) -> int:
        """``cxgb_compute_wscale(rcv_win)``: the smallest shift (at most 14) with
        ``65535 << shift >= rcv_win``."""
        shift = 0
        while shift < 14 and (65535 << shift) < self.rcv_win:
            shift += 1
        return shift

    def as_dict(self) -> dict[str, int | bool]:
        """Every setting by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
