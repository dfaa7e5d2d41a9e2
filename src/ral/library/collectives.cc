// The collectives (docs/language.md, "Collectives"): allreduce, allgather, reduce_scatter,
// broadcast, rank and world_size, on "cpu", "interp", "opencl" and "cuda", each through the
// process's World (kiln/ral/world.h) over host memory (mapped on opencl): MPI across the ranks of
// a job, a copy in a world of one. On cuda they take device memory where
// cuda_collectives_on_device() says so (NCCL, cuda_collectives.h).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kiln/ral/element_types.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/world.h"
#include "ral/library/cuda_collectives.h"
#include "ral/library/library.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

// A collective's tensor, whatever its element type and rank: the functions of each type and rank
// below only describe their tensors this way, so that what checks and starts a collective is
// compiled once, and their registration once for every device.
struct Tensor {
  void* data = nullptr;
  std::span<const int64_t> sizes;  // empty for a scalar
  ir::DType type = ir::DType::kF32;

  int64_t element_count() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

template <typename T, int N>
Tensor tensor_of(const MemRef<T, N>& m) {
  if constexpr (N == 0) return Tensor{m.data, {}, *dtype_of<T>()};
  else return Tensor{m.data, m.sizes, *dtype_of<T>()};
}

Result<CollectiveOp> collective_op(int64_t op, const char* call) {
  if (op < 0 || op > 3) {
    return invalid_argument_error(std::string(call) + ": op=" + std::to_string(op) +
                                  " is none of 0 (sum), 1 (mean), 2 (max), 3 (min)");
  }
  return static_cast<CollectiveOp>(op);
}

// A collective of `kind` from x's data to y's; `count` elements (per rank where they differ).
Collective make_collective(CollectiveKind kind, const Tensor& x, const Tensor& y, int64_t count) {
  Collective c;
  c.kind = kind;
  c.in = x.data;
  c.out = y.data;
  c.count = count;
  c.type = x.type;
  return c;
}

// Runs `c` from x to y on the process's world: started, ending later, where the runtime offered
// a completion (a routine's collective step), else to its end before returning. On cuda's own
// memory (the tensors are its buffers) on the device instead.
Status run_collective(ExecutionContext* execution, World* w, Collective c, const Tensor& x, const Tensor& y) {
  if (execution->device() == "cuda") {
    KILN_ASSIGN_OR_RETURN(const bool on_device, cuda_collectives_on_device());
    if (on_device) return run_cuda_collective(execution, std::move(c), buffer_at(x.data), buffer_at(y.data));
  }
  if (std::optional<ExecutionContext::Completion> later = execution->take_completion()) {
    c.site = std::move(later->site);
    if (later->gather) later->gather(std::move(c), std::move(later->done));
    else w->start(std::move(c), std::move(later->done));
    return Status(StatusCode::kDeferred, "a collective in flight");
  }
  return w->run(std::move(c));
}

Status allreduce_tensors(ExecutionContext* execution, const Tensor& x, const Tensor& y, int64_t op) {
  KILN_ASSIGN_OR_RETURN(CollectiveOp how, collective_op(op, "allreduce"));
  if (x.element_count() != y.element_count()) {
    return invalid_argument_error("allreduce: y has shape " + shape_string(y.sizes) + ", x has shape " +
                                  shape_string(x.sizes));
  }
  KILN_ASSIGN_OR_RETURN(World * w, world());
  Collective c = make_collective(CollectiveKind::kAllreduce, x, y, x.element_count());
  c.op = how;
  return run_collective(execution, w, std::move(c), x, y);
}

Status broadcast_tensors(ExecutionContext* execution, const Tensor& x, const Tensor& y, int64_t root) {
  if (x.element_count() != y.element_count()) {
    return invalid_argument_error("broadcast: y has shape " + shape_string(y.sizes) + ", x has shape " +
                                  shape_string(x.sizes));
  }
  if (root < 0 || root > INT32_MAX) {
    return invalid_argument_error("broadcast: root " + std::to_string(root) + " is not a rank");
  }
  KILN_ASSIGN_OR_RETURN(World * w, world());
  Collective c = make_collective(CollectiveKind::kBroadcast, x, y, x.element_count());
  c.root = static_cast<int>(root);
  return run_collective(execution, w, std::move(c), x, y);
}

// y's first dimension is R × x's (a scalar x: y is [R]); the rest agree.
Status allgather_tensors(ExecutionContext* execution, const Tensor& x, const Tensor& y) {
  KILN_ASSIGN_OR_RETURN(World * w, world());
  const int64_t ranks = w->size();
  bool fits = y.element_count() == ranks * x.element_count();
  if (!x.sizes.empty()) fits = fits && y.sizes[0] == ranks * x.sizes[0];
  if (!fits) {
    return invalid_argument_error("allgather: y has shape " + shape_string(y.sizes) + ", but " +
                                  std::to_string(ranks) + " rank(s) gathering x of shape " + shape_string(x.sizes) +
                                  " make a first dimension of R × x's (R = " + std::to_string(ranks) + ")");
  }
  return run_collective(execution, w, make_collective(CollectiveKind::kAllgather, x, y, x.element_count()), x, y);
}

// x's first dimension is R × y's: rank r gets part r of the combination.
Status reduce_scatter_tensors(ExecutionContext* execution, const Tensor& x, const Tensor& y, int64_t op) {
  KILN_ASSIGN_OR_RETURN(CollectiveOp how, collective_op(op, "reduce_scatter"));
  KILN_ASSIGN_OR_RETURN(World * w, world());
  const int64_t ranks = w->size();
  if (x.element_count() != ranks * y.element_count() || x.sizes[0] != ranks * y.sizes[0]) {
    return invalid_argument_error("reduce_scatter: x has shape " + shape_string(x.sizes) + " and y " +
                                  shape_string(y.sizes) + "; x's first dimension must be R × y's, R = " +
                                  std::to_string(ranks) + " rank(s)");
  }
  Collective c = make_collective(CollectiveKind::kReduceScatter, x, y, y.element_count());
  c.op = how;
  return run_collective(execution, w, std::move(c), x, y);
}

template <typename T, int N>
Status allreduce(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t op) {
  return allreduce_tensors(execution, tensor_of(x), tensor_of(y), op);
}

template <typename T, int N>
Status broadcast(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t root) {
  return broadcast_tensors(execution, tensor_of(x), tensor_of(y), root);
}

template <typename T, int N, int M>
Status allgather(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, M> y) {
  return allgather_tensors(execution, tensor_of(x), tensor_of(y));
}

template <typename T, int N>
Status reduce_scatter(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t op) {
  return reduce_scatter_tensors(execution, tensor_of(x), tensor_of(y), op);
}

Status rank(ExecutionContext*, MemRef<int32_t, 0> r) {
  KILN_ASSIGN_OR_RETURN(World * w, world());
  *r.data = w->rank();
  return Status();
}

Status world_size(ExecutionContext*, MemRef<int32_t, 0> n) {
  KILN_ASSIGN_OR_RETURN(World * w, world());
  *n.data = w->size();
  return Status();
}

// Registers `f` as a collective (Function::collective); cuda's take its own memory where
// cuda_collectives_on_device() says so.
Status add_collective(Registry& registry, Function f) {
  f.collective = true;
  if (f.device == "cuda") {
    f.memory = Memory::kDeviceStream;
    f.takes_device_memory = &cuda_collectives_on_device;
  }
  return registry.add(std::move(f));
}

template <typename T, int N>
Status add_typed(Registry& registry, std::string_view device) {
  KILN_RETURN_IF_ERROR(add_collective(registry, make_function_for<"allreduce", &allreduce<T, N>>(device)));
  KILN_RETURN_IF_ERROR(add_collective(registry, make_function_for<"broadcast", &broadcast<T, N>>(device)));
  if constexpr (N == 0) {
    return add_collective(registry, make_function_for<"allgather", &allgather<T, 0, 1>>(device));
  } else {
    KILN_RETURN_IF_ERROR(add_collective(registry, make_function_for<"allgather", &allgather<T, N, N>>(device)));
    return add_collective(registry, make_function_for<"reduce_scatter", &reduce_scatter<T, N>>(device));
  }
}

template <typename T>
Status add_ranks(Registry& registry, std::string_view device) {
  KILN_RETURN_IF_ERROR((add_typed<T, 0>(registry, device)));
  KILN_RETURN_IF_ERROR((add_typed<T, 1>(registry, device)));
  KILN_RETURN_IF_ERROR((add_typed<T, 2>(registry, device)));
  KILN_RETURN_IF_ERROR((add_typed<T, 3>(registry, device)));
  return add_typed<T, 4>(registry, device);
}

template <typename... Types>
Status add_types(Registry& registry, std::string_view device) {
  Status status;
  ((status = status.ok() ? add_ranks<Types>(registry, device) : status), ...);
  return status;
}

Status add_device(Registry& registry, std::string_view device) {
  // Every element type (kiln/ral/element_types.h); how each combines: ral/collective_types.h.
  KILN_RETURN_IF_ERROR((add_types<bool, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, Half,
                                  BFloat16, float, double>(registry, device)));
  KILN_RETURN_IF_ERROR(registry.add(make_function_for<"rank", &rank>(device)));
  return registry.add(make_function_for<"world_size", &world_size>(device));
}

}  // namespace

// On opencl the data crosses through mapped host memory; on cuda see cuda_collectives.h.
Status register_collectives(Registry& registry) {
  for (std::string_view device : {"cpu", "interp", "opencl", "cuda"}) KILN_RETURN_IF_ERROR(add_device(registry, device));
  return Status();
}

}  // namespace kiln::ral::library
