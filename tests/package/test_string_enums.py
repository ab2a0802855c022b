"""The Literal aliases of the package's string enums name exactly the values the code
accepts: the checksum modes, replay's answer to an MPA request, the suite verdicts, the
responder's RTR preference and the v2 private-data tail, and what a payload is in MPA
terms."""

from __future__ import annotations

from typing import get_args

import pytest
from mpa_emu.stacks.irdma.config import PDATA_TAILS, CmConfig, PdataTail, Quirks, RtrPreference
from mpa_emu.stacks.irdma.core import CmCore
from mpa_emu.stacks.irdma.mpa_policy import Rdma0Op

from mpa_emu.campaign.suite import VERDICTS, SuiteVerdict
from mpa_emu.capture.checksums import Mode, ModeName, mode_name
from mpa_emu.cli import build_parser
from mpa_emu.replay.engine import OnRequest
from mpa_emu.wire.mpa import MpaKind


def test_checksum_mode_names_are_the_modes() -> None:
    assert set(get_args(ModeName)) == {m.value for m in Mode}
    assert [mode_name(m) for m in Mode] == [m.value for m in Mode]


def test_rtr_preferences_are_the_zero_length_operations() -> None:
    assert set(get_args(RtrPreference)) == {op.value for op in Rdma0Op} == {"read", "write"}
    for pref in get_args(RtrPreference):
        CmCore("h", b"\x02" * 6, CmConfig(rtr_preference=pref))
    with pytest.raises(ValueError):
        CmCore("h", b"\x02" * 6, CmConfig(rtr_preference="send"))


def test_on_request_answers_are_replay_s_choices() -> None:
    parser = build_parser("replay")
    args = parser.parse_args(["replay", "x.pcap", "--emulate", "192.0.2.1"])
    assert args.on_request in get_args(OnRequest)
    sub = next(a for a in parser._actions if a.dest == "command")
    replay = sub.choices["replay"]
    choices = next(a.choices for a in replay._actions if a.dest == "on_request")
    assert tuple(choices) == get_args(OnRequest)


def test_suite_verdicts_are_the_exit_codes_names() -> None:
    assert get_args(SuiteVerdict) == tuple(VERDICTS) == ("match", "diverge", "error")


def test_pdata_tails_are_the_quirk_s_choices() -> None:
    assert get_args(PdataTail) == PDATA_TAILS
    with pytest.raises(ValueError):
        Quirks(v2_pdata_tail="ones")


def test_mpa_kinds_are_the_four_and_none() -> None:
    assert set(get_args(MpaKind)) == {"request", "reply", "reject", "data", ""}
