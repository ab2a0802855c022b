"""Local misuse of the CM verbs: raised at once, before anything changes."""

from __future__ import annotations

import errno as _errno

from mpa_emu.errors import MpaEmuError

_KERNEL_NAMES = {_errno.EOPNOTSUPP: "EOPNOTSUPP", _errno.EDEADLK: "EDEADLK",
                 _errno.EAGAIN: "EAGAIN"}
"""Where two names share a value, the one the kernel returns
(include/uapi/asm-generic/errno.h): Python's ``errno.errorcode`` gives the C library's
alias (ENOTSUP for 95, EDEADLOCK for 35)."""


def errno_name(err: int) -> str:
    """The kernel's name of a positive errno value (``EOPNOTSUPP`` for 95), or the number
    as text when it has none."""
    return _KERNEL_NAMES.get(err) or _errno.errorcode.get(err, str(err))


class CmError(MpaEmuError, ValueError):
    """A verb called in a way the driver refuses (wrong state, over a limit, unknown handle).

    ``errno`` is the positive Linux errno the kernel would return (``-errno`` in C), e.g.
    ``errno.EINVAL`` for ``irdma_reject`` with private data over the limit. Raising a
    ``CmError`` guarantees that the core's state is unchanged, except where a verb
    documents that the kernel's error path ran before it returned (``CmCore.accept``).

    ``before_iw_cm`` marks a refusal the kernel makes before iw_cm's own state changes:
    the call would run only after another one still under way in the driver returns
    (ucma takes the id's handler lock around ``rdma_accept``/``rdma_reject``), by which
    time iw_cm's id has left CONN_RECV and ``iw_cm_accept``/``iw_cm_reject`` return
    -EINVAL untouched. The caller then leaves the iw_cm state as it is.
    """

    def __init__(self, err: int, message: str, *, before_iw_cm: bool = False) -> None:
        super().__init__(f"{message} (-{errno_name(err)})")
        self.errno = err
        self.message = message
        self.before_iw_cm = before_iw_cm
