"""Shared test configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from scapy.config import conf


@pytest.fixture
def strict_dissection() -> Iterator[None]:
    """Make scapy re-raise dissector errors instead of hiding them behind Raw (a test
    module opts in with ``pytestmark = pytest.mark.usefixtures("strict_dissection")``)."""
    saved = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = saved


@pytest.fixture(autouse=True)
def strict_reachability() -> Iterator[None]:
    """Every test fails when a transition row marked unreachable runs."""
    from mpa_emu.stacks.irdma import transitions

    saved = transitions.STRICT_REACHABILITY
    transitions.STRICT_REACHABILITY = True
    yield
    transitions.STRICT_REACHABILITY = saved


# The long fuzz profile, for deliberate runs only (about 10^6 steps over the property
# tests of tests/stacks/irdma/test_fuzz_core.py):
#     pytest -m fuzz --hypothesis-profile=fuzz-long
settings.register_profile("fuzz-long", max_examples=25_000, deadline=None,
                          suppress_health_check=list(HealthCheck))


@pytest.fixture(autouse=True, scope="session")
def isolated_wireshark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Every tshark a test starts, directly or through mpa_emu, sees none of the user's
    Wireshark set-up: the personal configuration folder and the home (where personal
    plugins live) point into an empty folder for the whole session. Yields that folder."""
    from mpa_emu.capture.tshark import isolated_environment

    folder = str(tmp_path_factory.mktemp("wireshark-home"))
    env = isolated_environment(folder)
    with pytest.MonkeyPatch.context() as patch:
        for key in ("WIRESHARK_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME"):
            patch.setenv(key, env[key])
        yield folder


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow(seconds): runs for about that many seconds on one core; such tests "
                   "start first, longest first (no worker of a parallel run is left with one "
                   "at the end)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` first, longest first, the others after them in their
    order. pytest-xdist hands tests out in this order (tools/test.sh sends them one at a
    time, ``--maxschedchunk=1``), so the long ones run beside the many short ones instead
    of making a tail."""
    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("slow")
        return float(mark.args[0]) if mark is not None else 0.0

    items.sort(key=seconds, reverse=True)  # stable: the others keep their order
