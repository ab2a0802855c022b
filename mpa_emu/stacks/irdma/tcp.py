"""TCP as the irdma CM does it: sequence checks, option parsing and the SYN options.

Only what cm.c implements: no reassembly, no SACK, no timestamps, no PSH.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from mpa_emu.wire.seq import add, between
from mpa_emu.wire.tcp_options import EOL as OPTION_NUM_EOL
from mpa_emu.wire.tcp_options import MSS as OPTION_NUM_MSS
from mpa_emu.wire.tcp_options import NOP as OPTION_NUM_NONE
from mpa_emu.wire.tcp_options import WINDOW_SCALE as OPTION_NUM_WINDOW_SCALE

MTU_TO_MSS_IPV4: Final = 40  # IRDMA_MTU_TO_MSS_IPV4
MTU_TO_MSS_IPV6: Final = 60  # IRDMA_MTU_TO_MSS_IPV6
MIN_MTU_IPV4: Final = 576  # IRDMA_MIN_MTU_IPV4
MIN_MTU_IPV6: Final = 1280  # IRDMA_MIN_MTU_IPV6
CM_DEFAULT_MSS: Final = 536  # IRDMA_CM_DEFAULT_MSS
CM_DEFAULT_RCV_WND_SCALED: Final = 0x3FFFC  # IRDMA_CM_DEFAULT_RCV_WND_SCALED


def check_seq(seq: int, ack: int, *, loc_seq_num: int, rcv_nxt: int, rcv_wnd: int) -> bool:
    """``irdma_check_seq``: the peer acknowledged everything we sent, and its sequence
    number lies in ``[rcv_nxt, rcv_nxt + rcv_wnd]``. The ACK field is compared even when
    the ACK flag is clear."""
    return ack == loc_seq_num and between(seq, rcv_nxt, add(rcv_nxt, rcv_wnd))


def check_seq_refusal(seq: int, ack: int, *, loc_seq_num: int, rcv_nxt: int,
                      rcv_wnd: int) -> str | None:
    """Why ``irdma_check_seq`` refuses a segment, or None when it passes."""
    if check_seq(seq, ack, loc_seq_num=loc_seq_num, rcv_nxt=rcv_nxt, rcv_wnd=rcv_wnd):
        return None
    if ack != loc_seq_num:
        return f"irdma_check_seq: ack {ack} != loc_seq_num {loc_seq_num}"
    return f"irdma_check_seq: seq {seq} outside [{rcv_nxt}, rcv_nxt + {rcv_wnd}]"


@dataclass(slots=True, unsafe_hash=True)
class OptionResult:
    """Outcome of ``irdma_process_options``.

    ``error`` is None when the options were accepted, otherwise a reason text;
    ``hang`` is True when the kernel would loop forever (an option other than EOL, NOP
    and MSS with length 0). ``mss`` and ``snd_wscale`` are the node's values after the
    parse (unchanged fields keep the value passed in).
    """

    mss: int
    snd_wscale: int
    error: str | None = None
    hang: bool = False

    def __init__(self, mss: int, snd_wscale: int, error: str | None = None,
                 hang: bool = False) -> None:
        self.mss = mss
        self.snd_wscale = snd_wscale
        self.error = error
        self.hang = hang


def process_options(options: bytes, *, syn: bool, ipv4: bool, mss: int,
                    snd_wscale: int) -> OptionResult:
    """``irdma_process_options`` over the raw option bytes of one segment: the kernel's
    own loop with its quirks (how any capture's options read is
    :func:`mpa_emu.wire.tcp_options.parse_options`).

    EOL stops; NOP advances one byte; MSS must have length 4 and a value of at least
    536 (IPv4) / 1220 (IPv6), and only lowers the MSS; window scale is taken with no
    length check and no cap; anything else is skipped by its length. A SYN with options
    but no MSS falls back to 536. Reading past the option bytes reads zeros (the kernel
    reads the bytes that follow, our codec pads with EOL).
    """
    offset = 0
    size = len(options)
    got_mss = False

    def byte(i: int) -> int:
        return options[i] if i < size else 0

    while offset < size:
        kind = byte(offset)
        if kind == OPTION_NUM_EOL:
            break
        if kind == OPTION_NUM_NONE:
            offset += 1
            continue
        length = byte(offset + 1)
        if kind == OPTION_NUM_MSS:
            got_mss = True
            if length != 4:
                return OptionResult(mss, snd_wscale, f"MSS option length {length} != 4")
            value = (byte(offset + 2) << 8) | byte(offset + 3)
            floor_mtu, to_mss = ((MIN_MTU_IPV4, MTU_TO_MSS_IPV4) if ipv4
                                 else (MIN_MTU_IPV6, MTU_TO_MSS_IPV6))
            if value + to_mss < floor_mtu:
                return OptionResult(mss, snd_wscale,
                                    f"MSS {value} below {floor_mtu - to_mss}")
            mss = min(mss, value)
        elif kind == OPTION_NUM_WINDOW_SCALE:
            snd_wscale = byte(offset + 2)
        if length == 0:
            # offset += 0: irdma_process_options spins on this option forever.
            return OptionResult(mss, snd_wscale, f"option {kind} with length 0",
                                hang=True)
        offset += length
    if not got_mss and syn:
        mss = CM_DEFAULT_MSS
    return OptionResult(mss, snd_wscale)


def syn_options(mss: int, rcv_wscale: int) -> bytes:
    """``irdma_send_syn``: MSS, window scale and EOL: ``02 04 MSS 03 03 shift 00``."""
    return struct.pack("!BBHBBBB", OPTION_NUM_MSS, 4, mss & 0xFFFF,
                       OPTION_NUM_WINDOW_SCALE, 3, rcv_wscale & 0xFF, OPTION_NUM_EOL)
