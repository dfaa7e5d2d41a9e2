#include "ral/library/cuda_collectives.h"

#include <optional>
#include <string>

#include "kiln/base/log.h"
#include "kiln/base/settings.h"
#include "ral/library/cuda_library.h"
#include "ral/library/nccl.h"
#include "ral/library/nccl_communicator.h"

namespace kiln::ral::library {

namespace {

// Whether NCCL combines `c` exactly as the language does (docs/distributed.md, "Element types"),
// after turning bool's sum and mean into the or they are. NCCL has no 16-bit integers, sums
// f16 and bf16 in their own type at each step, and divides integers for a mean: those go through
// the host. allgather and broadcast move bytes, exactly, whatever the type.
bool nccl_combines(Collective& c) {
  if (c.kind == CollectiveKind::kAllgather || c.kind == CollectiveKind::kBroadcast) return true;
  switch (c.type) {
    case ir::DType::kI16:
    case ir::DType::kU16: return false;
    case ir::DType::kBool:
      if (c.op != CollectiveOp::kMin) c.op = CollectiveOp::kMax;  // a logical or
      return true;
    case ir::DType::kF16:
    case ir::DType::kBF16: return c.op == CollectiveOp::kMax || c.op == CollectiveOp::kMin;
    case ir::DType::kF32:
    case ir::DType::kF64: return true;  // a mean: the sum, then divided (kiln_divide_*)
    default: return c.op != CollectiveOp::kMean;
  }
}

// The world's collective over the buffers mapped on the host, after the work before the call on
// its stream: for what NCCL cannot combine exactly.
Status run_on_host(ExecutionContext* execution, World* w, Collective c, const hal::Buffer& x, const hal::Buffer& y,
                   const char* name) {
  KILN_RETURN_IF_ERROR(await_call_stream(*execution, y, name));
  auto* out = const_cast<hal::Buffer*>(&y);
  KILN_ASSIGN_OR_RETURN(hal::Mapping out_map, out->map(hal::MapAccess::kReadWrite));
  std::optional<hal::Mapping> in_map;
  if (&x != &y) {
    KILN_ASSIGN_OR_RETURN(in_map, const_cast<hal::Buffer*>(&x)->map(hal::MapAccess::kRead));
  }
  c.in = in_map ? in_map->data() : out_map.data();
  c.out = out_map.data();
  return w->run(std::move(c));  // the mappings write `y` back as they go
}

}  // namespace

Result<bool> cuda_collectives_on_device() {
  static const Result<bool> decided = []() -> Result<bool> {
    KILN_ASSIGN_OR_RETURN(const std::optional<std::string> asked, setting_choice("KILN_CUDA_COLLECTIVES"));
    if (asked == "host") return false;
    KILN_ASSIGN_OR_RETURN(World * w, world());
    if (w->size() == 1) return true;
    const Nccl& lib = nccl();
    if (lib.status.ok()) return true;
    if (asked == "nccl") return lib.status.annotate("KILN_CUDA_COLLECTIVES=nccl");
    KILN_LOG(kWarn, "collectives on cuda cross through host memory: " + lib.status.message());
    return false;
  }();
  return decided;
}

Status run_cuda_collective(ExecutionContext* execution, Collective c, const hal::Buffer& x, const hal::Buffer& y) {
  const std::string name(collective_kind_name(c.kind));
  KILN_ASSIGN_OR_RETURN(const cuda::CUdeviceptr in, device_pointer(x, name.c_str(), "x"));
  KILN_ASSIGN_OR_RETURN(const cuda::CUdeviceptr out, device_pointer(y, name.c_str(), "y"));
  KILN_ASSIGN_OR_RETURN(CudaLibrary * library, CudaLibrary::of(execution, y, name));
  KILN_ASSIGN_OR_RETURN(World * w, world());
  const std::string what = name + " on cuda";
  if (c.kind == CollectiveKind::kBroadcast && c.root >= w->size()) {
    return invalid_argument_error("broadcast: root " + std::to_string(c.root) + " is not a rank of the world of " +
                                  std::to_string(w->size()));
  }
  if (w->size() == 1) {
    // Every collective of one rank is a copy (a mean divides by 1).
    const size_t bytes = static_cast<size_t>(c.count) * ir::dtype_size(c.type);
    return library->run(*execution, what, [&]() -> Status {
      if (in == out || bytes == 0) return Status();
      const cuda::CUresult copied = library->context()->api().MemcpyDtoDAsync(out, in, bytes, library->stream());
      return copied == cuda::CUDA_SUCCESS ? Status() : cuda::cu_error("cuMemcpyDtoDAsync_v2", copied, what);
    });
  }
  if (!nccl_combines(c)) return run_on_host(execution, w, std::move(c), x, y, name.c_str());
  KILN_ASSIGN_OR_RETURN(NcclCommunicator * comm, NcclCommunicator::of(execution, library->context()));
  KILN_RETURN_IF_ERROR(comm->connect().annotate(what));
  const bool mean = c.op == CollectiveOp::kMean &&
                    (c.kind == CollectiveKind::kAllreduce || c.kind == CollectiveKind::kReduceScatter);
  return library->run(*execution, what, [&]() -> Status {
    c.in = reinterpret_cast<const void*>(static_cast<uintptr_t>(in));
    c.out = reinterpret_cast<void*>(static_cast<uintptr_t>(out));
    KILN_RETURN_IF_ERROR(comm->enqueue(c, library->stream()));
    if (!mean) return Status();
    const auto count = static_cast<uint64_t>(c.count);  // y's elements: a mean is never an allgather
    if (c.type == ir::DType::kF64) {
      const double ranks = w->size();
      return library->launch("kiln_divide_f64", count, {&out, &count, &ranks});
    }
    const float ranks = static_cast<float>(w->size());
    return library->launch("kiln_divide_f32", count, {&out, &count, &ranks});
  });
}

}  // namespace kiln::ral::library
