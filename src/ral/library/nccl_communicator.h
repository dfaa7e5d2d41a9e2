// One NCCL communicator over the world's ranks (kiln/ral/world.h) for one CUDA context: the
// collectives of the cuda device between processes, device memory to device memory on a stream.
//
// What a caller may rely on:
//  - It connects at the first collective that needs it: rank 0 makes NCCL's unique id and the
//    world broadcasts it (over MPI), then every rank joins with ncclCommInitRank. Every rank must
//    reach that first collective, as every rank must issue the same collectives in one order.
//  - enqueue() puts the collective on the stream after the work already there and returns; the
//    stream's later work runs after it.
//  - A watchdog follows each collective from when its stream reaches it. One that has not ended
//    within collective_timeout_seconds(), or an error NCCL reports (ncclCommGetAsyncError),
//    aborts the communicator (ncclCommAbort, which ends its kernels) and marks the device lost
//    with DEADLINE_EXCEEDED or UNAVAILABLE naming the collective: what the aborted collective and
//    the work after it wrote cannot be told apart, so nothing of the device may be trusted again
//    in this process. Every later enqueue fails with the same status.
//  - Thread-safe: collectives are enqueued one at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "drivers/cuda/cu_context.h"
#include "kiln/ral/context.h"
#include "kiln/ral/world.h"
#include "ral/library/nccl.h"

namespace kiln::ral::library {

class NcclCommunicator final : public Resource {
 public:
  // The communicator of `context` in `execution`'s ral::Context, made (not yet connected) on
  // first use.
  static Result<NcclCommunicator*> of(ExecutionContext* execution, const std::shared_ptr<cuda::CuContext>& context);

  NcclCommunicator(std::shared_ptr<cuda::CuContext> context, World* world, double timeout_seconds);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Joins the other ranks unless joined already (see above); blocks until they have. The
  // context need not be pushed.
  Status connect();

  // Queues `c` (its `in` and `out` device addresses, its type one NCCL combines as
  // docs/distributed.md says: cuda_collectives.cc chooses) on `stream`, with the context pushed
  // and after connect().
  Status enqueue(const Collective& c, cuda::CUstream stream);

 private:
  // A collective the watchdog follows: `started` is recorded on the stream before it, `ended`
  // after it.
  struct Watched {
    cuda::EventRef started, ended;
    std::string what;
    std::optional<std::chrono::steady_clock::time_point> reached;  // when `started` was seen complete
  };
  void watch();
  // Aborts the communicator for `why` (under mutex_): later enqueues fail with it.
  void abort(const Status& why);

  std::shared_ptr<cuda::CuContext> context_;
  World* world_;
  std::chrono::duration<double> timeout_;

  std::mutex connect_mutex_;  // one connect at a time
  std::mutex mutex_;          // guards everything below
  std::condition_variable wake_;
  ncclComm_t comm_ = nullptr;
  Status broken_;  // why later collectives fail
  std::deque<Watched> watched_;
  bool stopping_ = false;
  std::thread watchdog_;  // started by connect()
};

}  // namespace kiln::ral::library
