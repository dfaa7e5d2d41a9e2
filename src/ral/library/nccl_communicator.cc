#include "ral/library/nccl_communicator.h"

#include <cstdio>
#include <cstring>

#include "kiln/ral/execution_context.h"

namespace kiln::ral::library {

namespace {

// How often the watchdog looks at the collectives in flight: a timeout is seconds, an error
// NCCL reports needs no quicker notice.
constexpr std::chrono::milliseconds kWatchInterval{2};

// NCCL's element type and op for `c`: cuda_collectives.cc sends only what NCCL combines exactly.
int nccl_type(ir::DType type) {
  switch (type) {
    case ir::DType::kI8: return kNcclInt8;
    case ir::DType::kBool:
    case ir::DType::kU8: return kNcclUint8;
    case ir::DType::kI32: return kNcclInt32;
    case ir::DType::kU32: return kNcclUint32;
    case ir::DType::kI64: return kNcclInt64;
    case ir::DType::kU64: return kNcclUint64;
    case ir::DType::kF16: return kNcclFloat16;
    case ir::DType::kBF16: return kNcclBfloat16;
    case ir::DType::kF32: return kNcclFloat32;
    case ir::DType::kF64: return kNcclFloat64;
    default: return -1;  // i16, u16: moved as bytes only
  }
}

int nccl_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kMax: return kNcclMax;
    case CollectiveOp::kMin: return kNcclMin;
    default: return kNcclSum;  // a mean is a sum, divided after (cuda_collectives.cc)
  }
}

}  // namespace

Result<NcclCommunicator*> NcclCommunicator::of(ExecutionContext* execution,
                                               const std::shared_ptr<cuda::CuContext>& context) {
  char key[64];
  std::snprintf(key, sizeof key, "cuda.nccl.%p", static_cast<const void*>(context.get()));
  KILN_ASSIGN_OR_RETURN(Resource * resource,
                        execution->context().get_or_create(
                            key, Lifetime::kContext,
                            [&]() -> Result<std::unique_ptr<Resource>> {
                              KILN_ASSIGN_OR_RETURN(World * w, world());
                              KILN_ASSIGN_OR_RETURN(double timeout, collective_timeout_seconds());
                              return std::unique_ptr<Resource>(std::make_unique<NcclCommunicator>(context, w, timeout));
                            },
                            execution));
  return static_cast<NcclCommunicator*>(resource);
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<cuda::CuContext> context, World* world, double timeout_seconds)
    : context_(std::move(context)), world_(world), timeout_(timeout_seconds) {}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  watched_.clear();  // their events go back to the pool before the context may go
  if (comm_) {
    cuda::ContextScope scope(context_->target());
    // ncclCommDestroy waits for the communicator's work on the device, which has ended: the
    // runtime finishes a context after its executions.
    if (scope.status("").ok()) nccl().CommDestroy(comm_);
  }
}

