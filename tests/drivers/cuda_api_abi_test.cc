// kiln's CUDA declarations (drivers/cuda/cu_api.h) against the toolkit's cuda.h: every enumerator
// and flag has cuda.h's value, every type its size (the handles are the same types), and every
// Api member has the signature cuda.h declares for the symbol it is bound to. These are
// static_asserts, so a mismatch fails the build of this test. They compile only where CMake found
// the toolkit (KILN_HAVE_CUDA_H); elsewhere the test reports itself skipped, saying so. With the
// toolkit's stub libcuda.so, a child process also loads it through KILN_CUDA_LIBRARY: every
// symbol the loader asks for must be exported.
#include <gtest/gtest.h>

#include <type_traits>

#include "common/abi_same.h"
#include "drivers/cuda/cu_api.h"

namespace {

// Every Api member is a function pointer named in KILN_CUDA_API_FUNCTIONS, so the loader binds
// (and the checks below cover) all of them. Needs no toolkit.
#define KILN_COUNT_FUNCTION(member, symbol) +1
constexpr size_t kListedFunctions =
    0 KILN_CUDA_API_FUNCTIONS(KILN_COUNT_FUNCTION) KILN_CUDA_API_GRAPH_FUNCTIONS(KILN_COUNT_FUNCTION);
#undef KILN_COUNT_FUNCTION
static_assert(sizeof(kiln::cuda::Api) == kListedFunctions * sizeof(void (*)()),
              "an Api member is missing from KILN_CUDA_API_FUNCTIONS, or the list has extras");

#if KILN_HAVE_CUDA_H
// cuda.h makes these flags macros; read kiln's values before the macros hide the names.
constexpr unsigned int kKilnMemHostAllocPortable = kiln::cuda::CU_MEMHOSTALLOC_PORTABLE;
constexpr unsigned int kKilnMemHostAllocDeviceMap = kiln::cuda::CU_MEMHOSTALLOC_DEVICEMAP;
constexpr unsigned int kKilnMemHostRegisterPortable = kiln::cuda::CU_MEMHOSTREGISTER_PORTABLE;
constexpr unsigned int kKilnMemHostRegisterDeviceMap = kiln::cuda::CU_MEMHOSTREGISTER_DEVICEMAP;
constexpr unsigned int kKilnMemHostRegisterReadOnly = kiln::cuda::CU_MEMHOSTREGISTER_READ_ONLY;
#endif

}  // namespace

#if KILN_HAVE_CUDA_H
#include <cuda.h>

#include <cstddef>

// kiln's CUmemPoolProps is cuda.h's, field by field (the offsets below): a pointer to it passes
// as cuda.h's does.
template <>
struct kiln::test::AbiSame<const kiln::cuda::CUmemPoolProps, const ::CUmemPoolProps> {
  static constexpr bool value = true;
};

// So is its CUDA_KERNEL_NODE_PARAMS (version 2).
template <>
struct kiln::test::AbiSame<const kiln::cuda::CUDA_KERNEL_NODE_PARAMS, const ::CUDA_KERNEL_NODE_PARAMS> {
  static constexpr bool value = true;
};

