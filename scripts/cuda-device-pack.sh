#!/bin/sh
# Builds, on this machine, what scripts/cuda-device-check.sh runs on a machine with an NVIDIA GPU
# that has the CUDA driver but none of kiln's build dependencies: a Release build in
# build-device/, then .device/pack.tar.xz (ignored by git; about 13 MB, inside the device tool's
# 64 MiB): the stripped test binaries, kiln, train_moons and cuda_bench, the shared libraries
# they need beyond the C and C++ runtimes (OpenBLAS, Google Benchmark, ...), and this
# checkout's path, which the tests read example programs from. Run `make deps` first.
# BUILD_DIR, when given, is an existing build folder with tests, benchmarks and examples (such as
# `make`'s build/, RelWithDebInfo) to build in as it is configured: a GPU is sometimes lent for
# less time than a fresh Release build takes on a small machine.
# Usage: scripts/cuda-device-pack.sh [BUILD_DIR]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-device}
out=$root/.device
if [ $# -eq 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON \
    -DKILN_BUILD_BENCHMARKS=ON -DKILN_BUILD_EXAMPLES=ON -DKILN_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$build" --target kiln_hal_test kiln_drivers_test kiln_ral_test kiln_runtime_test kiln_cli \
  train_moons cuda_bench
stage=$build/pack
rm -rf "$out" "$stage"
mkdir -p "$out" "$stage/bin" "$stage/lib"
for f in tests/kiln_hal_test tests/kiln_drivers_test tests/kiln_ral_test tests/kiln_runtime_test kiln \
         examples/train_moons/train_moons bench/cuda_bench; do
  strip -o "$stage/bin/$(basename "$f")" "$build/$f"
done
# Every shared library the binaries need beyond the C and C++ runtimes (OpenBLAS and its Fortran
# runtime, Google Benchmark, ...): a GPU machine has a different distribution's libraries, if any.
# OpenBLAS is loaded with dlopen, so it is named as well as found by ldd.
for f in "$stage"/bin/*; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
      *) cp -L "$path" "$stage/lib/" ;;
    esac
  done
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
  [ -n "$path" ] || { echo "cuda-device-pack: $lib not found (run make deps)" >&2; exit 1; }
  cp -L "$path" "$stage/lib/"
done
echo "$root" > "$stage/source_dir"
tar -C "$stage" -cJf "$out/pack.tar.xz" bin lib source_dir
du -h "$out/pack.tar.xz"
