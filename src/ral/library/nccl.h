// NCCL, loaded at run time like cuBLAS: the collectives between CUDA devices. kiln loads the
// library KILN_NCCL_LIBRARY names (a path: the nvidia-nccl-cu12 / -cu13 wheels keep it under
// site-packages/nvidia/nccl/lib), else libnccl.so.2 from the loader's path (a process that has
// loaded it already, PyTorch's, shares that one). Declared here, so that kiln builds without
// nccl.h (tests/ral/nccl_abi_test.cc checks these against nccl.h where it is installed).
#pragma once

#include <cstdint>
#include <string>

#include "drivers/cuda/cu_api.h"
#include "kiln/base/status.h"

// NCCL's opaque communicator type, at global scope as in nccl.h.
struct ncclComm;

namespace kiln::ral::library {

using ncclComm_t = ::ncclComm*;
using ncclResult_t = int;  // ncclResult_t: 0 success, 7 in progress
inline constexpr int kNcclSuccess = 0, kNcclInProgress = 7;
inline constexpr int kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct NcclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

// ncclDataType_t and ncclRedOp_t, as nccl.h numbers them (stable since NCCL 2.10, which brought
// bf16: kiln asks for 2.10 or newer).
inline constexpr int kNcclInt8 = 0, kNcclUint8 = 1, kNcclInt32 = 2, kNcclUint32 = 3, kNcclInt64 = 4, kNcclUint64 = 5,
                     kNcclFloat16 = 6, kNcclFloat32 = 7, kNcclFloat64 = 8, kNcclBfloat16 = 9;
inline constexpr int kNcclSum = 0, kNcclMax = 2, kNcclMin = 3;
inline constexpr int kNcclMinimumVersion = 21000;  // NCCL_VERSION(2, 10, 0)

struct Nccl {
  ncclResult_t (*GetVersion)(int* version) = nullptr;
  ncclResult_t (*GetUniqueId)(NcclUniqueId* id) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t* comm, int nranks, NcclUniqueId id, int rank) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t comm) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t comm) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t* error) = nullptr;
  const char* (*GetErrorString)(ncclResult_t result) = nullptr;
  ncclResult_t (*AllReduce)(const void* send, void* recv, size_t count, int type, int op, ncclComm_t comm,
                            cuda::CUstream stream) = nullptr;
  ncclResult_t (*AllGather)(const void* send, void* recv, size_t send_count, int type, ncclComm_t comm,
                            cuda::CUstream stream) = nullptr;
  ncclResult_t (*ReduceScatter)(const void* send, void* recv, size_t recv_count, int type, int op, ncclComm_t comm,
                                cuda::CUstream stream) = nullptr;
  ncclResult_t (*Broadcast)(const void* send, void* recv, size_t count, int type, int root, ncclComm_t comm,
                            cuda::CUstream stream) = nullptr;
  Status status;        // UNAVAILABLE saying why when the library or a symbol is missing, or too old
  std::string version;  // "2.28.3" once loaded
};

// Every Nccl function member with the symbol it is bound to, X(member, symbol).
#define KILN_NCCL_FUNCTIONS(X)                  \
  X(GetVersion, ncclGetVersion)                 \
  X(GetUniqueId, ncclGetUniqueId)               \
  X(CommInitRank, ncclCommInitRank)             \
  X(CommDestroy, ncclCommDestroy)               \
  X(CommAbort, ncclCommAbort)                   \
  X(CommGetAsyncError, ncclCommGetAsyncError)   \
  X(GetErrorString, ncclGetErrorString)         \
  X(AllReduce, ncclAllReduce)                   \
  X(AllGather, ncclAllGather)                   \
  X(ReduceScatter, ncclReduceScatter)           \
  X(Broadcast, ncclBroadcast)

// Loaded on first use, once per process, and never unloaded.
const Nccl& nccl();

// A status for NCCL's `result` of `call`: OK for success, else UNAVAILABLE
// "<call> failed: <NCCL's text> (<code>)".
Status nccl_status(ncclResult_t result, const char* call);

}  // namespace kiln::ral::library
