"""One reader for ``NAME(K=V,...)`` stack labels (mpa_emu.stacks.labels), the inverse of
stack_label, used by the matrix's ``--side`` and replay's ``--profile``."""

from __future__ import annotations

import pytest

from mpa_emu.matrix.sides import parse_side
from mpa_emu.replay.stacks import choose
from mpa_emu.stacks import STACKS, parse_params, stack_label
from mpa_emu.stacks.labels import split_label


def test_a_bare_name_is_itself() -> None:
    assert split_label("siw") == ("siw", {})


def test_pairs_are_integers_or_booleans() -> None:
    assert split_label("cxgb4(mpa_rev=1, crc_enabled=off,ep_timeout_secs=0x10)") == \
        ("cxgb4", {"mpa_rev": 1, "crc_enabled": False, "ep_timeout_secs": 16})
    assert split_label("siw(peer_to_peer=true,)") == ("siw", {"peer_to_peer": True})


@pytest.mark.parametrize("name", list(STACKS))
def test_it_reads_back_what_stack_label_writes(name: str) -> None:
    st = STACKS[name]
    changed = dict(st.defaults())
    for p in st.params:  # every parameter away from its default, within its range
        changed[p.name] = (not p.default) if p.kind is bool else \
            (p.minimum if p.default != p.minimum else p.maximum)
    label = stack_label(name, changed)
    read_name, pairs = split_label(label)
    assert read_name == name
    assert parse_params(name, pairs) == changed


@pytest.mark.parametrize(("text", "message"), [
    ("siw(peer_to_peer=1", "'siw(peer_to_peer=1': write a stack as NAME or NAME(KEY=VALUE,...)"),
    ("siw(peer_to_peer)", "'siw(peer_to_peer)': 'peer_to_peer' is not KEY=VALUE"),
    ("siw(rtr_type=two)", "'siw(rtr_type=two)': 'two' is not a number"),
])
def test_a_malformed_label_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        split_label(text)
    assert str(exc.value) == message
    # the matrix and replay say the same, through the same reader
    for read in (parse_side, choose):
        with pytest.raises(ValueError) as again:
            read(text)
        assert str(again.value) == message


def test_the_matrix_and_replay_read_a_label_alike() -> None:
    side = parse_side("siw(peer_to_peer=yes,mpa_version=1)")
    choice = choose("siw(peer_to_peer=yes,mpa_version=1)")
    assert side.stack == choice.stack == "siw"
    assert dict(side.params) == dict(choice.params) == {"peer_to_peer": True,
                                                         "mpa_version": 1}