Status NcclCommunicator::connect() {
  std::lock_guard<std::mutex> connecting(connect_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_RETURN_IF_ERROR(broken_);
    if (comm_) return Status();
  }
  const Nccl& lib = nccl();
  KILN_RETURN_IF_ERROR(lib.status);
  NcclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (world_->rank() == 0) KILN_RETURN_IF_ERROR(nccl_status(lib.GetUniqueId(&id), "ncclGetUniqueId"));
  Collective share;
  share.kind = CollectiveKind::kBroadcast;
  share.in = &id;
  share.out = &id;
  share.count = sizeof id;
  share.type = ir::DType::kU8;
  share.site = "NCCL's unique id";
  KILN_RETURN_IF_ERROR(world_->run(std::move(share)).annotate("connecting NCCL's ranks"));
  ncclComm_t comm = nullptr;
  {
    // NCCL joins on the current context's device.
    cuda::ContextScope scope(context_->target());
    KILN_RETURN_IF_ERROR(scope.status("connecting NCCL's ranks"));
    KILN_RETURN_IF_ERROR(nccl_status(lib.CommInitRank(&comm, world_->size(), id, world_->rank()), "ncclCommInitRank")
                             .annotate("NCCL " + lib.version + ", rank " + std::to_string(world_->rank()) + " of " +
                                       std::to_string(world_->size()) + " on " + context_->record().info.name));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  comm_ = comm;
  watchdog_ = std::thread([this] { watch(); });
  return Status();
}

Status NcclCommunicator::enqueue(const Collective& c, cuda::CUstream stream) {
  const Nccl& lib = nccl();
  const cuda::Api& api = context_->api();
  Watched w;
  w.what = c.describe() + " over NCCL";
  KILN_ASSIGN_OR_RETURN(w.started, context_->events().acquire());
  KILN_ASSIGN_OR_RETURN(w.ended, context_->events().acquire());
  std::lock_guard<std::mutex> lock(mutex_);
  KILN_RETURN_IF_ERROR(broken_);
  if (!comm_) return internal_error(w.what + ": NCCL is not connected");
  if (const cuda::CUresult r = api.EventRecord(w.started.get(), stream); r != cuda::CUDA_SUCCESS) {
    return cuda::cu_error("cuEventRecord", r, w.what);
  }
  const int type = nccl_type(c.type);
  const size_t count = static_cast<size_t>(c.count);
  // allgather and broadcast move bytes: every type goes as bytes, exactly.
  const size_t bytes = count * ir::dtype_size(c.type);
  ncclResult_t result = kNcclSuccess;
  const char* call = "";
  switch (c.kind) {
    case CollectiveKind::kAllreduce:
      call = "ncclAllReduce";
      result = lib.AllReduce(c.in, c.out, count, type, nccl_op(c.op), comm_, stream);
      break;
    case CollectiveKind::kReduceScatter:
      call = "ncclReduceScatter";
      result = lib.ReduceScatter(c.in, c.out, count, type, nccl_op(c.op), comm_, stream);
      break;
    case CollectiveKind::kAllgather:
      call = "ncclAllGather";
      result = lib.AllGather(c.in, c.out, bytes, kNcclUint8, comm_, stream);
      break;
    case CollectiveKind::kBroadcast:
      call = "ncclBroadcast";
      result = lib.Broadcast(c.in, c.out, bytes, kNcclUint8, c.root, comm_, stream);
      break;
  }
  KILN_RETURN_IF_ERROR(nccl_status(result, call).annotate(w.what));
  if (const cuda::CUresult r = api.EventRecord(w.ended.get(), stream); r != cuda::CUDA_SUCCESS) {
    return cuda::cu_error("cuEventRecord", r, w.what);
  }
  watched_.push_back(std::move(w));
  wake_.notify_all();
  return Status();
}

void NcclCommunicator::watch() {
  const cuda::Api& api = context_->api();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !watched_.empty(); });
    if (stopping_) return;
    {
      cuda::ContextScope scope(context_->target());
      while (!watched_.empty() && broken_.ok()) {
        Watched& w = watched_.front();
        if (!w.reached && api.EventQuery(w.started.get()) == cuda::CUDA_SUCCESS) {
          w.reached = std::chrono::steady_clock::now();
        }
        const cuda::CUresult ended = api.EventQuery(w.ended.get());
        if (ended == cuda::CUDA_SUCCESS) {
          watched_.pop_front();
          continue;
        }
        ncclResult_t async = kNcclSuccess;
        if (nccl().CommGetAsyncError(comm_, &async) == kNcclSuccess && async != kNcclSuccess && async != kNcclInProgress) {
          abort(nccl_status(async, "NCCL").annotate(w.what));
        } else if (ended != cuda::CUDA_ERROR_NOT_READY) {
          abort(cuda::cu_error("cuEventQuery", ended, w.what));
        } else if (w.reached && std::chrono::steady_clock::now() - *w.reached > timeout_) {
          char seconds[32];
          std::snprintf(seconds, sizeof seconds, "%g", timeout_.count());
          abort(deadline_exceeded_error(w.what + ": the other ranks did not complete it within " + seconds +
                                        " s (KILN_COLLECTIVE_TIMEOUT); the NCCL communicator was aborted"));
        }
        break;
      }
      if (!broken_.ok()) watched_.clear();
    }
    if (!watched_.empty()) wake_.wait_for(lock, kWatchInterval, [this] { return stopping_; });
  }
}

void NcclCommunicator::abort(const Status& why) {
  nccl().CommAbort(comm_);  // ends the communicator's kernels, so that its streams go on
  comm_ = nullptr;
  broken_ = context_->mark_lost(why);
}

}  // namespace kiln::ral::library
