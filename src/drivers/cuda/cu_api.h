// The subset of the CUDA driver API (cuda.h) that the CUDA driver uses, declared here so that kiln
// builds without the CUDA toolkit, and loaded at run time from libcuda.so.1 (or the file named by
// KILN_CUDA_LIBRARY) so that kiln runs on machines without an NVIDIA driver.
//
// A caller may rely on:
//  - every type, enumerator and flag below has the value and size of the same name in cuda.h
//    (tests/drivers/cuda_api_abi_test.cc checks this against the toolkit's header, when a build
//    machine has one);
//  - each Api member is the function KILN_CUDA_API_FUNCTIONS pairs it with, bound by that
//    exported symbol name: the versioned one (cuMemAlloc_v2) where cuda.h maps the plain name to
//    a version, never the per-thread-default-stream (_ptsz) variants, because every call names
//    its stream;
//  - the opaque handle types are cuda.h's own (struct CUctx_st* ...), declared at global scope,
//    so a handle from code that includes cuda.h passes to these functions unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "kiln/base/status.h"

// cuda.h's handle structs. Only pointers to them are ever used; naming the same global structs
// makes kiln's handle types identical to cuda.h's, not merely the same size.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUmemPoolHandle_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
struct CUkern_st;

namespace kiln::cuda {

// --- Types -------------------------------------------------------------------------------------
// cuda.h leaves its enums' underlying type to the compiler (int on every ABI CUDA supports);
// fixing it to int here lets an enum variable hold any code a newer driver returns.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_UNKNOWN = 999,
};

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = ::CUctx_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUstream = ::CUstream_st*;
using CUevent = ::CUevent_st*;
using CUmemoryPool = ::CUmemPoolHandle_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUgraphExec = ::CUgraphExec_st*;
using CUkernel = ::CUkern_st*;

// A kernel node of a graph (cuda.h's CUDA_KERNEL_NODE_PARAMS, version 2: CUDA 12.0 and later).
struct CUDA_KERNEL_NODE_PARAMS {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;  // null: func is the kernel
  CUcontext ctx;  // null: the current context
};

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
};

// A memory pool of kiln's own (cuMemPoolCreate): device memory, no export handles.
enum CUmemAllocationType : int { CU_MEM_ALLOCATION_TYPE_PINNED = 0x1 };
enum CUmemAllocationHandleType : int { CU_MEM_HANDLE_TYPE_NONE = 0x0 };
enum CUmemLocationType : int { CU_MEM_LOCATION_TYPE_DEVICE = 0x1 };
struct CUmemLocation {
  CUmemLocationType type;
  int id;  // the device ordinal
};
struct CUmemPoolProps {
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;  // zero
  size_t maxSize;                 // 0: the system's default
  unsigned short usage;
  unsigned char reserved[54];     // zero
};

enum CUmemPool_attribute : int {
  // cuuint64_t: bytes the pool keeps reserved at a synchronization instead of releasing them.
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
};

// --- Flags -------------------------------------------------------------------------------------
inline constexpr unsigned int CU_CTX_SCHED_AUTO = 0x00;
inline constexpr unsigned int CU_CTX_SCHED_SPIN = 0x01;
inline constexpr unsigned int CU_CTX_SCHED_YIELD = 0x02;
inline constexpr unsigned int CU_CTX_SCHED_BLOCKING_SYNC = 0x04;

inline constexpr unsigned int CU_STREAM_DEFAULT = 0x0;
inline constexpr unsigned int CU_STREAM_NON_BLOCKING = 0x1;

// CUlimit: the size of the buffer that device printf writes into.
enum CUlimit : int { CU_LIMIT_PRINTF_FIFO_SIZE = 0x01 };

