// DLPack (https://dmlc.github.io/dlpack): its ABI, declared as dlpack.h gives it (version 0.8 and
// later, with 1.0's versioned tensor), and where a kiln array is in its terms. The Python package
// exchanges tensors through it (src/python/dlpack.cc); this part needs no Python, so that it is
// tested on its own, device memory included (tests/runtime/dlpack_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/base/status.h"
#include "kiln/hal/buffer.h"
#include "kiln/hal/device.h"
#include "kiln/ir/program.h"

namespace kiln::dlpack {

// DLDeviceType values kiln meets.
enum DeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory: host-addressable too
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLROCM = 10,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
};

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
// DLDataTypeCode values.
enum DataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  // 7 to 17: DLPack 1.1's narrow floats, named in type_text: float8 kinds (7 to 14), float6
  // (15, 16) and float4 (17). kiln has none of them.
};
struct DLDataType {
  uint8_t code;  // DataTypeCode
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL for row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
// DLPack 1.0: the same with a version and flags, in a "dltensor_versioned" capsule.
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
inline constexpr uint64_t kDLPackFlagReadOnly = 1u << 0;

// Every kiln element type has one: bool is kDLBool of 8 bits (one byte, 0 or 1, as NumPy's and
// PyTorch's), f16 kDLFloat of 16 bits, bf16 kDLBfloat of 16 bits.
DLDataType data_type(ir::DType dtype);
// The kiln type of a DLPack type: the inverse of data_type; nullopt for any other (complex,
// float8, vectors of several lanes, widths kiln has not).
std::optional<ir::DType> dtype_of(DLDataType type);
// "bfloat16 (DLPack code 4, 16 bits, 1 lane)", "complex64 (DLPack code 5, ...)", "float8_e4m3fn
// (DLPack code 10, ...)": a DLPack type by the name frameworks give it, for messages.
std::string type_text(DLDataType type);

// Where an array that starts `offset` bytes into `memory` is, in DLTensor's fields. dlpack.h:
// `data` is "a CUDA device pointer or cl_mem handle in OpenCL", the array starting
// `byte_offset` bytes after it. Host and CUDA memory: `data` points at the array's first element
// (byte_offset 0, as consumers that ignore byte_offset expect); OpenCL: `data` is the cl_mem and
// byte_offset the offset. UNIMPLEMENTED for memory its driver does not hand out (kNone).
struct Placement {
  DLDevice device;
  void* data;
  uint64_t byte_offset;
};
Result<Placement> placement(const hal::NativeMemory& memory, size_t offset);

// The DLPack device of a kiln device's own memory: (kDLOpenCL, ordinal) for OpenCL, (kDLCUDA,
// CUDA device number) for CUDA, (kDLCPU, 0) for the host devices (cpu, interp).
DLDevice device_of(const hal::DeviceInfo& info);

// "CUDA device memory", "OpenCL device memory", ...: what a DLPack device type is, for messages.
std::string device_text(int32_t device_type);

}  // namespace kiln::dlpack
