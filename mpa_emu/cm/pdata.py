"""Private data lengths as the verbs receive them: a u8 all the way down.

``rdma_reject`` and ``iw_cm_reject`` take ``u8 private_data_len`` and ``irdma_reject``
takes ``u8 pdata_len``; ``struct rdma_conn_param`` carries ``u8 private_data_len`` into
``cma_accept_iw``/``cma_connect_iw``, which copy it into the (u16) field of
``struct iw_cm_conn_param`` for ``irdma_accept``/``irdma_connect``. A caller's length of
256 therefore arrives as 0, 513 as 1, and only that many bytes of its buffer are used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

U8 = 0xFF


def as_u8(verb: str, fn: str, private_data: bytes, trace: Callable[..., Any]) -> bytes:
    """The private data ``fn`` sees when the caller passed ``private_data``: its length
    cut to a u8 and the buffer to that length. A cut is recorded (``pdata_len_wrapped``)."""
    given = len(private_data)
    wrapped = given & U8
    if wrapped == given:
        return private_data
    trace("pdata_len_wrapped", fn, verb=verb, given=given, length=wrapped,
          reason=f"private_data_len is a u8: {given} bytes arrive as {wrapped}")
    return private_data[:wrapped]