// CUjit_option: the JIT's error log, for a PTX image it refuses.
enum CUjit_option : int { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned int CU_EVENT_BLOCKING_SYNC = 0x1;
inline constexpr unsigned int CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned int CU_EVENT_WAIT_DEFAULT = 0x0;

inline constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x02;
inline constexpr unsigned int CU_MEMHOSTREGISTER_PORTABLE = 0x01;
inline constexpr unsigned int CU_MEMHOSTREGISTER_DEVICEMAP = 0x02;
inline constexpr unsigned int CU_MEMHOSTREGISTER_READ_ONLY = 0x08;

// --- The function table ------------------------------------------------------------------------
struct Api {
  // Initialization, version, errors.
  CUresult (*Init)(unsigned int flags);
  CUresult (*DriverGetVersion)(int* version);
  CUresult (*GetErrorName)(CUresult error, const char** name);
  CUresult (*GetErrorString)(CUresult error, const char** text);
  // Devices.
  CUresult (*DeviceGet)(CUdevice* device, int ordinal);
  CUresult (*DeviceGetCount)(int* count);
  CUresult (*DeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*DeviceGetAttribute)(int* value, CUdevice_attribute attribute, CUdevice device);
  CUresult (*DeviceTotalMem)(size_t* bytes, CUdevice device);
  CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool* pool, CUdevice device);
  CUresult (*MemPoolCreate)(CUmemoryPool* pool, const CUmemPoolProps* props);
  CUresult (*MemPoolDestroy)(CUmemoryPool pool);
  // Releases the pool's unused memory to the driver down to `keep` bytes.
  CUresult (*MemPoolTrimTo)(CUmemoryPool pool, size_t keep);
  CUresult (*MemAllocFromPoolAsync)(CUdeviceptr* pointer, size_t bytes, CUmemoryPool pool, CUstream stream);
  // Primary contexts: kiln shares the device's primary context with every other user of the
  // runtime API in the process, as the CUDA runtime itself does.
  CUresult (*DevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*DevicePrimaryCtxSetFlags)(CUdevice device, unsigned int flags);
  CUresult (*CtxSetCurrent)(CUcontext context);
  CUresult (*CtxPushCurrent)(CUcontext context);
  CUresult (*CtxPopCurrent)(CUcontext* context);
  // Waits for all work of the current context, every stream's (other libraries' too).
  CUresult (*CtxSynchronize)();
  // Memory.
  CUresult (*MemAlloc)(CUdeviceptr* pointer, size_t bytes);
  CUresult (*MemFree)(CUdeviceptr pointer);
  CUresult (*MemAllocAsync)(CUdeviceptr* pointer, size_t bytes, CUstream stream);
  CUresult (*MemFreeAsync)(CUdeviceptr pointer, CUstream stream);
  CUresult (*MemPoolSetAttribute)(CUmemoryPool pool, CUmemPool_attribute attribute, void* value);
  CUresult (*MemHostAlloc)(void** pointer, size_t bytes, unsigned int flags);
  CUresult (*MemFreeHost)(void* pointer);
  // Page-locks and maps existing host memory (imported buffers), and undoes it.
  CUresult (*MemHostRegister)(void* pointer, size_t bytes, unsigned int flags);
  CUresult (*MemHostUnregister)(void* pointer);
  CUresult (*MemHostGetDevicePointer)(CUdeviceptr* device_pointer, void* host_pointer,
                                      unsigned int flags);
  CUresult (*MemcpyAsync)(CUdeviceptr target, CUdeviceptr source, size_t bytes, CUstream stream);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr target, const void* source, size_t bytes, CUstream stream);
  CUresult (*MemcpyDtoHAsync)(void* target, CUdeviceptr source, size_t bytes, CUstream stream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr target, CUdeviceptr source, size_t bytes, CUstream stream);
  CUresult (*MemsetD8Async)(CUdeviceptr target, unsigned char value, size_t count, CUstream stream);
  CUresult (*MemsetD16Async)(CUdeviceptr target, unsigned short value, size_t count,
                             CUstream stream);
  CUresult (*MemsetD32Async)(CUdeviceptr target, unsigned int value, size_t count, CUstream stream);
  // Streams and events.
  CUresult (*StreamCreate)(CUstream* stream, unsigned int flags);
  CUresult (*StreamDestroy)(CUstream stream);
  CUresult (*StreamSynchronize)(CUstream stream);
  CUresult (*StreamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
  CUresult (*EventCreate)(CUevent* event, unsigned int flags);
  CUresult (*EventDestroy)(CUevent event);
  CUresult (*EventRecord)(CUevent event, CUstream stream);
  CUresult (*EventQuery)(CUevent event);
  CUresult (*EventSynchronize)(CUevent event);
  // Modules and kernels.
  CUresult (*CtxSetLimit)(CUlimit limit, size_t value);
  CUresult (*CtxGetLimit)(size_t* value, CUlimit limit);
  CUresult (*ModuleLoadDataEx)(CUmodule* module, const void* image, unsigned int count, CUjit_option* options,
                               void** values);
  CUresult (*ModuleUnload)(CUmodule module);
  CUresult (*ModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*ModuleGetGlobal)(CUdeviceptr* pointer, size_t* bytes, CUmodule module,
                              const char* name);
  CUresult (*FuncGetAttribute)(int* value, CUfunction_attribute attribute, CUfunction function);
  // Graphs: bound where the driver has them (CUDA 12.0 and later), else null, and routines are
  // not replayed as graphs (KILN_CUDA_API_GRAPH_FUNCTIONS).
  CUresult (*GraphCreate)(CUgraph* graph, unsigned int flags);
  CUresult (*GraphDestroy)(CUgraph graph);
  CUresult (*GraphAddKernelNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* dependencies, size_t count,
                                 const CUDA_KERNEL_NODE_PARAMS* params);
  CUresult (*GraphInstantiate)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params);
  CUresult (*GraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*GraphExecDestroy)(CUgraphExec exec);
  bool has_graphs() const { return GraphCreate && GraphDestroy && GraphAddKernelNode && GraphInstantiate &&
                                   GraphExecKernelNodeSetParams && GraphLaunch && GraphExecDestroy; }
  CUresult (*LaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                           unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                           unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                           void** parameters, void** extra);

  // The table, loaded once per process on the first call (thread-safe); UNAVAILABLE naming the
  // library and dlerror() when it does not load, or the library and every missing symbol. The
  // library is never unloaded: CUDA's own threads and the primary contexts outlive kiln's objects.
  static Result<const Api*> load();
};

