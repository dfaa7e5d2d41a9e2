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

cmake -S "$source_dir/tests/consumer/cpp" -B "$work/cpp" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cpp" >/dev/null
"$work/cpp/consumer"
"$work/cpp/consumer_static"
"$work/cpp/c_consumer_static"

PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -pedantic -Werror -o "$work/c_consumer" "$source_dir/tests/consumer/c/main.c" \
  $(pkg-config --cflags --libs kiln)
LD_LIBRARY_PATH=$prefix/lib "$work/c_consumer"
