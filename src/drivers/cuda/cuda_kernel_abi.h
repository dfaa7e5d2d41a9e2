// The CUDA kernel ABI of kiln (version 1), prepended by the CUDA driver's compiler to every
// "cuda-c" source before NVRTC builds it, as the OpenCL driver prepends its ABI.
//
// An export is an extern "C" __global__ function with these parameters, in order (the same as
// the OpenCL ABI, so that the two drivers bind arguments alike):
//   unsigned* kiln_status_ring, unsigned kiln_tag, unsigned kiln_command      (KILN_STATUS_PARAMS)
//   per binding i: unsigned char* base, unsigned long long byte offset, byte length
//                                                                    (KILN_BINDING_PARAMS(i))
//   per push constant j: unsigned                                    (KILN_CONSTANT_PARAM(j))
// Its body starts with KILN_ENTRY() (KILN_GROUP_ENTRY() with block barriers), which returns at
// once when the action already failed on the device. One HAL workgroup is one block: blockIdx
// is the workgroup id and gridDim the count; a kernel that says it works with any local size
// (hal::ExportInfo::any_local_size) runs with the driver's block size in x, else with one
// thread. KILN_FAIL(code) records the action's first failure in its status slot (tag, code,
// command index, block x, y, z), which the driver reads after the action; a queue's status ring
// has kStatusSlots slots of kStatusWords words, and action `tag` uses slot tag % kStatusSlots.
// KILN_FAIL_VALUE(code, value) records the same and a 64-bit value (words 6 and 7, low first)
// without returning: a failed check (drivers/kernel_failure.h).
// NVRTC compiles without system headers, so the ABI also defines the integer limits the
// generated code uses (KILN_INT32_MIN, ...).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

inline constexpr const char* kKernelAbiText = R"CU(/* kiln CUDA kernel ABI */
#define KILN_CUDA_ABI_VERSION 1
#define KILN_STATUS_SLOTS 256u
#define KILN_INT32_MAX 2147483647
#define KILN_INT32_MIN (-KILN_INT32_MAX - 1)
#define KILN_INT64_MAX 9223372036854775807ll
#define KILN_INT64_MIN (-KILN_INT64_MAX - 1ll)
#define KILN_STATUS_PARAMS unsigned* kiln_status_ring, unsigned kiln_tag, unsigned kiln_command
#define KILN_STATUS_SLOT(ring, tag) ((ring) + ((tag) % KILN_STATUS_SLOTS) * 8u)
#define KILN_BINDING_PARAMS(i) unsigned char* kiln_base##i, unsigned long long kiln_offset##i, unsigned long long kiln_length##i
#define KILN_BINDING(T, i) ((T*)(kiln_base##i + kiln_offset##i))
#define KILN_BINDING_LENGTH(i) (kiln_length##i)
#define KILN_CONSTANT_PARAM(j) unsigned kiln_constant##j
#define KILN_CONSTANT(j) (kiln_constant##j)
static __device__ void kiln_fail_value(unsigned* status, unsigned tag, unsigned command, unsigned code,
                                       unsigned long long value) {
  if (atomicExch(&status[0], tag) != tag) {
    status[1] = code;
    status[2] = command;
    status[3] = blockIdx.x;
    status[4] = blockIdx.y;
    status[5] = blockIdx.z;
    status[6] = (unsigned)value;
    status[7] = (unsigned)(value >> 32);
  }
}
static __device__ void kiln_fail(unsigned* status, unsigned tag, unsigned command, unsigned code) {
  kiln_fail_value(status, tag, command, code, 0);
}
static __device__ __forceinline__ unsigned kiln_failed(const unsigned* ring, unsigned tag) {
  return *(const volatile unsigned*)KILN_STATUS_SLOT(ring, tag) == tag;
}
#define KILN_FAIL(code) do { kiln_fail(KILN_STATUS_SLOT(kiln_status_ring, kiln_tag), kiln_tag, kiln_command, (unsigned)(code)); return; } while (0)
#define KILN_FAIL_VALUE(code, value) kiln_fail_value(KILN_STATUS_SLOT(kiln_status_ring, kiln_tag), kiln_tag, kiln_command, (unsigned)(code), (unsigned long long)(value))
#define KILN_ENTRY() do { if (kiln_failed(kiln_status_ring, kiln_tag)) return; } while (0)
#define KILN_GROUP_ENTRY() \
  __shared__ unsigned kiln_group_stop; \
  if (threadIdx.x == 0) kiln_group_stop = kiln_failed(kiln_status_ring, kiln_tag); \
  __syncthreads(); \
  if (kiln_group_stop) return
)CU";

// Words of one status slot, and slots of a queue's status ring (KILN_STATUS_SLOTS).
inline constexpr size_t kStatusWords = 8;
inline constexpr uint32_t kStatusSlots = 256;

}  // namespace kiln::cuda
