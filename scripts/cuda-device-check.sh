#!/bin/bash
# The CUDA checks for a machine with an NVIDIA GPU, run from the repository root there after
# scripts/cuda-device-pack.sh built .device/pack.tar.xz here and it travelled along: the device's
# conformance suite, the CUDA driver's and library's tests, the examples and differential tests
# against the interpreter (a kernel that faults, in a child process, among the drivers' tests),
# the element types' tests, the narrow products (bf16, f16, i8, qgemm),
# `kiln run` and `train_moons` on cuda, a value trace of traced kernels, a 2^24-element elementwise
# kernel beside PyTorch's (where python3 has torch), and bench/cuda_bench (3 repetitions,
# aggregates). Each step has a time limit, a failure does not stop the next, and the
# whole log goes to $OUT/cuda-check.log (or ./cuda-check.log). Exit status: the number of
# failed steps. Usage: scripts/cuda-device-check.sh [SECONDS_PER_STEP]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
limit=${1:-240}
log=${OUT:-$root}/cuda-check.log
[ -f "$root/.device/pack.tar.xz" ] || { echo "cuda-device-check: no .device/pack.tar.xz (run scripts/cuda-device-pack.sh first)" >&2; exit 99; }
pack=$(mktemp -d "${TMPDIR:-/tmp}/kiln-device.XXXXXX")
trap 'rm -rf "$pack"' EXIT
tar -C "$pack" -xJf "$root/.device/pack.tar.xz" || exit 99
# The tests read the example programs where the pack was built: make that path this checkout.
built_in=$(cat "$pack/source_dir")
if [ "$built_in" != "$root" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$root" "$built_in"
fi
# NVRTC and cuBLAS: the toolkit's, or the pip packages' (nvidia/*/lib) where that is all there is.
extra=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/lib /opt /usr/lib/python3* -maxdepth 7 \
          \( -name 'libnvrtc.so*' -o -name 'libcublas.so*' \) -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH=$pack/lib:$extra${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${TMPDIR:-/tmp}/kiln-device-cache
bin=$pack/bin
failed=0
step() {
  echo "=== $*" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== exit $rc: $*" | tee -a "$log"
  [ $rc -eq 0 ] || failed=$((failed + 1))
}
: > "$log"
step nvidia-smi -L
step "$bin/kiln" devices
step "$bin/kiln_drivers_test" --gtest_filter='*Cuda*:*cuda*:*Staging*:*EventPool*:*Timepoint*'
step "$bin/kiln_hal_test" --gtest_filter='*/cuda:*Cuda*'
step "$bin/kiln_ral_test"
step "$bin/kiln_runtime_test" --gtest_filter='*/cuda:*Cuda*:ExamplesTest.*Cuda*:CollectivesTest.*:-*NarrowGemmTest*'
# gemm of bf16, f16 and i8 operands and qgemm on cuda (cuBLAS's cublasGemmEx, kiln's i8 and
# scaling kernels) against exact products and against interp; never run on a GPU before this.
step "$bin/kiln_runtime_test" --gtest_filter='*NarrowGemmTest*/cuda'
# Every element type's ops, casts, reductions and gathers on cuda against the rules (language
# version 3; the test adds cuda to its devices where the driver starts).
step "$bin/kiln_runtime_test" --gtest_filter='ElementTypesTest.*'
step "$bin/kiln" run "$root/examples/kiln/mlp.kiln" --device cuda
step "$bin/train_moons" --device cuda --epochs 20
# Value tracing on the GPU: device printf, flushed before each traced action signals.
step "$bin/kiln" run "$root/examples/tracing/debug_nan.kiln" --device cuda --trace-values "$pack/values.jsonl"
step "$bin/kiln" trace-values "$pack/values.jsonl" --first-nan
# An elementwise kernel at GPU scale (2^24 f32): kiln's grid against PyTorch on the same GPU.
step "$bin/kiln" run "$root/bench/programs/relu_fma_2e24.kiln" --device cuda --repeat 20
if python3 -c 'import torch' 2>/dev/null; then step python3 "$root/bench/programs/torch_relu_fma.py"; fi
step "$bin/cuda_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
echo "=== $failed step(s) failed; log in $log" | tee -a "$log"
exit "$failed"
