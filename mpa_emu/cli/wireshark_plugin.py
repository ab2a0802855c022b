"""``mpa-emu wireshark-plugin [--install]``: the MPA v2 Lua plugin shipped with the package."""

from __future__ import annotations

import argparse

from mpa_emu.cli import CliError

HELP = "print the path of the MPA v2 Lua plugin for Wireshark, or install it"

EPILOG = """\
Use it for one run:  tshark -X lua_script:"$(mpa-emu wireshark-plugin)" -r CAPTURE ...
or install it into your personal Lua plugin folder (Wireshark and tshark then load it
every time):  mpa-emu wireshark-plugin --install
Loading it both ways at once is harmless: the second copy stands down.

exit codes: 0 printed or installed, 2 the folder is unwritable
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpa-emu wireshark-plugin``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--install", action="store_true",
                        help="copy the plugin into the personal Lua plugin folder "
                             "(as `tshark -G folders` names it)")
    parser.add_argument("--dir", metavar="DIR",
                        help="with --install: copy into DIR instead")


def run(args: argparse.Namespace) -> int:
    """Print or install the plugin."""
    from mpa_emu.cli.packaged import install_wireshark_plugin, wireshark_plugin

    if args.dir is not None and not args.install:
        raise CliError("--dir needs --install")
    if not args.install:
        print(wireshark_plugin())
        return 0
    try:
        target = install_wireshark_plugin(args.dir)
    except OSError as exc:
        raise CliError(f"cannot install the plugin: {exc.strerror or exc}") from None
    print(f"installed {target}")
    return 0
