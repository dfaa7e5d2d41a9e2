// The OpenCL driver against direct OpenCL calls on the same device, in the same run:
//  - BM_KilnDispatch vs BM_DirectDispatch: one trivial kernel, submit and wait (kiln: dispatch
//    signalling a semaphore, host waits on it; direct: clEnqueueNDRangeKernel + clFinish).
//  - BM_KilnChain/device_waits:0|1 vs BM_DirectChain: 16 trivial kernels alternating between two
//    queues, each after the one before, then one host wait (kiln: one timeline, each dispatch
//    waits for the previous value, handed to the device (1) or waited for on the host (0;
//    DeviceOptions::device_waits); direct: each clEnqueueNDRangeKernel lists the previous event).
//  - BM_KilnWrite/Read vs BM_DirectWrite/Read: 64 MiB host <-> device (kiln: queue write/read
//    and a semaphore wait; direct: blocking clEnqueueWriteBuffer / clEnqueueReadBuffer).
//  - BM_OpenClGemm/clblast:0|1: a 512^3 f32 matrix product in the language on the opencl device
//    (automatic gemm) on the host over mapped buffers (0) or through CLBlast (1), against
//    BM_OpenBlasSgemm, OpenBLAS called directly on 2 threads.
//  - BM_RowSum/opencl:0|1: the row sum y[i] = sum(x[i, j]) of 4096 x 1024 f32 in the language on
//    the cpu device (0) or the opencl device (1), each run waited for, against BM_DirectRowSum, a
//    hand-written OpenCL kernel (8 work groups of one work item, float16 accumulators) with
//    clEnqueueNDRangeKernel + clFinish. Run with --benchmark_enable_random_interleaving=true so
//    that the repetitions of the devices alternate.
// Without an OpenCL platform every benchmark is skipped with the reason.
#include <benchmark/benchmark.h>

#include <stdlib.h>

#include <cstring>
#include <vector>

#include "bench_common.h"
#include "sgemm_baseline.h"
#include "drivers/opencl/cl_api.h"
#include "drivers/opencl/cl_kernel_abi.h"
#include "kiln/base/time.h"
#include "kiln/lang/parser.h"
#include "kiln/runtime/program_instance.h"

namespace kiln::bench {
namespace {

using namespace kiln::opencl;

constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr const char* kKernel =
    "__kernel void empty(KILN_STATUS_PARAMS) { KILN_ENTRY(); if (kiln_tag == 0u) KILN_FAIL(1); }\n";

// Why OpenCL cannot be benchmarked here, or "" when it can.
std::string unavailable() {
  Result<hal::DriverRef> driver = drivers::builtin_registry().find("opencl");
  if (!driver.ok()) return driver.status().to_string();
  Status status = (*driver)->availability();
  return status.ok() ? "" : status.to_string();
}

hal::DeviceRef kiln_device() {
  return check(drivers::builtin_registry().create_device("opencl:0"), "opencl device");
}

// A context, queue, kernel and buffers of the first device, made with the raw API.
struct Direct {
  const Api* api = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr, queue2 = nullptr;
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  cl_mem status = nullptr, data = nullptr;

  Direct() {
    api = check(load_api(), "load OpenCL");
    cl_platform_id platform;
    api->GetPlatformIDs(1, &platform, nullptr);
    api->GetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr);
    cl_int err;
    context = api->CreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    queue = api->CreateCommandQueue(context, device, 0, &err);
    std::string source = std::string(kKernelAbiText) + kKernel;
    const char* text = source.c_str();
    program = api->CreateProgramWithSource(context, 1, &text, nullptr, &err);
    check(api->BuildProgram(program, 1, &device, "", nullptr, nullptr) == CL_SUCCESS
              ? Status() : internal_error("clBuildProgram"), "build");
    kernel = api->CreateKernel(program, "empty", &err);
    queue2 = api->CreateCommandQueue(context, device, 0, &err);
    status = api->CreateBuffer(context, CL_MEM_READ_WRITE, kStatusSlots * kStatusWords * 4, nullptr, &err);
    data = api->CreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, kCopyBytes, nullptr, &err);
  }
  ~Direct() {
    api->ReleaseMemObject(data);
    api->ReleaseMemObject(status);
    api->ReleaseKernel(kernel);
    api->ReleaseProgram(program);
    api->ReleaseCommandQueue(queue);
    api->ReleaseCommandQueue(queue2);
    api->ReleaseContext(context);
  }
};

