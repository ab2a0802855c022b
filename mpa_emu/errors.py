"""The one base of every exception mpa_emu defines.

``except MpaEmuError`` catches anything the package raises on purpose: a verb the driver
refuses (:class:`mpa_emu.stacks.contract.errors.CmError`, with its errno), bytes that cannot be a
frame,
a capture or scenario that cannot be read, a failed command. Each class keeps the built-in
base it has always had (``ValueError`` for bad values, ``RuntimeError`` for tshark,
``AssertionError`` for an emulator bug), so code that catches those still does.
"""

from __future__ import annotations


class MpaEmuError(Exception):
    """Base class of every exception defined by mpa_emu."""


class ConfigError(MpaEmuError, ValueError):
    """A bad value given to a public entry point (a host, an address, a stack or its
    parameters, a fault setting, a verb's argument): refused with one line naming it,
    before anything changes. Also a ``ValueError``, so older ``except ValueError``
    callers still catch it."""


class UsageError(MpaEmuError, RuntimeError):
    """A call the API refuses in its current state (a nested ``Network.run``). Also a
    ``RuntimeError``, as it always was."""


__all__ = ["ConfigError", "MpaEmuError", "UsageError"]
