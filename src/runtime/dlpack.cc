#include "runtime/dlpack.h"

#include <string>

namespace kiln::dlpack {

DLDataType data_type(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32: return {2, 32, 1};
    case ir::DType::kF64: return {2, 64, 1};
    case ir::DType::kI32: return {0, 32, 1};
    case ir::DType::kI64: return {0, 64, 1};
  }
  return {2, 32, 1};
}

Result<Placement> placement(const hal::NativeMemory& memory, size_t offset) {
  using Kind = hal::NativeMemory::Kind;
  switch (memory.kind) {
    case Kind::kHost:
      return Placement{{kDLCPU, 0}, static_cast<std::byte*>(memory.host) + offset, 0};
    case Kind::kCuda:
      return Placement{{kDLCUDA, memory.device},
                       reinterpret_cast<void*>(static_cast<uintptr_t>(memory.device_address + offset)), 0};
    case Kind::kOpenCL:
      return Placement{{kDLOpenCL, memory.device}, memory.handle, offset};
    case Kind::kNone: break;
  }
  return unimplemented_error("the memory's driver hands out no form of it that DLPack describes");
}

DLDevice device_of(const hal::DeviceInfo& info) {
  const int32_t ordinal = static_cast<int32_t>(info.ordinal);
  if (info.driver == "opencl") return {kDLOpenCL, ordinal};
  if (info.driver == "cuda") return {kDLCUDA, ordinal};
  return {kDLCPU, 0};
}

std::string device_text(int32_t device_type) {
  switch (device_type) {
    case kDLCPU: return "host memory";
    case kDLCUDA: return "CUDA device memory";
    case kDLCUDAHost: return "CUDA pinned host memory";
    case kDLOpenCL: return "OpenCL device memory";
    case kDLVulkan: return "Vulkan device memory";
    case kDLMetal: return "Metal device memory";
    case kDLROCM: return "ROCm device memory";
    case kDLCUDAManaged: return "CUDA managed memory";
    case kDLOneAPI: return "oneAPI device memory";
  }
  return "memory of DLPack device type " + std::to_string(device_type);
}

}  // namespace kiln::dlpack
