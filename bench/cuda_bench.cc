// The CUDA driver against direct CUDA driver API calls on the same device, in the same run (the
// issue's targets: dispatch within 1.2x of the direct call, copies at 0.9x of its bandwidth or
// better):
//  - BM_KilnDispatch vs BM_DirectDispatch: one trivial kernel, submit and wait (kiln: dispatch
//    signalling a semaphore, host waits on it; direct: cuLaunchKernel + cuStreamSynchronize).
//    may_fail:1 is a kernel with a failure path (its action gets a status slot, copied back after
//    it), may_fail:0 one without, as kiln generates for code without checks (no slot).
//  - BM_KilnChain vs BM_DirectChain: 16 trivial kernels alternating between two queues, each after
//    the one before, then one host wait (kiln: one timeline, each dispatch waits for the previous
//    value, handed to the device; direct: cuEventRecord + cuStreamWaitEvent between streams);
//    may_fail as above (with a slot, each waiter runs the wait gate first).
//  - BM_KilnCopy vs BM_DirectCopy: 64 MiB host <-> device from pageable host memory (kiln: queue
//    write/read and a semaphore wait; direct: cuMemcpyHtoDAsync / cuMemcpyDtoHAsync from the
//    same memory and cuStreamSynchronize, which is what cuMemcpy does with pageable memory).
//  - BM_KilnGemm/cublas:1|0 vs BM_DirectCublasSgemm: a 2048^3 f32 matrix product written in the
//    language (an automatic gemm call) on the cuda device, through cuBLAS or on the host over
//    mapped buffers, against cublasSgemm on device buffers + cuStreamSynchronize.
//  - BM_DirectDispatchStatusCopy: where kiln's dispatch time goes, without its threads: the
//    direct launch, then what kiln puts on the stream after it (a 32-byte copy of the status slot
//    to pinned memory, an event) and a spin on cuEventQuery, as kiln's completion worker does.
//  - BM_StagedReadCopyOut/pinned:1|0: the host's part of a staged 64 MiB read, memcpy out of a
//    pinned (cuMemHostAlloc) block into pageable memory, against the same memcpy between two
//    pageable buffers.
//  - BM_KilnSort vs BM_HostStableSort: a 2^20-element f32 `call sort` on the device (the bitonic
//    kernels, whose work does not depend on the values) against std::stable_sort of the same
//    count on the host, which is what a program without a device sort does.
// Without a CUDA device every benchmark is skipped with the reason. Figures from an H200:
// docs/performance.md; scripts/cuda-bench-judge.py judges them against the targets.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "drivers/cuda/cu_context_scope.h"
#include "drivers/cuda/cu_platform.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "drivers/cuda/nvrtc.h"
#include "kiln/base/time.h"
#include "ral/library/cublas.h"
#include "sgemm_baseline.h"

namespace kiln::bench {
namespace {

using namespace kiln::cuda;

constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr uint64_t kChainLength = 16;
constexpr const char* kKernel =
    "extern \"C\" __global__ void empty(KILN_STATUS_PARAMS) { KILN_ENTRY(); if (kiln_tag == 0u) KILN_FAIL(1); }\n"
    "extern \"C\" __global__ void quiet(KILN_STATUS_PARAMS) { KILN_ENTRY(); }\n";

// Why CUDA cannot be benchmarked here, or "" when it can.
std::string unavailable() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find("cuda");
  if (!driver.ok()) return driver.status().to_string();
  Status status = (*driver)->availability();
  return status.ok() ? "" : status.to_string();
}

hal::DeviceRef kiln_device() { return check(drivers::builtin_registry().create_device("cuda:0"), "cuda device"); }

// Export 0 may fail ("empty"); export 1 cannot ("quiet", hal::ExportInfo::may_fail false).
hal::ExecutableRef kiln_kernel(hal::Device& device) {
  hal::ExportInfo quiet{"quiet", 0, 0};
  quiet.may_fail = false;
  return check(device.compile_executable({"cuda-c", kKernel, {{"empty", 0, 0}, quiet}, "bench"}), "compile");
}

// The first device's primary context, two streams, the kernel and buffers, made with the raw API.
struct Direct {
  const Api* api = nullptr;
  ContextTarget target;
  CUdevice device = 0;
  CUstream stream = nullptr, stream2 = nullptr;
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  CUdeviceptr status = 0, data = 0;
  CUevent events[2] = {nullptr, nullptr};

