"""Kernel time arithmetic: jiffies of a configurable HZ and the retransmission back-off.

``irdma_cm_timer_tick`` computes the gap after the n-th resend as the C expression
``min(IRDMA_RETRY_TIMEOUT << n, IRDMA_MAX_TIMEOUT)`` where ``IRDMA_RETRY_TIMEOUT`` is
``HZ`` (an ``int``). Compiled for x86-64/arm64 the shift count is taken mod 32, the
result is a 32-bit int, a negative value converts to a huge ``unsigned long`` and is capped
at 12 s, and a result of 0 makes the entry due at once (``Quirks.backoff_int_shift``;
off: the clean ``min(HZ * 2**n, 12 s)``).
"""

from __future__ import annotations

from typing import Final

NS_PER_S: Final = 1_000_000_000
MAX_TIMEOUT_S: Final = 12
"""IRDMA_MAX_TIMEOUT = 12 * HZ."""


def ns_to_jiffies(now_ns: int, hz: int) -> int:
    """The jiffies counter at ``now_ns`` (virtual time starts at jiffy 0)."""
    if NS_PER_S % hz == 0:
        # The same floor for every HZ that divides a second (100, 250, 1000 ...), without
        # the product, which the compiled build multiplies on its slow path.
        return now_ns // (NS_PER_S // hz)
    return now_ns * hz // NS_PER_S


def jiffies_to_ns(j: int, hz: int) -> int:
    """The first nanosecond at which the jiffies counter reads ``j``."""
    return -(-j * NS_PER_S // hz)


def c_int_shift(value: int, shift: int) -> int:
    """``(int)value << shift`` as compiled on x86-64: count mod 32, 32-bit two's complement."""
    raw = (value << (shift & 31)) & 0xFFFF_FFFF
    return raw - (1 << 32) if raw & 0x8000_0000 else raw


def backoff_gap(hz: int, n: int, *, int_shift: bool = True) -> int:
    """Jiffies until the next resend after the ``n``-th one (``n`` = RETRANS - retranscount).

    With ``int_shift`` (the kernel as compiled) the C int shift rules apply; otherwise the
    gap is the clean ``min(HZ * 2**n, 12 * HZ)``.
    """
    cap = MAX_TIMEOUT_S * hz
    if not int_shift:
        # Past the cap's bit length the shift only grows (retrans may be any u32).
        return cap if n >= cap.bit_length() else min(hz << n, cap)
    shifted = c_int_shift(hz, n)
    if shifted < 0:
        # min(unsigned long, ...) of a negative int: the conversion makes it huge.
        return cap
    return min(shifted, cap)


def retransmit_schedule(hz: int, retrans: int, *, int_shift: bool = True) -> tuple[
        list[int], int]:
    """Jiffies (relative to the first send) of every resend and of the expiry.

    A gap of 0 makes the entry due at once; the core timer then fires on the next jiffy,
    so such a resend lands one jiffy after the previous one.
    """
    resends: list[int] = []
    due = hz  # IRDMA_RETRY_TIMEOUT after the first transmission
    count = retrans
    while count:
        resends.append(due)
        count -= 1
        gap = backoff_gap(hz, retrans - count, int_shift=int_shift)
        due = due + gap if gap > 0 else due + 1
    return resends, due
