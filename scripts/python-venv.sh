#!/usr/bin/env bash
# Makes the Python virtual environment that builds and tests the Python package: VENV (default
# build/python-venv) with python/requirements.txt, made again when the pins change. Uses Debian's
# python3 (python3-venv, python3-dev from scripts/install-deps.sh), never the system's site.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$root/build/python-venv}"
requirements="$root/python/requirements.txt"
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$venv/requirements.txt"; then exit 0; fi
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
cp "$requirements" "$venv/requirements.txt"
