// Calling CUDA with a given context current, from any thread: the pools make and free their
// objects on whichever thread needs one, which need not have the device's context current.
#pragma once

#include <string_view>

#include "drivers/cuda/cu_api.h"

namespace kiln::cuda {

// A context and the table to call it through. Ops built from one keep a pointer to it, so it
// must outlive every pool using them.
struct ContextTarget {
  const Api* api = nullptr;
  CUcontext context = nullptr;
};

// Pushes `target.context` as the calling thread's current context for this scope and pops it on
// leaving, when the push succeeded.
class ContextScope {
 public:
  explicit ContextScope(const ContextTarget& target) : api_(*target.api) {
    pushed_ = api_.CtxPushCurrent(target.context);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  ~ContextScope() {
    CUcontext popped = nullptr;
    if (pushed_ == CUDA_SUCCESS) api_.CtxPopCurrent(&popped);
  }
  // OK, or the failed push naming `where`; the caller must then not make its call.
  Status status(std::string_view where) const {
    if (pushed_ == CUDA_SUCCESS) return Status();
    return cu_error("cuCtxPushCurrent_v2", pushed_, where);
  }

 private:
  const Api& api_;
  CUresult pushed_;
};

// Makes one driver call, `call(*target.api)` returning its CUresult, with `target.context`
// pushed: OK, or the failed push or the failed call (named `name`, in `where`), as cu_error says.
// The call is not made when the push fails.
template <typename Call>
Status call_in_context(const ContextTarget& target, const char* name, std::string_view where,
                       Call&& call) {
  ContextScope scope(target);
  KILN_RETURN_IF_ERROR(scope.status(where));
  CUresult result = call(*target.api);
  if (result != CUDA_SUCCESS) return cu_error(name, result, where);
  return Status();
}

}  // namespace kiln::cuda
