// The collectives (docs/language.md, "Collectives"): allreduce, allgather, reduce_scatter,
// broadcast, rank and world_size, on "cpu", "interp", "opencl" and "cuda" (over mapped host memory), each
// through the process's World (kiln/ral/world.h): MPI across the ranks of a job, a copy in a
// world of one.
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/ral/element_types.h"
#include "kiln/ral/execution_context.h"
#include "kiln/ral/world.h"
#include "ral/library/library.h"
#include "ral/library/rows.h"

namespace kiln::ral::library {

namespace {

template <typename T, int N>
std::string shape_text(const MemRef<T, N>& m) {
  if constexpr (N == 0) return "[]";
  else return shape_string(m);
}

Result<CollectiveOp> collective_op(int64_t op, const char* call) {
  if (op < 0 || op > 3) {
    return invalid_argument_error(std::string(call) + ": op=" + std::to_string(op) +
                                  " is none of 0 (sum), 1 (mean), 2 (max), 3 (min)");
  }
  return static_cast<CollectiveOp>(op);
}

// A collective of `kind` from x's data to y's; `count` elements of T (per rank where they differ).
template <typename T, int N, int M>
Collective make_collective(CollectiveKind kind, const MemRef<T, N>& x, const MemRef<T, M>& y, int64_t count) {
  Collective c;
  c.kind = kind;
  c.in = x.data;
  c.out = y.data;
  c.count = count;
  c.type = *dtype_of<T>();
  return c;
}

// Runs `c` on the process's world: started, ending later, where the runtime offered a
// completion (a routine's collective step), else to its end before returning.
Status run_on_world(ExecutionContext* execution, World* w, Collective c) {
  if (std::optional<ExecutionContext::Completion> later = execution->take_completion()) {
    c.site = std::move(later->site);
    w->start(std::move(c), std::move(later->done));
    return Status(StatusCode::kDeferred, "a collective in flight");
  }
  return w->run(std::move(c));
}

template <typename T, int N>
Status allreduce(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t op) {
  KILN_ASSIGN_OR_RETURN(CollectiveOp how, collective_op(op, "allreduce"));
  if (x.element_count() != y.element_count()) {
    return invalid_argument_error("allreduce: y has shape " + shape_text(y) + ", x has shape " + shape_text(x));
  }
  KILN_ASSIGN_OR_RETURN(World * w, world());
  Collective c = make_collective(CollectiveKind::kAllreduce, x, y, x.element_count());
  c.op = how;
  return run_on_world(execution, w, std::move(c));
}

template <typename T, int N>
Status broadcast(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t root) {
  if (x.element_count() != y.element_count()) {
    return invalid_argument_error("broadcast: y has shape " + shape_text(y) + ", x has shape " + shape_text(x));
  }
  if (root < 0 || root > INT32_MAX) {
    return invalid_argument_error("broadcast: root " + std::to_string(root) + " is not a rank");
  }
  KILN_ASSIGN_OR_RETURN(World * w, world());
  Collective c = make_collective(CollectiveKind::kBroadcast, x, y, x.element_count());
  c.root = static_cast<int>(root);
  return run_on_world(execution, w, std::move(c));
}

// y's first dimension is R × x's (a scalar x: y is [R]); the rest agree.
template <typename T, int N, int M>
Status allgather(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, M> y) {
  KILN_ASSIGN_OR_RETURN(World * w, world());
  const int64_t ranks = w->size();
  bool fits = y.element_count() == ranks * x.element_count();
  if constexpr (N > 0) fits = fits && y.sizes[0] == ranks * x.sizes[0];
  if (!fits) {
    return invalid_argument_error("allgather: y has shape " + shape_text(y) + ", but " + std::to_string(ranks) +
                                  " rank(s) gathering x of shape " + shape_text(x) +
                                  " make a first dimension of R × x's (R = " + std::to_string(ranks) + ")");
  }
  return run_on_world(execution, w, make_collective(CollectiveKind::kAllgather, x, y, x.element_count()));
}

// x's first dimension is R × y's: rank r gets part r of the combination.
template <typename T, int N>
Status reduce_scatter(ExecutionContext* execution, MemRef<T, N> x, MemRef<T, N> y, int64_t op) {
  KILN_ASSIGN_OR_RETURN(CollectiveOp how, collective_op(op, "reduce_scatter"));
  KILN_ASSIGN_OR_RETURN(World * w, world());
  const int64_t ranks = w->size();
  if (x.element_count() != ranks * y.element_count() || x.sizes[0] != ranks * y.sizes[0]) {
    return invalid_argument_error("reduce_scatter: x has shape " + shape_text(x) + " and y " + shape_text(y) +
                                  "; x's first dimension must be R × y's, R = " + std::to_string(ranks) + " rank(s)");
  }
  Collective c = make_collective(CollectiveKind::kReduceScatter, x, y, y.element_count());
  c.op = how;
  return run_on_world(execution, w, std::move(c));
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

// Registers Fn as (Name, Device), a collective (Function::collective).
template <FixedString Name, FixedString Device, auto Fn>
Status add_collective(Registry& registry) {
  Function f = make_function<Name, Device, Fn>();
  f.collective = true;
  return registry.add(std::move(f));
}

template <FixedString Device, typename T, int N>
Status add_typed(Registry& registry) {
  KILN_RETURN_IF_ERROR((add_collective<"allreduce", Device, &allreduce<T, N>>(registry)));
  KILN_RETURN_IF_ERROR((add_collective<"broadcast", Device, &broadcast<T, N>>(registry)));
  if constexpr (N == 0) {
    return add_collective<"allgather", Device, &allgather<T, 0, 1>>(registry);
  } else {
    KILN_RETURN_IF_ERROR((add_collective<"allgather", Device, &allgather<T, N, N>>(registry)));
    return add_collective<"reduce_scatter", Device, &reduce_scatter<T, N>>(registry);
  }
}

template <FixedString Device, typename T>
Status add_ranks(Registry& registry) {
  KILN_RETURN_IF_ERROR((add_typed<Device, T, 0>(registry)));
  KILN_RETURN_IF_ERROR((add_typed<Device, T, 1>(registry)));
  KILN_RETURN_IF_ERROR((add_typed<Device, T, 2>(registry)));
  KILN_RETURN_IF_ERROR((add_typed<Device, T, 3>(registry)));
  return add_typed<Device, T, 4>(registry);
}

template <FixedString Device, typename... Types>
Status add_types(Registry& registry) {
  Status status;
  ((status = status.ok() ? add_ranks<Device, Types>(registry) : status), ...);
  return status;
}

template <FixedString Device>
Status add_device(Registry& registry) {
  // Every element type (kiln/ral/element_types.h); how each combines: ral/collective_types.h.
  KILN_RETURN_IF_ERROR((add_types<Device, bool, int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t,
                                  uint64_t, Half, BFloat16, float, double>(registry)));
  KILN_RETURN_IF_ERROR(registry.add(make_function<"rank", Device, &rank>()));
  return registry.add(make_function<"world_size", Device, &world_size>());
}

}  // namespace

// On opencl and cuda the data crosses through mapped host memory (NCCL on cuda is not done).
Status register_collectives(Registry& registry) {
  KILN_RETURN_IF_ERROR(add_device<"cpu">(registry));
  KILN_RETURN_IF_ERROR(add_device<"interp">(registry));
  KILN_RETURN_IF_ERROR(add_device<"opencl">(registry));
  return add_device<"cuda">(registry);
}

}  // namespace kiln::ral::library
