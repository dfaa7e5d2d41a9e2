#include "drivers/opencl/cl_wait_gate.h"

#include <string>

#include "drivers/opencl/cl_context.h"
#include "drivers/opencl/cl_executable.h"
#include "drivers/opencl/cl_kernel_abi.h"
#include "drivers/opencl/cl_status_ring.h"
#include "kiln/base/log.h"

namespace kiln::opencl {
namespace {

// A signaller failed on the device while the first word of its slot holds its tag.
constexpr const char* kGateSource = R"CL(
#define KILN_SIGNALLER_FAILED(i) (KILN_STATUS_SLOT(r##i, t##i)[0] == t##i)
__kernel void kiln_wait_gate(KILN_STATUS_PARAMS, __global const uint* r0, uint t0,
                             __global const uint* r1, uint t1, __global const uint* r2, uint t2,
                             __global const uint* r3, uint t3) {
  KILN_ENTRY();
  if (KILN_SIGNALLER_FAILED(0) || KILN_SIGNALLER_FAILED(1) || KILN_SIGNALLER_FAILED(2) ||
      KILN_SIGNALLER_FAILED(3)) {
    KILN_FAIL(KILN_WAIT_FAILED_CODE);
  }
}
)CL";

}  // namespace

WaitGate::~WaitGate() {
  const Api& api = context_.api();
  if (kernel_) api.ReleaseKernel(kernel_);
  if (program_) api.ReleaseProgram(program_);
}

Status WaitGate::build() {
  if (kernel_) return Status();
  const Api& api = context_.api();
  const std::string source = std::string(kKernelAbiText) + "#define KILN_WAIT_FAILED_CODE " +
                             std::to_string(kWaitFailedCode) + "u\n" + kGateSource;
  KILN_ASSIGN_OR_RETURN(cl_program program, build_program_from_source(context_, source, "wait gate"));
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = api.CreateKernel(program, "kiln_wait_gate", &err);
  if (!kernel || err != CL_SUCCESS) {
    api.ReleaseProgram(program);
    return cl_error("clCreateKernel", err, "wait gate");
  }
  program_ = program;
  kernel_ = kernel;
  return Status();
}

bool WaitGate::available() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kernel_) return true;
  if (build_failed_) return false;
  Status built = build();
  if (!built.ok()) {
    build_failed_ = true;
    KILN_LOG(kWarn, "OpenCL waits on kernels stay on the host: " + built.to_string());
  }
  return built.ok();
}

Status WaitGate::enqueue(cl_command_queue queue, cl_mem ring, uint32_t tag,
                         std::span<const PendingSignal* const> signallers,
                         const std::vector<cl_event>& waits, cl_event* event) {
  if (signallers.empty() || signallers.size() > kMaxSignallers) {
    return internal_error("a wait gate reads 1 to 4 signallers, not " +
                          std::to_string(signallers.size()));
  }
  const Api& api = context_.api();
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_RETURN_IF_ERROR(build());
  cl_uint arg = 0;
  cl_int err = CL_SUCCESS;
  auto set = [&](size_t size, const void* value) {
    if (err == CL_SUCCESS) err = api.SetKernelArg(kernel_, arg, size, value);
    ++arg;
  };
  // The gate is command "all ones" of its action: not one of the action's own commands.
  const uint32_t command = 0xFFFFFFFFu;
  set(sizeof(cl_mem), &ring);
  set(sizeof(uint32_t), &tag);
  set(sizeof(uint32_t), &command);
  for (size_t i = 0; i < kMaxSignallers; ++i) {
    // Unused parameters repeat the first signaller.
    const PendingSignal& s = *signallers[i < signallers.size() ? i : 0];
    cl_mem mem = s.ring->mem();
    set(sizeof(cl_mem), &mem);
    set(sizeof(uint32_t), &s.tag);
  }
  if (err != CL_SUCCESS) return cl_error("clSetKernelArg", err, "wait gate argument " + std::to_string(arg - 1));
  const size_t one[3] = {1, 1, 1};
  err = api.EnqueueNDRangeKernel(queue, kernel_, 3, nullptr, one, one,
                                 static_cast<cl_uint>(waits.size()),
                                 waits.empty() ? nullptr : waits.data(), event);
  if (err != CL_SUCCESS) return cl_error("clEnqueueNDRangeKernel", err, "wait gate");
  return Status();
}

}  // namespace kiln::opencl
