"""The stack registry: names, parameter checks and labels, and how Network and scenario
files pick a stack."""

from __future__ import annotations

import pytest

from mpa_emu.net.network import Network
from mpa_emu.scenario import ScenarioError, loads
from mpa_emu.stacks import STACKS, Stack, StackParam, parse_params, stack_label

HOST = """\
[[host]]
name = "a"
address = "192.0.2.1"
"""


def test_irdma_is_registered_with_no_parameters() -> None:
    st = STACKS["irdma"]
    assert isinstance(st, Stack)
    assert st.name == "irdma"
    assert st.params == ()
    assert "OFFLOADED" in st.states  # enum irdma_cm_node_state (cm.h)


def test_every_parameter_default_is_in_its_range() -> None:
    for st in STACKS.values():
        for p in st.params:
            assert isinstance(p, StackParam)
            assert p.kind in (int, bool)
            assert p.minimum <= int(p.default) <= p.maximum, (st.name, p.name)
            assert p.where and p.doc


def test_unknown_stack_and_unknown_parameter_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown stack 'nope'"):
        parse_params("nope", {})
    with pytest.raises(ValueError, match=r"^irdma: unknown parameter 'x' \(parameters: none\)$"):
        parse_params("irdma", {"x": 1})


def test_a_default_irdma_host_is_unchanged() -> None:
    net = Network(seed=3)
    a = net.add_host("a", "192.0.2.1")
    b = net.add_host("b", "192.0.2.2", stack="irdma", params={})
    assert (a.stack, a.params, b.stack) == ("irdma", {}, "irdma")
    assert type(a.core).__name__ == "CmCore"


def test_network_refuses_an_unknown_stack_before_building_anything() -> None:
    net = Network()
    with pytest.raises(ValueError, match="unknown stack 'roce'"):
        net.add_host("a", "192.0.2.1", stack="roce")
    assert net.hosts == {}


def test_scenario_unknown_stack_names_file_and_key() -> None:
    with pytest.raises(ScenarioError) as info:
        loads(HOST + 'stack = "roce"\n', "s.toml")
    text = str(info.value)
    assert text.startswith("s.toml:4") and "stack" in text and "irdma" in text
    assert "\n" not in text


def test_scenario_params_on_irdma_are_refused_by_name() -> None:
    with pytest.raises(ScenarioError) as info:
        loads(HOST + "[host.params]\npeer_to_peer = true\n", "s.toml")
    text = str(info.value)
    assert "s.toml:5" in text and "peer_to_peer" in text and "\n" not in text


def test_stack_label_of_defaults_is_the_name() -> None:
    assert stack_label("irdma", {}) == "irdma"
