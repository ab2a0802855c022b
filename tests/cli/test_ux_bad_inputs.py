"""Every command refuses bad input the same way: exit 2, one line on stderr naming the
problem, no traceback. Each case runs in-process through ``mpa_emu.cli.main``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
GOOD_PCAP = ROOT / "pcaps" / "v2_accept.pcap"
GOOD_PCAPNG = ROOT / "pcaps" / "v2_accept_ipv6.pcapng"
SCENARIO = ROOT / "scenarios" / "v2_accept.toml"

HOSTS = """\
[[host]]
name = "a"
address = "192.0.2.1"

[[host]]
name = "b"
address = "192.0.2.2"
"""

# name -> scenario text, each with one kind of mistake.
SCENARIOS = {
    "wrong_type": 'seed = "x"\n' + HOSTS,
    "unknown_top_key": "sed = 1\n" + HOSTS,
    "unknown_host_key": HOSTS + 'adress = "192.0.2.3"\n',
    "missing_name": '[[host]]\naddress = "192.0.2.1"\n',
    "no_host": 'name = "empty"\n',
    "bad_ipv4": '[[host]]\nname = "a"\naddress = "192.0.2.300"\n',
    "bad_ipv6": '[[host]]\nname = "a"\naddress = "fd00::zz"\n',
    "empty_address_list": '[[host]]\nname = "a"\naddress = []\n',
    "duplicate_host": HOSTS + '[[host]]\nname = "a"\naddress = "192.0.2.9"\n',
    "shared_address": HOSTS + '[[host]]\nname = "c"\naddress = "192.0.2.1"\n',
    "listen_port_0": HOSTS + '[[listen]]\nhost = "b"\nport = 0\n',
    "listen_port_65536": HOSTS + '[[listen]]\nhost = "b"\nport = 65536\n',
    "listen_no_port": HOSTS + '[[listen]]\nhost = "b"\n',
    "listen_unknown_host": HOSTS + '[[listen]]\nhost = "z"\nport = 1\n',
    "duplicate_listen_name": HOSTS + '[[listen]]\nhost = "b"\nport = 1\nname = "l"\n'
                                     '[[listen]]\nhost = "b"\nport = 2\nname = "l"\n',
    "duplicate_connect_name": HOSTS + '[[connect]]\nfrom = "a"\nto = "b"\nport = 1\nname = "c"\n'
                                      '[[connect]]\nfrom = "a"\nto = "b"\nport = 2\nname = "c"\n',
    "connect_bad_target": HOSTS + '[[connect]]\nfrom = "a"\nto = "nobody"\nport = 1\n',
    "time_in_the_past": HOSTS + '[[event]]\nat = "-1s"\nhost = "a"\naction = "link_down"\n',
    "time_not_a_duration": 'duration = "5 parsecs"\n' + HOSTS,
    "probability_over_1": HOSTS + "[wire]\nloss = 2\n",
    "unknown_verb": HOSTS + '[[expect.verb_failure]]\nhost = "a"\nverb = "fly"\n',
    "not_toml": "this is = = not toml\n",
    "expect_table_typo": HOSTS + '[[expect.upcal]]\nhost = "a"\n',
}

SCENARIO_MESSAGES = {
    "wrong_type": "s.toml:1: seed: expected an integer",
    "unknown_top_key": "unknown key 'sed'",
    "unknown_host_key": "unknown key 'adress'",
    "missing_name": "missing required key 'name'",
    "no_host": "at least one [[host]]",
    "bad_ipv4": "not an IPv4 or IPv6 address: '192.0.2.300'",
    "bad_ipv6": "not an IPv4 or IPv6 address: 'fd00::zz'",
    "empty_address_list": "host[1].address: an empty array",
    "duplicate_host": "host 'a' is defined twice",
    "shared_address": "192.0.2.1 already belongs to a",
    "listen_port_0": "listen[1].port: expected an integer 1..65535 (u16 loc_port",
    "listen_port_65536": "got 65536",
    "listen_no_port": "missing required key 'port'",
    "listen_unknown_host": "no [[host]] named 'z'",
    "duplicate_listen_name": "[[listen]] name 'l' is already used on line 11",
    "duplicate_connect_name": "[[connect]] name 'c' is already used on line 12",
    "connect_bad_target": "s.toml:10: connect[1].to: unknown host 'nobody' (hosts: a, b; or "
                          "give an IPv4 or IPv6 address)",
    "expect_table_typo": "s.toml:8: expect.upcal: unknown key 'upcal' (known here: "
                         "cm_event, frame, listener, state, trace, upcall, verb_failure)",
    "time_in_the_past": 'event[1].at: expected a duration such as "10us"',
    "time_not_a_duration": "duration: expected a duration",
    "probability_over_1": "wire.loss: expected a probability between 0 and 1, got 2",
    "unknown_verb": 'verb: expected one of connect, create_listen',
    "not_toml": "invalid TOML",
}


def _pcap_records(data: bytes) -> list[tuple[int, int, bytes]]:
    records, pos = [], 24
    while pos < len(data):
        sec, usec, caplen, _orig = struct.unpack_from("<IIII", data, pos)
        records.append((sec, usec, data[pos + 16:pos + 16 + caplen]))
        pos += 16 + caplen
    return records


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.pcap").write_bytes(b"")
    (d / "dir.pcap").mkdir()
    (d / "text.pcap").write_text("hello\n")
    (d / "random.pcap").write_bytes(bytes(range(7, 250)) * 9)
    good = GOOD_PCAP.read_bytes()
    (d / "cut.pcap").write_bytes(good[:100])
    (d / "cut.pcapng").write_bytes(GOOD_PCAPNG.read_bytes()[:200])
    # A record header announcing 2 GiB.
    (d / "huge.pcap").write_bytes(good[:24] + struct.pack("<IIII", 0, 0, 2**31 - 1, 2**31 - 1))
    # A Linux cooked capture: readable by inspect, refused by replay (needs Ethernet).
    header = bytearray(good[:24])
    struct.pack_into("<I", header, 20, 113)
    body = b"".join(
        struct.pack("<IIII", sec, usec, len(f) + 2, len(f) + 2)
        + struct.pack("!HHH8sH", 0, 1, 6, f[6:12] + b"\0\0", 0x0800) + f[14:]
        for sec, usec, f in _pcap_records(good))
    (d / "sll.pcap").write_bytes(bytes(header) + body)
    (d / "bin.toml").write_bytes(b"\x00\xff\xfe")
    for name, text in SCENARIOS.items():
        (d / name).mkdir()
        (d / name / "s.toml").write_text(text)
    return d


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse usage errors
        return int(exc.code or 0)


CASES: list[tuple[str, list[str], str]] = [
    # captures: inspect, diagram, replay, judge
    ("inspect_missing", ["inspect", "{d}/none.pcap"], "No such file or directory"),
    ("inspect_directory", ["inspect", "{d}/dir.pcap"], "Is a directory"),
    ("inspect_empty", ["inspect", "{d}/empty.pcap"], "empty file"),
    ("inspect_random", ["inspect", "{d}/random.pcap"], "not a pcap or pcapng file"),
    ("inspect_cut_pcap", ["inspect", "{d}/cut.pcap"], "truncated pcap record 0"),
    ("inspect_cut_pcapng", ["inspect", "{d}/cut.pcapng", "-c", "2"], "no connection 2"),
    ("inspect_huge_record", ["inspect", "{d}/huge.pcap"], "claims 2147483647 captured bytes"),
    ("inspect_port_70000", ["inspect", str(GOOD_PCAP), "-p", "70000"],
     "a TCP port is 0..65535, got 70000"),
    ("inspect_port_negative", ["inspect", str(GOOD_PCAP), "-p", "-5"],
     "a TCP port is 0..65535, got -5"),
    ("inspect_port_text", ["inspect", str(GOOD_PCAP), "-p", "http"], "expected an integer"),
    ("inspect_connection_0", ["inspect", str(GOOD_PCAP), "-c", "0"], "expected 1 or more"),
    ("inspect_connection_absent", ["inspect", str(GOOD_PCAP), "-c", "7"],
     "no connection 7 in"),
    ("diagram_missing", ["diagram", "{d}/none.pcap"], "No such file or directory"),
    ("diagram_cut_pcap", ["diagram", "{d}/cut.pcap"], "truncated pcap record 0"),
    ("diagram_random", ["diagram", "{d}/random.pcap"], "not a pcap or pcapng file"),
    ("diagram_port", ["diagram", str(GOOD_PCAP), "-p", "65536"], "a TCP port is 0..65535"),
    ("diagram_unwritable", ["diagram", str(GOOD_PCAP), "-o", "{d}/none/x.svg"],
     "No such file or directory"),
    ("diagram_output_directory", ["diagram", str(GOOD_PCAP), "-o", "{d}/dir.pcap"],
     "Is a directory"),
    ("diagram_bad_scenario", ["diagram", "{d}/bad_ipv4/s.toml"], "not an IPv4"),
    ("replay_no_emulate", ["replay", str(GOOD_PCAP)], "required: --emulate"),
    ("replay_bad_ipv4", ["replay", str(GOOD_PCAP), "--emulate", "999.1.1.1"],
     "--emulate: not an IPv4 or IPv6 address"),
    ("replay_bad_ipv6", ["replay", str(GOOD_PCAP), "--emulate", "fd00::zz"],
     "--emulate: not an IPv4 or IPv6 address"),
    ("replay_absent_host", ["replay", str(GOOD_PCAP), "--emulate", "10.0.0.9"],
     "no TCP frames sent or received by 10.0.0.9 (addresses in the capture: 192.168.10.1, "
     "192.168.10.2)"),
    ("replay_linux_cooked", ["replay", "{d}/sll.pcap", "--emulate", "192.168.10.2"],
     "not Ethernet (link type 113)"),
    ("replay_empty", ["replay", "{d}/empty.pcap", "--emulate", "192.168.10.2"], "empty file"),
    ("replay_horizon_inf", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                            "--horizon", "inf"], "--horizon must be 0..1e+09 seconds, got inf"),
    ("replay_horizon_huge", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                             "--horizon", "1e300"], "--horizon must be 0..1e+09 seconds"),
    ("replay_tolerance_nan", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                              "--time-tolerance", "nan"], "--time-tolerance must be"),
    ("replay_tolerance_inf", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                              "--time-tolerance", "inf"], "--time-tolerance must be"),
    ("replay_backlog_negative", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                                 "--backlog", "-1"], "--backlog must be 0..2147483647"),
    ("replay_seed_text", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                          "--seed", "x"], "expected an integer, got 'x'"),
    ("replay_seed_negative", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                              "--seed", "-2"], "a seed is 0 or more, got -2"),
    ("replay_unwritable", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                           "-o", "{d}/none/x.pcapng"], "cannot write output"),
    ("replay_json_unwritable", ["replay", str(GOOD_PCAP), "--emulate", "192.168.10.2",
                                "--json", "{d}/dir.pcap"], "Is a directory"),
    ("demo_seed_negative", ["demo", "--seed", "-1", "-o", "{d}/demo.pcapng"],
     "a seed is 0 or more, got -1"),
    ("judge_missing", ["judge", "{d}/none.pcap"], "no such capture file"),
    ("judge_directory", ["judge", "{d}/dir.pcap"], "Is a directory"),
    ("judge_empty", ["judge", "{d}/empty.pcap"], "empty file"),
    ("judge_text", ["judge", "{d}/text.pcap"], "not a pcap or pcapng file"),
    ("judge_no_tshark", ["judge", str(GOOD_PCAP), "--tshark", "{d}/none/tshark"],
     "tshark not found"),
    # scenarios
    ("run_missing", ["run", "{d}/none.toml"], "cannot read: No such file or directory"),
    ("run_directory", ["run", "{d}/dir.pcap"], "cannot read: Is a directory"),
    ("run_binary", ["run", "{d}/bin.toml"], "not UTF-8 text"),
    ("run_seed_text", ["run", str(SCENARIO), "--seed", "x"], "expected an integer, got 'x'"),
    ("run_seed_negative", ["run", str(SCENARIO), "--seed", "-1"], "a seed is 0 or more, got -1"),
    ("run_unwritable_pcapng", ["run", str(SCENARIO), "-o", "{d}/none/x.pcapng"],
     "No such file or directory"),
    ("run_unwritable_trace", ["run", str(SCENARIO), "--trace", "{d}/none/x.jsonl"],
     "No such file or directory"),
    ("run_unwritable_json", ["run", str(SCENARIO), "--json", "{d}/dir.pcap"], "Is a directory"),
    ("run_outputs_with_two_files", ["run", str(SCENARIO), str(SCENARIO), "-o", "{d}/x.pcapng"],
     "need a single scenario file"),
    # a capture where a scenario is due, and the other way round
    ("run_a_capture", ["run", str(GOOD_PCAP)], "a packet capture, not a scenario file"),
    ("inspect_a_scenario", ["inspect", str(SCENARIO)], "(a scenario file? mpa-emu run or "
                                                       "diagram take those)"),
    ("replay_a_scenario", ["replay", str(SCENARIO), "--emulate", "192.0.2.2"],
     "(a scenario file? mpa-emu run or diagram take those)"),
    # kernel-map
    ("kernel_map_unknown", ["kernel-map", "irdma_no_such_function"], "not a cm.c function"),
    ("kernel_map_status", ["kernel-map", "--status", "bogus"], "invalid choice: 'bogus'"),
    # peer: every case fails before a socket is opened
    ("peer_no_mode", ["peer"], "one of the arguments --listen --connect is required"),
    ("peer_listen_0", ["peer", "--listen", "0"], "--listen port must be 1..65535, got 0"),
    ("peer_listen_65536", ["peer", "--listen", "65536"], "got 65536"),
    ("peer_listen_text", ["peer", "--listen", "http"], "invalid int value"),
    ("peer_connect_no_port", ["peer", "--connect", "192.0.2.1"], "IP:PORT"),
    ("peer_connect_port_0", ["peer", "--connect", "192.0.2.1:0"], "port must be 1..65535"),
    ("peer_connect_port_65536", ["peer", "--connect", "192.0.2.1:65536"],
     "port must be 1..65535"),
    ("peer_connect_bad_ipv4", ["peer", "--connect", "192.0.2.300:80"], "IP:PORT"),
    ("peer_connect_bad_ipv6", ["peer", "--connect", "[fd00::zz]:80"], "[IPv6]:PORT"),
    ("peer_connect_ipv6_unbracketed", ["peer", "--connect", "fd00::1:80"],
     "needs brackets, as in [fd00::1]:80"),
    ("peer_bind_bad", ["peer", "--listen", "4000", "--bind", "999.1.1.1"],
     "--bind: not an IPv4 or IPv6 address"),
    ("peer_ird_negative", ["peer", "--listen", "4000", "--ird", "-1"], "--ird must be 0..16383"),
    ("peer_timeout_inf", ["peer", "--connect", "192.0.2.1:4000", "--timeout", "inf"],
     "--timeout must be a finite number of seconds"),
    ("peer_hold_nan", ["peer", "--connect", "192.0.2.1:4000", "--hold", "nan"],
     "--hold must be a finite number of seconds"),
    ("peer_private_data_too_long", ["peer", "--connect", "192.0.2.1:4000",
                                    "--private-data", "x" * 600], "private data is 600 bytes"),
    # live: every case fails before a device is created (the TAP name is invalid anyway)
    ("live_no_address", ["live", "--tap", "bad/name"], "required: --address"),
    ("live_bad_ipv6", ["live", "--tap", "bad/name", "--address", "fd00::zz"],
     "not an IPv4 or IPv6 address"),
    ("live_connect_port", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                           "--connect", "192.0.2.1:65536"], "port must be 1..65535"),
    ("live_duration_nan", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                           "--duration", "nan"], "--duration must be a finite number"),
    ("live_grace_negative", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                             "--grace", "-1"], "--grace must be a finite number"),
    ("live_output_unwritable", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                                "-o", "{d}/none/x.pcapng"], "-o {d}/none/x.pcapng: no such "
                                                            "directory"),
    ("live_trace_directory", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                              "--trace", "{d}/dir.pcap"], "--trace {d}/dir.pcap: is a directory"),
    ("live_seed_negative", ["live", "--tap", "bad/name", "--address", "192.0.2.2",
                            "--seed", "-1"], "a seed is 0 or more"),
    ("live_tap_name", ["live", "--tap", "x" * 16, "--address", "192.0.2.2"],
     "bad interface name"),
    # the command line itself
    ("unknown_command", ["bogus"], "invalid choice: 'bogus'"),
    ("unknown_option", ["inspect", str(GOOD_PCAP), "--frobnicate"],
     "unrecognized arguments: --frobnicate"),
]
CASES += [(f"run_scenario_{name}", ["run", f"{{d}}/{name}/s.toml"], SCENARIO_MESSAGES[name])
          for name in SCENARIOS]


@pytest.mark.parametrize(("argv", "message"), [pytest.param(a, m, id=i) for i, a, m in CASES])
def test_bad_input_exits_2_with_one_line_naming_the_problem(
        files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    d = str(files)
    code = _run([a.replace("{d}", d) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    command = argv[0] if argv[0] != "bogus" else ""
    assert err.startswith(f"mpa-emu {command}".rstrip() + ": error: "), err
    assert message.replace("{d}", d) in err, err


def test_usage_errors_point_to_help_instead_of_printing_usage(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["inspect", str(GOOD_PCAP), "-p", "http"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("mpa-emu inspect: error: argument -p/--port: expected an integer, "
                            "got 'http' (see mpa-emu inspect --help)\n")
