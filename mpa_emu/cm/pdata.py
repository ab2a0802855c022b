"""Private data lengths as the verbs receive them: a u8 all the way down.

``rdma_reject`` and ``iw_cm_reject`` take ``u8 private_data_len`` and ``irdma_reject``
takes ``u8 pdata_len``; ``struct rdma_conn_param`` carries ``u8 private_data_len`` into
``cma_accept_iw``/``cma_connect_iw``, which copy it into the (u16) field of
``struct iw_cm_conn_param`` for ``irdma_accept``/``irdma_connect``. A caller's length of
256 therefore arrives as 0, 513 as 1, and only that many bytes of its buffer are used.
"""

from __future__ import annotations

from collections.abc import Callable
from errno import EINVAL
from typing import Any, Final

from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.wire.mpa import MAX_PRIV_DATA_LEN, RTR_MSG_SIZE

U8: Final = 0xFF


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


def check_conn_pdata(fn: str, private_data: bytes, rev: int) -> None:
    """Refuse (:class:`~mpa_emu.stacks.contract.errors.CmError` -EINVAL) private data of connect or
    accept that its MPA frame cannot carry: PD_Length, the data plus the RFC 6581 block
    at rev 2 (irdma_build_mpa_v2), above IETF_MAX_PRIV_DATA_LEN (RFC 5044 section 7.1;
    irdma_parse_mpa refuses such a frame with -EOVERFLOW), and over the pdata_buf[512]
    irdma_create_cm_node copies into. Reached only with ``Quirks.conn_pdata_u8`` off:
    the u8 length of rdma_conn_param never passes 255."""
    pd_length = len(private_data) + (RTR_MSG_SIZE if rev == 2 else 0)
    if pd_length > MAX_PRIV_DATA_LEN:
        block = f" + {RTR_MSG_SIZE} of the RFC 6581 block" if rev == 2 else ""
        raise CmError(EINVAL, f"{fn}: private data of {len(private_data)} bytes{block} is "
                      f"PD_Length {pd_length}, over the MPA limit of {MAX_PRIV_DATA_LEN}")
