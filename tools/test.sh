#!/usr/bin/env bash
# The project's test command: installs what the tests need, then lints, type-checks and
# runs the whole suite (tshark, browser and live tests included). Extra arguments go to
# pytest.
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

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check mpa_emu tests tools
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
