# The two commands of the README. Everything else is CMake.
#   make demo   installs what is missing, builds, runs the main job (data-parallel training: the
#               half-moons MLP in C++, the digits CNN from Python)
#   make test   installs what is missing, builds, runs every test: a plain build with GCC, ASan+UBSan
#               and TSan builds with Clang (so both compilers build kiln on every run),
#               `pip install .` into a fresh virtual environment, then each libFuzzer target for
#               FUZZ_TEST_SECONDS (docs/fuzzing.md)
#   make fuzz   the libFuzzer targets only, FUZZ_SECONDS each (FUZZ_TARGETS to pick some)
#   make bench  builds and runs the benchmarks
#   make bench-peers  kiln against PyTorch, NumPy, IREE, tinygrad and ONNX Runtime on the same work (bench/peers)

JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST = ctest --output-on-failure --no-tests=error -j $(JOBS) --timeout 600

FUZZ_TEST_SECONDS ?= 40
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=

.PHONY: deps build demo test test-start test-plain test-asan test-tsan test-python-install test-fuzz fuzz fuzz-build bench bench-peers clean

# The Python package is built in `build` with the virtual environment build/python-venv
# (python/requirements.txt: nanobind, numpy, pytest), and its tests run with the plain tests.
PYTHON_VENV = build/python-venv

# Each phase of `make test` is timed (scripts/timed.sh); the times are printed at the end.
PHASES = $(CURDIR)/build/phase-times.txt
TIMED = scripts/timed.sh $(PHASES)

# Line tables only (-g1) in every build: enough for stack traces and sanitizer reports, and much
# cheaper to compile than full debug information. The test programs themselves are built without
# optimization (KILN_TEST_FLAGS, CMakeLists.txt): kiln's libraries keep the build type's.
DEBUG_FLAGS = -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
SANITIZER_FLAGS = -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"

# Every build compiles its sources in unity batches of 8 (CMake's UNITY_BUILD): the headers are
# parsed once a batch, which halves a build from nothing (2026-11-30, 2 cores: 8 of the runtime's
# files in 11.5 s instead of 23.5; the plain build 5.0 minutes instead of 7.3). A file's
# internal names must therefore differ from those of the other files of its layer.
UNITY_FLAGS = -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8

deps:
	@$(TIMED) deps scripts/install-deps.sh
	@$(TIMED) python-venv scripts/python-venv.sh $(CURDIR)/$(PYTHON_VENV)

