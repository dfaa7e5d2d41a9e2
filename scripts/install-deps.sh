#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build, test and benchmark, if any are missing, and
# the packages named as arguments (PyTorch's: `make test` for tests/python/test_torch.py,
# bench/peers/run.sh for the peers). Run as root, or with sudo available. Does nothing when
# everything is present.
set -euo pipefail

packages=(
  cmake ninja-build g++ gcc clang   # build (gcc is also the CPU driver's C compiler)
  libclang-rt-14-dev               # clang's runtimes: libFuzzer and the sanitizers (make test-fuzz)
  libgtest-dev googletest          # tests
  pkg-config                       # tests: a C program built against the installed kiln.pc
  nlohmann-json3-dev               # the kiln command: reading value traces (kiln trace-values)
  python3-venv python3-dev         # the Python package: its virtual environment and Python.h
  libbenchmark-dev                 # benchmarks
  libopenblas-dev                  # the cpu device's gemm (RAL) and the sgemm baseline of the benchmarks
  libclblast-dev                   # the opencl device's gemm (RAL; loaded at run time, optional)
  libdnnl2                         # the cpu device's products of bf16 and i8 operands (oneDNN; RAL,
                                   # loaded at run time, optional)
  openmpi-bin libopenmpi-dev       # collectives across processes (RAL; optional: without it, worlds of one)
  libonnx-testdata                 # the ONNX backend's node tests, run through kiln.onnx
                                   # (tests/python/onnx_node_tests.py)
  pocl-opencl-icd ocl-icd-libopencl1 clinfo  # an OpenCL platform on the CPU (PoCL) and the ICD
                                   # loader, so the OpenCL driver's tests run without a GPU
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
