// The OpenCL kernel ABI of kiln (version 1), prepended by the driver's compiler to every
// "opencl-c" source, as the CPU driver prepends kiln/kernel_abi.h to "c" sources.
//
// An export is a __kernel with these parameters, in order:
//   __global uint* kiln_status, uint kiln_tag, uint kiln_command   (KILN_STATUS_PARAMS)
//   per binding i: __global uchar* base, ulong byte offset, ulong byte length (KILN_BINDING_PARAMS(i))
//   per push constant j: uint                                       (KILN_CONSTANT_PARAM(j))
// One HAL workgroup is one OpenCL work group: get_group_id(0..2) is the workgroup id and
// get_num_groups(0..2) the count. It has one work item, unless the export says the kernel works
// with any local size (hal::ExportInfo::any_local_size): then the driver runs
// ClKernel::local_size work items in x (get_local_id(0) / get_local_size(0)). A kernel fails its dispatch with
// KILN_FAIL(code) (code != 0), which records the first failure of the action in the queue's
// status words (tag, code, command index, workgroup x, y, z); the driver reads them back after
// the action and fails its semaphores naming the kernel.
#pragma once

namespace kiln::opencl {

inline constexpr const char* kKernelAbiText = R"CL(/* kiln OpenCL kernel ABI */
#define KILN_OPENCL_ABI_VERSION 1
#define KILN_STATUS_PARAMS __global uint* kiln_status, uint kiln_tag, uint kiln_command
#define KILN_BINDING_PARAMS(i) __global uchar* kiln_base##i, ulong kiln_offset##i, ulong kiln_length##i
#define KILN_BINDING(T, i) ((__global T*)(kiln_base##i + kiln_offset##i))
#define KILN_BINDING_LENGTH(i) (kiln_length##i)
#define KILN_CONSTANT_PARAM(j) uint kiln_constant##j
#define KILN_CONSTANT(j) (kiln_constant##j)
static void kiln_fail(__global uint* status, uint tag, uint command, uint code) {
  if (atomic_xchg(&status[0], tag) != tag) {
    status[1] = code;
    status[2] = command;
    status[3] = (uint)get_group_id(0);
    status[4] = (uint)get_group_id(1);
    status[5] = (uint)get_group_id(2);
  }
}
#define KILN_FAIL(code) do { kiln_fail(kiln_status, kiln_tag, kiln_command, (uint)(code)); return; } while (0)
)CL";

// Words of the per-queue status buffer.
inline constexpr size_t kStatusWords = 8;

}  // namespace kiln::opencl