build: deps
	@cmake -S . -B build -G Ninja -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCHMARKS=ON -DKILN_BUILD_EXAMPLES=ON \
	  -DKILN_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(CURDIR)/$(PYTHON_VENV)/bin/python $(DEBUG_FLAGS) $(UNITY_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@$(TIMED) build cmake --build build -j $(JOBS)

# examples/onnx exports a torchvision model with Debian's python3-torch and python3-torchvision,
# installed for the interpreter the virtual environment was made from (as for test-plain).
demo: build
	./build/examples/train_moons/train_moons --trace build/train_moons.trace.json
	PYTHONPATH=build/python $(PYTHON_VENV)/bin/python examples/digits/train_digits.py
	scripts/install-deps.sh python3-torch python3-torchvision
	PYTHONPATH=build/python $(PYTHON_VENV)/bin/python examples/onnx/classify.py
	./build/kiln run examples/kiln/softmax.kiln --print

test: test-start test-plain test-python-install test-asan test-tsan test-fuzz
	@echo "make test: every phase passed; the phases took:"
	@$(TIMED) --report

test-start:
	@rm -f $(PHASES)

# KILN_OPENCL_WORK_ITEMS=64: the OpenCL tests run generated kernels with 64 work items per work
# group here (PoCL's own choice is one; the sanitizer runs keep it), so that both ways are tested.
# KILN_OPENCL_DEVICE_WAITS=1: waits between OpenCL actions are handed to the device here and in
# the TSan run (PoCL's default keeps them on the host; the ASan run keeps that), likewise.
# PyTorch for the ctest python.torch (tests/python/test_torch.py): Debian's python3-torch (CPU) and
# python3-pytest for the interpreter the virtual environment was made from, installed here only,
# where the tests use them (the environment itself pins NumPy 2, which that PyTorch predates); and
# python3-torchvision, whose models tests/python/test_onnx.py exports to ONNX with that interpreter.
test-plain: build
	@$(TIMED) deps-torch scripts/install-deps.sh python3-torch python3-pytest python3-torchvision
	cd build && KILN_OPENCL_WORK_ITEMS=64 KILN_OPENCL_DEVICE_WAITS=1 $(CURDIR)/$(TIMED) ctest-plain $(CTEST)

# `pip install .` from this tree into a fresh virtual environment, then the README's Python
# snippet against what it installed (tests/python/pip_install.sh). Its build folder is
# build/pip-<tag> (pyproject.toml), so a second run rebuilds only what changed.
test-python-install: deps
	JOBS=$(JOBS) $(TIMED) pip-install tests/python/pip_install.sh . build/pip-install-test

# intercept_tls_get_addr=0: the __tls_get_addr interceptor of GCC 12's libasan (and LLVM's before
# 17) takes a dynamic TLS block whose start is 16 bytes past a page boundary for a glibc < 2.25
# block header and reads the two words before it as an address and a size; LeakSanitizer's tracer
# then faults while scanning them ("Tracer caught signal 11") at the exit of processes that dlopen
# libraries with thread-local storage: PoCL and its LLVM, so the OpenCL tests. Leak checking stays
# on everywhere; only the dynamic TLS of dlopen()ed libraries is no longer scanned for pointers.
ASAN_TEST_OPTIONS = detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:intercept_tls_get_addr=0

# Clang builds kiln with ASan+UBSan faster than GCC (2026-11-29, fresh clones on 2 cores: 9.8
# minutes, where GCC took 14.8 and 16.8), and its UBSan checks more (function types, float casts).
test-asan: deps
	@grep -qs '^CMAKE_CXX_COMPILER:.*clang' build-asan/CMakeCache.txt || rm -rf build-asan  # was GCC's
	@CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DKILN_SANITIZE=address -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCHMARKS=OFF $(SANITIZER_FLAGS) $(UNITY_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@$(TIMED) build-asan cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=$(ASAN_TEST_OPTIONS) LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(CURDIR)/$(TIMED) ctest-asan $(CTEST)

# The TSan build tests the layers where threads meet (base's futexes and queues, the HAL, the
# drivers, the RAL, the runtime), the C API's programs, and the Python package's thread tests
# (tests/CMakeLists.txt: python.threads); the parser, IR, lowering, code generation and command
# line run on one thread and are covered by the plain and ASan builds.
TSAN_TEST_LAYERS = base;hal;drivers;ral;runtime
# Of those layers' tests, the ones that check what the compiler emits over many programs (the
# differential tests, the CUDA C builds, random programs' lowering) run on the plain and ASan
# builds only: they exercise the compiler, and the threads they meet are tested here by others.
TSAN_SKIP_TESTS = DifferentialTest|DifferentialSizesTest|CudaCodegenTest|LoweringRobustnessTest.RandomPrograms

# OPENBLAS_NUM_THREADS=1: OpenBLAS's worker threads hand results back through spin-waits in its
# uninstrumented code, which TSan cannot see as synchronization; the cpu device's gemm then looks
# like a race on the result. OMP_NUM_THREADS=1 likewise for oneDNN's OpenMP threads (the
# products of bf16 and i8 operands). kiln's own threads are all still checked.
test-tsan: deps
	@CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DKILN_SANITIZE=thread -DKILN_BUILD_TESTS=ON -DKILN_BUILD_BENCHMARKS=OFF \
	  -DKILN_BUILD_TOOLS=OFF -DKILN_TEST_LAYERS="$(TSAN_TEST_LAYERS)" \
	  -DKILN_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(CURDIR)/$(PYTHON_VENV)/bin/python $(SANITIZER_FLAGS) $(UNITY_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@$(TIMED) build-tsan cmake --build build-tsan -j $(JOBS)
	cd build-tsan && KILN_OPENCL_DEVICE_WAITS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1 $(CURDIR)/$(TIMED) ctest-tsan $(CTEST) -E '$(TSAN_SKIP_TESTS)'

# The fuzz targets and only the libraries they need (Clang, libFuzzer, ASan + UBSan).
fuzz-build: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DKILN_FUZZ=ON -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=OFF $(SANITIZER_FLAGS) $(UNITY_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@$(TIMED) build-fuzz cmake --build build-fuzz -j $(JOBS) --target kiln_fuzzers

test-fuzz: fuzz-build
	FUZZ_JOBS=$(JOBS) $(TIMED) fuzz tests/fuzz/run.sh build-fuzz $(FUZZ_TEST_SECONDS) $(FUZZ_TARGETS)

fuzz: fuzz-build
	FUZZ_JOBS=$(JOBS) tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# collectives_bench runs under mpiexec with 2 ranks (Open MPI as root wants its two variables).
MPIEXEC_2 = env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -np 2 --oversubscribe

bench: build
	@for b in build/bench/*_bench; do echo "== $$b"; \
	  case $$b in *collectives_bench) launch="$(MPIEXEC_2)";; *) launch="";; esac; \
	  $$launch $$b --benchmark_repetitions=5 --benchmark_report_aggregates_only=true || exit 1; done
	$(PYTHON_VENV)/bin/python bench/python_call_overhead.py --build build
	$(PYTHON_VENV)/bin/python bench/large_npy.py --build build

bench-peers: build
	bench/peers/run.sh build

clean:
	rm -rf build build-asan build-tsan build-fuzz
