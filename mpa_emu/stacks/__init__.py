"""The stack registry: every iWARP connection manager mpa_emu emulates, by name.

``STACKS["irdma"]`` is the Intel irdma CM (:mod:`mpa_emu.stacks.irdma`), ``STACKS["siw"]``
soft-iWARP
(:mod:`mpa_emu.stacks.siw`), ``STACKS["cxgb4"]`` Chelsio's iw_cxgb4
(:mod:`mpa_emu.stacks.cxgb4`), ``STACKS["qedr"]`` Marvell/QLogic FastLinQ
(:mod:`mpa_emu.stacks.qedr`), ``STACKS["erdma"]`` Alibaba's Elastic RDMA
(:mod:`mpa_emu.stacks.erdma`). Each :class:`Stack` carries the typed facts other layers
read instead of comparing its name (its kernel map, limits, statuses, framing,
fingerprint, lifecycle: docs/stacks/README.md) and makes a core that implements
:class:`mpa_emu.stacks.contract.api.CoreApi`, so :class:`mpa_emu.net.Network` drives any of them:
``net.add_host("b", "192.0.2.2", stack="siw", params={"peer_to_peer": True})``.
A stack's parameters (:class:`StackParam`) are named as its kernel source names them;
:func:`parse_params` checks them, :func:`stack_label` names a configured stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpa_emu.errors import ConfigError
from mpa_emu.stacks.base import Refusals, Stack, StackParam


def _irdma() -> Stack:
    from mpa_emu.stacks import irdma

    return Stack(name="irdma", title="Intel E810/X722 (irdma)", params=irdma.PARAMS,
                 make_core=irdma.make_core, doc="docs/cm-core.md", states=irdma.STATES,
                 kernel_map=irdma.KERNEL_MAP, facts=irdma.FACTS, statuses=irdma.STATUSES,
                 peer_framing=irdma.peer_framing, fingerprint=irdma.FINGERPRINT,
                 lifecycle=irdma.LIFECYCLE,
                 listener_facts=frozenset({"syn_qhash_installed"}), config=irdma.CONFIG,
                 replay=irdma.REPLAY, matrix=irdma.MATRIX, texts=irdma.TEXTS,
                 fuzz=irdma.FUZZ, refusals=irdma.REFUSALS, outcomes=irdma.OUTCOMES)


def _siw() -> Stack:
    from mpa_emu.stacks import siw
    from mpa_emu.stacks.siw import facts, kernel_map, refusals

    return Stack(name="siw", title="soft-iWARP over Linux TCP (siw)", params=siw.PARAMS,
                 make_core=siw.make_core, doc="docs/stacks/siw.md", states=siw.STATES,
                 kernel_map=kernel_map.KERNEL_MAP, facts=facts.FACTS,
                 statuses=facts.STATUSES, peer_framing=facts.peer_framing,
                 fingerprint=facts.FINGERPRINT, lifecycle=facts.LIFECYCLE,
                 listener_facts=frozenset(), config=None, replay=facts.REPLAY,
                 matrix=facts.MATRIX, texts=facts.TEXTS, fuzz=None,
                 refusals=Refusals(refusals.responder, refusals.initiator),
                 outcomes=facts.OUTCOMES)


def _cxgb4() -> Stack:
    from mpa_emu.stacks import cxgb4
    from mpa_emu.stacks.cxgb4 import facts, kernel_map, refusals

    params = tuple(StackParam(*spec) for spec in cxgb4.PARAM_SPECS)
    return Stack(name="cxgb4", title=cxgb4.TITLE, params=params, make_core=cxgb4.make_core,
                 doc=cxgb4.DOC, states=cxgb4.STATES, kernel_map=kernel_map.KERNEL_MAP,
                 facts=facts.FACTS, statuses=facts.STATUSES,
                 peer_framing=facts.peer_framing, fingerprint=facts.FINGERPRINT,
                 lifecycle=facts.LIFECYCLE, listener_facts=frozenset(), config=None,
                 replay=facts.REPLAY, matrix=facts.MATRIX, texts=facts.TEXTS, fuzz=None,
                 refusals=Refusals(refusals.responder, refusals.initiator),
                 outcomes=facts.OUTCOMES)


def _qedr() -> Stack:
    from mpa_emu.stacks import qedr
    from mpa_emu.stacks.qedr import facts, kernel_map, refusals

    return Stack(name="qedr", title=qedr.TITLE, params=qedr.PARAMS, make_core=qedr.make_core,
                 doc=qedr.DOC, states=qedr.STATES, kernel_map=kernel_map.KERNEL_MAP,
                 facts=facts.FACTS, statuses=facts.STATUSES,
                 peer_framing=facts.peer_framing, fingerprint=facts.FINGERPRINT,
                 lifecycle=facts.LIFECYCLE, listener_facts=frozenset(), config=None,
                 replay=facts.REPLAY, matrix=facts.MATRIX, texts=facts.TEXTS, fuzz=None,
                 refusals=Refusals(refusals.responder, refusals.initiator),
                 outcomes=facts.OUTCOMES)


def _erdma() -> Stack:
    from mpa_emu.stacks import erdma
    from mpa_emu.stacks.erdma import facts, kernel_map, refusals

    return Stack(name="erdma", title=erdma.TITLE, params=erdma.PARAMS,
                 make_core=erdma.make_core, doc=erdma.DOC, states=erdma.STATES,
                 kernel_map=kernel_map.KERNEL_MAP, facts=facts.FACTS,
                 statuses=facts.STATUSES, peer_framing=facts.peer_framing,
                 fingerprint=facts.FINGERPRINT, lifecycle=facts.LIFECYCLE,
                 listener_facts=frozenset(), config=None, replay=facts.REPLAY,
                 matrix=facts.MATRIX, texts=facts.TEXTS, fuzz=None,
                 refusals=Refusals(refusals.responder, refusals.initiator),
                 outcomes=facts.OUTCOMES)


STACKS: dict[str, Stack] = {"irdma": _irdma(), "siw": _siw(), "cxgb4": _cxgb4(),
                            "qedr": _qedr(), "erdma": _erdma()}
"""Stack name -> :class:`Stack`."""

DEFAULT_STACK = "irdma"
"""The stack a host, a scenario's ``[[host]]``, replay's emulated side and ``mpa-emu
live`` run when none is named."""


def stack_of(name: str) -> Stack:
    """The registered stack ``name``; :class:`~mpa_emu.errors.ConfigError` (a
    ValueError) naming the known ones otherwise."""
    return _stack(name)


def _stack(name: str) -> Stack:
    try:
        return STACKS[name]
    except KeyError:
        raise ConfigError(f"unknown stack {name!r}; expected one of "
                         f"{', '.join(sorted(STACKS))}") from None


def parse_params(stack: str, pairs: Mapping[str, object]) -> dict[str, int | bool]:
    """Check ``pairs`` against the parameters of ``stack``: every key known, every value
    of the right type and in range. Returns the full set (defaults filled in). A problem
    is a ValueError with one line naming the stack, the key and what is allowed."""
    st = _stack(stack)
    out = st.defaults()
    for key, value in pairs.items():
        try:
            p = st.param(key)
        except KeyError:
            known = ", ".join(q.name for q in st.params) or "none"
            raise ConfigError(f"{stack}: unknown parameter {key!r} (parameters: {known})"
                             ) from None
        out[key] = _check(stack, p, value)
    return out


def _check(stack: str, p: StackParam, value: Any) -> int | bool:
    if p.kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{stack}: {p.name} must be true or false (or 0/1), got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{stack}: {p.name} must be an integer {p.minimum}..{p.maximum}, "
                         f"got {value!r}")
    if not p.minimum <= value <= p.maximum:
        raise ConfigError(f"{stack}: {p.name} must be {p.minimum}..{p.maximum}, got {value}")
    return value


def stack_label(stack: str, params: Mapping[str, int | bool]) -> str:
    """``"siw"`` with every parameter at its default, else ``"siw(peer_to_peer=1)"``:
    the non-default parameters, sorted, comma-separated, booleans as 0/1."""
    st = _stack(stack)
    changed = []
    for key in sorted(params):
        value = params[key]
        try:
            default = st.param(key).default
        except KeyError:
            default = None
        if value != default:
            changed.append(f"{key}={int(value)}")
    return f"{stack}({','.join(changed)})" if changed else stack


__all__ = ["DEFAULT_STACK", "STACKS", "Stack", "StackParam", "parse_params", "stack_label",
           "stack_of"]
