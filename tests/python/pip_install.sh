#!/bin/sh
# `pip install .` the way a user does: from SOURCE_DIR into a fresh virtual environment under
# WORK_DIR, with the build tools that pyproject.toml pins fetched by pip. Then, from outside the
# source tree, checks that numpy is the package's only run-time dependency (ml_dtypes, for bf16
# arrays, is the optional extra `kiln[bfloat16]`, onnx for kiln.onnx `kiln[onnx]`) and runs the
# README's Python snippet (the first ```python block after "From Python"), which checks itself.
# Usage: pip_install.sh SOURCE_DIR WORK_DIR
set -eu
source_dir=$(cd "$1" && pwd)
work=$2
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
/usr/bin/python3 -m venv "$work/venv"
# Built without optimization: this checks the packaging, the metadata and the README's snippet,
# and the plain build already compiles the same sources optimized; -O0 takes a third of -O3's
# time (2026-11-29: gemm_narrow.cc 7.3 s against 22.2), 3 minutes of `make test`.
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} \
  "$work/venv/bin/pip" install -q --disable-pip-version-check \
  --config-settings=cmake.define.CMAKE_C_FLAGS_RELEASE=-O0 \
  --config-settings=cmake.define.CMAKE_CXX_FLAGS_RELEASE=-O0 "$source_dir"

requires=$("$work/venv/bin/python" -c 'import importlib.metadata as m; print(m.requires("kiln"))')
if [ "$requires" != "['numpy>=1.22', 'ml_dtypes>=0.5; extra == \"bfloat16\"', 'onnx>=1.16; extra == \"onnx\"']" ]; then
  echo "pip_install.sh: kiln requires $requires, expected numpy alone (and ml_dtypes for the extra bfloat16, onnx for the extra onnx)" >&2
  exit 1
fi

awk '/^From Python/ { found = 1 } found && /^```python/ { copy = 1; next } copy && /^```/ { exit } copy { print }' \
  "$source_dir/README.md" > "$work/readme_snippet.py"
if [ ! -s "$work/readme_snippet.py" ]; then
  echo "pip_install.sh: README.md has no \`\`\`python block after 'From Python'" >&2
  exit 1
fi
cd "$work"
# Without the extra, kiln.onnx says what to install.
if venv/bin/python -c 'import kiln.onnx' 2> onnx_error.txt || ! grep -q "kiln\[onnx\]" onnx_error.txt; then
  echo "pip_install.sh: import kiln.onnx without the onnx package did not say to install kiln[onnx]:" >&2
  cat onnx_error.txt >&2
  exit 1
fi
venv/bin/python readme_snippet.py
echo "pip_install.sh: kiln $(venv/bin/python -c 'import kiln; print(kiln.__version__)') installed and the README snippet ran"
