"""The arguments of the verbs every stack takes, each with the range of the type iw_cm
hands it to the driver in: one table for every stack's verbs and for ``Host``'s.

A value outside its type cannot reach a driver at all (a port is the u16 ``sin_port`` of
a sockaddr, IRD and ORD the u32 fields of ``struct iw_cm_conn_param``), so it is refused
here, before anything changes, with :class:`VerbArgumentError` (a
:class:`~mpa_emu.stacks.contract.errors.CmError` with -EINVAL, hence an ``MpaEmuError`` and a
``ValueError``). What a driver refuses within those ranges (port 0, private data over
its limit, IRD over its device's) stays each stack's own rule, in its core, with its
kernel function.
"""

from __future__ import annotations

from collections.abc import Mapping
from errno import EINVAL

from mpa_emu.ranges import INT_MAX, U16_MAX, U32_MAX, Range
from mpa_emu.stacks.contract.errors import CmError

VERB_ARGS: Mapping[str, Range] = {
    "port": Range(0, U16_MAX, "u16 sin_port of the sockaddr in struct iw_cm_id "
                              "(include/rdma/iw_cm.h)"),
    "local_port": Range(0, U16_MAX, "u16 sin_port of iw_cm_id's local_addr"),
    "backlog": Range(0, INT_MAX, "int backlog of iw_cm_listen and the driver's "
                                 "create_listen"),
    "ird": Range(0, U32_MAX, "u32 ird of struct iw_cm_conn_param"),
    "ord": Range(0, U32_MAX, "u32 ord of struct iw_cm_conn_param"),
    "private_data": Range(0, U16_MAX, "bytes: the 16-bit PD_Length of an MPA frame "
                                      "(RFC 5044 section 7.1) bounds what can be sent; "
                                      "each stack's own limit and u8 length apply "
                                      "below it"),
    "vlan": Range(0, 4094, "u16 vlan_id below VLAN_N_VID (4096); 4095 is reserved"),
}
"""Verb argument -> the range of its type."""

VERBS: Mapping[str, tuple[str, ...]] = {
    "listen": ("port", "backlog", "vlan"),
    "connect": ("port", "local_port", "private_data", "ird", "ord"),
    "accept": ("private_data", "ird", "ord"),
    "reject": ("private_data",),
}
"""The arguments of each verb that :data:`VERB_ARGS` bounds."""


class VerbArgumentError(CmError):
    """A verb argument outside :data:`VERB_ARGS` or of the wrong type (-EINVAL)."""

    def __init__(self, verb: str, name: str, problem: str) -> None:
        super().__init__(EINVAL, f"{verb}: {name}: {problem}")
        self.verb = verb
        self.argument = name


def check_verb_args(verb: str, **values: object) -> None:
    """Check the arguments of ``verb`` (a key of :data:`VERBS`) given as keywords; None
    means not given (an ephemeral local port, the request's IRD/ORD, no VLAN)."""
    allowed = VERBS[verb]
    for name, value in values.items():
        if name not in allowed:
            raise KeyError(f"{verb} has no bounded argument {name!r}")
        if value is None:
            continue
        bounds = VERB_ARGS[name]
        if name == "private_data":
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise VerbArgumentError(verb, name, f"expected bytes, got "
                                        f"{type(value).__name__}")
            if len(value) > bounds.hi:
                raise VerbArgumentError(verb, name, f"{len(value)} bytes, at most "
                                        f"{bounds.hi} ({bounds.why})")
            continue
        problem = bounds.problem(value)
        if problem is not None:
            raise VerbArgumentError(verb, name, problem)


__all__ = ["VERBS", "VERB_ARGS", "VerbArgumentError", "check_verb_args"]
