#include "runtime/dlpack.h"

#include <iterator>
#include <string>

namespace kiln::dlpack {

DLDataType data_type(ir::DType dtype) {
  const auto bits = static_cast<uint8_t>(ir::dtype_size(dtype) * 8);
  if (dtype == ir::DType::kBool) return {kDLBool, 8, 1};
  if (dtype == ir::DType::kBF16) return {kDLBfloat, 16, 1};
  if (ir::is_float_type(dtype)) return {kDLFloat, bits, 1};
  return {ir::is_unsigned_type(dtype) ? kDLUInt : kDLInt, bits, 1};
}

std::optional<ir::DType> dtype_of(DLDataType type) {
  for (ir::DType dtype : ir::kAllDTypes) {
    const DLDataType t = data_type(dtype);
    if (t.code == type.code && t.bits == type.bits && t.lanes == type.lanes) return dtype;
  }
  return std::nullopt;
}

std::string type_text(DLDataType t) {
  // DLPack 1.1's DLDataTypeCode names, as the frameworks (ml_dtypes, PyTorch) call the types.
  static constexpr const char* kKinds[] = {
      "int",         "uint",          "float",       "opaque handle",  "bfloat",       "complex",
      "bool",        "float8_e3m4",   "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
      "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  std::string name;
  if (t.code < std::size(kKinds)) {
    name = kKinds[t.code];
    // The widths of int, uint, float, bfloat and complex are part of their names.
    if (t.code <= kDLComplex && t.code != kDLOpaqueHandle) name += std::to_string(t.bits);
    if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
    name += " ";
  }
  return name + "(DLPack code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + (t.lanes == 1 ? " lane)" : " lanes)");
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
