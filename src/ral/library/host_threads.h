// The threads over which a library function's loops spread their parts: the device's host
// threads (ExecutionContext::host_parallel), or the calling thread alone, where the caller
// already runs one piece of work a thread (conv2d_blocked's images at a large batch).
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/ral/execution_context.h"

namespace kiln::ral::library {

class HostThreads {
 public:
  // The device's threads, or with `alone` the calling thread only.
  explicit HostThreads(const ExecutionContext& context, bool alone = false) : context_(context), alone_(alone) {}

  int64_t count() const { return alone_ ? 1 : static_cast<int64_t>(context_.host_threads()); }
  // part(0) ... part(parts - 1), in order on the calling thread when alone; returns when all ran.
  void run(uint64_t parts, const std::function<void(uint64_t)>& part) const {
    if (!alone_) return context_.host_parallel(parts, part);
    for (uint64_t i = 0; i < parts; ++i) part(i);
  }

 private:
  const ExecutionContext& context_;
  bool alone_;
};

}  // namespace kiln::ral::library
