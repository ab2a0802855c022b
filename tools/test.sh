#!/usr/bin/env bash
# The project's test command: installs what the tests need, then lints, type-checks and
# runs the whole suite (tshark, browser and live tests included) on the pure-Python
# package, then again on the compiled build (docs/compiling.md) in .venv-compiled.
# Extra arguments go to pytest. MPA_EMU_SKIP_COMPILED=1 leaves the second run out.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tshark >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "tools/test.sh: tshark is missing; run as root to install it" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null
fi

# Headless Chromium renders the SVG diagrams and HTML reports for the browser tests.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "tools/test.sh: chromium is missing; run as root to install it" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# rsvg-convert renders `mpa-emu diagram -o FILE.png` (the PNG tests use it).
if ! command -v rsvg-convert >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "tools/test.sh: rsvg-convert is missing; run as root to install librsvg2-bin" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librsvg2-bin >/dev/null
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check mpa_emu tests tools setup.py
.venv/bin/mypy
.venv/bin/python -m pytest "$@"

if [ "${MPA_EMU_SKIP_COMPILED:-0}" = 1 ]; then
    exit 0
fi

# The compiled build needs a C compiler and Python's headers.
include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if ! command -v cc >/dev/null 2>&1 || [ ! -f "$include/Python.h" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "tools/test.sh: the compiled build needs a C compiler and Python.h;" \
             "run as root to install them, or set MPA_EMU_SKIP_COMPILED=1" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev python3-dev >/dev/null
fi

# A regular (not editable) install: the compiled modules live in the environment, never
# beside the sources, so an edited .py is never shadowed by a stale build of it.
python3 -m venv .venv-compiled
.venv-compiled/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv-compiled/bin/python -m pip install -q 'setuptools>=77' '.[test]'
MPA_EMU_COMPILE=1 .venv-compiled/bin/python -m pip install -q --no-build-isolation \
    --no-deps --force-reinstall .
# PYTHONSAFEPATH: the checkout (the current directory) must not shadow the installed build.
PYTHONSAFEPATH=1 MPA_EMU_EXPECT_COMPILED=1 .venv-compiled/bin/python -m pytest "$@"
