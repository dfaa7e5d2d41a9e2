#!/bin/bash
# The CUDA checks for a machine with an NVIDIA GPU, run from the repository root there after
# scripts/cuda-device-pack.sh built .device/pack.tar.xz here and it travelled along. In order:
#  1. the GPU, and kiln's cuda device with NVRTC and cuBLAS: without all three the check FAILS
#     at once (exit 99) instead of skipping what needs them;
#  2. bench/cuda_bench (3 repetitions) judged against the driver's targets by
#     scripts/cuda-bench-judge.py (dispatch, the two-queue chain, copies both ways, cuBLAS);
#  3. kiln beside PyTorch on the same GPU (where python3 has torch): a 2^24-element elementwise
#     kernel and an 8192^3 bf16 product;
#  4. the drivers', conformance suite's, library's and runtime's CUDA tests (a kernel that faults,
#     in a child process; more actions in flight than status slots), the narrow products (bf16,
#     f16, i8, qgemm), every element type, and the language's end-to-end suites on cuda;
#  5. `kiln run` and `train_moons` on cuda (with CUDA graphs and without, beside PyTorch's epoch of
#     the same training), and a value trace of traced kernels.
# Each step has a time limit (SECONDS_PER_STEP, 240 by default) and all of them one deadline
# (KILN_CHECK_SECONDS after the start, 450 by default, inside one 8-minute command): a step the
# deadline leaves no time for is reported as not run and counted as failed. Each line says when
# its step started and how long it took. The log goes to $OUT/cuda-check.log (or
# ./cuda-check.log), cuda_bench's JSON beside it. Exit status: the number of failed steps.
# Usage: scripts/cuda-device-check.sh [SECONDS_PER_STEP]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
limit=${1:-240}
deadline=${KILN_CHECK_SECONDS:-450}
out=${OUT:-$root}
log=$out/cuda-check.log
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
programs=$root/bench/programs
failed=0
say() { echo "$*" | tee -a "$log"; }
step() {
  local start=$SECONDS left=$((deadline - SECONDS))
  if [ $left -lt 10 ]; then
    say "=== [+${start}s] NOT RUN (the ${deadline} s deadline): $*"
    failed=$((failed + 1))
    return 1
  fi
  say "=== [+${start}s] $*"
  timeout "$((left < limit ? left : limit))" "$@" >>"$log" 2>&1
  local rc=$?
  say "=== exit $rc after $((SECONDS - start)) s: $*"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  return $rc
}
# The cuda device with both libraries, from `kiln devices` (which names their versions).
cuda_ready() {
  local devices
  devices=$("$bin/kiln" devices 2>&1)
  echo "$devices"
  grep -q '^cuda:0' <<<"$devices" || { echo "no cuda device"; return 1; }
  grep -q 'NVRTC [0-9]' <<<"$devices" || { echo "no NVRTC"; return 1; }
  grep -q 'cuBLAS [0-9]' <<<"$devices" || { echo "no cuBLAS"; return 1; }
}
export bin
export -f cuda_ready  # for `timeout`, which runs programs, not shell functions
: > "$log"
step nvidia-smi -L
step bash -c cuda_ready || { say "=== the GPU, its driver, NVRTC or cuBLAS is missing: nothing else can be checked"; exit 99; }

step "$bin/cuda_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/cuda_bench.json" --benchmark_out_format=json
step python3 "$root/scripts/cuda-bench-judge.py" "$out/cuda_bench.json"

step "$bin/kiln" run "$programs/relu_fma_2e24.kiln" --device cuda --repeat 20
step "$bin/kiln" run "$programs/matmul_bf16_8192.kiln" --device cuda --repeat 20
if python3 -c 'import torch' 2>/dev/null; then
  step python3 "$programs/torch_gpu.py" relu_fma
  step python3 "$programs/torch_gpu.py" matmul_bf16
else
  say "=== python3 has no torch: kiln is not compared with PyTorch"
fi

step "$bin/kiln_drivers_test" --gtest_filter='*Cuda*:*cuda*:*Staging*:*EventPool*:*Timepoint*'
step "$bin/kiln_hal_test" --gtest_filter='*/cuda:*Cuda*'
# NCCL where PyTorch's wheel brought it (NcclTest loads it; with one GPU there is no second rank
# for NCCL to run with: it refuses two ranks on one device).
if nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null) &&
  [ -f "$nccl" ]; then
  export KILN_NCCL_LIBRARY="$nccl"
fi
step "$bin/kiln_ral_test"
step "$bin/kiln_runtime_test" --gtest_filter='*/cuda:*Cuda*:ExamplesTest.*Cuda*:CollectivesTest.*:-*NarrowGemmTest*'
# gemm of bf16, f16 and i8 operands and qgemm (cublasGemmEx, kiln's i8 and scaling kernels)
# against exact products and against interp.
step "$bin/kiln_runtime_test" --gtest_filter='*NarrowGemmTest*/cuda'
# Every element type's ops, casts, reductions and gathers, and the language's meaning, on every
# device present (cuda among them where its driver starts) against the rules.
step "$bin/kiln_runtime_test" --gtest_filter='ElementTypesTest.*'
# And shared buffers: a routine's intermediates as views of one buffer, laid out again at new sizes.
step "$bin/kiln_runtime_test" --gtest_filter='LanguageSemanticsTest.*:TransformerFormsTest.*:SharedBuffersTest.*'

step "$bin/kiln" run "$root/examples/kiln/mlp.kiln" --device cuda
step "$bin/train_moons" --device cuda --epochs 20
# The same with the routines launched kernel by kernel: what their CUDA graphs gain (docs/cuda.md),
# and PyTorch's epoch of the same training on the same GPU.
step env KILN_CUDA_GRAPHS=off "$bin/train_moons" --device cuda --epochs 20
if python3 -c 'import torch' 2>/dev/null; then step python3 "$programs/torch_gpu.py" moons_epoch; fi
# Value tracing on the GPU: device printf, flushed before each traced action signals.
step "$bin/kiln" run "$root/examples/tracing/debug_nan.kiln" --device cuda --trace-values "$pack/values.jsonl"
step "$bin/kiln" trace-values "$pack/values.jsonl" --first-nan
say "=== [+${SECONDS}s] $failed step(s) failed; log in $log"
exit "$failed"
