#!/bin/sh
# Installs the kiln built in BUILD_DIR into a fresh prefix under WORK_DIR, then builds and runs
# out-of-tree consumers against it: tests/consumer/cpp with find_package(kiln CONFIG REQUIRED),
# (linked to libkiln.so and to libkiln.a), the README's HAL program with the README's CMake
# lines, and tests/consumer/c with the README's pkg-config lines. Usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR
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

# The README's program (the ```c++ block under "## Using the HAL") built with its CMake lines (the
# ```cmake block), both as printed, into a project of the usual three lines around them.
readme_block() {  # readme_block HEADING_PATTERN FENCE
  awk -v heading="$1" -v fence="$2" '$0 ~ heading { found = 1 } found && $0 == fence { copy = 1; next }
                                     copy && /^```/ { exit } copy { print }' "$source_dir/README.md"
}
mkdir -p "$work/readme"
readme_block '^## Using the HAL' '```c++' > "$work/readme/main.cc"
readme_cmake=$(readme_block '^From CMake, with the imported target' '```cmake')
if [ ! -s "$work/readme/main.cc" ] || [ -z "$readme_cmake" ]; then
  echo "consumer/run.sh: README.md lacks the \`\`\`c++ block of 'Using the HAL' or the \`\`\`cmake block" >&2
  exit 1
fi
printf 'cmake_minimum_required(VERSION 3.22)\nproject(my_app CXX)\nset(CMAKE_CXX_STANDARD 20)\nadd_executable(my_app main.cc)\n%s\n' \
  "$readme_cmake" > "$work/readme/CMakeLists.txt"
cmake -S "$work/readme" -B "$work/readme/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/readme/build" >/dev/null
KILN_CACHE_DIR="$work/readme/cache" "$work/readme/build/my_app"
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