// Every Api member with the symbol it is bound to, X(member, symbol): the one list the loader
// binds from and the ABI test checks against cuda.h's declarations.
#define KILN_CUDA_API_FUNCTIONS(X)                          \
  X(Init, cuInit)                                           \
  X(DriverGetVersion, cuDriverGetVersion)                   \
  X(GetErrorName, cuGetErrorName)                           \
  X(GetErrorString, cuGetErrorString)                       \
  X(DeviceGet, cuDeviceGet)                                 \
  X(DeviceGetCount, cuDeviceGetCount)                       \
  X(DeviceGetName, cuDeviceGetName)                         \
  X(DeviceGetAttribute, cuDeviceGetAttribute)               \
  X(DeviceTotalMem, cuDeviceTotalMem_v2)                    \
  X(DeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)     \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)       \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)  \
  X(DevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2) \
  X(CtxSetCurrent, cuCtxSetCurrent)                         \
  X(CtxPushCurrent, cuCtxPushCurrent_v2)                    \
  X(CtxPopCurrent, cuCtxPopCurrent_v2)                      \
  X(CtxSynchronize, cuCtxSynchronize)                       \
  X(MemAlloc, cuMemAlloc_v2)                                \
  X(MemFree, cuMemFree_v2)                                  \
  X(MemAllocAsync, cuMemAllocAsync)                         \
  X(MemFreeAsync, cuMemFreeAsync)                           \
  X(MemPoolSetAttribute, cuMemPoolSetAttribute)             \
  X(MemPoolCreate, cuMemPoolCreate)                         \
  X(MemPoolDestroy, cuMemPoolDestroy)                       \
  X(MemPoolTrimTo, cuMemPoolTrimTo)                         \
  X(MemAllocFromPoolAsync, cuMemAllocFromPoolAsync)         \
  X(MemHostAlloc, cuMemHostAlloc)                           \
  X(MemFreeHost, cuMemFreeHost)                             \
  X(MemHostRegister, cuMemHostRegister_v2)                  \
  X(MemHostUnregister, cuMemHostUnregister)                 \
  X(MemHostGetDevicePointer, cuMemHostGetDevicePointer_v2)  \
  X(MemcpyAsync, cuMemcpyAsync)                             \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)                  \
  X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                  \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)                  \
  X(MemsetD8Async, cuMemsetD8Async)                         \
  X(MemsetD16Async, cuMemsetD16Async)                       \
  X(MemsetD32Async, cuMemsetD32Async)                       \
  X(StreamCreate, cuStreamCreate)                           \
  X(StreamDestroy, cuStreamDestroy_v2)                      \
  X(StreamSynchronize, cuStreamSynchronize)                 \
  X(StreamWaitEvent, cuStreamWaitEvent)                     \
  X(EventCreate, cuEventCreate)                             \
  X(EventDestroy, cuEventDestroy_v2)                        \
  X(EventRecord, cuEventRecord)                             \
  X(EventQuery, cuEventQuery)                               \
  X(EventSynchronize, cuEventSynchronize)                   \
  X(CtxSetLimit, cuCtxSetLimit)                             \
  X(CtxGetLimit, cuCtxGetLimit)                             \
  X(ModuleLoadDataEx, cuModuleLoadDataEx)                     \
  X(ModuleUnload, cuModuleUnload)                           \
  X(ModuleGetFunction, cuModuleGetFunction)                 \
  X(ModuleGetGlobal, cuModuleGetGlobal_v2)                  \
  X(FuncGetAttribute, cuFuncGetAttribute)                   \
  X(LaunchKernel, cuLaunchKernel)

