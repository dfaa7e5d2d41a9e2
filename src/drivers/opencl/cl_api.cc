#include "drivers/opencl/cl_api.h"

#include <stdlib.h>

#include <mutex>

#include "kiln/base/shared_library.h"

namespace kiln::opencl {

namespace {

struct Loaded {
  Api api{};
  Status status;
};

// PoCL compiles each kernel again at its first dispatch for the work-group shape it is given,
// unless told not to: kiln's kernels then compile once, when they are built (compile()), and load
// from kiln's disk cache without compiling (docs/opencl.md). PoCL reads it when it starts, after
// this; set when kiln is loaded (before main, or while a host dlopens kiln), not at the first
// OpenCL call, where other threads may be reading the environment. A value the user set is kept.
[[gnu::constructor]] void default_pocl_specialization() {
  ::setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", /*overwrite=*/0);
}

Loaded load() {
  Loaded out;
  Result<void*> loaded = load_shared_library({"libOpenCL.so.1", "libOpenCL.so"});
  if (!loaded.ok()) {
    out.status = unavailable_error("the OpenCL library was not found (" + loaded.status().message() +
                                   "); install an ICD loader and a platform, e.g. "
                                   "ocl-icd-libopencl1 and pocl-opencl-icd");
    return out;
  }
  void* handle = *loaded;
  // Every entry is required; a library without one of them is not a usable OpenCL 1.2.
  SymbolBinder binder(handle);
  Api& a = out.api;
#define KILN_CL_BIND(name) binder.bind(a.name, "cl" #name)
  KILN_CL_BIND(GetPlatformIDs);
  KILN_CL_BIND(GetPlatformInfo);
  KILN_CL_BIND(GetDeviceIDs);
  KILN_CL_BIND(GetDeviceInfo);
  KILN_CL_BIND(CreateContext);
  KILN_CL_BIND(ReleaseContext);
  KILN_CL_BIND(CreateCommandQueue);
  KILN_CL_BIND(ReleaseCommandQueue);
  KILN_CL_BIND(Flush);
  KILN_CL_BIND(Finish);
  KILN_CL_BIND(CreateBuffer);
  KILN_CL_BIND(ReleaseMemObject);
  KILN_CL_BIND(CreateProgramWithSource);
  KILN_CL_BIND(CreateProgramWithBinary);
  KILN_CL_BIND(BuildProgram);
  KILN_CL_BIND(GetProgramInfo);
  KILN_CL_BIND(GetProgramBuildInfo);
  KILN_CL_BIND(ReleaseProgram);
  KILN_CL_BIND(CreateKernel);
  KILN_CL_BIND(ReleaseKernel);
  KILN_CL_BIND(GetKernelWorkGroupInfo);
  KILN_CL_BIND(SetKernelArg);
  KILN_CL_BIND(EnqueueNDRangeKernel);
  KILN_CL_BIND(EnqueueReadBuffer);
  KILN_CL_BIND(EnqueueWriteBuffer);
  KILN_CL_BIND(EnqueueCopyBuffer);
  KILN_CL_BIND(EnqueueFillBuffer);
  KILN_CL_BIND(EnqueueMapBuffer);
  KILN_CL_BIND(EnqueueUnmapMemObject);
  KILN_CL_BIND(EnqueueMarkerWithWaitList);
  KILN_CL_BIND(WaitForEvents);
  KILN_CL_BIND(GetEventInfo);
  KILN_CL_BIND(SetEventCallback);
  KILN_CL_BIND(RetainEvent);
  KILN_CL_BIND(ReleaseEvent);
  KILN_CL_BIND(CreateUserEvent);
  KILN_CL_BIND(SetUserEventStatus);
#undef KILN_CL_BIND
  if (!binder.missing().empty()) {
    out.status = unavailable_error("the OpenCL library lacks OpenCL 1.2 functions: " + binder.missing());
  }
  return out;
}

}  // namespace

Result<const Api*> load_api() {
  // Loaded once and never unloaded (see the header).
  static const Loaded* loaded = new Loaded(load());
  if (!loaded->status.ok()) return loaded->status;
  return &loaded->api;
}

std::string error_name(cl_int code) {
  const char* name = nullptr;
  switch (code) {
    case 0: name = "CL_SUCCESS"; break;
    case -1: name = "CL_DEVICE_NOT_FOUND"; break;
    case -2: name = "CL_DEVICE_NOT_AVAILABLE"; break;
    case -3: name = "CL_COMPILER_NOT_AVAILABLE"; break;
    case -4: name = "CL_MEM_OBJECT_ALLOCATION_FAILURE"; break;
    case -5: name = "CL_OUT_OF_RESOURCES"; break;
    case -6: name = "CL_OUT_OF_HOST_MEMORY"; break;
    case -7: name = "CL_PROFILING_INFO_NOT_AVAILABLE"; break;
    case -8: name = "CL_MEM_COPY_OVERLAP"; break;
    case -9: name = "CL_IMAGE_FORMAT_MISMATCH"; break;
    case -10: name = "CL_IMAGE_FORMAT_NOT_SUPPORTED"; break;
    case -11: name = "CL_BUILD_PROGRAM_FAILURE"; break;
    case -12: name = "CL_MAP_FAILURE"; break;
    case -13: name = "CL_MISALIGNED_SUB_BUFFER_OFFSET"; break;
    case -14: name = "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"; break;
    case -15: name = "CL_COMPILE_PROGRAM_FAILURE"; break;
    case -16: name = "CL_LINKER_NOT_AVAILABLE"; break;
    case -17: name = "CL_LINK_PROGRAM_FAILURE"; break;
    case -30: name = "CL_INVALID_VALUE"; break;
    case -31: name = "CL_INVALID_DEVICE_TYPE"; break;
    case -32: name = "CL_INVALID_PLATFORM"; break;
    case -33: name = "CL_INVALID_DEVICE"; break;
    case -34: name = "CL_INVALID_CONTEXT"; break;
    case -35: name = "CL_INVALID_QUEUE_PROPERTIES"; break;
    case -36: name = "CL_INVALID_COMMAND_QUEUE"; break;
    case -37: name = "CL_INVALID_HOST_PTR"; break;
    case -38: name = "CL_INVALID_MEM_OBJECT"; break;
    case -42: name = "CL_INVALID_BINARY"; break;
    case -43: name = "CL_INVALID_BUILD_OPTIONS"; break;
    case -44: name = "CL_INVALID_PROGRAM"; break;
    case -45: name = "CL_INVALID_PROGRAM_EXECUTABLE"; break;
    case -46: name = "CL_INVALID_KERNEL_NAME"; break;
    case -47: name = "CL_INVALID_KERNEL_DEFINITION"; break;
    case -48: name = "CL_INVALID_KERNEL"; break;
    case -49: name = "CL_INVALID_ARG_INDEX"; break;
    case -50: name = "CL_INVALID_ARG_VALUE"; break;
    case -51: name = "CL_INVALID_ARG_SIZE"; break;
    case -52: name = "CL_INVALID_KERNEL_ARGS"; break;
    case -53: name = "CL_INVALID_WORK_DIMENSION"; break;
    case -54: name = "CL_INVALID_WORK_GROUP_SIZE"; break;
    case -55: name = "CL_INVALID_WORK_ITEM_SIZE"; break;
    case -56: name = "CL_INVALID_GLOBAL_OFFSET"; break;
    case -57: name = "CL_INVALID_EVENT_WAIT_LIST"; break;
    case -58: name = "CL_INVALID_EVENT"; break;
    case -59: name = "CL_INVALID_OPERATION"; break;
    case -61: name = "CL_INVALID_BUFFER_SIZE"; break;
    case -63: name = "CL_INVALID_GLOBAL_WORK_SIZE"; break;
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR"; break;
    default: break;
  }
  return std::string(name ? name : "CL error") + " (" + std::to_string(code) + ")";
}

Status cl_error(const char* call, cl_int code, const std::string& context) {
  std::string message = std::string(call) + " failed: " + error_name(code);
  if (!context.empty()) message = context + ": " + message;
  const bool memory = code == -4 || code == -5 || code == -6;
  return Status(memory ? StatusCode::kResourceExhausted : StatusCode::kInternal, message);
}

}  // namespace kiln::opencl
