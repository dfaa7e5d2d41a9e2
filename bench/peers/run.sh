#!/usr/bin/env bash
# `make bench-peers`: installs the peers and runs bench/peers/peers.py against the build in BUILD.
# PyTorch is Debian's (python3-torch and python3-torchvision, CPU-only, for /usr/bin/python3); NumPy, IREE and tinygrad
# come from PyPI, pinned in requirements.txt, into BUILD/peers-venv (made again when the pins
# change). Arguments after BUILD go to peers.py (--rounds N, --tasks a,b, --threads N).
#
#     bench/peers/run.sh [BUILD] [peers.py options]
set -euo pipefail
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
"$root/scripts/install-deps.sh" python3-torch python3-torchvision python3-venv
venv="$root/$build/peers-venv"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
exec "$venv/bin/python" "$here/peers.py" --build "$root/$build" --venv-python "$venv/bin/python" \
  --torch-python /usr/bin/python3 "$@"