// The Api members bound only where the driver has them (graphs), X(member, symbol) as above.
#define KILN_CUDA_API_GRAPH_FUNCTIONS(X)                              \
  X(GraphCreate, cuGraphCreate)                                       \
  X(GraphDestroy, cuGraphDestroy)                                     \
  X(GraphAddKernelNode, cuGraphAddKernelNode_v2)                      \
  X(GraphInstantiate, cuGraphInstantiateWithFlags)                    \
  X(GraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams_v2)  \
  X(GraphLaunch, cuGraphLaunch)                                       \
  X(GraphExecDestroy, cuGraphExecDestroy)

// The library file Api::load() opens: KILN_CUDA_LIBRARY when set (a name dlopen searches for, or
// a path), else "libcuda.so.1", the name the NVIDIA driver installs (libcuda.so without the
// version is only in the toolkit, often as a stub that cannot run anything).
std::string cuda_library_name();

// The CUDA version the loaded driver supports (cuDriverGetVersion: 13000 for 13.0); the load's
// or the call's error when there is no usable driver.
Result<int> driver_version();
// driver_version() where there is a usable driver, else nullopt.
std::optional<int> driver_or_none();
// "12.4" for 12040.
std::string cuda_version_text(int version);

// The CUDA libraries kiln loads (NVRTC, cuBLAS) by their SONAMEs, newest first: `versioned`
// pairs a CUDA major with its file ("libnvrtc.so.12"), then `unversioned` ("libnvrtc.so") comes
// last. A library of a newer major than the driver supports cannot work with it (PTX from NVRTC 13
// is refused by a 12.x driver, cuBLAS 13 does not start on it), so where there is a `driver`
// (driver_version()), names of newer majors are left out. `why` receives what was left out
// ("libnvrtc.so.13 (the CUDA driver supports CUDA 12.4)"), for the error when nothing loads.
std::vector<std::string> library_names_for_driver(std::optional<int> driver,
                                                  std::initializer_list<std::pair<int, const char*>> versioned,
                                                  const char* unversioned, std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY (2)": the driver's own name when the library is loaded
// (cuGetErrorName), else kiln's name for the codes declared above, else "CUDA error (N)".
std::string error_name(CUresult code);
// A status naming the call, its error and where it happened:
// "<where>: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)" (no "<where>: " when empty).
// Out of memory is RESOURCE_EXHAUSTED; a missing device or unusable driver UNAVAILABLE; the rest
// INTERNAL.
Status cu_error(const char* call, CUresult code, std::string_view where = {});

}  // namespace kiln::cuda