void BM_KilnDispatch(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  hal::DeviceRef device = kiln_device();
  time_kiln_dispatch(state, *device,
                     check(device->compile_executable({"opencl-c", kKernel, {{"empty", 0, 0}}, "bench"}), "compile"));
}
BENCHMARK(BM_KilnDispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectDispatch(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  uint32_t tag = 1, command = 0;
  const size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
  for (auto _ : state) {
    d.api->SetKernelArg(d.kernel, 0, sizeof(cl_mem), &d.status);
    d.api->SetKernelArg(d.kernel, 1, sizeof tag, &tag);
    d.api->SetKernelArg(d.kernel, 2, sizeof command, &command);
    d.api->EnqueueNDRangeKernel(d.queue, d.kernel, 3, nullptr, global, local, 0, nullptr, nullptr);
    d.api->Finish(d.queue);
  }
}
BENCHMARK(BM_DirectDispatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

constexpr uint64_t kChainLength = 16;

void BM_KilnChain(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  hal::DeviceOptions options;
  options.device_waits = state.range(0) != 0;
  hal::DeviceRef device = check(drivers::builtin_registry().create_device("opencl:0", options), "opencl device");
  time_kiln_chain(state, *device,
                  check(device->compile_executable({"opencl-c", kKernel, {{"empty", 0, 0}}, "bench"}), "compile"),
                  kChainLength);
}
BENCHMARK(BM_KilnChain)->ArgName("device_waits")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectChain(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  uint32_t tag = 1, command = 0;
  const size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
  d.api->SetKernelArg(d.kernel, 0, sizeof(cl_mem), &d.status);
  d.api->SetKernelArg(d.kernel, 1, sizeof tag, &tag);
  d.api->SetKernelArg(d.kernel, 2, sizeof command, &command);
  for (auto _ : state) {
    cl_event previous = nullptr;
    for (uint64_t i = 0; i < kChainLength; ++i) {
      cl_event event = nullptr;
      d.api->EnqueueNDRangeKernel(i % 2 ? d.queue2 : d.queue, d.kernel, 3, nullptr, global, local,
                                  previous ? 1 : 0, previous ? &previous : nullptr, &event);
      d.api->Flush(i % 2 ? d.queue2 : d.queue);
      if (previous) d.api->ReleaseEvent(previous);
      previous = event;
    }
    d.api->WaitForEvents(1, &previous);
    d.api->ReleaseEvent(previous);
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
  std::vector<uint8_t> host(kCopyBytes, 1);
  for (auto _ : state) {
    if (write) {
      d.api->EnqueueWriteBuffer(d.queue, d.data, CL_TRUE, 0, kCopyBytes, host.data(), 0, nullptr, nullptr);
    } else {
      d.api->EnqueueReadBuffer(d.queue, d.data, CL_TRUE, 0, kCopyBytes, host.data(), 0, nullptr, nullptr);
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kCopyBytes));
}
BENCHMARK(BM_DirectCopy)->ArgName("write")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr int kGemmN = 512;

void BM_OpenBlasSgemm(benchmark::State& state) { run_openblas_sgemm(state, kGemmN); }
BENCHMARK(BM_OpenBlasSgemm)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_OpenClGemm(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  run_language_gemm(state, kiln_device(), kGemmN, "KILN_OPENCL_GEMM", state.range(0) ? "clblast" : "host");
}
BENCHMARK(BM_OpenClGemm)->ArgName("clblast")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr int kRows = 4096, kCols = 1024;

// Row i holds i % 7 + j % 5 / 4 (exact in f32, sums exact too), so every row's sum is known.
std::vector<float> row_sum_input() {
  std::vector<float> x(size_t(kRows) * kCols);
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) x[size_t(i) * kCols + j] = float(i % 7) + float(j % 5) * 0.25f;
  }
  return x;
}

// Why `y` is not the row sum of row_sum_input(), or "" when it is.
std::string row_sum_error(const std::vector<float>& y) {
  for (int i = 0; i < kRows; ++i) {
    float want = float(i % 7) * kCols;
    for (int j = 0; j < kCols; ++j) want += float(j % 5) * 0.25f;
    if (y[i] != want) return "row " + std::to_string(i) + ": " + std::to_string(y[i]) + ", want " + std::to_string(want);
  }
  return "";
}

void BM_RowSum(benchmark::State& state) {
  const bool opencl = state.range(0) != 0;
  if (std::string why = unavailable(); opencl && !why.empty()) return state.SkipWithError(why.c_str());
  hal::DeviceRef device = opencl ? kiln_device() : make_cpu_device();
  const std::string rows = std::to_string(kRows), cols = std::to_string(kCols);
  ir::Program program = check(lang::parse_program("input x : f32[" + rows + ", " + cols + "]\noutput y : f32[" + rows +
                                                      "]\ny[i] = sum(x[i, j])\n",
                                                  "row_sum.kiln"),
                              "parse");
  auto p = check(runtime::ProgramInstance::create(device, program, {}), "compile");
  const std::vector<float> x = row_sum_input();
  std::vector<float> y(kRows);
  check(p->write("x", x.data(), x.size() * sizeof(float)), "write x");
  check(p->run("main"), "run");
  check(p->read("y", y.data(), y.size() * sizeof(float)), "read y");
  if (std::string wrong = row_sum_error(y); !wrong.empty()) return state.SkipWithError(wrong.c_str());
  for (auto _ : state) check(p->run("main"), "run");
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(x.size() * sizeof(float)));
}
BENCHMARK(BM_RowSum)->ArgName("opencl")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// What PoCL itself does with a row sum written by hand for it: each work item sums its rows
// with two float16 accumulators.
constexpr const char* kDirectRowSum = R"CL(
__kernel void row_sum(__global const float* restrict x, __global float* restrict y, int rows, int cols) {
  const int g = get_group_id(0), groups = get_num_groups(0);
  const int begin = (int)((long)rows * g / groups), end = (int)((long)rows * (g + 1) / groups);
  for (int i = begin; i < end; ++i) {
    __global const float* row = x + (long)i * cols;
    float16 a = vload16(0, row), b = vload16(1, row);
    for (int w = 1; w < cols / 32; ++w) {
      a += vload16(2 * w, row);
      b += vload16(2 * w + 1, row);
    }
    a += b;
    const float8 c = a.lo + a.hi;
    const float4 d = c.lo + c.hi;
    const float2 e = d.lo + d.hi;
    y[i] = e.x + e.y;
  }
}
)CL";

