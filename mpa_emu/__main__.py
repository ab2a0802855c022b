"""``python -m mpa_emu``."""

import sys

from mpa_emu.cli import main

sys.exit(main())
