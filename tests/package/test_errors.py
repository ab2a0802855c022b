"""One error base: every exception class mpa_emu defines derives from
``mpa_emu.MpaEmuError`` and keeps the built-in base it is caught by."""

from __future__ import annotations

import errno
import importlib
import pkgutil

import pytest
from mpa_emu.stacks.contract.errors import CmError

import mpa_emu
from mpa_emu import MpaEmuError
from mpa_emu.capture.tshark import TsharkError
from mpa_emu.wire.codec import DecodeError
from mpa_emu.wire.mpa import MpaFormatError, decode_frame


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(mpa_emu.__path__, "mpa_emu."):
        if info.name.endswith("__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, BaseException)
                    and obj.__module__ == info.name):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


def test_the_walk_finds_the_package_s_exceptions() -> None:
    found = _exception_classes()
    assert CmError in found and DecodeError in found and TsharkError in found
    assert len(found) >= 26


def test_every_exception_of_the_package_derives_from_mpa_emu_error() -> None:
    outside = [f"{c.__module__}.{c.__qualname__}" for c in _exception_classes()
               if not issubclass(c, MpaEmuError)]
    assert outside == []


def test_a_verb_error_keeps_its_errno_and_is_still_a_value_error() -> None:
    with pytest.raises(ValueError) as caught:
        raise CmError(errno.EINVAL, "private data over the limit")
    assert isinstance(caught.value, MpaEmuError)
    assert caught.value.errno == errno.EINVAL
    assert str(caught.value) == "private data over the limit (-EINVAL)"


def test_bad_bytes_raise_an_error_caught_by_the_base_and_by_value_error() -> None:
    with pytest.raises(MpaEmuError) as caught:
        decode_frame(b"MPA ID Req Frame\x00")  # the header needs 20 bytes
    assert isinstance(caught.value, MpaFormatError)
    assert isinstance(caught.value, ValueError)