void BM_DirectRowSum(benchmark::State& state) {
  if (std::string why = unavailable(); !why.empty()) return state.SkipWithError(why.c_str());
  Direct d;
  cl_int err;
  const char* text = kDirectRowSum;
  cl_program program = d.api->CreateProgramWithSource(d.context, 1, &text, nullptr, &err);
  check(d.api->BuildProgram(program, 1, &d.device, "", nullptr, nullptr) == CL_SUCCESS
            ? Status() : internal_error("clBuildProgram"), "build");
  cl_kernel kernel = d.api->CreateKernel(program, "row_sum", &err);
  std::vector<float> x = row_sum_input(), y(kRows);
  cl_mem xs = d.api->CreateBuffer(d.context, CL_MEM_READ_WRITE, x.size() * sizeof(float), nullptr, &err);
  d.api->EnqueueWriteBuffer(d.queue, xs, CL_TRUE, 0, x.size() * sizeof(float), x.data(), 0, nullptr, nullptr);
  cl_mem ys = d.api->CreateBuffer(d.context, CL_MEM_READ_WRITE, y.size() * sizeof(float), nullptr, &err);
  const int rows = kRows, cols = kCols;
  d.api->SetKernelArg(kernel, 0, sizeof xs, &xs);
  d.api->SetKernelArg(kernel, 1, sizeof ys, &ys);
  d.api->SetKernelArg(kernel, 2, sizeof rows, &rows);
  d.api->SetKernelArg(kernel, 3, sizeof cols, &cols);
  // As many work groups as kiln dispatches on this device (4 per compute unit).
  const size_t global = 8, local = 1;
  auto run = [&] {
    d.api->EnqueueNDRangeKernel(d.queue, kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr);
    d.api->Finish(d.queue);
  };
  run();
  d.api->EnqueueReadBuffer(d.queue, ys, CL_TRUE, 0, y.size() * sizeof(float), y.data(), 0, nullptr, nullptr);
  if (std::string wrong = row_sum_error(y); !wrong.empty()) state.SkipWithError(wrong.c_str());
  else for (auto _ : state) run();
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(x.size() * sizeof(float)));
  d.api->ReleaseMemObject(xs);
  d.api->ReleaseMemObject(ys);
  d.api->ReleaseKernel(kernel);
  d.api->ReleaseProgram(program);
}
BENCHMARK(BM_DirectRowSum)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench

BENCHMARK_MAIN();
