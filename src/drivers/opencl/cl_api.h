// The subset of the OpenCL 1.2 C API that the driver uses, declared here so that kiln builds
// without OpenCL headers, and loaded at run time (dlopen "libOpenCL.so.1", then "libOpenCL.so")
// so that kiln runs on machines without an OpenCL library.
//
// The declarations follow the Khronos headers (CL/cl.h, OpenCL 1.2): the handle types are opaque
// pointers, the scalar types have the headers' widths, and the calls use the C calling
// convention, which is all the ABI there is on Linux.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/base/status.h"

namespace kiln::opencl {

// --- Types (CL/cl_platform.h, CL/cl.h) ----------------------------------------------------------
using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_ulong = uint64_t;
using cl_bool = cl_uint;
using cl_bitfield = cl_ulong;
using cl_device_type = cl_bitfield;
using cl_platform_info = cl_uint;
using cl_device_info = cl_uint;
using cl_mem_flags = cl_bitfield;
using cl_map_flags = cl_bitfield;
using cl_command_queue_properties = cl_bitfield;
using cl_context_properties = intptr_t;
using cl_program_info = cl_uint;
using cl_program_build_info = cl_uint;
using cl_event_info = cl_uint;

using cl_platform_id = struct _cl_platform_id*;
using cl_device_id = struct _cl_device_id*;
using cl_context = struct _cl_context*;
using cl_command_queue = struct _cl_command_queue*;
using cl_mem = struct _cl_mem*;
using cl_program = struct _cl_program*;
using cl_kernel = struct _cl_kernel*;
using cl_event = struct _cl_event*;
using cl_kernel_work_group_info = cl_uint;

// --- Constants -------------------------------------------------------------------------------
inline constexpr cl_int CL_SUCCESS = 0;
inline constexpr cl_int CL_COMPLETE = 0;
inline constexpr cl_int CL_PLATFORM_NOT_FOUND_KHR = -1001;
inline constexpr cl_int CL_BUILD_PROGRAM_FAILURE = -11;
inline constexpr cl_int CL_INVALID_BINARY = -42;
inline constexpr cl_int CL_DEVICE_NOT_FOUND = -1;

inline constexpr cl_bool CL_FALSE = 0;
inline constexpr cl_bool CL_TRUE = 1;

inline constexpr cl_device_type CL_DEVICE_TYPE_CPU = 1 << 1;
inline constexpr cl_device_type CL_DEVICE_TYPE_ALL = 0xFFFFFFFF;

inline constexpr cl_platform_info CL_PLATFORM_VERSION = 0x0901;
inline constexpr cl_platform_info CL_PLATFORM_NAME = 0x0902;

inline constexpr cl_device_info CL_DEVICE_TYPE = 0x1000;
inline constexpr cl_device_info CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002;
inline constexpr cl_device_info CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004;
inline constexpr cl_device_info CL_DEVICE_MAX_MEM_ALLOC_SIZE = 0x1010;
inline constexpr cl_device_info CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F;
inline constexpr cl_device_info CL_DEVICE_LOCAL_MEM_SIZE = 0x1023;
inline constexpr cl_device_info CL_DEVICE_HOST_UNIFIED_MEMORY = 0x1035;
inline constexpr cl_device_info CL_DEVICE_NAME = 0x102B;
inline constexpr cl_device_info CL_DEVICE_VERSION = 0x102F;
inline constexpr cl_device_info CL_DRIVER_VERSION = 0x102D;
inline constexpr cl_device_info CL_DEVICE_EXTENSIONS = 0x1030;
inline constexpr cl_device_info CL_DEVICE_DOUBLE_FP_CONFIG = 0x1032;

inline constexpr cl_mem_flags CL_MEM_READ_WRITE = 1 << 0;
inline constexpr cl_mem_flags CL_MEM_USE_HOST_PTR = 1 << 3;
inline constexpr cl_mem_flags CL_MEM_ALLOC_HOST_PTR = 1 << 4;

inline constexpr cl_map_flags CL_MAP_READ = 1 << 0;
inline constexpr cl_map_flags CL_MAP_WRITE = 1 << 1;
inline constexpr cl_map_flags CL_MAP_WRITE_INVALIDATE_REGION = 1 << 2;

inline constexpr cl_program_info CL_PROGRAM_BINARY_SIZES = 0x1165;
inline constexpr cl_program_info CL_PROGRAM_BINARIES = 0x1166;
inline constexpr cl_program_build_info CL_PROGRAM_BUILD_LOG = 0x1183;

inline constexpr cl_event_info CL_EVENT_COMMAND_EXECUTION_STATUS = 0x11D3;

inline constexpr cl_kernel_work_group_info CL_KERNEL_WORK_GROUP_SIZE = 0x11B0;
inline constexpr cl_kernel_work_group_info CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE = 0x11B3;

// --- The function table ----------------------------------------------------------------------
using EventCallback = void (*)(cl_event, cl_int, void*);

struct Api {
  cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id*, cl_uint*);
  cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void*, size_t*);
  cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id*, cl_uint*);
  cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void*, size_t*);
  cl_context (*CreateContext)(const cl_context_properties*, cl_uint, const cl_device_id*,
                              void (*)(const char*, const void*, size_t, void*), void*, cl_int*);
  cl_int (*ReleaseContext)(cl_context);
  cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                         cl_int*);
  cl_int (*ReleaseCommandQueue)(cl_command_queue);
  cl_int (*Flush)(cl_command_queue);
  cl_int (*Finish)(cl_command_queue);
  cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void*, cl_int*);
  cl_int (*ReleaseMemObject)(cl_mem);
  cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char**, const size_t*, cl_int*);
  cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id*, const size_t*,
                                        const unsigned char**, cl_int*, cl_int*);
  cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id*, const char*,
                         void (*)(cl_program, void*), void*);
  cl_int (*GetProgramInfo)(cl_program, cl_program_info, size_t, void*, size_t*);
  cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void*,
                                size_t*);
  cl_int (*ReleaseProgram)(cl_program);
  cl_kernel (*CreateKernel)(cl_program, const char*, cl_int*);
  cl_int (*ReleaseKernel)(cl_kernel);
  cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void*,
                                   size_t*);
  cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void*);
  cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t*,
                                 const size_t*, const size_t*, cl_uint, const cl_event*,
                                 cl_event*);
  cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void*, cl_uint,
                              const cl_event*, cl_event*);
  cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void*,
                               cl_uint, const cl_event*, cl_event*);
  cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                              const cl_event*, cl_event*);
  cl_int (*EnqueueFillBuffer)(cl_command_queue, cl_mem, const void*, size_t, size_t, size_t,
                              cl_uint, const cl_event*, cl_event*);
  void* (*EnqueueMapBuffer)(cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t,
                            cl_uint, const cl_event*, cl_event*, cl_int*);
  cl_int (*EnqueueUnmapMemObject)(cl_command_queue, cl_mem, void*, cl_uint, const cl_event*,
                                  cl_event*);
  cl_int (*EnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event*, cl_event*);
  cl_int (*WaitForEvents)(cl_uint, const cl_event*);
  cl_int (*GetEventInfo)(cl_event, cl_event_info, size_t, void*, size_t*);
  cl_int (*SetEventCallback)(cl_event, cl_int, EventCallback, void*);
  cl_int (*RetainEvent)(cl_event);
  cl_int (*ReleaseEvent)(cl_event);
  // User events: an event the host completes, which holds the commands that wait on it.
  cl_event (*CreateUserEvent)(cl_context, cl_int*);
  cl_int (*SetUserEventStatus)(cl_event, cl_int);
};

// The loaded API, once per process; UNAVAILABLE saying why when the library or one of its
// functions is missing. The library stays loaded for the life of the process, because OpenCL
// objects (and the ICD's threads) may outlive every kiln object.
Result<const Api*> load_api();

// "CL_OUT_OF_RESOURCES (-5)".
std::string error_name(cl_int code);
// A status naming the call and its error: "clCreateBuffer failed: CL_INVALID_BUFFER_SIZE (-61)".
// Out-of-memory codes are RESOURCE_EXHAUSTED, the rest INTERNAL.
Status cl_error(const char* call, cl_int code, const std::string& context = "");

}  // namespace kiln::opencl
