#!/usr/bin/env bash
# The project's test command: installs what the tests need, then lints, type-checks and
# runs the whole suite (tshark, tcpdump, browser and live tests included) on the
# pure-Python package (an editable install in .venv), then again on the compiled build
# (docs/compiling.md) in .venv-compiled. pytest runs on every core (pytest-xdist, a
# worker more than the cores), the longest tests first (tests/conftest.py). The compiled build is made while the first run
# goes, once per state of the sources, setup.py and mypy, and reused by later runs. Two
# kinds of test run once: those marked ``memory`` (how memory grows with the work) on the
# compiled build, the one a user installs; those marked ``source`` (they read the source
# tree or install it afresh, whatever build runs them) on the pure package. Extra
# arguments go to pytest. MPA_EMU_SKIP_COMPILED=1 leaves the second run out, and the
# first then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use: tshark (the judge), tcpdump (the real-capture
# generator), headless Chromium and rsvg-convert (the browser and PNG tests), and for the
# compiled build a C compiler and Python's headers. Installed when missing, as root.
missing=()
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# rsvg-convert renders `mpa-emu diagram -o FILE.png` (the PNG tests use it).
command -v rsvg-convert >/dev/null 2>&1 || missing+=(librsvg2-bin)
if [ "${MPA_EMU_SKIP_COMPILED:-0}" != 1 ]; then
    include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
    [ -f "$include/Python.h" ] || missing+=(python3-dev)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "tools/test.sh: missing ${missing[*]}; run as root to install them" \
             "(or set MPA_EMU_SKIP_COMPILED=1 when only the compiler is missing)" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The compiled build is made by the README's first command itself (`pip install .` in a
# fresh environment, an isolated build where pip finds a compiler and compiles), so the
# second run tests exactly what a user installs; the README test leaves that compile to
# this build. A regular (not editable) install: the compiled modules live in the
# environment, never beside the sources, so an edited .py is never shadowed by a stale
# build of it. The test tools go in first, without the package. Built from a copy of the
# sources, so that nothing the first run does in the checkout (a wheel built there) meets
# it, beside ruff, mypy and the first run, which leave a core idle often enough (tshark,
# subprocesses, live tests) to make room for it. The key holds mypy's version: the
# isolated build takes the same mypy from the same index.
sources="$( (find mpa_emu -type f ! -path '*/__pycache__/*' -print0 | sort -z \
             | xargs -0 sha256sum; sha256sum setup.py build_backend.py pyproject.toml) \
           | sha256sum | cut -d' ' -f1)"
stamp=.venv-compiled/mpa_emu-build.key
key() { echo "$sources $(.venv-compiled/bin/python -m mypy --version 2>/dev/null || true)"; }
build_compiled() {
    rm -f "$stamp"
    python3 -m venv .venv-compiled
    .venv-compiled/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    local python="$PWD/.venv-compiled/bin/python" copy
    # The package's dependencies and its test extra, read from pyproject.toml.
    "$python" -m pip install -q $("$python" -c 'import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(project["dependencies"] + project["optional-dependencies"]["test"]))')
    copy="$(mktemp -d)"
    # Removed however the build ends (tools/test.sh stops it with SIGTERM when it exits
    # early).
    trap 'rm -rf "$copy"' EXIT
    trap 'exit 143' TERM
    cp -r mpa_emu setup.py build_backend.py pyproject.toml README.md "$copy"
    find "$copy/mpa_emu" -name __pycache__ -prune -exec rm -rf {} +
    # The README's first command (its install step): nothing forces either build.
    (cd "$copy" && env -u MPA_EMU_COMPILE "$python" -m pip install -q .)
    key > "$stamp"
}
build_pid=
if [ "${MPA_EMU_SKIP_COMPILED:-0}" != 1 ]; then
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(key)" ]; then
        echo "tools/test.sh: reusing the compiled build in .venv-compiled (same sources and mypy)"
    else
        echo "tools/test.sh: building the compiled package in .venv-compiled meanwhile"
        build_log="$(mktemp)"
        # Its own process group (set -m), so that an early exit stops all of it.
        set -m
        build_compiled </dev/null >"$build_log" 2>&1 &
        build_pid=$!
        set +m
        trap 'kill -- -"$build_pid" 2>/dev/null || true; rm -f "$build_log"' EXIT
    fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'

# One pytest worker more than the cores: the live tests, tshark and the commands run in
# subprocesses wait often enough to leave a core idle behind each worker otherwise.
workers=$(( $(nproc) + 1 ))

.venv/bin/ruff check mpa_emu tests tools setup.py build_backend.py
.venv/bin/mypy
if [ "${MPA_EMU_SKIP_COMPILED:-0}" = 1 ]; then
    .venv/bin/python -m pytest -n "$workers" --maxschedchunk=1 "$@"
    exit 0
fi
.venv/bin/python -m pytest -n "$workers" --maxschedchunk=1 -m "not memory" "$@"

if [ -n "$build_pid" ]; then
    if ! wait "$build_pid"; then
        cat "$build_log" >&2
        echo "tools/test.sh: the compiled build failed (above)" >&2
        exit 1
    fi
    trap - EXIT
    rm -f "$build_log"
fi
# PYTHONSAFEPATH: the checkout (the current directory) must not shadow the installed build.
PYTHONSAFEPATH=1 MPA_EMU_EXPECT_COMPILED=1 .venv-compiled/bin/python -m pytest -n "$workers" \
    --maxschedchunk=1 -m "not source" "$@"
