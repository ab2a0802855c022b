"""What ``mpa-emu peer --stack NAME`` offers: the MPA settings of a stack's requests and
replies, from its registry parameters, so a kernel-socket peer frames MPA as that stack
does (the kernel does TCP). Each stack states its own framing, with the function that
decides each setting (``STACKS[name].peer_framing``)."""

from __future__ import annotations

from collections.abc import Mapping

from mpa_emu.stacks import STACKS, parse_params
from mpa_emu.stacks.base import PeerFraming as PeerStack


def peer_stack(stack: str, params: Mapping[str, object] | None = None) -> PeerStack:
    """The settings of ``stack`` with ``params`` (checked by the registry; ValueError
    with one line naming the problem)."""
    p = parse_params(stack, dict(params or {}))
    return STACKS[stack].peer_framing(p)


__all__ = ["PeerStack", "peer_stack"]
