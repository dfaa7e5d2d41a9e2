#include "drivers/cuda/cu_wait_gate.h"

#include <string>

#include "drivers/cuda/cu_context.h"
#include "drivers/cuda/cu_image_builder.h"
#include "drivers/cuda/cuda_kernel_abi.h"
#include "kiln/base/log.h"

namespace kiln::cuda {

namespace {

constexpr const char* kGateSource = R"CU(
extern "C" __global__ void kiln_wait_gate(KILN_STATUS_PARAMS, const unsigned* s0, unsigned t0,
                                          const unsigned* s1, unsigned t1, const unsigned* s2,
                                          unsigned t2, const unsigned* s3, unsigned t3) {
  const unsigned* slots[4] = {s0, s1, s2, s3};
  const unsigned tags[4] = {t0, t1, t2, t3};
  for (int i = 0; i < 4; ++i) {
    if (slots[i] && *(const volatile unsigned*)slots[i] == tags[i]) {
      unsigned* own = KILN_STATUS_SLOT(kiln_status_ring, kiln_tag);
      own[1] = KILN_WAIT_FAILED_CODE;
      own[2] = kiln_command;
      own[0] = kiln_tag;
      return;
    }
  }
}
)CU";

// The device address of a slot's first word, as the ABI computes it.
CUdeviceptr slot_address(const StatusSlot& slot) {
  return slot.ring + CUdeviceptr{slot.tag % kStatusSlots} * kStatusWords * sizeof(uint32_t);
}

}  // namespace

WaitGate::~WaitGate() {
  if (module_) {
    call_in_context(context_.target(), "cuModuleUnload", "wait gate", [&](const Api& api) {
      return api.ModuleUnload(module_);
    }).ignore();
  }
}

bool WaitGate::available() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tried_) return function_ != nullptr;
  tried_ = true;
  ImageBuilder builder{DiskCache("")};
  const std::string source =
      "#define KILN_WAIT_FAILED_CODE " + std::to_string(kWaitFailedCode) + "u\n" + std::string(kGateSource);
  Result<KernelImage> image = builder.build(source, context_.arch(), "kiln_wait_gate");
  Status status = image.status();
  if (status.ok()) {
    ContextScope scope(context_.target());
    status = scope.status("loading the wait gate");
    if (status.ok()) {
      Result<CUmodule> module = load_module(context_.api(), *image, "the wait gate");
      status = module.status();
      if (module.ok()) module_ = *module;
    }
  }
  if (status.ok()) {
    status = call_in_context(context_.target(), "cuModuleGetFunction", "wait gate", [&](const Api& api) {
      return api.ModuleGetFunction(&function_, module_, "kiln_wait_gate");
    });
  }
  if (!status.ok()) {
    function_ = nullptr;
    KILN_LOG(kWarn, "the CUDA wait gate is not available, so waits on kernels stay on the host: " + status.to_string());
  }
  return function_ != nullptr;
}

Status WaitGate::launch(CUstream stream, const StatusSlot& own, std::span<const StatusSlot* const> signallers) {
  uint64_t values[3 + 2 * kMaxSignallers] = {own.ring, own.tag, 0};
  for (size_t i = 0; i < kMaxSignallers && i < signallers.size(); ++i) {
    values[3 + 2 * i] = slot_address(*signallers[i]);
    values[4 + 2 * i] = signallers[i]->tag;
  }
  void* pointers[3 + 2 * kMaxSignallers];
  for (size_t i = 0; i < 3 + 2 * kMaxSignallers; ++i) pointers[i] = &values[i];
  CUresult result = context_.api().LaunchKernel(function_, 1, 1, 1, 1, 1, 1, 0, stream, pointers, nullptr);
  return result == CUDA_SUCCESS ? Status() : cu_error("cuLaunchKernel", result, "wait gate");
}

}  // namespace kiln::cuda
