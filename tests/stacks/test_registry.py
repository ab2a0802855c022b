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


def test_irdma_is_registered_with_its_two_compiled_in_settings() -> None:
    st = STACKS["irdma"]
    assert isinstance(st, Stack)
    assert st.name == "irdma"
    # IRDMA_CM_DEFAULT_MPA_VER is 2 (cm.h); GEN_2 is the E810 (icrdma).
    assert st.defaults() == {"mpa_rev": 2, "gen": 2}
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
    with pytest.raises(ValueError,
                       match=r"^irdma: unknown parameter 'x' \(parameters: mpa_rev, gen\)$"):
        parse_params("irdma", {"x": 1})


def test_a_default_irdma_host_is_unchanged() -> None:
    net = Network(seed=3)
    a = net.add_host("a", "192.0.2.1")
    b = net.add_host("b", "192.0.2.2", stack="irdma", params={})
    assert (a.stack, b.stack) == ("irdma", "irdma")
    assert a.params == b.params == {"mpa_rev": 2, "gen": 2}
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


SIW_HOST = """\
[[host]]
name = "a"
address = "192.0.2.1"
stack = "siw"
"""


def test_siw_is_registered_with_its_kernel_names() -> None:
    st = STACKS["siw"]
    names = [p.name for p in st.params]
    assert names[:5] == ["mpa_version", "peer_to_peer", "mpa_crc_required", "mpa_crc_strict",
                         "try_gso"]
    # siw_main.c: u_char mpa_version = MPA_REVISION_2; const bool peer_to_peer (false)...
    defaults = st.defaults()
    assert (defaults["mpa_version"], defaults["peer_to_peer"], defaults["mpa_crc_required"],
            defaults["mpa_crc_strict"], defaults["try_gso"]) == (2, False, False, False, False)
    assert all("rebuilt or patched siw" in p.where for p in st.params)
    # enum siw_cep_state (siw_cm.h), kernel order
    assert st.states == ("IDLE", "LISTENING", "CONNECTING", "AWAIT_MPAREQ", "RECVD_MPAREQ",
                         "AWAIT_MPAREP", "RDMA_MODE", "CLOSED")


def test_siw_parameters_are_checked_by_type_and_range() -> None:
    assert parse_params("siw", {"peer_to_peer": 1})["peer_to_peer"] is True
    with pytest.raises(ValueError, match=r"^siw: mpa_version must be 0\.\.255, got 300$"):
        parse_params("siw", {"mpa_version": 300})
    with pytest.raises(ValueError, match=r"^siw: peer_to_peer must be true or false"):
        parse_params("siw", {"peer_to_peer": "yes"})
    with pytest.raises(ValueError, match=r"^siw: unknown parameter 'p2p' \(parameters: "):
        parse_params("siw", {"p2p": True})


def test_stack_label_names_the_non_defaults_sorted_bools_as_digits() -> None:
    assert stack_label("siw", parse_params("siw", {})) == "siw"
    params = parse_params("siw", {"try_gso": True, "peer_to_peer": True, "mpa_version": 2})
    assert stack_label("siw", params) == "siw(peer_to_peer=1,try_gso=1)"


def test_scenario_siw_params_errors_name_file_line_key_and_range() -> None:
    with pytest.raises(ScenarioError) as info:
        loads(SIW_HOST + "[host.params]\nmpa_version = 7000\n", "s.toml")
    text = str(info.value)
    assert text.startswith("s.toml:6") and "mpa_version" in text and "0..255" in text
    assert "\n" not in text
    with pytest.raises(ScenarioError) as info:
        loads(SIW_HOST + "[host.params]\npeer2peer = true\n", "s.toml")
    assert "peer2peer" in str(info.value) and "peer_to_peer" in str(info.value)


def test_scenario_refuses_irdma_settings_on_a_siw_host() -> None:
    with pytest.raises(ScenarioError) as info:
        loads(SIW_HOST + 'profile = "siw"\n', "s.toml")
    assert "profile" in str(info.value) and "[host.params]" in str(info.value)


def test_scenario_siw_host_gets_its_stack_and_params() -> None:
    sc = loads(SIW_HOST + "[host.params]\npeer_to_peer = true\n", "s.toml")
    (host,) = sc.hosts
    assert (host.stack, host.params) == ("siw", (("peer_to_peer", True),))


def test_network_builds_a_siw_core_and_labels_its_capture_interface(tmp_path: object) -> None:
    import io

    net = Network(seed=1)
    h = net.add_host("s", "192.0.2.1", stack="siw", params={"peer_to_peer": True})
    assert type(h.core).__name__ == "SiwCore"
    assert h.params["peer_to_peer"] is True and h.params["mpa_version"] == 2
    out = io.BytesIO()
    net.write_pcapng(out)
    assert b"emulated siw(peer_to_peer=1) host s" in out.getvalue()


def test_irdma_parameters_set_its_configuration() -> None:
    net = Network(seed=3)
    host = net.add_host("a", "192.0.2.1", stack="irdma", params={"mpa_rev": 1, "gen": 1})
    assert (host.core.config.mpa_rev, host.core.config.gen) == (1, 1)
    with pytest.raises(ValueError, match=r"irdma: mpa_rev must be 1\.\.2, got 3"):
        net.add_host("b", "192.0.2.2", stack="irdma", params={"mpa_rev": 3})
