"""pytest plugin: fixtures for writing emulated iWARP tests in a few lines.

Installed with mpa_emu (entry point ``pytest11``), so the fixtures are available in any
test once the package is installed:

- ``mpa_seed``: the seed for the test's network (``--mpa-emu-seed``, default 1).
- ``mpa_network``: a fresh seeded :class:`mpa_emu.net.Network`.
- ``run_scenario``: ``run_scenario(path_or_toml_text, check=True)`` runs a scenario file
  (a path relative to the test file) or TOML text and, with ``check``, fails the test
  listing every unmet expectation by line (for TOML text written in the test file, its
  line in that file); returns the :class:`mpa_emu.scenario.ScenarioRun`.

``--mpa-emu-captures DIR`` writes the pcapng of every network used by a failing test to
``DIR/<test name>.pcapng`` for Wireshark. The guide is docs/pytest.md.

Under pytest-xdist (``-n N``) every worker writes its captures to its own directory,
``DIR/<worker id>/`` (``gw0``, ``gw1`` ...), and takes the seed from the same option,
so a test gets the same seed, and the same frames, whichever worker runs it.

Imports of mpa_emu happen inside the fixtures: loading the plugin stays cheap and cannot
break a pytest run that does not use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mpa_emu.net import Network
    from mpa_emu.scenario import ScenarioRun

_NETWORKS = pytest.StashKey[list[Any]]()
_REPORT = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--mpa-emu-seed`` and ``--mpa-emu-captures``."""
    group = parser.getgroup("mpa_emu", "mpa_emu iWARP emulation")
    group.addoption("--mpa-emu-seed", type=int, default=1, metavar="N",
                    help="seed of the mpa_network and run_scenario fixtures (default 1)")
    group.addoption("--mpa-emu-captures", metavar="DIR", default=None,
                    help="write the pcapng of each network used by a failing test to DIR")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Keep each phase's report on the item, for the capture dump at teardown."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    item.stash.setdefault(_REPORT, {})[report.when] = report


@pytest.fixture
def mpa_seed(request: pytest.FixtureRequest) -> int:
    """The seed for this test's emulation (``--mpa-emu-seed``)."""
    return int(request.config.getoption("--mpa-emu-seed"))


def _remember(request: pytest.FixtureRequest, net: Any) -> None:
    request.node.stash.setdefault(_NETWORKS, []).append(net)


def _worker_id(config: pytest.Config) -> str | None:
    """The pytest-xdist worker running this process (None outside xdist)."""
    workerinput = getattr(config, "workerinput", None)
    worker = workerinput.get("workerid") if isinstance(workerinput, dict) else None
    return worker if isinstance(worker, str) else None


def _dump_on_failure(request: pytest.FixtureRequest) -> None:
    target = request.config.getoption("--mpa-emu-captures")
    reports = request.node.stash.get(_REPORT, {})
    failed = any(r.failed for r in reports.values())
    nets = request.node.stash.get(_NETWORKS, [])
    if not (target and failed and nets):
        return
    folder = Path(target)
    worker = _worker_id(request.config)
    if worker is not None:
        folder = folder / worker
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
    for i, net in enumerate(nets):
        suffix = f"-{i + 1}" if len(nets) > 1 else ""
        net.write_pcapng(folder / f"{stem}{suffix}.pcapng")


@pytest.fixture
def mpa_network(request: pytest.FixtureRequest, mpa_seed: int) -> Iterator[Network]:
    """A fresh :class:`mpa_emu.net.Network` seeded with ``mpa_seed``::

        def test_reject(mpa_network):
            alice = mpa_network.add_host("alice", "192.0.2.1")
            bob = mpa_network.add_host("bob", "192.0.2.2")
            bob.listen(31000, policy=Reject(b"busy"))
            alice.connect("192.0.2.2", 31000)
            mpa_network.run()
            assert alice.events(IwEvent.CONNECT_REPLY)[0].status == -111
    """
    from mpa_emu.net import Network

    net = Network(mpa_seed)
    _remember(request, net)
    yield net
    _dump_on_failure(request)


@pytest.fixture
def run_scenario(request: pytest.FixtureRequest) -> Iterator[Callable[..., ScenarioRun]]:
    """``run_scenario(source, check=True, seed=None)``: run a scenario file (a path) or
    TOML text (a string with a newline). The scenario's own seed is used unless ``seed``
    is given. With ``check`` the test fails with every unmet expectation, by line."""
    from dataclasses import replace

    from mpa_emu.scenario import ScenarioError, load_scenario, loads
    from mpa_emu.scenario import run_scenario as run

    def runner(source: str | Path, *, check: bool = True,
               seed: int | None = None) -> ScenarioRun:
        try:
            if isinstance(source, str) and "\n" in source:
                name, text = _inline_text(request, source)
                sc = loads(text, name)
            else:
                sc = load_scenario(_scenario_path(request, source))
            if seed is not None:
                sc = replace(sc, seed=seed)
            result = run(sc)
        except ScenarioError as exc:
            pytest.fail(f"bad scenario: {exc}", pytrace=False)
        _remember(request, result.net)
        if check and not result.ok:
            lines = [e.text(sc.path) for e in result.failures()]
            pytest.fail("scenario expectations failed:\n" + "\n".join(lines), pytrace=False)
        return result

    yield runner
    _dump_on_failure(request)


def _scenario_path(request: pytest.FixtureRequest, source: str | Path) -> Path:
    """A relative path is taken from the test file's folder; when nothing is there but
    the path exists from the current directory (how the plugin resolved it before), that
    file is used."""
    path = Path(source)
    if path.is_absolute():
        return path
    beside = Path(request.path).parent / path
    if not beside.exists() and path.exists():
        return path
    return beside


def _inline_text(request: pytest.FixtureRequest, text: str) -> tuple[str, str]:
    """The name and text to load TOML text with, so that its line numbers are those of
    the test file where the text is written. The text is found line by line (it may have
    been edited, e.g. with ``str.replace``, before the call); when it is not found it
    keeps its own numbering under the name ``<test name>``."""
    fallback = (f"<{request.node.name}>", text)
    try:
        test_file = Path(request.path)
        file_lines = test_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return fallback
    lines = text.splitlines()
    wanted = sum(1 for line in lines if line.strip())
    best, best_score = -1, 0
    for start in range(len(file_lines) - len(lines) + 1):
        score = sum(1 for i, line in enumerate(lines)
                    if line.strip() and file_lines[start + i] == line)
        if score > best_score:
            best, best_score = start, score
    # A text written in the file: its first line is the rest of the line opening the
    # string (empty right after the quotes), so it matches all but that line at worst.
    if best < 0 or best_score * 2 < wanted:
        return fallback
    try:
        name = str(test_file.relative_to(request.config.rootpath))
    except ValueError:
        name = str(test_file)
    return name, "\n" * best + text
