"""The ranges of irdma's settings and verb arguments, each with the type the kernel keeps
the value in (``drivers/infiniband/hw/irdma/cm.h`` unless named otherwise).

One table for every entry point: :class:`~mpa_emu.stacks.irdma.config.CmConfig` checks itself
against :data:`CONFIG_RANGES` when built (so ``CmConfig(retrans=2**63 - 1)`` raises), the
verbs check :data:`VERB_RANGES`, scenario files report the same ranges with their file
and line, and the CLI options use them as argparse types. The checking helper is
:mod:`mpa_emu.ranges`.
"""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.ranges import FRONT_VERB_RANGES, HOST_RANGES, U32_MAX, Range, check_fields

S_NS = 1_000_000_000

CONFIG_RANGES: Mapping[str, Range] = {
    "gen": Range(1, 2, "hardware generation: 1 X722 (GEN_1), 2 E810 (GEN_2)"),
    "hz": Range(100, 1000, "HZ, an int; the kernel/Kconfig.hz choices run from 100 to "
                           "1000"),
    "retrans": Range(0, U32_MAX, "u32 retranscount of struct irdma_timer_entry, set from "
                                 "IRDMA_DEFAULT_RETRANS"),
    "mpa_rev": Range(0, 255, "u8 rev of struct ietf_mpa_v1; irdma_cm_build_mpa_frame "
                             "builds 1 and 2, and no request at all for any other"),
    "max_ird": Range(0, 0x3FFE, "max_hw_ird, kept in the node's u16 ird_size; the MPA v2 "
                                "IRD field is 14 bits and 0x3FFF is IETF_NO_IRD_ORD"),
    "max_ord": Range(0, 0x3FFE, "max_hw_ord, kept in the node's u16 ord_size; the MPA v2 "
                                "ORD field is 14 bits and 0x3FFF is IETF_NO_IRD_ORD"),
    "mtu": HOST_RANGES["mtu"],
    "rcv_wscale": Range(0, 14, "u8 rcv_wscale of struct irdma_cm_tcp_context; RFC 7323 "
                               "section 2.3 caps the shift at 14"),
    "ah_latency_ns": Range(0, 60 * S_NS, "virtual ns of the asynchronous AH create "
                                         "(a CQP completion), at most a minute"),
    "rts_ae_timeout_ns": Range(0, 3600 * S_NS, "virtual ns irdma_accept waits for the RTS "
                                               "AE (IRDMA_MAX_TIMEOUT, 12 s), at most an "
                                               "hour"),
}
"""Every integer field of :class:`~mpa_emu.stacks.irdma.config.CmConfig`."""

VERB_RANGES = FRONT_VERB_RANGES
"""The verbs' argument ranges irdma checks (:data:`mpa_emu.ranges.FRONT_VERB_RANGES`, the
table scenario files and the CLI check every stack's verbs with: they are irdma's
types)."""


def check_config(config: object) -> None:
    """Check every integer field of a CmConfig against :data:`CONFIG_RANGES`
    (:class:`~mpa_emu.ranges.RangeError`, a ValueError, naming the first bad field)."""
    check_fields(config, CONFIG_RANGES)
