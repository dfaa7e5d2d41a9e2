#!/bin/sh
# Installs the kiln built in BUILD_DIR into a fresh prefix under WORK_DIR, then builds and runs two
# out-of-tree consumers against it: tests/consumer/cpp with find_package(kiln CONFIG REQUIRED),
# (linked to libkiln.so and to libkiln.a), and tests/consumer/c with pkg-config. Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
source_dir=$1
build_dir=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
# A build with the Python package installs it where Python finds it, not at the prefix's top.
if [ -e "$prefix/kiln" ]; then
  echo "consumer/run.sh: the Python package was installed at $prefix/kiln" >&2
  exit 1
fi
for module in "$prefix"/lib*/python3*/site-packages/kiln/__init__.py; do
  [ -e "$module" ] || continue
  python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
  PYTHONPATH=$(dirname "$(dirname "$module")") "$python" -c 'import kiln; print("Python package at", kiln.__file__)'
done

cmake -S "$source_dir/tests/consumer/cpp" -B "$work/cpp" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cpp" >/dev/null
"$work/cpp/consumer"
"$work/cpp/consumer_static"
"$work/cpp/c_consumer_static"

# The README's pkg-config lines, as printed there (the ```sh block after "From C through
# pkg-config"), with this test's prefix for /opt/kiln and its program for app.c: they must build
# and run the program with nothing else set (no LD_LIBRARY_PATH).
readme_lines=$(awk '/^From C through pkg-config/ { found = 1 } found && /^```sh/ { copy = 1; next }
                    copy && /^```/ { exit } copy { print }' "$source_dir/README.md")
if [ -z "$readme_lines" ]; then
  echo "consumer/run.sh: README.md has no \`\`\`sh block after 'From C through pkg-config'" >&2
  exit 1
fi
mkdir -p "$work/c"
cp "$source_dir/tests/consumer/c/main.c" "$work/c/app.c"
printf '%s\n' "$readme_lines" | sed "s|/opt/kiln|$prefix|g" > "$work/c/readme.sh"
(cd "$work/c" && env -u LD_LIBRARY_PATH sh -eu readme.sh)
