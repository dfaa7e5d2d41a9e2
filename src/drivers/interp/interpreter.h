// The reference interpreter of the loop IR: runs one workgroup of a kernel over the bindings of
// a dispatch, by walking the kernel's tree. It defines what every program means (the semantics
// in kiln/loop/loop.h); it is written to be obviously correct, not fast.
//
// Evaluation: integers in int64 (i32 values kept in range by wrapping through unsigned
// arithmetic), floating point in double whatever the expression's type; a value is rounded to
// f32 only when it is stored to an f32 buffer or local, by a cast to f32, or when it is an f32
// constant. Every load and store is checked against its binding's byte length or its local's
// size; a failure stops the workgroup and returns one of the codes below (the dispatch then
// fails with a status naming the code), and is described in a warning log line. A failed check
// (kFail) is not such an error: it is returned as its failure code once the workgroup ends.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/loop/loop.h"
#include "kiln/kernel_abi.h"

namespace kiln::interp {

// What run_workgroup returns.
enum InterpCode : int {
  kInterpOk = 0,
  kLoadOutOfRange = 1,         // a load outside its binding
  kStoreOutOfRange = 2,        // a store outside its binding
  kLocalOutOfRange = 3,        // a local load or store outside the local array
  kBindingCountMismatch = 4,   // the dispatch's binding count is not the kernel's node count
  kLocalAllocationFailed = 5,  // no memory for a local array
  kMalformedKernel = 6,        // a tree the parser would have refused (null, unknown kind)
};
// "load out of range", ...
std::string_view interp_code_name(int code);

class Interpreter {
 public:
  // `kernel` must be valid (as parse_kernel returns it).
  explicit Interpreter(ir::Kernel kernel);

  const ir::Kernel& kernel() const { return kernel_; }
  // Runs workgroup `id` following the dispatch convention of loop.h: the range of the parallel
  // top loop that belongs to `id->x`, or the whole body in workgroup (0, 0, 0); other
  // workgroups do nothing. Safe to call concurrently.
  // A failed check (a kFail statement) returns ir::kFirstFailureCode + its site, with its value in
  // `*failure_value` when that is not null; the workgroup runs on to its end first, as compiled
  // kernels do, and the first failure is the one returned.
  int run_workgroup(const kiln_dispatch_state_t* state, const kiln_workgroup_id_t* id,
                    int64_t* failure_value = nullptr) const;

  // The binding position of node `node`, or -1.
  int binding_of(int node) const;

 private:
  ir::Kernel kernel_;
  std::vector<std::pair<int, int>> bindings_;  // (node id, binding position), sorted by node id
};

}  // namespace kiln::interp
