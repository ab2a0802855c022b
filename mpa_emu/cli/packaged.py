"""Files shipped inside the package: the example scenarios and the Wireshark Lua plugin.

Both are package data, so a plain ``pip install mpa_emu`` has them; ``mpa-emu examples``
and ``mpa-emu wireshark-plugin`` find them here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

PLUGIN_NAME = "mpa_v2.lua"


@dataclass(frozen=True, slots=True)
class Example:
    """One example scenario file: its path and the ``name``/``description`` it declares."""

    path: Path
    name: str
    description: str

    @property
    def file_name(self) -> str:
        """The file's name, e.g. ``v2_accept.toml``."""
        return self.path.name


def _package_dir(sub: str) -> Path:
    # The package is always installed as plain files (wheel or editable), never zipped.
    return Path(str(resources.files("mpa_emu") / sub))


def examples_dir() -> Path:
    """The folder holding the example scenarios."""
    return _package_dir("examples")


def examples() -> list[Example]:
    """Every example scenario, sorted by file name."""
    found = []
    for path in sorted(examples_dir().glob("*.toml")):
        with path.open("rb") as stream:
            doc = tomllib.load(stream)
        found.append(Example(path, str(doc.get("name", path.stem)),
                             str(doc.get("description", ""))))
    return found


def copy_examples(target: str | os.PathLike[str]) -> list[Path]:
    """Copy every example into ``target`` (created if missing). An existing file of the
    same name is never overwritten: :class:`FileExistsError` names the first one, before
    anything is copied."""
    folder = Path(target)
    chosen = examples()
    for ex in chosen:
        if (folder / ex.file_name).exists():
            raise FileExistsError(f"{folder / ex.file_name} already exists")
    folder.mkdir(parents=True, exist_ok=True)
    copied = []
    for ex in chosen:
        copied.append(Path(shutil.copyfile(ex.path, folder / ex.file_name)))
    return copied


def wireshark_plugin() -> Path:
    """The MPA v2 (RFC 6581) Lua plugin for Wireshark/tshark 4.0 to 4.4."""
    return _package_dir("wireshark") / PLUGIN_NAME


def personal_lua_plugin_dir(tshark: str | None = None) -> Path:
    """The user's personal Lua plugin folder, as tshark reports it (``tshark -G folders``,
    "Personal Lua Plugins"); without a tshark, Wireshark's default
    ``$HOME/.local/lib/wireshark/plugins``."""
    binary = tshark or shutil.which("tshark")
    if binary:
        try:
            done = subprocess.run([binary, "-G", "folders"], capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            done = None
        for line in (done.stdout.splitlines() if done else []):
            label, _, value = line.partition(":")
            if label.strip() == "Personal Lua Plugins" and value.strip():
                return Path(value.strip())
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def install_wireshark_plugin(folder: str | os.PathLike[str] | None = None) -> Path:
    """Copy the plugin into ``folder`` (default: the personal Lua plugin folder) and return
    where it went. The plugin guards itself, so also passing it with ``-X lua_script:``
    later is harmless."""
    target = Path(folder) if folder is not None else personal_lua_plugin_dir()
    target.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(wireshark_plugin(), target / PLUGIN_NAME))
