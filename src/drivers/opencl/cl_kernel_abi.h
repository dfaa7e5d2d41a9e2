// The OpenCL kernel ABI of kiln (version 2), prepended by the driver's compiler to every
// "opencl-c" source, as the CPU driver prepends kiln/kernel_abi.h to "c" sources.
//
// An export is a __kernel with these parameters, in order:
//   __global uint* kiln_status_ring, uint kiln_tag, uint kiln_command  (KILN_STATUS_PARAMS)
//   per binding i: __global uchar* base, ulong byte offset, ulong byte length (KILN_BINDING_PARAMS(i))
//   per push constant j: uint                                       (KILN_CONSTANT_PARAM(j))
// and its body starts with KILN_ENTRY(), which returns at once when the action has already
// failed on the device: an earlier kernel of it failed, or a wait that the driver handed to
// the device found its signaller failed (docs/opencl.md, "Waits"). A kernel without it may
// run after such a failure. A kernel with work-group barriers starts with KILN_GROUP_ENTRY()
// instead, where work item 0 decides for the whole group (a barrier that some work items of
// a group never reach is undefined).
// One HAL workgroup is one OpenCL work group: get_group_id(0..2) is the workgroup id and
// get_num_groups(0..2) the count. It has one work item, unless the export says the kernel works
// with any local size (hal::ExportInfo::any_local_size): then the driver runs
// ClKernel::local_size work items in x (get_local_id(0) / get_local_size(0)). A kernel fails its
// dispatch with KILN_FAIL(code) (code != 0), which records the first failure of the action in
// its status slot (tag, code, command index, workgroup x, y, z); the driver reads the slot back
// after the action and fails its semaphores naming the kernel. KILN_FAIL_VALUE(code, value)
// records the same and a 64-bit value (words 6 and 7, low first) without returning: a failed
// check (drivers/kernel_failure.h), which the kernel runs on from. A queue's status ring has
// kStatusSlots slots of kStatusWords words; action `tag` uses slot tag % kStatusSlots, and a
// slot holds a failure of that action only while its first word equals the tag, so slots are
// never cleared.
#pragma once

#include <cstddef>
#include <cstdint>

#include "drivers/kernel_failure.h"

namespace kiln::opencl {

inline constexpr const char* kKernelAbiText = R"CL(/* kiln OpenCL kernel ABI */
#define KILN_OPENCL_ABI_VERSION 2
#define KILN_STATUS_SLOTS 256u
#define KILN_STATUS_PARAMS __global uint* kiln_status_ring, uint kiln_tag, uint kiln_command
#define KILN_STATUS_SLOT(ring, tag) ((ring) + ((tag) % KILN_STATUS_SLOTS) * 8u)
#define KILN_BINDING_PARAMS(i) __global uchar* kiln_base##i, ulong kiln_offset##i, ulong kiln_length##i
#define KILN_BINDING(T, i) ((__global T*)(kiln_base##i + kiln_offset##i))
#define KILN_BINDING_LENGTH(i) (kiln_length##i)
#define KILN_CONSTANT_PARAM(j) uint kiln_constant##j
#define KILN_CONSTANT(j) (kiln_constant##j)
static void kiln_fail_value(__global uint* status, uint tag, uint command, uint code, ulong value) {
  if (atomic_xchg(&status[0], tag) != tag) {
    status[1] = code;
    status[2] = command;
    status[3] = (uint)get_group_id(0);
    status[4] = (uint)get_group_id(1);
    status[5] = (uint)get_group_id(2);
    status[6] = (uint)value;
    status[7] = (uint)(value >> 32);
  }
}
static void kiln_fail(__global uint* status, uint tag, uint command, uint code) { kiln_fail_value(status, tag, command, code, 0); }
#define KILN_FAIL(code) do { kiln_fail(KILN_STATUS_SLOT(kiln_status_ring, kiln_tag), kiln_tag, kiln_command, (uint)(code)); return; } while (0)
#define KILN_FAIL_VALUE(code, value) kiln_fail_value(KILN_STATUS_SLOT(kiln_status_ring, kiln_tag), kiln_tag, kiln_command, (uint)(code), (ulong)(value))
#define KILN_ENTRY() do { if (KILN_STATUS_SLOT(kiln_status_ring, kiln_tag)[0] == kiln_tag) return; } while (0)
#define KILN_GROUP_ENTRY() \
  __local uint kiln_group_stop; \
  if (get_local_id(0) == 0) kiln_group_stop = KILN_STATUS_SLOT(kiln_status_ring, kiln_tag)[0] == kiln_tag; \
  barrier(CLK_LOCAL_MEM_FENCE); \
  if (kiln_group_stop) return
)CL";

// Words of one status slot, and slots of a queue's status ring (KILN_STATUS_SLOTS).
inline constexpr size_t kStatusWords = 8;
inline constexpr uint32_t kStatusSlots = 256;
using drivers::kWaitFailedCode;  // what the wait gate writes (drivers/kernel_failure.h)

}  // namespace kiln::opencl
