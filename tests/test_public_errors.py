"""Every public entry point refuses bad input with an ``MpaEmuError`` subclass and a
clear one-line message, so ``except MpaEmuError`` catches all of it; value errors stay
``ValueError`` too (:class:`mpa_emu.errors.ConfigError`), so older callers still work.

Each case is one call with one bad value; the message must name what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mpa_emu.compiled import compiled_modules
from mpa_emu.errors import ConfigError, MpaEmuError, UsageError
from mpa_emu.matrix.sides import make_side, parse_side
from mpa_emu.net.faults import DropRule, FaultConfig, drop_nth, is_kind
from mpa_emu.net.network import Network
from mpa_emu.scenario import loads
from mpa_emu.stacks import parse_params, stack_label


def _net() -> Network:
    return Network(seed=1)


def _host(stack: str = "siw") -> Any:
    return _net().add_host("a", "192.0.2.1", stack=stack)


def _nested_run() -> None:
    net = _net()
    net.at(0, net.run)
    net.run()


CASES: dict[str, tuple[Callable[[], object], str]] = {
    # Network
    "seed": (lambda: Network(seed=-1), "seed"),
    "latency": (lambda: Network(latency_ns="fast"), "latency_ns"),  # type: ignore[arg-type]
    "address": (lambda: _net().add_host("a", "192.0.2.300"), "192.0.2.300"),
    "address-type": (lambda: _net().add_host("a", 42), "42"),  # type: ignore[arg-type]
    "packed-address": (lambda: _net().add_host("a", b"\x01\x02\x03"), "4 or 16 bytes"),
    "host-name": (lambda: _net().add_host("", "192.0.2.1"), "host name"),
    "mac": (lambda: _net().add_host("a", mac="zz:zz"), "zz:zz"),
    "mac-type": (lambda: _net().add_host("a", mac=7), "MAC"),  # type: ignore[arg-type]
    "multicast-mac": (lambda: _net().add_host("a", mac="01:00:00:00:00:01"), "unicast"),
    "vlan": (lambda: _net().add_host("a", "192.0.2.1", vlan=5000), "VLAN"),
    "unknown-stack": (lambda: _net().add_host("a", stack="nosuch"), "nosuch"),
    "unknown-param": (lambda: _net().add_host("a", stack="siw", params={"bogus": 1}),
                      "bogus"),
    "param-range": (lambda: _net().add_host("a", stack="siw", params={"rtr_type": 9}),
                    "rtr_type"),
    "param-type": (lambda: _net().add_host("a", stack="cxgb4",
                                           params={"peer2peer": "yes"}), "peer2peer"),
    "no-host": (lambda: _net().host("nobody"), "nobody"),
    "at-past": (lambda: _net().at(-1, print), "time_ns"),
    "at-type": (lambda: _net().at("soon", print), "time_ns"),  # type: ignore[arg-type]
    "at-not-callable": (lambda: _net().at(0, 5), "callable"),  # type: ignore[arg-type]
    "after": (lambda: _net().after(-5, print), "delay_ns"),
    "run-until": (lambda: _net().run(until_ns=-1), "until_ns"),
    "run-events": (lambda: _net().run(max_events=0), "max_events"),
    "run-for": (lambda: _net().run_for("1s"), "duration_ns"),  # type: ignore[arg-type]
    "packet": (lambda: _net().packet(1), "no captured frame"),
    "drop-kind": (lambda: _net().drop("SYNACK"), "SYNACK"),
    "nested-run": (_nested_run, "re-entrant"),
    "inject-text": (lambda: _net().inject("frame"), "inject"),  # type: ignore[arg-type]
    "inject-object": (lambda: _net().inject(object()), "inject"),
    # faults
    "fault-probability": (lambda: FaultConfig(loss=1.5), "loss"),
    "fault-type": (lambda: FaultConfig(corrupt="often"), "corrupt"),  # type: ignore[arg-type]
    "fault-delay": (lambda: FaultConfig(reorder_delay_ns=-1), "reorder_delay_ns"),
    "drop-nth": (lambda: drop_nth("SYN", 0), "nth"),
    "drop-rule-count": (lambda: DropRule(is_kind("SYN"), "x", count=0), "count"),
    # Host verbs
    "host-address": (lambda: _host().add_address("nope"), "nope"),
    "host-vlan": (lambda: _host().add_address("192.0.2.9", vlan=-1), "VLAN"),
    "remove-address": (lambda: _host().remove_address("192.0.2.9"), "192.0.2.9"),
    "no-ipv6": (lambda: _host().address(ipv6=True), "IPv6"),
    "listen-port": (lambda: _host().listen(70000), "port"),
    "listen-policy": (lambda: _host().listen(31000, policy="accept"),  # type: ignore[arg-type]
                      "policy"),
    "listen-backlog": (lambda: _host("irdma").listen(31000, backlog=-2), "backlog"),
    "connect-remote": (lambda: _host().connect("999.1.1.1", 31000), "999.1.1.1"),
    "connect-local-port": (lambda: _host().connect("192.0.2.2", 31000, local_port=-1),
                           "local_port"),
    "connect-pdata": (lambda: _host("cxgb4").connect("192.0.2.2", 1,
                                                     private_data="hi"),  # type: ignore[arg-type]
                      "private_data"),
    "accept-unknown": (lambda: _host().accept(99), "99"),
    "reject-unknown": (lambda: _host("cxgb4").reject(99), "99"),
    "close-unknown": (lambda: _host("irdma").close(99), "99"),
    "disconnect-unknown": (lambda: _host().disconnect(99), "99"),
    # the registry
    "parse-params-stack": (lambda: parse_params("nosuch", {}), "nosuch"),
    "parse-params-key": (lambda: parse_params("siw", {"mpa_rev": 1}), "mpa_rev"),
    "stack-label": (lambda: stack_label("nosuch", {}), "nosuch"),
    # matrix sides
    "side-stack": (lambda: parse_side("nosuch"), "nosuch"),
    "side-syntax": (lambda: parse_side("siw(peer_to_peer=1"), "NAME(KEY=VALUE"),
    "side-pair": (lambda: parse_side("siw(peer_to_peer)"), "KEY=VALUE"),
    "side-number": (lambda: parse_side("siw(mpa_version=two)"), "two"),
    "side-value": (lambda: make_side("siw", {"mpa_version": 300}), "mpa_version"),
    # scenario loading
    "scenario-toml": (lambda: loads("[[host]\n", "bad.toml"), "bad.toml"),
    "scenario-empty": (lambda: loads("", "empty.toml"), "[[host]]"),
    "scenario-stack": (lambda: loads('[[host]]\nname = "a"\nstack = "nosuch"\n', "s.toml"),
                       "nosuch"),
}


WRONG_TYPES = {"address-type", "at-type", "connect-pdata", "latency", "mac-type", "run-for"}
"""Cases that pass a value of the wrong type (what the type checker refuses). The pure
package refuses them with its own one-line ConfigError; in the compiled build the
compiled function's own argument check refuses them first, with a one-line TypeError
that names the type it expected (mypyc's boundary check: no Python code of the function
runs)."""

COMPILED = bool({"mpa_emu.net.network", "mpa_emu.net.host"} & set(compiled_modules()))
"""Whether the network's entry points run compiled."""


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_an_mpa_emu_error(case: str) -> None:
    call, named = CASES[case]
    if COMPILED and case in WRONG_TYPES:
        with pytest.raises((MpaEmuError, TypeError)) as caught:
            call()
        message = str(caught.value)
        assert message and "\n" not in message.strip(), message
        assert named in message or "expected" in message, message
        return
    with pytest.raises(MpaEmuError) as info:
        call()
    message = str(info.value)
    assert message and "\n" not in message.strip(), message
    assert named in message, message


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "nested-run"))
def test_bad_values_stay_value_errors(case: str) -> None:
    if COMPILED and case in WRONG_TYPES:
        with pytest.raises((ValueError, TypeError)):
            CASES[case][0]()
        return
    with pytest.raises(ValueError):
        CASES[case][0]()


def test_the_classes() -> None:
    assert issubclass(ConfigError, MpaEmuError) and issubclass(ConfigError, ValueError)
    assert issubclass(UsageError, MpaEmuError) and issubclass(UsageError, RuntimeError)
    with pytest.raises(ConfigError):
        _net().add_host("a", "192.0.2.300")
