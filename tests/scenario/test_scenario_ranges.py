"""Every configuration value is checked against the type the kernel keeps it in, with one
table for scenario files, the Python API and the CLI: out of range is a one-line error
naming the file, the line, the key and the allowed range, and nothing runs.

The bounds asserted here are the kernel's (drivers/infiniband/hw/irdma/cm.h: ``u32
retranscount`` of struct irdma_timer_entry, ``int backlog`` of struct irdma_cm_listener,
``u16`` ports; ``u16 mtu`` of struct irdma_sc_vsi in type.h; IETF_NO_IRD_ORD 0x3FFF in
the 14-bit MPA v2 IRD/ORD field) and RFC 7323 section 2.3 (window shift at most 14)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mpa_emu.stacks.contract.errors import CmError
from mpa_emu.stacks.irdma.config import CmConfig
from mpa_emu.stacks.irdma.limits import CONFIG_RANGES, VERB_RANGES

from mpa_emu.cli import main
from mpa_emu.net import Network
from mpa_emu.scenario import ScenarioError, loads

SILENT_PEER = """\
[[host]]
name = "a"
address = "10.0.0.1"
neighbours = {{ "10.0.0.2" = "02:00:00:00:00:09" }}
[host.config]
retrans = {retrans}
[[connect]]
from = "a"
to = "10.0.0.2"
port = 1
"""
"""A host that connects to an address nobody answers: each SYN is retransmitted until
``retrans`` runs out (a fuzzed file set it to 2^63 - 1)."""


def test_the_200_byte_scenario_with_retrans_2_63_ends_before_it_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "silent.toml"
    path.write_text(SILENT_PEER.format(retrans=2**63 - 1), encoding="utf-8")
    assert len(path.read_bytes()) <= 200
    out = tmp_path / "o.pcapng"
    assert main(["run", str(path), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"mpa-emu run: error: {path}:6: host[1].config.retrans: "
                          "expected an integer 0..4294967295 (u32 retranscount")
    assert err.rstrip().endswith("got 9223372036854775807")
    assert not out.exists()  # nothing ran


def test_a_legal_large_retrans_is_taken() -> None:
    sc = loads(SILENT_PEER.format(retrans=2**32 - 1), "silent.toml")
    assert sc.hosts[0].config.retrans == 2**32 - 1


@pytest.mark.parametrize(("key", "lo", "hi"), [
    ("retrans", 0, 2**32 - 1), ("mtu", 68, 0xFFFF), ("max_ird", 0, 0x3FFE),
    ("max_ord", 0, 0x3FFE), ("rcv_wscale", 0, 14), ("gen", 1, 2),
])
def test_config_ranges_are_the_kernels_types(key: str, lo: int, hi: int) -> None:
    assert (CONFIG_RANGES[key].lo, CONFIG_RANGES[key].hi) == (lo, hi)


def test_verb_ranges_are_the_kernels_types() -> None:
    assert (VERB_RANGES["backlog"].lo, VERB_RANGES["backlog"].hi) == (0, 2**31 - 1)
    assert (VERB_RANGES["port"].lo, VERB_RANGES["port"].hi) == (1, 0xFFFF)
    assert (VERB_RANGES["ird"].hi, VERB_RANGES["ord"].hi) == (2**32 - 1, 2**32 - 1)


def test_every_integer_setting_has_a_range() -> None:
    ints = {f.name for f in dataclasses.fields(CmConfig)
            if isinstance(getattr(CmConfig(), f.name), int)
            and not isinstance(getattr(CmConfig(), f.name), bool)}
    assert ints == set(CONFIG_RANGES)


def _host_config(key: str, value: int) -> str:
    return f'[[host]]\nname = "a"\naddress = "10.0.0.1"\n[host.config]\n{key} = {value}\n'


@pytest.mark.parametrize("key", sorted(CONFIG_RANGES))
def test_scenario_file_and_api_refuse_the_same_values_with_the_same_words(key: str) -> None:
    allowed = CONFIG_RANGES[key]
    for bad in (allowed.lo - 1, allowed.hi + 1):
        problem = allowed.problem(bad)
        assert problem is not None and allowed.text() in problem
        with pytest.raises(ScenarioError) as toml:
            loads(_host_config(key, bad), "s.toml")
        assert str(toml.value) == f"s.toml:5: host[1].config.{key}: {problem}"
        with pytest.raises(ValueError) as api:
            CmConfig(**{key: bad})
        assert str(api.value) == f"{key}: {problem}"
    for good in (allowed.lo, allowed.hi):
        assert getattr(CmConfig(**{key: good}), key) == good
        assert getattr(loads(_host_config(key, good), "s.toml").hosts[0].config, key) == good


def test_listen_backlog_and_connect_ird_past_the_kernel_types_are_refused() -> None:
    net = Network(seed=1)
    a = net.add_host("a", "10.0.0.1")
    b = net.add_host("b", "10.0.0.2")
    with pytest.raises(CmError, match=r"backlog: expected an integer 0\.\.2147483647"):
        b.core.create_listen(None, 31000, backlog=2**31)
    with pytest.raises(CmError, match=r"ird: expected an integer 0\.\.4294967295"):
        a.core.connect(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 31000, ird=2**32,
                       now_ns=0)
    assert net.frames == []


def test_network_seed_latency_and_schedule_have_bounds() -> None:
    with pytest.raises(ValueError, match=r"seed: expected an integer 0\.\.18446744073709551615"):
        Network(seed=2**64)
    with pytest.raises(ValueError, match="latency_ns: expected an integer"):
        Network(latency_ns=-1)
    with pytest.raises(ValueError, match=r"time_ns: expected an integer 0\.\.4611686018427387904"):
        Network().at(2**63, print)


def test_scenario_times_and_counts_have_bounds() -> None:
    hosts = '[[host]]\nname = "a"\naddress = "10.0.0.1"\n'
    with pytest.raises(ScenarioError, match=r"s.toml:1: duration: expected a duration of "
                                            r"at most 4611686018427387904 ns"):
        loads('duration = "99999999999999999999999s"\n' + hosts, "s.toml")
    connect = ('[[connect]]\nfrom = "a"\nto = "10.0.0.2"\nport = 1\ncount = 100000\n'
               'interval = "5000000s"\n')
    with pytest.raises(ScenarioError, match=r"s.toml:\d+: connect\[1\].interval: the last "
                                            r"of 100000 connects would start"):
        loads(hosts + connect, "s.toml")
    with pytest.raises(ScenarioError, match=r"max_events: expected an integer 1..1000000000"):
        loads("max_events = 10000000000\n" + hosts, "s.toml")
    with pytest.raises(ScenarioError, match=r"listen\[1\].backlog: expected an integer "
                                            r"0..2147483647 \(int backlog"):
        loads(hosts + '[[listen]]\nhost = "a"\nport = 1\nbacklog = 2147483648\n', "s.toml")


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "x.pcap", "--emulate", "10.0.0.1", "--backlog", "2147483648"],
     "--backlog must be 0..2147483647 (int backlog"),
    (["run", "x.toml", "--seed", str(2**64)], "a seed is 0..18446744073709551615"),
])
def test_cli_options_use_the_same_table(capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
