"""A user's Wireshark set-up (personal plugins, disabled protocols) never reaches a
verdict: ``mpa_emu.capture.tshark`` and every tshark of the test session run isolated. The
shipped Lua plugin installs where tshark looks and loading it twice is harmless."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mpa_emu.capture.tshark import MPA_OPTIONS, Tshark
from mpa_emu.cli import main
from mpa_emu.cli.packaged import wireshark_plugin

pytestmark = pytest.mark.tshark

GOLDEN = Path(__file__).resolve().parents[2] / "pcaps" / "golden" / "golden_accept_v2.pcapng"

# A personal plugin that marks every frame with an Error expert info: were it loaded,
# the judge would report problems on a clean capture.
SPOILER = """\
local p = Proto("spoiler", "Planted by a test")
local planted = ProtoExpert.new("spoiler.planted", "planted error", expert.group.MALFORMED,
                                expert.severity.ERROR)
p.experts = { planted }
function p.dissector(tvb, pinfo, tree)
    tree:add(p, tvb()):add_proto_expert_info(planted)
end
register_postdissector(p)
"""


def _user_home(tmp_path: Path) -> Path:
    """A home whose Wireshark set-up would spoil every verdict: the spoiler plugin, the
    MPA v2 plugin, and MPA disabled in the personal configuration."""
    home = tmp_path / "home"
    plugins = home / ".local" / "lib" / "wireshark" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "spoiler.lua").write_text(SPOILER, encoding="utf-8")
    (plugins / "mpa_v2.lua").write_bytes(wireshark_plugin().read_bytes())
    config = home / ".config" / "wireshark"
    config.mkdir(parents=True)
    (config / "disabled_protos").write_text("iwarp_mpa\n", encoding="utf-8")
    return home


def _plain_tshark(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """tshark as the user would run it, with their own home and no isolation."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WIRESHARK_CONFIG_DIR", "XDG_CONFIG_HOME")}
    env["HOME"] = str(home)
    return subprocess.run(["tshark", *args], capture_output=True, text=True, env=env,
                          check=True)


def test_the_user_set_up_would_change_tshark_output(tmp_path: Path) -> None:
    home = _user_home(tmp_path)
    experts = _plain_tshark(home, "-n", "-r", str(GOLDEN), *MPA_OPTIONS, "-q", "-z", "expert")
    assert "planted error" in experts.stdout
    lines = _plain_tshark(home, "-n", "-r", str(GOLDEN), *MPA_OPTIONS).stdout
    assert "MPA Request Frame" not in lines  # MPA disabled by the personal configuration


def test_judge_ignores_personal_plugins_and_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = _user_home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("WIRESHARK_CONFIG_DIR")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    judge = Tshark()
    assert judge.problems(GOLDEN) == []
    assert any("MPA Request Frame" in line for line in judge.summary(GOLDEN))
    assert main(["judge", str(GOLDEN)]) == 0
    out = capsys.readouterr().out
    assert "planted" not in out and "MPA Request Frame" in out


def test_the_test_session_runs_tshark_isolated(isolated_wireshark: str) -> None:
    folders = subprocess.run(["tshark", "-G", "folders"], capture_output=True, text=True,
                             check=True).stdout
    rows = dict(line.split(":", 1) for line in folders.splitlines() if ":" in line)
    for label in ("Personal configuration", "Personal Plugins", "Personal Lua Plugins"):
        assert rows[label].strip().startswith(isolated_wireshark), (label, rows[label])


def test_install_puts_the_plugin_where_tshark_loads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert main(["wireshark-plugin", "--install"]) == 0
    installed = home / ".local" / "lib" / "wireshark" / "plugins" / "mpa_v2.lua"
    assert capsys.readouterr().out.strip() == f"installed {installed}"
    assert installed.read_bytes() == wireshark_plugin().read_bytes()
    plugins = subprocess.run(["tshark", "-G", "plugins"], capture_output=True, text=True,
                             check=True).stdout
    assert str(installed) in plugins


def test_loading_the_plugin_twice_is_harmless(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    plugins = home / ".local" / "lib" / "wireshark" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "mpa_v2.lua").write_bytes(wireshark_plugin().read_bytes())
    monkeypatch.setenv("HOME", str(home))
    done = subprocess.run(
        ["tshark", "-n", "-r", str(GOLDEN), *MPA_OPTIONS, "-X",
         f"lua_script:{wireshark_plugin()}", "-Y", "mpa_v2", "-T", "fields",
         "-E", "occurrence=a", "-e", "frame.number", "-e", "mpa_v2.ird"],
        capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "Lua" not in done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    # The request and the reply, each with one IRD (one copy of the plugin dissecting).
    assert len(rows) == 2
    assert all("," not in ird and ird for _, ird in rows)


def test_print_path_names_the_shipped_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wireshark-plugin"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.name == "mpa_v2.lua" and path.is_file()
    assert 'register_postdissector' in path.read_text(encoding="utf-8")