  Direct() {
    api = check(Api::load(), "load CUDA");
    std::vector<CuDeviceRecord> devices = check(enumerate_devices(*api), "devices");
    device = devices[0].device;
    target.api = api;
    check(api->DevicePrimaryCtxRetain(&target.context, device) == CUDA_SUCCESS ? Status() : internal_error("retain"), "context");
    ContextScope scope(target);
    const int arch = devices[0].compute_major * 10 + devices[0].compute_minor;
    std::string image = check(nvrtc_compile(kKernel, arch, CudaImage::kPtx, "bench"), "nvrtc");
    image.push_back('\0');
    api->ModuleLoadDataEx(&module, image.data(), 0, nullptr, nullptr);
    api->ModuleGetFunction(&kernel, module, "empty");
    api->StreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    api->StreamCreate(&stream2, CU_STREAM_NON_BLOCKING);
    api->MemAlloc(&status, kStatusSlots * kStatusWords * 4);
    api->MemsetD8Async(status, 0, kStatusSlots * kStatusWords * 4, stream);
    api->MemAlloc(&data, kCopyBytes);
    for (CUevent& e : events) api->EventCreate(&e, CU_EVENT_DISABLE_TIMING);
    api->StreamSynchronize(stream);
  }
  ~Direct() {
    ContextScope scope(target);
    for (CUevent e : events) api->EventDestroy(e);
    api->MemFree(data);
    api->MemFree(status);
    api->StreamDestroy(stream);
    api->StreamDestroy(stream2);
    api->ModuleUnload(module);
    api->DevicePrimaryCtxRelease(device);
  }
  void launch(CUstream on) {
    uint64_t values[3] = {status, 1, 0};
    void* params[3] = {&values[0], &values[1], &values[2]};
    api->LaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, on, params, nullptr);
  }
};

void BM_KilnDispatch(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  hal::DeviceRef device = kiln_device();
  time_kiln_dispatch(state, *device, kiln_kernel(*device), state.range(0) ? 0 : 1);
}
BENCHMARK(BM_KilnDispatch)->ArgName("may_fail")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectDispatch(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  ContextScope scope(d.target);
  for (auto _ : state) {
    d.launch(d.stream);
    d.api->StreamSynchronize(d.stream);
  }
}
BENCHMARK(BM_DirectDispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectDispatchStatusCopy(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  ContextScope scope(d.target);
  void* mirror = nullptr;
  d.api->MemHostAlloc(&mirror, kStatusWords * 4, CU_MEMHOSTALLOC_PORTABLE);
  for (auto _ : state) {
    d.launch(d.stream);
    d.api->MemcpyDtoHAsync(mirror, d.status, kStatusWords * 4, d.stream);
    d.api->EventRecord(d.events[0], d.stream);
    while (d.api->EventQuery(d.events[0]) == CUDA_ERROR_NOT_READY) {
    }
  }
  d.api->MemFreeHost(mirror);
}
BENCHMARK(BM_DirectDispatchStatusCopy)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KilnChain(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  hal::DeviceRef device = kiln_device();
  time_kiln_chain(state, *device, kiln_kernel(*device), kChainLength, state.range(0) ? 0 : 1);
}
BENCHMARK(BM_KilnChain)->ArgName("may_fail")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectChain(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  ContextScope scope(d.target);
  for (auto _ : state) {
    for (uint64_t i = 0; i < kChainLength; ++i) {
      CUstream on = i % 2 ? d.stream2 : d.stream;
      if (i > 0) d.api->StreamWaitEvent(on, d.events[(i - 1) % 2], 0);
      d.launch(on);
      d.api->EventRecord(d.events[i % 2], on);
    }
    d.api->EventSynchronize(d.events[(kChainLength - 1) % 2]);
  }
}
BENCHMARK(BM_DirectChain)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KilnCopy(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  time_kiln_copy(state, *kiln_device(), kCopyBytes, state.range(0) == 1);
}
BENCHMARK(BM_KilnCopy)->ArgName("write")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_DirectCopy(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  const bool write = state.range(0) == 1;
  Direct d;
  ContextScope scope(d.target);
  std::vector<uint8_t> host(kCopyBytes, 1);
  for (auto _ : state) {
    if (write) {
      d.api->MemcpyHtoDAsync(d.data, host.data(), kCopyBytes, d.stream);
    } else {
      d.api->MemcpyDtoHAsync(host.data(), d.data, kCopyBytes, d.stream);
    }
    d.api->StreamSynchronize(d.stream);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kCopyBytes));
}
BENCHMARK(BM_DirectCopy)->ArgName("write")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_StagedReadCopyOut(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  const bool pinned = state.range(0) == 1;
  Direct d;
  ContextScope scope(d.target);
  std::vector<uint8_t> pageable(pinned ? 0 : kCopyBytes, 1), host(kCopyBytes, 2);
  void* block = pageable.data();
  if (pinned) {
    d.api->MemHostAlloc(&block, kCopyBytes, CU_MEMHOSTALLOC_PORTABLE);
    std::memset(block, 1, kCopyBytes);
  }
  for (auto _ : state) {
    std::memcpy(host.data(), block, kCopyBytes);
    benchmark::DoNotOptimize(host.data());
  }
  if (pinned) d.api->MemFreeHost(block);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kCopyBytes));
}
BENCHMARK(BM_StagedReadCopyOut)->ArgName("pinned")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr int kGemmN = 2048;

