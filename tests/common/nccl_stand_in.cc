// A stand-in for NCCL, built as a shared library that kiln loads through KILN_NCCL_LIBRARY, for
// testing kiln's NCCL path without GPUs (tests/mpi/nccl_collectives_mpi_test.cc). Its ranks are
// the processes of an MPI job started by mpiexec (MPI_COMM_WORLD, which kiln's world shares), its
// "device" memory is host memory and its streams are the CUDA stand-in's (common/cuda_fake_api.h),
// as in the tests that use both:
//  - ncclCommInitRank duplicates MPI_COMM_WORLD and checks that every rank got rank 0's unique id;
//  - each collective is pushed onto its stream and runs there when the stream reaches it: an
//    MPI_Iallgather (MPI_Ibcast for broadcast) of the bytes, tested until it completes or the
//    communicator is aborted, then combined in rank order on the host. ncclCommAbort ends the
//    collectives waiting on the stream at once, as NCCL's ends its kernels;
//  - it refuses (ncclInvalidArgument) the sums of f16 and bf16, which NCCL would round at each
//    step and kiln must not send it.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/cuda_fake_api.h"
#include "ral/library/nccl.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 0;
  std::atomic<bool> aborted{false};
};

namespace {

using kiln::ral::library::NcclUniqueId;
using namespace kiln::ral::library;  // NOLINT: NCCL's constants

constexpr int kInvalidArgument = 4, kInvalidUsage = 5, kSystemError = 2, kRemoteError = 6;

size_t type_size(int type) {
  switch (type) {
    case kNcclInt8:
    case kNcclUint8: return 1;
    case kNcclFloat16:
    case kNcclBfloat16: return 2;
    case kNcclInt32:
    case kNcclUint32:
    case kNcclFloat32: return 4;
    default: return 8;
  }
}

float half_value(uint16_t bits, bool bf16) {
  if (bf16) {
    const uint32_t wide = uint32_t{bits} << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  const uint32_t sign = (bits >> 15) & 1, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  float magnitude = exponent == 0    ? std::ldexp(static_cast<float>(mantissa), -24)
                    : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                     : std::ldexp(static_cast<float>(mantissa + 1024), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

// a ∘ b into a, for one element of `type`.
template <typename T>
void combine_as(void* a, const void* b, int op) {
  T x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  const T r = op == kNcclSum ? static_cast<T>(x + y) : op == kNcclMax ? (y > x ? y : x) : (y < x ? y : x);
  std::memcpy(a, &r, sizeof r);
}
void combine(void* a, const void* b, int type, int op) {
  switch (type) {
    case kNcclInt8: return combine_as<int8_t>(a, b, op);
    case kNcclUint8: return combine_as<uint8_t>(a, b, op);
    case kNcclInt32: return combine_as<int32_t>(a, b, op);
    case kNcclUint32: return combine_as<uint32_t>(a, b, op);
    case kNcclInt64: return combine_as<int64_t>(a, b, op);
    case kNcclUint64: return combine_as<uint64_t>(a, b, op);
    case kNcclFloat32: return combine_as<float>(a, b, op);
    case kNcclFloat64: return combine_as<double>(a, b, op);
    default: {  // f16, bf16: max and min only
      uint16_t x, y;
      std::memcpy(&x, a, 2);
      std::memcpy(&y, b, 2);
      const float fx = half_value(x, type == kNcclBfloat16), fy = half_value(y, type == kNcclBfloat16);
      if (op == kNcclMax ? fy > fx : fy < fx) std::memcpy(a, &y, 2);
    }
  }
}

// Waits for `request` on the stream's thread until it completes or `comm` is aborted.
bool finished(MPI_Request& request, ncclComm* comm) {
  int done = 0;
  while (!done) {
    if (comm->aborted) return false;  // the request is abandoned: MPI cannot cancel a collective
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::yield();
  }
  return true;
}

// Every rank's `bytes` from `send`, in rank order, then `reduce` on them, on the stream.
template <typename Reduce>
int gather_then(const void* send, size_t bytes, ncclComm* comm, kiln::cuda::CUstream stream, Reduce reduce) {
  if (comm->aborted) return kInvalidUsage;
  kiln::cuda::fake::stream_of(stream)->push([=] {
    std::vector<char> all(bytes * comm->size);
    MPI_Request request;
    MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes), MPI_BYTE, comm->mpi,
                   &request);
    if (finished(request, comm)) reduce(all);
  });
  return 0;
}

}  // namespace

extern "C" {

int ncclGetVersion(int* version) {
  *version = 22800;
  return 0;
}

const char* ncclGetErrorString(int result) {
  switch (result) {
    case 0: return "no error";
    case kSystemError: return "unhandled system error (the stand-in needs MPI_THREAD_MULTIPLE)";
    case kInvalidArgument: return "invalid argument";
    case kInvalidUsage: return "invalid usage";
    case kRemoteError: return "remote process exited or there was a network error";
    default: return "unknown result code";
  }
}

int ncclGetUniqueId(NcclUniqueId* id) {
  std::random_device random;
  for (char& c : id->internal) c = static_cast<char>(random());
  return 0;
}

int ncclCommInitRank(ncclComm** out, int nranks, NcclUniqueId id, int rank) {
  int initialized = 0, provided = 0, size = 0, me = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return kInvalidUsage;
  MPI_Query_thread(&provided);
  if (provided != MPI_THREAD_MULTIPLE) return kSystemError;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (size != nranks || me != rank) return kInvalidArgument;
  auto* comm = new ncclComm();
  MPI_Comm_dup(MPI_COMM_WORLD, &comm->mpi);
  comm->rank = rank;
  comm->size = nranks;
  NcclUniqueId root = id;
  MPI_Bcast(root.internal, sizeof root.internal, MPI_BYTE, 0, comm->mpi);
  if (std::memcmp(root.internal, id.internal, sizeof id.internal) != 0) {
    MPI_Comm_free(&comm->mpi);
    delete comm;
    return kInvalidArgument;  // this rank joined with another id than rank 0's
  }
  *out = comm;
  return 0;
}

int ncclCommDestroy(ncclComm* comm) {
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return 0;
}

int ncclCommAbort(ncclComm* comm) {
  comm->aborted = true;  // kept: a collective on a stream may still look at it
  return 0;
}

int ncclCommGetAsyncError(ncclComm*, int* error) {
  *error = 0;
  return 0;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, ncclComm* comm,
                  kiln::cuda::CUstream stream) {
  if ((type == kNcclFloat16 || type == kNcclBfloat16) && op == kNcclSum) return kInvalidArgument;
  const size_t size = type_size(type), bytes = count * size;
  return gather_then(send, bytes, comm, stream, [=](std::vector<char>& all) {
    for (int r = 1; r < comm->size; ++r) {
      for (size_t i = 0; i < count; ++i) combine(&all[i * size], &all[r * bytes + i * size], type, op);
    }
    std::memcpy(recv, all.data(), bytes);
  });
}

int ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, ncclComm* comm,
                      kiln::cuda::CUstream stream) {
  if ((type == kNcclFloat16 || type == kNcclBfloat16) && op == kNcclSum) return kInvalidArgument;
  const size_t size = type_size(type), part = count * size, bytes = part * comm->size;
  return gather_then(send, bytes, comm, stream, [=](std::vector<char>& all) {
    char* mine = &all[comm->rank * part];
    for (int r = 1; r < comm->size; ++r) {
      for (size_t i = 0; i < count; ++i) combine(mine + i * size, &all[r * bytes + comm->rank * part + i * size], type, op);
    }
    std::memcpy(recv, mine, part);
  });
}

int ncclAllGather(const void* send, void* recv, size_t count, int type, ncclComm* comm, kiln::cuda::CUstream stream) {
  const size_t bytes = count * type_size(type);
  return gather_then(send, bytes, comm, stream,
                     [=](std::vector<char>& all) { std::memcpy(recv, all.data(), all.size()); });
}

int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, ncclComm* comm,
                  kiln::cuda::CUstream stream) {
  if (root < 0 || root >= comm->size) return kInvalidArgument;
  if (comm->aborted) return kInvalidUsage;
  const size_t bytes = count * type_size(type);
  kiln::cuda::fake::stream_of(stream)->push([=] {
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    MPI_Request request;
    MPI_Ibcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm->mpi, &request);
    finished(request, comm);
  });
  return 0;
}

}  // extern "C"