namespace {

using KilnNode = kiln::cuda::CUDA_KERNEL_NODE_PARAMS;
static_assert(sizeof(KilnNode) == sizeof(::CUDA_KERNEL_NODE_PARAMS) && alignof(KilnNode) == alignof(::CUDA_KERNEL_NODE_PARAMS));
static_assert(offsetof(KilnNode, func) == offsetof(::CUDA_KERNEL_NODE_PARAMS, func));
static_assert(offsetof(KilnNode, gridDimZ) == offsetof(::CUDA_KERNEL_NODE_PARAMS, gridDimZ));
static_assert(offsetof(KilnNode, blockDimX) == offsetof(::CUDA_KERNEL_NODE_PARAMS, blockDimX));
static_assert(offsetof(KilnNode, sharedMemBytes) == offsetof(::CUDA_KERNEL_NODE_PARAMS, sharedMemBytes));
static_assert(offsetof(KilnNode, kernelParams) == offsetof(::CUDA_KERNEL_NODE_PARAMS, kernelParams));
static_assert(offsetof(KilnNode, extra) == offsetof(::CUDA_KERNEL_NODE_PARAMS, extra));
static_assert(offsetof(KilnNode, kern) == offsetof(::CUDA_KERNEL_NODE_PARAMS, kern));
static_assert(offsetof(KilnNode, ctx) == offsetof(::CUDA_KERNEL_NODE_PARAMS, ctx));

using KilnProps = kiln::cuda::CUmemPoolProps;
static_assert(sizeof(KilnProps) == sizeof(::CUmemPoolProps) && alignof(KilnProps) == alignof(::CUmemPoolProps));
static_assert(offsetof(KilnProps, allocType) == offsetof(::CUmemPoolProps, allocType));
static_assert(offsetof(KilnProps, handleTypes) == offsetof(::CUmemPoolProps, handleTypes));
static_assert(offsetof(KilnProps, location) == offsetof(::CUmemPoolProps, location));
static_assert(offsetof(KilnProps, location.id) == offsetof(::CUmemPoolProps, location.id));
static_assert(offsetof(KilnProps, win32SecurityAttributes) == offsetof(::CUmemPoolProps, win32SecurityAttributes));
static_assert(offsetof(KilnProps, maxSize) == offsetof(::CUmemPoolProps, maxSize));
static_assert(offsetof(KilnProps, usage) == offsetof(::CUmemPoolProps, usage));
static_assert(offsetof(KilnProps, reserved) == offsetof(::CUmemPoolProps, reserved));
static_assert(sizeof(kiln::cuda::CUmemLocationType) == sizeof(::CUmemLocationType));
static_assert(int{kiln::cuda::CU_MEM_ALLOCATION_TYPE_PINNED} == int{::CU_MEM_ALLOCATION_TYPE_PINNED});
static_assert(int{kiln::cuda::CU_MEM_HANDLE_TYPE_NONE} == int{::CU_MEM_HANDLE_TYPE_NONE});
static_assert(int{kiln::cuda::CU_MEM_LOCATION_TYPE_DEVICE} == int{::CU_MEM_LOCATION_TYPE_DEVICE});

#define KILN_CHECK_FUNCTION(member, symbol)                                              \
  static_assert(kiln::test::AbiSame<decltype(kiln::cuda::Api::member), decltype(&::symbol)>::value, \
                "Api::" #member " does not match cuda.h's " #symbol);
KILN_CUDA_API_FUNCTIONS(KILN_CHECK_FUNCTION)
KILN_CUDA_API_GRAPH_FUNCTIONS(KILN_CHECK_FUNCTION)
#undef KILN_CHECK_FUNCTION

#define KILN_CHECK_VALUE(name)                                                     \
  static_assert(static_cast<long long>(kiln::cuda::name) == static_cast<long long>(::name), \
                #name " differs from cuda.h");
KILN_CHECK_VALUE(CUDA_SUCCESS)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_VALUE)
KILN_CHECK_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
KILN_CHECK_VALUE(CUDA_ERROR_NOT_INITIALIZED)
KILN_CHECK_VALUE(CUDA_ERROR_DEINITIALIZED)
KILN_CHECK_VALUE(CUDA_ERROR_STUB_LIBRARY)
KILN_CHECK_VALUE(CUDA_ERROR_DEVICE_UNAVAILABLE)
KILN_CHECK_VALUE(CUDA_ERROR_NO_DEVICE)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_DEVICE)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_IMAGE)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_CONTEXT)
KILN_CHECK_VALUE(CUDA_ERROR_NO_BINARY_FOR_GPU)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_PTX)
KILN_CHECK_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
KILN_CHECK_VALUE(CUDA_ERROR_INVALID_HANDLE)
KILN_CHECK_VALUE(CUDA_ERROR_NOT_FOUND)
KILN_CHECK_VALUE(CUDA_ERROR_NOT_READY)
KILN_CHECK_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS)
KILN_CHECK_VALUE(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
KILN_CHECK_VALUE(CUDA_ERROR_LAUNCH_TIMEOUT)
KILN_CHECK_VALUE(CUDA_ERROR_LAUNCH_FAILED)
KILN_CHECK_VALUE(CUDA_ERROR_NOT_SUPPORTED)
KILN_CHECK_VALUE(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
KILN_CHECK_VALUE(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
KILN_CHECK_VALUE(CUDA_ERROR_UNKNOWN)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_INTEGRATED)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
KILN_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
KILN_CHECK_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
KILN_CHECK_VALUE(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
KILN_CHECK_VALUE(CU_FUNC_ATTRIBUTE_NUM_REGS)
KILN_CHECK_VALUE(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
KILN_CHECK_VALUE(CU_CTX_SCHED_AUTO)
KILN_CHECK_VALUE(CU_CTX_SCHED_SPIN)
KILN_CHECK_VALUE(CU_CTX_SCHED_YIELD)
KILN_CHECK_VALUE(CU_CTX_SCHED_BLOCKING_SYNC)
KILN_CHECK_VALUE(CU_STREAM_DEFAULT)
KILN_CHECK_VALUE(CU_STREAM_NON_BLOCKING)
KILN_CHECK_VALUE(CU_EVENT_DEFAULT)
KILN_CHECK_VALUE(CU_EVENT_DISABLE_TIMING)
KILN_CHECK_VALUE(CU_EVENT_WAIT_DEFAULT)
#undef KILN_CHECK_VALUE
static_assert(kKilnMemHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE);
static_assert(kKilnMemHostAllocDeviceMap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(kKilnMemHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(kKilnMemHostRegisterDeviceMap == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(kKilnMemHostRegisterReadOnly == CU_MEMHOSTREGISTER_READ_ONLY);

static_assert(sizeof(kiln::cuda::CUresult) == sizeof(::CUresult));
static_assert(sizeof(kiln::cuda::CUdevice_attribute) == sizeof(::CUdevice_attribute));
static_assert(sizeof(kiln::cuda::CUfunction_attribute) == sizeof(::CUfunction_attribute));
static_assert(int{kiln::cuda::CU_JIT_ERROR_LOG_BUFFER} == int{::CU_JIT_ERROR_LOG_BUFFER});
static_assert(int{kiln::cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES} == int{::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES});
static_assert(kiln::cuda::CU_EVENT_BLOCKING_SYNC == ::CU_EVENT_BLOCKING_SYNC);
static_assert(int{kiln::cuda::CU_LIMIT_PRINTF_FIFO_SIZE} == int{::CU_LIMIT_PRINTF_FIFO_SIZE});
static_assert(sizeof(kiln::cuda::CUmemPool_attribute) == sizeof(::CUmemPool_attribute));
static_assert(std::is_same_v<kiln::cuda::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<kiln::cuda::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<kiln::cuda::CUcontext, ::CUcontext>);
static_assert(std::is_same_v<kiln::cuda::CUmodule, ::CUmodule>);
static_assert(std::is_same_v<kiln::cuda::CUfunction, ::CUfunction>);
static_assert(std::is_same_v<kiln::cuda::CUstream, ::CUstream>);
static_assert(std::is_same_v<kiln::cuda::CUevent, ::CUevent>);
static_assert(std::is_same_v<kiln::cuda::CUmemoryPool, ::CUmemoryPool>);

}  // namespace
#endif  // KILN_HAVE_CUDA_H

namespace kiln {
namespace {

TEST(CudaApiAbiTest, DeclarationsMatchCudaH) {
#if KILN_HAVE_CUDA_H
  // The checks are the static_asserts above; reaching here means they held. Also at run time:
  // the X-list count covers what the loader binds.
  EXPECT_EQ(sizeof(cuda::Api) / sizeof(void (*)()), kListedFunctions);
  EXPECT_GE(CUDA_VERSION, 11020) << "kiln's declarations need cuda.h of CUDA 11.2 or newer";
#else
  GTEST_SKIP() << "CMake did not find the CUDA toolkit's cuda.h (find_package(CUDAToolkit)) when "
                  "configuring, so kiln's CUDA declarations are not checked against it";
#endif
}

}  // namespace
}  // namespace kiln