void BM_KilnGemm(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  run_language_gemm(state, kiln_device(), kGemmN, "KILN_CUDA_GEMM", state.range(0) ? "cublas" : "host");
}
BENCHMARK(BM_KilnGemm)->ArgName("cublas")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_DirectCublasSgemm(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  const ral::library::Cublas& lib = ral::library::cublas();
  if (!lib.status.ok()) return state.SkipWithError(lib.status.to_string().c_str());
  Direct d;
  ContextScope scope(d.target);
  const size_t bytes = size_t{kGemmN} * kGemmN * sizeof(float);
  CUdeviceptr m[3] = {0, 0, 0};
  for (CUdeviceptr& p : m) {
    d.api->MemAlloc(&p, bytes);
    d.api->MemsetD32Async(p, 0x3e800000u, bytes / 4, d.stream);  // 0.25f
  }
  ral::library::cublasHandle_t handle = nullptr;
  lib.Create(&handle);
  lib.SetStream(handle, d.stream);
  const float alpha = 1, beta = 0;
  const auto* a = reinterpret_cast<const float*>(m[0]);
  const auto* b = reinterpret_cast<const float*>(m[1]);
  auto* c = reinterpret_cast<float*>(m[2]);
  for (auto _ : state) {
    lib.Sgemm(handle, ral::library::kCublasOpN, ral::library::kCublasOpN, kGemmN, kGemmN, kGemmN, &alpha, b, kGemmN,
              a, kGemmN, &beta, c, kGemmN);
    d.api->StreamSynchronize(d.stream);
  }
  lib.Destroy(handle);
  for (CUdeviceptr p : m) d.api->MemFree(p);
  set_gflops(state, kGemmN);
}
BENCHMARK(BM_DirectCublasSgemm)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr int64_t kSortCount = int64_t{1} << 20;

void BM_KilnSort(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  const std::string shape = "f32[" + std::to_string(kSortCount) + "]";
  ir::Program program = check(lang::parse_program("input x : " + shape + "\noutput y : " + shape + "\ncall sort(x) -> y\n",
                                                  "sort.kiln"),
                              "parse");
  auto p = check(runtime::ProgramInstance::create(kiln_device(), program, {}), "compile");
  check(p->run("main"), "first run");  // builds the library kernels
  for (auto _ : state) check(p->run("main"), "run");
  state.SetItemsProcessed(int64_t(state.iterations()) * kSortCount);
}
BENCHMARK(BM_KilnSort)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_HostStableSort(benchmark::State& state) {
  std::vector<float> x(kSortCount), y;
  for (int64_t i = 0; i < kSortCount; ++i) x[size_t(i)] = float((i * 7919) % 100003);
  for (auto _ : state) {
    y = x;
    std::stable_sort(y.begin(), y.end());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kSortCount);
}
BENCHMARK(BM_HostStableSort)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
